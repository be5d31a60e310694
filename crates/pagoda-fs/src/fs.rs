//! The file system: open/format, metadata commits, and the namespace operations.
//! File data (read, write, truncate, fallocate) is in `data.rs`.

use crate::alloc::Alloc;
use crate::error::{FsError, Result};
use crate::gate::Gate;
use crate::layout::{self, Inode, Kind, Super, Time, SECTOR};
use crate::streams::StreamRules;
use pagoda_device::{DeviceRef, PowerCutReport, WriteHints};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The root directory's inode number (FUSE's too).
pub const ROOT: u64 = 1;

/// Options of a mounted file system.
#[derive(Clone, Debug, Default)]
pub struct FsOptions {
    /// Stream rules for data writes.
    pub rules: StreamRules,
}

/// What `stat` shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attr {
    /// Inode number.
    pub ino: u64,
    /// File, directory or symlink.
    pub kind: Kind,
    /// Length in bytes.
    pub size: u64,
    /// Allocated 4 KiB blocks.
    pub blocks: u64,
    /// Permission bits (`0o7777` mask).
    pub perm: u32,
    /// Hard links.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Last access.
    pub atime: Time,
    /// Last change of the contents.
    pub mtime: Time,
    /// Last change of the inode.
    pub ctime: Time,
}

/// Attribute changes (`setattr`); `None` leaves a field alone.
#[derive(Clone, Debug, Default)]
pub struct SetAttr {
    /// New permission bits.
    pub perm: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New length (truncate or extend with a hole).
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<Time>,
    /// New modification time.
    pub mtime: Option<Time>,
}

/// `statfs` figures in 4 KiB blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatFs {
    /// Blocks of the device.
    pub blocks: u64,
    /// Blocks free.
    pub free: u64,
    /// Inodes in use.
    pub files: u64,
}

/// The file system's own counters (the device's are in `DeviceStats`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsStats {
    /// Metadata commits (one per fsync that found metadata changed).
    pub commits: u64,
    /// Sectors written by commits.
    pub meta_sectors: u64,
    /// Data sectors written.
    pub data_sectors: u64,
    /// Device flushes.
    pub flushes: u64,
    /// Whole, aligned atomic units of direct-I/O writes handed to the device as one atomic
    /// write each.
    pub atomic_writes: u64,
    /// Whole, aligned atomic units of direct-I/O writes written non-atomically: their sectors
    /// were not one aligned run on the device (or were on two streams).
    pub atomic_fallbacks: u64,
    /// The most data reads, writes and flushes that ran at once outside the file system's
    /// lock (through FUSE; 0 when only the `Fs` API was used).
    pub peak_io_in_flight: u64,
}

/// A small file system on a [`pagoda_device::BlockDevice`]. Metadata lives in memory and is
/// made durable as a whole on fsync (see `layout.rs`); data goes to the device at once, in
/// place, on the stream the rules give it.
///
/// Guarantee: after a power cut and [`Fs::open`], the file system is the one of the last
/// completed commit, and every file's data written before its last fsync is there.
#[derive(Debug)]
pub struct Fs {
    pub(crate) dev: DeviceRef,
    pub(crate) sb: Super,
    pub(crate) inodes: BTreeMap<u64, Inode>,
    pub(crate) next_ino: u64,
    pub(crate) alloc: Alloc,
    pub(crate) gen: u64,
    /// Metadata changed since the last commit.
    pub(crate) dirty: bool,
    /// Freed sectors the last commit may still name: reusable only after the next commit.
    pub(crate) pending_free: Vec<u64>,
    pub(crate) rules: StreamRules,
    /// The device's atomic-write unit in sectors (0: none). Blocks are placed so that each
    /// aligned unit of a file is an aligned run on the device where space allows, so that a
    /// direct-I/O write can hand it over as one atomic write.
    pub(crate) atomic_unit: u64,
    /// Why the file system stopped (power cut, device error): every call then fails.
    pub(crate) down: Option<String>,
    pub(crate) cut_after: Option<(u64, u64)>,
    pub(crate) last_cut: Option<PowerCutReport>,
    pub(crate) stats: FsStats,
    /// Data I/O running outside the lock (`io.rs`).
    pub(crate) gate: Arc<Gate>,
}

