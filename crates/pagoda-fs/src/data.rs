//! File data: read, write (in place, on the rules' streams), truncate, fallocate.

use crate::error::{FsError, Result};
use crate::fs::{Attr, Fs, SetAttr};
use crate::layout::{Kind, Time, SECTOR};
use crate::streams::stream_at;
use pagoda_device::WriteHints;

const S: u64 = SECTOR as u64;

impl Fs {
    fn max_size(&self) -> u64 {
        self.sb.capacity * S
    }

    /// Reads up to `size` bytes at `offset` (fewer at the end of the file).
    pub fn read(&mut self, ino: u64, offset: u64, size: usize) -> Result<Vec<u8>> {
        self.plan_read(ino, offset, size, false)?.run()
    }

    /// Writes `data` at `offset`. New blocks are allocated next to the file's previous block
    /// where free, so files stay in few extents.
    pub fn write(&mut self, ino: u64, offset: u64, data: &[u8]) -> Result<usize> {
        self.write_with(ino, offset, data, false)
    }

    /// A direct-I/O (`O_DIRECT`) write: as [`Fs::write`], but on a device with an atomic-write
    /// unit each whole, aligned unit of the file that `data` covers (an InnoDB page on
    /// `atomic=16KiB`) goes to the device as one atomic write, so a power cut keeps all of it
    /// or none. The rest of `data` is written as [`Fs::write`] does.
    pub fn write_direct(&mut self, ino: u64, offset: u64, data: &[u8]) -> Result<usize> {
        self.write_with(ino, offset, data, true)
    }

    fn write_with(&mut self, ino: u64, offset: u64, data: &[u8], direct: bool) -> Result<usize> {
        self.check_up()?;
        if data.is_empty() {
            return Ok(0);
        }
        let mut plan = self.plan_write(ino, offset, data.len(), direct, false)?;
        // Under the lock: each device write counts towards --power-cut-after.
        let r = plan.run(data, &mut |s, b, h| self.dev_write(s, b, h));
        self.finish_write(plan, r)
    }

    /// The sectors of blocks `first..=last` of `ino`, allocating holes; `(sector, fresh)`.
    /// On a full device nothing stays allocated.
    pub(crate) fn map_blocks(
        &mut self,
        ino: u64,
        first: u64,
        last: u64,
    ) -> Result<Vec<(u64, bool)>> {
        let mut blocks = std::mem::take(&mut self.inode_mut(ino)?.blocks);
        if blocks.len() <= last as usize {
            blocks.resize(last as usize + 1, 0);
        }
        let mut out = Vec::with_capacity((last - first + 1) as usize);
        let mut failed = false;
        for b in first..=last {
            let cur = blocks[b as usize];
            if cur != 0 {
                out.push((cur, false));
                continue;
            }
            let hint = b
                .checked_sub(1)
                .map(|p| blocks[p as usize])
                .filter(|&p| p != 0)
                .map(|p| p + 1);
            let got = match self.atomic_unit {
                0 | 1 => self.alloc.alloc(hint),
                unit => {
                    // A block already placed in this block's unit fixes where it must go;
                    // else the next block on the device, if that keeps the unit aligned.
                    let r = b % unit;
                    let g = b - r..(b - r + unit).min(blocks.len() as u64);
                    let sibling = g.filter(|&j| j != b).find_map(|j| {
                        let p = blocks[j as usize];
                        (p != 0 && p % unit == j % unit).then(|| p - j % unit + r)
                    });
                    let want = sibling.or(hint.filter(|&h| h % unit == r));
                    self.alloc.alloc_in_group(want, unit, r)
                }
            };
            match got {
                Some(s) => {
                    blocks[b as usize] = s;
                    out.push((s, true));
                }
                None => {
                    failed = true;
                    break;
                }
            }
        }
        if failed {
            for (k, &(s, fresh)) in out.iter().enumerate() {
                if fresh {
                    self.alloc.release(s);
                    blocks[first as usize + k] = 0;
                }
            }
        }
        if out.iter().any(|&(_, fresh)| fresh) && !failed {
            self.dirty = true;
        }
        trim_holes(&mut blocks);
        self.inode_mut(ino)?.blocks = blocks;
        if failed {
            return Err(FsError::NoSpace);
        }
        Ok(out)
    }

    /// Changes attributes; a size change truncates or extends (with a hole).
    pub fn setattr(&mut self, ino: u64, a: &SetAttr) -> Result<Attr> {
        self.check_up()?;
        if let Some(size) = a.size {
            // Blocks a truncate frees must have no write on its way to them.
            self.drain_io()?;
            self.truncate(ino, size)?;
        }
        let now = Time::now();
        let i = self.inode_mut(ino)?;
        let mut changed = false;
        if let Some(p) = a.perm {
            i.perm = p & 0o7777;
            changed = true;
        }
        if let Some(u) = a.uid {
            i.uid = u;
            changed = true;
        }
        if let Some(g) = a.gid {
            i.gid = g;
            changed = true;
        }
        if let Some(t) = a.atime {
            i.atime = t;
        }
        if let Some(t) = a.mtime {
            i.mtime = t;
        }
        i.ctime = now;
        if changed {
            self.dirty = true;
        }
        self.getattr(ino)
    }

