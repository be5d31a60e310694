//! On-device layout and the metadata encoding.
//!
//! ```text
//! sector 0            superblock (magic, version, capacity, slot size, data start, CRC)
//! 1 .. 1+S            metadata slot 0 ┐ one header sector (magic, generation, length, CRCs)
//! 1+S .. 1+2S         metadata slot 1 ┘ then the encoded inode table
//! 1+2S .. capacity    data sectors (4 KiB file blocks)
//! ```
//!
//! A commit writes the whole inode table into the slot the current generation does not use,
//! so a torn commit leaves the previous one intact; open takes the valid slot with the higher
//! generation.

use crate::error::{FsError, Result};
use std::collections::BTreeMap;

pub(crate) const SECTOR: usize = 4096;
const SB_MAGIC: &[u8; 8] = b"PGDAFS01";
const META_MAGIC: &[u8; 8] = b"PGDAMETA";

/// Superblock contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Super {
    pub capacity: u64,
    pub slot_sectors: u64,
}

impl Super {
    /// The layout for a device of `capacity` sectors: each slot 1/128 of the device, between
    /// 64 sectors (256 KiB) and 16,384 (64 MiB).
    pub(crate) fn for_capacity(capacity: u64) -> Result<Self> {
        let slot_sectors = (capacity / 128).clamp(64, 16_384);
        let need = 1 + 2 * slot_sectors + 64;
        if capacity < need {
            return Err(FsError::TooSmall {
                capacity: capacity * SECTOR as u64,
                need: need * SECTOR as u64,
            });
        }
        Ok(Self {
            capacity,
            slot_sectors,
        })
    }

    pub(crate) fn slot_start(&self, slot: u64) -> u64 {
        1 + slot * self.slot_sectors
    }

    pub(crate) fn data_start(&self) -> u64 {
        1 + 2 * self.slot_sectors
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(SECTOR);
        b.extend_from_slice(SB_MAGIC);
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&self.capacity.to_le_bytes());
        b.extend_from_slice(&self.slot_sectors.to_le_bytes());
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b.resize(SECTOR, 0);
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Result<Self> {
        if b.get(..8) != Some(SB_MAGIC.as_slice()) {
            return Err(FsError::NotFormatted);
        }
        if b.len() < 32 {
            return Err(FsError::Corrupt(format!(
                "superblock of {} bytes, needs 32",
                b.len()
            )));
        }
        let crc = u32::from_le_bytes(b[28..32].try_into().unwrap_or_default());
        if crc != crc32c::crc32c(&b[..28]) {
            return Err(FsError::Corrupt("superblock checksum mismatch".into()));
        }
        let mut r = Reader { b, pos: 8 };
        let version = r.u32()?;
        if version != 1 {
            return Err(FsError::Corrupt(format!(
                "superblock: file system format version {version}, this build reads 1"
            )));
        }
        let sb = Self {
            capacity: r.u64()?,
            slot_sectors: r.u64()?,
        };
        // Slot and data addresses are computed from these: they must describe a layout that
        // fits (no overflow, a data area after both slots), as `for_capacity` makes.
        let fits = sb
            .slot_sectors
            .checked_mul(2)
            .and_then(|s| s.checked_add(1 + 64))
            .is_some_and(|need| sb.slot_sectors > 0 && need <= sb.capacity);
        if !fits {
            return Err(FsError::Corrupt(format!(
                "superblock: metadata slots of {} sectors do not fit a device of {} sectors",
                sb.slot_sectors, sb.capacity
            )));
        }
        Ok(sb)
    }
}

/// File kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
}

/// Seconds and nanoseconds since the epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Time {
    /// Whole seconds.
    pub secs: i64,
    /// Nanoseconds within the second.
    pub nanos: u32,
}

impl Time {
    /// The system clock now (the epoch if the clock is set before it).
    pub fn now() -> Self {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Self {
            secs: d.as_secs() as i64,
            nanos: d.subsec_nanos(),
        }
    }
}