impl Fs {
    /// Writes a new, empty file system on `dev`.
    pub fn format(dev: DeviceRef, opts: FsOptions) -> Result<Self> {
        let sb = Super::for_capacity(dev.caps().capacity_sectors)?;
        let zero = vec![0u8; SECTOR];
        // Old slots of an earlier file system must not win over the new one.
        dev.write(sb.slot_start(0), &zero, WriteHints::NORMAL)?;
        dev.write(sb.slot_start(1), &zero, WriteHints::NORMAL)?;
        dev.write(0, &sb.encode(), WriteHints::NORMAL)?;
        let mut root = Inode::new(Kind::Dir, 0o755, 0, 0);
        root.parent = ROOT;
        let mut fs = Self::assemble(dev, sb, 0, ROOT + 1, BTreeMap::from([(ROOT, root)]), opts)?;
        fs.commit()?;
        // A device that keeps no data (backing=none) would lose everything silently.
        let mut b = vec![0u8; SECTOR];
        fs.dev.read(0, &mut b)?;
        if Super::decode(&b).ok() != Some(sb) {
            return Err(FsError::Invalid(
                "the device does not keep data (backing=none?); use backing=ram".into(),
            ));
        }
        Ok(fs)
    }

    /// Opens the file system on `dev`: the newest intact metadata commit.
    pub fn open(dev: DeviceRef, opts: FsOptions) -> Result<Self> {
        let caps = dev.caps();
        let mut b = vec![0u8; SECTOR];
        dev.read(0, &mut b)?;
        let sb = Super::decode(&b)?;
        if sb.capacity != caps.capacity_sectors {
            return Err(FsError::Corrupt(format!(
                "the file system was made for {} sectors, the device has {}; use the same \
                 capacity= as when it was made",
                sb.capacity, caps.capacity_sectors
            )));
        }
        let mut best: Option<(u64, Vec<u8>)> = None;
        for slot in 0..2 {
            let start = sb.slot_start(slot);
            dev.read(start, &mut b)?;
            let Some((gen, len, crc)) = layout::decode_header(&b) else {
                continue;
            };
            let sectors = len.div_ceil(SECTOR) as u64;
            if sectors + 1 > sb.slot_sectors || best.as_ref().is_some_and(|(g, _)| *g > gen) {
                continue;
            }
            let mut payload = vec![0u8; (sectors as usize).max(1) * SECTOR];
            dev.read(start + 1, &mut payload)?;
            payload.truncate(len);
            if crc32c::crc32c(&payload) == crc {
                best = Some((gen, payload));
            }
        }
        let (gen, payload) =
            best.ok_or_else(|| FsError::Corrupt("neither metadata slot is intact".into()))?;
        let (next_ino, inodes) = layout::decode_meta(&payload, sb.capacity)?;
        let mut fs = Self::assemble(dev, sb, gen, next_ino, inodes, opts)?;
        fs.zero_tails()?;
        Ok(fs)
    }

    /// Opens the file system on `dev`, or formats it when the device holds none. Returns
    /// whether it formatted.
    pub fn open_or_format(dev: DeviceRef, opts: FsOptions) -> Result<(Self, bool)> {
        match Self::open(dev.clone(), opts.clone()) {
            Ok(fs) => Ok((fs, false)),
            Err(FsError::NotFormatted) => Ok((Self::format(dev, opts)?, true)),
            Err(e) => Err(e),
        }
    }