    fn truncate(&mut self, ino: u64, size: u64) -> Result<()> {
        if size > self.max_size() {
            return Err(FsError::TooLarge {
                max: self.max_size(),
            });
        }
        let i = self.file(ino)?;
        if size == i.size {
            return Ok(());
        }
        let keep = size.div_ceil(S) as usize;
        let tail = (size < i.size && !size.is_multiple_of(S))
            .then(|| i.blocks.get(keep - 1).copied().filter(|&p| p != 0))
            .flatten();
        // Bytes past the end of the last block must read as zeros if the file grows again.
        if let Some(p) = tail {
            let mut b = vec![0u8; SECTOR];
            self.dev.read(p, &mut b)?;
            b[(size % S) as usize..].fill(0);
            let st = stream_at(self.inode(ino)?.streams.as_deref(), (keep as u64 - 1) * S);
            self.dev_write(p, &b, WriteHints::stream(st))?;
        }
        let now = Time::now();
        let i = self.inode_mut(ino)?;
        let freed: Vec<u64> = if i.blocks.len() > keep {
            i.blocks.drain(keep..).filter(|&s| s != 0).collect()
        } else {
            Vec::new()
        };
        i.size = size;
        i.mtime = now;
        i.ctime = now;
        self.pending_free.extend(freed);
        self.dirty = true;
        Ok(())
    }

    /// fallocate: mode 0 and KEEP_SIZE reserve blocks (trimmed, so they read as zeros);
    /// PUNCH_HOLE|KEEP_SIZE frees whole blocks and zeroes the partial ends. A range past the
    /// largest file is [`FsError::TooLarge`] (EFBIG), another mode [`FsError::Unsupported`]
    /// (EOPNOTSUPP).
    pub fn fallocate(&mut self, ino: u64, offset: u64, len: u64, mode: i32) -> Result<()> {
        self.check_up()?;
        self.drain_io()?;
        self.file(ino)?;
        let end = offset.saturating_add(len);
        if len == 0 {
            return Err(FsError::Invalid("fallocate of an empty range".into()));
        }
        // EFBIG, as a write there: not EOPNOTSUPP, which tells the caller (posix_fallocate)
        // to write zeros instead.
        if end > self.max_size() {
            return Err(FsError::TooLarge {
                max: self.max_size(),
            });
        }
        let keep_size = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        if mode == libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE {
            return self.punch_hole(ino, offset, end);
        }
        if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 {
            return Err(FsError::Unsupported(format!(
                "fallocate mode {mode:#x} is not supported (only 0, KEEP_SIZE, PUNCH_HOLE)"
            )));
        }
        let (first, last) = (offset / S, (end - 1) / S);
        let phys = self.map_blocks(ino, first, last)?;
        // New blocks may hold an old file's bytes: trim them so they read as zeros; the
        // commit's flush makes the trim durable before the commit names them.
        let mut k = 0;
        while k < phys.len() {
            if !phys[k].1 {
                k += 1;
                continue;
            }
            let mut n = 1;
            while k + n < phys.len() && phys[k + n].1 && phys[k + n].0 == phys[k].0 + n as u64 {
                n += 1;
            }
            self.dev.trim(phys[k].0, n as u64)?;
            k += n;
        }
        let i = self.inode_mut(ino)?;
        if !keep_size && end > i.size {
            i.size = end;
            i.ctime = Time::now();
            self.dirty = true;
        }
        Ok(())
    }

    /// After a power cut, a file's last block may hold bytes past the committed size (written
    /// later, never committed); zero them so they cannot reappear when the file grows.
    pub(crate) fn zero_tails(&mut self) -> Result<()> {
        let tails: Vec<(u64, u64, usize, u64)> = self
            .inodes
            .iter()
            .filter(|(_, i)| i.kind == Kind::File && !i.size.is_multiple_of(S))
            .filter_map(|(&ino, i)| {
                let b = i.size / S;
                let p = *i.blocks.get(b as usize)?;
                (p != 0).then_some((ino, p, (i.size % S) as usize, b))
            })
            .collect();
        let mut wrote = false;
        let mut buf = vec![0u8; SECTOR];
        for (ino, p, keep, b) in tails {
            self.dev.read(p, &mut buf)?;
            if buf[keep..].iter().any(|&x| x != 0) {
                buf[keep..].fill(0);
                let st = stream_at(self.inode(ino)?.streams.as_deref(), b * S);
                self.dev_write(p, &buf, WriteHints::stream(st))?;
                wrote = true;
            }
        }
        if wrote {
            self.dev_flush()?;
        }
        Ok(())
    }

    fn punch_hole(&mut self, ino: u64, offset: u64, end: u64) -> Result<()> {
        let size = self.inode(ino)?.size;
        let end = end.min(size);
        if offset >= end {
            return Ok(());
        }
        let (full_first, full_end) = (offset.div_ceil(S), end / S);
        // Partial blocks at either end: zero the bytes in place.
        if full_first >= full_end {
            self.write(ino, offset, &vec![0u8; (end - offset) as usize])?;
        } else {
            if offset < full_first * S {
                self.write(ino, offset, &vec![0u8; (full_first * S - offset) as usize])?;
            }
            if full_end * S < end {
                self.write(ino, full_end * S, &vec![0u8; (end - full_end * S) as usize])?;
            }
        }
        let i = self.inode_mut(ino)?;
        let mut freed = Vec::new();
        for b in full_first..full_end.min(i.blocks.len() as u64) {
            let s = std::mem::take(&mut i.blocks[b as usize]);
            if s != 0 {
                freed.push(s);
            }
        }
        trim_holes(&mut i.blocks);
        if !freed.is_empty() {
            self.pending_free.extend(freed);
            self.dirty = true;
        }
        Ok(())
    }
}

/// Drops trailing holes so the block map stays as short as the data.
fn trim_holes(blocks: &mut Vec<u64>) {
    while blocks.last() == Some(&0) {
        blocks.pop();
    }
}