/// One inode in memory. `blocks[i]` is the device sector of file block `i` (0 = hole: sector 0
/// is the superblock, never a data sector).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Inode {
    pub kind: Kind,
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    pub atime: Time,
    pub mtime: Time,
    pub ctime: Time,
    pub blocks: Vec<u64>,
    pub entries: BTreeMap<String, u64>,
    pub target: Vec<u8>,
    // Not stored: the last name and parent (stream rules), set on link and at open.
    pub parent: u64,
    pub name: String,
    pub open: u32,
    /// Stream ranges of the rules that name this file (`None`: all on stream 0).
    pub streams: Option<Vec<(u64, u64, u16)>>,
}

impl Inode {
    pub(crate) fn new(kind: Kind, perm: u32, uid: u32, gid: u32) -> Self {
        let t = Time::now();
        Self {
            kind,
            perm,
            uid,
            gid,
            nlink: if kind == Kind::Dir { 2 } else { 1 },
            size: 0,
            atime: t,
            mtime: t,
            ctime: t,
            blocks: Vec::new(),
            entries: BTreeMap::new(),
            target: Vec::new(),
            parent: 0,
            name: String::new(),
            open: 0,
            streams: None,
        }
    }

    /// Allocated blocks as extents `(file block, sector, length)`.
    pub(crate) fn extents(&self) -> Vec<(u64, u64, u64)> {
        let mut out: Vec<(u64, u64, u64)> = Vec::new();
        for (i, &s) in self.blocks.iter().enumerate() {
            if s == 0 {
                continue;
            }
            match out.last_mut() {
                Some(e) if e.0 + e.2 == i as u64 && e.1 + e.2 == s => e.2 += 1,
                _ => out.push((i as u64, s, 1)),
            }
        }
        out
    }
}

/// Encodes the inode table (inodes with links only) into a slot image: header sector + payload.
pub(crate) fn encode_meta(gen: u64, next_ino: u64, inodes: &BTreeMap<u64, Inode>) -> Vec<u8> {
    let mut p = Vec::new();
    put(&mut p, next_ino);
    let live: Vec<_> = inodes.iter().filter(|(_, i)| i.nlink > 0).collect();
    put(&mut p, live.len() as u64);
    for (&ino, i) in live {
        put(&mut p, ino);
        p.push(match i.kind {
            Kind::File => 0,
            Kind::Dir => 1,
            Kind::Symlink => 2,
        });
        for v in [i.perm, i.uid, i.gid, i.nlink] {
            p.extend_from_slice(&v.to_le_bytes());
        }
        put(&mut p, i.size);
        for t in [i.atime, i.mtime, i.ctime] {
            p.extend_from_slice(&t.secs.to_le_bytes());
            p.extend_from_slice(&t.nanos.to_le_bytes());
        }
        match i.kind {
            Kind::File => {
                let ex = i.extents();
                put(&mut p, ex.len() as u64);
                for (f, s, n) in ex {
                    put(&mut p, f);
                    put(&mut p, s);
                    put(&mut p, n);
                }
            }
            Kind::Dir => {
                put(&mut p, i.entries.len() as u64);
                for (name, &child) in &i.entries {
                    put(&mut p, name.len() as u64);
                    p.extend_from_slice(name.as_bytes());
                    put(&mut p, child);
                }
            }
            Kind::Symlink => {
                put(&mut p, i.target.len() as u64);
                p.extend_from_slice(&i.target);
            }
        }
    }
    let mut h = Vec::with_capacity(SECTOR + p.len());
    h.extend_from_slice(META_MAGIC);
    put(&mut h, gen);
    put(&mut h, p.len() as u64);
    h.extend_from_slice(&crc32c::crc32c(&p).to_le_bytes());
    let hcrc = crc32c::crc32c(&h);
    h.extend_from_slice(&hcrc.to_le_bytes());
    h.resize(SECTOR, 0);
    h.extend_from_slice(&p);
    h.resize(h.len().div_ceil(SECTOR) * SECTOR, 0);
    h
}