    /// Checks the inode table, rebuilds the allocation bitmap, names and stream ranges.
    fn assemble(
        dev: DeviceRef,
        sb: Super,
        gen: u64,
        next_ino: u64,
        mut inodes: BTreeMap<u64, Inode>,
        opts: FsOptions,
    ) -> Result<Self> {
        if inodes.get(&ROOT).map(|i| i.kind) != Some(Kind::Dir) {
            return Err(FsError::Corrupt("no root directory".into()));
        }
        let mut alloc = Alloc::new(sb.data_start(), sb.capacity);
        for (ino, i) in &inodes {
            for &s in i.blocks.iter().filter(|&&s| s != 0) {
                if !alloc.contains(s) || !alloc.mark(s) {
                    return Err(FsError::Corrupt(format!(
                        "inode {ino}: sector {s} is outside the data area or used twice"
                    )));
                }
            }
        }
        // Names from a walk of the tree (parents before children).
        let mut stack = vec![ROOT];
        while let Some(d) = stack.pop() {
            let entries: Vec<(String, u64)> = inodes[&d]
                .entries
                .iter()
                .map(|(n, &c)| (n.clone(), c))
                .collect();
            for (name, child) in entries {
                let Some(c) = inodes.get_mut(&child) else {
                    return Err(FsError::Corrupt(format!(
                        "directory {d}: entry {name:?} names missing inode {child}"
                    )));
                };
                c.parent = d;
                c.name = name;
                if c.kind == Kind::Dir {
                    stack.push(child);
                }
            }
        }
        if let Some(r) = inodes.get_mut(&ROOT) {
            r.parent = ROOT;
        }
        let atomic_unit = dev
            .caps()
            .atomic_write_unit
            .map_or(0, |u| (u / SECTOR) as u64);
        let mut fs = Self {
            dev,
            sb,
            inodes,
            next_ino,
            alloc,
            gen,
            dirty: false,
            pending_free: Vec::new(),
            rules: opts.rules,
            atomic_unit,
            down: None,
            cut_after: None,
            last_cut: None,
            stats: FsStats::default(),
            gate: Arc::default(),
        };
        fs.refresh_streams();
        Ok(fs)
    }

    /// The device under the file system.
    pub fn device(&self) -> &DeviceRef {
        &self.dev
    }

    /// The file system's counters.
    pub fn stats(&self) -> FsStats {
        self.stats.clone()
    }

    /// The stream rules.
    pub fn rules(&self) -> &StreamRules {
        &self.rules
    }

    /// Why the file system is down, if it is.
    pub fn down_reason(&self) -> Option<&str> {
        self.down.as_deref()
    }

    /// Cuts the device's power right after the `writes`-th next device write request
    /// (seeded outcome; 0 counts as 1).
    pub fn power_cut_after(&mut self, writes: u64, seed: u64) {
        self.cut_after = Some((writes.max(1), seed));
    }

    /// Cuts the device's power now: unflushed writes are partly lost as the device's
    /// [`pagoda_device::PowerCut`] decides, and this file system refuses every call after.
    /// Open the device again to recover.
    pub fn power_cut(&mut self, seed: u64, why: &str) -> Result<PowerCutReport> {
        let pc = self.dev.as_power_cut().ok_or_else(|| {
            FsError::Invalid("this device cannot emulate a power cut (use an emulated one)".into())
        })?;
        // The cut falls between requests served outside the lock, never inside one, so the
        // image (`backing.rs`) copies back after every write the device acknowledged. (A
        // write that failed meanwhile does not stop the cut; the cut takes it down anyway.)
        let _ = self.gate.drain();
        let report = pc.power_cut(seed)?;
        self.down = Some(why.to_string());
        self.last_cut = Some(report.clone());
        Ok(report)
    }

    /// What the last power cut did.
    pub fn last_power_cut(&self) -> Option<&PowerCutReport> {
        self.last_cut.as_ref()
    }

    pub(crate) fn check_up(&self) -> Result<()> {
        match &self.down {
            Some(why) => Err(FsError::PoweredOff(why.clone())),
            None => Ok(()),
        }
    }