/// A slot header: generation and payload length, if the header is intact.
pub(crate) fn decode_header(b: &[u8]) -> Option<(u64, usize, u32)> {
    let b = b.get(..32)?;
    if &b[..8] != META_MAGIC {
        return None;
    }
    let hcrc = u32::from_le_bytes(b[28..32].try_into().ok()?);
    if hcrc != crc32c::crc32c(&b[..28]) {
        return None;
    }
    let gen = u64::from_le_bytes(b[8..16].try_into().ok()?);
    let len = u64::from_le_bytes(b[16..24].try_into().ok()?);
    let crc = u32::from_le_bytes(b[24..28].try_into().ok()?);
    Some((gen, usize::try_from(len).ok()?, crc))
}

/// Decodes a payload whose CRC was checked: `(next_ino, inodes)`. `capacity` (sectors) bounds
/// the extents: no file is larger than the device, no sector past its end.
pub(crate) fn decode_meta(b: &[u8], capacity: u64) -> Result<(u64, BTreeMap<u64, Inode>)> {
    let mut r = Reader { b, pos: 0 };
    let next_ino = r.u64()?;
    let n = r.u64()?;
    let mut inodes = BTreeMap::new();
    for _ in 0..n {
        let ino = r.u64()?;
        let kind = match r.take(1)?[0] {
            0 => Kind::File,
            1 => Kind::Dir,
            2 => Kind::Symlink,
            k => return Err(FsError::Corrupt(format!("inode {ino} has kind {k}"))),
        };
        let mut i = Inode::new(kind, r.u32()?, r.u32()?, r.u32()?);
        i.nlink = r.u32()?;
        i.size = r.u64()?;
        i.atime = r.time()?;
        i.mtime = r.time()?;
        i.ctime = r.time()?;
        match kind {
            Kind::File => {
                for _ in 0..r.u64()? {
                    let (f, s, len) = (r.u64()?, r.u64()?, r.u64()?);
                    // Checked before the block map grows to `end`: a damaged extent must not
                    // overflow or ask for more memory than the device has sectors.
                    let inside = |start: u64| start.checked_add(len).filter(|&e| e <= capacity);
                    let (Some(end), Some(_)) = (inside(f), inside(s)) else {
                        return Err(FsError::Corrupt(format!(
                            "inode {ino}: extent of {len} blocks at file block {f}, sector {s} \
                             is past the device's {capacity} sectors"
                        )));
                    };
                    let end = end as usize;
                    if i.blocks.len() < end {
                        i.blocks.resize(end, 0);
                    }
                    for k in 0..len {
                        i.blocks[(f + k) as usize] = s + k;
                    }
                }
            }
            Kind::Dir => {
                for _ in 0..r.u64()? {
                    let len = r.u64()? as usize;
                    let name = String::from_utf8(r.take(len)?.to_vec())
                        .map_err(|_| FsError::Corrupt(format!("directory {ino}: bad name")))?;
                    let child = r.u64()?;
                    i.entries.insert(name, child);
                }
            }
            Kind::Symlink => {
                let len = r.u64()? as usize;
                i.target = r.take(len)?.to_vec();
            }
        }
        if inodes.insert(ino, i).is_some() {
            return Err(FsError::Corrupt(format!("inode {ino} is stored twice")));
        }
    }
    // The payload's length is exact: bytes after the last inode mean a wrong count.
    if r.pos != b.len() {
        return Err(FsError::Corrupt(format!(
            "metadata has {} bytes after its {n} inodes",
            b.len() - r.pos
        )));
    }
    Ok((next_ino, inodes))
}

fn put(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or_else(|| {
            FsError::Corrupt(format!(
                "metadata ends early: {n} bytes wanted at byte {} of {}",
                self.pos,
                self.b.len()
            ))
        })?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().unwrap_or_default(),
        ))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().unwrap_or_default(),
        ))
    }
    fn time(&mut self) -> Result<Time> {
        let secs = i64::from_le_bytes(self.take(8)?.try_into().unwrap_or_default());
        let nanos = self.u32()?;
        // Only a fraction of a second is ever written; more would carry into the seconds
        // where the mount turns the time into a `SystemTime` (and overflow it near the end).
        if nanos >= 1_000_000_000 {
            return Err(FsError::Corrupt(format!(
                "metadata: a time of {nanos} nanoseconds at byte {}",
                self.pos - 4
            )));
        }
        Ok(Time { secs, nanos })
    }
}

#[cfg(test)]
mod tests;