    /// Every device write goes through here: the power-cut countdown, and a failed write
    /// takes the file system down (what reached the device is unknown).
    pub(crate) fn dev_write(&mut self, sector: u64, buf: &[u8], hints: WriteHints) -> Result<()> {
        self.check_up()?;
        let r = self.dev.write(sector, buf, hints).map_err(|e| self.fail(e));
        if let Some((n, seed)) = self.cut_after {
            // The last allowed write is acknowledged (in the device cache), then power goes.
            if n <= 1 {
                self.cut_after = None;
                self.power_cut(seed, "--power-cut-after reached")?;
                return self.check_up();
            }
            self.cut_after = Some((n - 1, seed));
        }
        r
    }

    pub(crate) fn dev_flush(&mut self) -> Result<()> {
        self.check_up()?;
        self.stats.flushes += 1;
        self.dev.flush().map_err(|e| self.fail(e))
    }

    fn fail(&mut self, e: pagoda_device::DeviceError) -> FsError {
        self.device_failed(e)
    }

    /// Makes everything durable: data first, then the inode table into the other slot, then
    /// the freed sectors become reusable (and are trimmed).
    pub(crate) fn commit(&mut self) -> Result<()> {
        self.check_up()?;
        // The data a commit names must be on the device, then durable, before the commit is:
        // the wait for the I/O in flight also fails on any write among it that failed.
        self.drain_io()?;
        self.dev_flush()?;
        let img = layout::encode_meta(self.gen + 1, self.next_ino, &self.inodes);
        let have = self.sb.slot_sectors as usize * SECTOR;
        if img.len() > have {
            return Err(FsError::MetadataFull {
                need: img.len(),
                have,
            });
        }
        let start = self.sb.slot_start((self.gen + 1) % 2);
        self.dev_write(start, &img, WriteHints::NORMAL)?;
        self.dev_flush()?;
        self.gen += 1;
        self.dirty = false;
        self.stats.commits += 1;
        self.stats.meta_sectors += (img.len() / SECTOR) as u64;
        let mut freed = std::mem::take(&mut self.pending_free);
        freed.sort_unstable();
        let mut i = 0;
        while i < freed.len() {
            let mut j = i + 1;
            while j < freed.len() && freed[j] == freed[j - 1] + 1 {
                j += 1;
            }
            for &s in &freed[i..j] {
                self.alloc.release(s);
            }
            // Discard: a best effort, the sectors are free either way.
            let _ = self.dev.trim(freed[i], (j - i) as u64);
            i = j;
        }
        Ok(())
    }

    /// fsync / fdatasync: the device cache is flushed; changed metadata is committed.
    pub fn fsync(&mut self, _ino: u64) -> Result<()> {
        if self.dirty {
            self.commit()
        } else {
            self.dev_flush()
        }
    }

    /// A clean unmount: everything committed and flushed.
    pub fn sync(&mut self) -> Result<()> {
        self.commit()
    }

    pub(crate) fn inode(&self, ino: u64) -> Result<&Inode> {
        self.inodes.get(&ino).ok_or(FsError::NotFound)
    }

    pub(crate) fn inode_mut(&mut self, ino: u64) -> Result<&mut Inode> {
        self.inodes.get_mut(&ino).ok_or(FsError::NotFound)
    }

    pub(crate) fn dir(&self, ino: u64) -> Result<&Inode> {
        let d = self.inode(ino)?;
        if d.kind != Kind::Dir {
            return Err(FsError::NotDir);
        }
        Ok(d)
    }

    /// The attributes of `ino`.
    pub fn getattr(&self, ino: u64) -> Result<Attr> {
        self.check_up()?;
        let i = self.inode(ino)?;
        Ok(Attr {
            ino,
            kind: i.kind,
            size: i.size,
            blocks: i.blocks.iter().filter(|&&s| s != 0).count() as u64,
            perm: i.perm,
            nlink: i.nlink,
            uid: i.uid,
            gid: i.gid,
            atime: i.atime,
            mtime: i.mtime,
            ctime: i.ctime,
        })
    }
}
