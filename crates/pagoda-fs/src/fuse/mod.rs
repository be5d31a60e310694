//! The FUSE adapter: serves an [`Fs`] through the kernel (crate `fuser`, pure-Rust mount).
//!
//! Besides the files, a hidden control directory `/.pagoda` (not listed, reachable by name)
//! holds `stats` and `stats.json` (read: the counters, rendered by the mount's callback) and
//! `control` (write `power-cut [SEED]` to cut the device's power, `sync` to commit,
//! `reset-stats` to zero the device's counters, e.g. after a benchmark's load phase).
//!
//! Reads, writes and fsyncs run on worker threads (`workers.rs`), their device I/O outside
//! the file system's lock (`io.rs`), so requests to different files or block ranges proceed
//! at once; everything else is served on fuser's session thread under the lock.

mod attr;
mod workers;

use crate::error::FsError;
use crate::fs::{Fs, SetAttr, ROOT};
use crate::layout::{Kind, SECTOR};
use attr::{control_attr, direct_io, file_attr, file_type, from_time_or_now, name_str};
use fuser::{
    Filesystem, KernelConfig, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};
use workers::{Ranges, Workers};

/// Worker threads of a mount unless [`PagodaFuse::with_threads`] says otherwise: more than
/// InnoDB's default I/O threads (4 read, 4 write) plus its log writer.
pub const DEFAULT_THREADS: usize = 8;
const S: u64 = SECTOR as u64;

const TTL: Duration = Duration::from_secs(1);
const CTL_DIR: u64 = u64::MAX - 1;
const CTL_STATS: u64 = u64::MAX - 2;
const CTL_CMD: u64 = u64::MAX - 3;
const CTL_JSON: u64 = u64::MAX - 4;
/// Name of the control directory in the root.
pub const CONTROL_DIR: &str = ".pagoda";

/// Renders the counters for `/.pagoda/stats` (`false`: text) and `stats.json` (`true`).
pub type StatsFn = Arc<dyn Fn(&Fs, bool) -> String + Send + Sync>;

/// A mounted [`Fs`]. The file system is shared so the mount's owner can read counters,
/// sync and cut power while the kernel serves requests.
pub struct PagodaFuse {
    fs: Arc<Mutex<Fs>>,
    stats: StatsFn,
    cut_seed: u64,
    /// Snapshots of `stats` per open handle, so a reader sees one consistent text.
    handles: HashMap<u64, Vec<u8>>,
    next_fh: u64,
    ranges: Arc<Ranges>,
    workers: Workers,
}

impl std::fmt::Debug for PagodaFuse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PagodaFuse").finish_non_exhaustive()
    }
}

impl PagodaFuse {
    /// Serves `fs`; `stats` renders `/.pagoda/stats`; `cut_seed` seeds a power cut through
    /// `/.pagoda/control`.
    pub fn new(fs: Arc<Mutex<Fs>>, stats: StatsFn, cut_seed: u64) -> Self {
        Self {
            fs,
            stats,
            cut_seed,
            handles: HashMap::new(),
            next_fh: 1,
            ranges: Arc::default(),
            workers: Workers::new(DEFAULT_THREADS),
        }
    }

    /// Serves reads, writes and fsyncs on `n` worker threads (0: all on the session thread,
    /// one request at a time).
    pub fn with_threads(mut self, n: usize) -> Self {
        self.workers = Workers::new(n);
        self
    }

    /// Worker threads serving data requests.
    pub fn threads(&self) -> usize {
        self.workers.threads()
    }

    fn fs(&self) -> MutexGuard<'_, Fs> {
        lock(&self.fs)
    }

    fn control(&mut self, text: &str) -> Result<(), FsError> {
        let mut words = text.split_whitespace();
        match words.next() {
            Some("power-cut") => {
                let seed = words
                    .next()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(self.cut_seed);
                self.fs()
                    .power_cut(seed, "power cut through .pagoda/control")?;
                Ok(())
            }
            Some("sync") => self.fs().sync(),
            Some("reset-stats") => {
                self.fs().device().reset_stats();
                Ok(())
            }
            _ => Err(FsError::Invalid(format!(
                "unknown control command {text:?}: write 'power-cut [SEED]', 'sync' or \
                 'reset-stats'"
            ))),
        }
    }
}

fn lock(fs: &Mutex<Fs>) -> MutexGuard<'_, Fs> {
    // A panic while holding the lock left the Fs as it was; keep serving.
    fs.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A write on a worker: plan under the lock, device writes without it, finish under it.
fn write_detached(
    fs: &Mutex<Fs>,
    ranges: &Arc<Ranges>,
    ino: u64,
    offset: u64,
    data: &[u8],
    direct: bool,
) -> Result<usize, FsError> {
    if data.is_empty() {
        return Ok(0);
    }
    let end = offset.saturating_add(data.len() as u64);
    let _blocks = ranges.lock(ino, offset / S, (end - 1) / S);
    let mut plan = {
        let mut fs = lock(fs);
        if fs.serial_io() {
            return if direct {
                fs.write_direct(ino, offset, data)
            } else {
                fs.write(ino, offset, data)
            };
        }
        fs.plan_write(ino, offset, data.len(), direct, true)?
    };
    let dev = plan.device();
    let r = plan.run(data, &mut |s, b, h| Ok(dev.write(s, b, h)?));
    lock(fs).finish_write(plan, r)
}

/// An fsync on a worker: a commit under the lock, or a device flush without it.
fn fsync_detached(fs: &Mutex<Fs>) -> Result<(), FsError> {
    let flush = lock(fs).plan_fsync()?;
    match flush.map(crate::io::FlushPlan::run) {
        Some(Err(e)) => Err(lock(fs).device_failed(e)),
        _ => Ok(()),
    }
}

impl PagodaFuse {
    fn fsync_on_worker(&self, ino: u64, reply: ReplyEmpty) {
        if ino >= CTL_JSON {
            return reply.ok();
        }
        let fs = Arc::clone(&self.fs);
        self.workers.run(move || match fsync_detached(&fs) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e.errno()),
        });
    }

    /// Creates an empty file or directory and replies with its entry (mknod, mkdir).
    fn make(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        kind: Kind,
        mode: u32,
        reply: ReplyEntry,
    ) {
        let r = name_str(name).and_then(|n| {
            self.fs()
                .create(parent, n, kind, mode, (req.uid(), req.gid()), b"")
        });
        match r {
            Ok(a) => reply.entry(&TTL, &file_attr(&a), 0),
            Err(e) => reply.error(e.errno()),
        }
    }
}

impl Filesystem for PagodaFuse {
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), libc::c_int> {
        // InnoDB writes 16 KiB pages and larger batches: let them through whole.
        let _ = config.set_max_write(1 << 20);
        if self.workers.threads() > 0 {
            // Asynchronous direct I/O (libaio, io_uring) reaches us as several requests at
            // once instead of one by one; the kernel caps how many it queues in background.
            let _ = config.add_capabilities(fuser::consts::FUSE_ASYNC_DIO);
            let _ = config.set_max_background(64);
        }
        Ok(())
    }

    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let special = match (parent, name.as_bytes()) {
            (ROOT, b".pagoda") => Some(CTL_DIR),
            (CTL_DIR, b"stats") => Some(CTL_STATS),
            (CTL_DIR, b"control") => Some(CTL_CMD),
            (CTL_DIR, b"stats.json") => Some(CTL_JSON),
            (CTL_DIR, _) => return reply.error(libc::ENOENT),
            _ => None,
        };
        if let Some(ino) = special {
            return reply.entry(&Duration::ZERO, &control_attr(ino), 0);
        }
        match name_str(name).and_then(|n| self.fs().lookup(parent, n)) {
            Ok(a) => reply.entry(&TTL, &file_attr(&a), 0),
            Err(e) => reply.error(e.errno()),
        }
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        if ino >= CTL_JSON {
            return reply.attr(&Duration::ZERO, &control_attr(ino));
        }
        match self.fs().getattr(ino) {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(e.errno()),
        }
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        if ino >= CTL_JSON {
            // `echo power-cut > control` truncates first.
            return reply.attr(&Duration::ZERO, &control_attr(ino));
        }
        // A truncate must not run under a write to the blocks it frees.
        let _blocks = size.map(|_| self.ranges.lock(ino, 0, u64::MAX));
        let set = SetAttr {
            perm: mode,
            uid,
            gid,
            size,
            atime: atime.map(from_time_or_now),
            mtime: mtime.map(from_time_or_now),
        };
        match self.fs().setattr(ino, &set) {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(e.errno()),
        }
    }

    fn readlink(&mut self, _req: &Request<'_>, ino: u64, reply: ReplyData) {
        match self.fs().readlink(ino) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(e.errno()),
        }
    }

    fn mknod(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        if mode & libc::S_IFMT != libc::S_IFREG {
            // Sockets, FIFOs and devices need no storage: keep them on a real file system.
            return reply.error(libc::EPERM);
        }
        self.make(req, parent, name, Kind::File, mode & !umask, reply);
    }

    fn mkdir(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        self.make(req, parent, name, Kind::Dir, mode & !umask, reply);
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        match name_str(name).and_then(|n| self.fs().unlink(parent, n)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e.errno()),
        }
    }

    fn rmdir(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        match name_str(name).and_then(|n| self.fs().rmdir(parent, n)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e.errno()),
        }
    }

    fn symlink(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let t = target.as_os_str().as_bytes();
        let r = name_str(link_name).and_then(|n| {
            self.fs()
                .create(parent, n, Kind::Symlink, 0o777, (req.uid(), req.gid()), t)
        });
        match r {
            Ok(a) => reply.entry(&TTL, &file_attr(&a), 0),
            Err(e) => reply.error(e.errno()),
        }
    }

    fn rename(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        if flags & !libc::RENAME_NOREPLACE != 0 {
            return reply.error(libc::EINVAL);
        }
        let noreplace = flags & libc::RENAME_NOREPLACE != 0;
        let r = name_str(name).and_then(|n| {
            let nn = name_str(newname)?;
            self.fs().rename(parent, n, newparent, nn, noreplace)
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e.errno()),
        }
    }

    fn link(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        newparent: u64,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        match name_str(newname).and_then(|n| self.fs().link(ino, newparent, n)) {
            Ok(a) => reply.entry(&TTL, &file_attr(&a), 0),
            Err(e) => reply.error(e.errno()),
        }
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        if ino >= CTL_JSON && ino != CTL_DIR {
            let fh = self.next_fh;
            self.next_fh += 1;
            if ino != CTL_CMD {
                let text = {
                    let fs = self.fs();
                    (self.stats)(&fs, ino == CTL_JSON)
                };
                self.handles.insert(fh, text.into_bytes());
            }
            // Direct I/O: the kernel reads until we return nothing, whatever the size says.
            return reply.opened(fh, fuser::consts::FOPEN_DIRECT_IO);
        }
        match self.fs().open_file(ino) {
            Ok(()) => reply.opened(0, direct_io(flags)),
            Err(e) => reply.error(e.errno()),
        }
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock: Option<u64>,
        reply: ReplyData,
    ) {
        if ino == CTL_STATS || ino == CTL_JSON {
            let text = self.handles.get(&fh).map_or(&[][..], Vec::as_slice);
            let start = (offset.max(0) as usize).min(text.len());
            let end = (start + size as usize).min(text.len());
            return reply.data(&text[start..end]);
        }
        let fs = Arc::clone(&self.fs);
        self.workers.run(move || {
            let plan = lock(&fs).plan_read(ino, offset.max(0) as u64, size as usize, true);
            match plan.and_then(crate::io::ReadPlan::run) {
                Ok(d) => reply.data(&d),
                Err(e) => reply.error(e.errno()),
            }
        });
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        flags: i32,
        _lock: Option<u64>,
        reply: ReplyWrite,
    ) {
        if ino == CTL_CMD {
            let text = String::from_utf8_lossy(data).into_owned();
            return match self.control(&text) {
                Ok(()) => reply.written(data.len() as u32),
                Err(e) => reply.error(e.errno()),
            };
        }
        // The file's flags as they are now (fcntl may set O_DIRECT after the open: InnoDB).
        let offset = offset.max(0) as u64;
        let direct = flags & libc::O_DIRECT != 0;
        // fuser reuses its buffer for the next request: the worker gets a copy.
        let data = data.to_vec();
        let (fs, ranges) = (Arc::clone(&self.fs), Arc::clone(&self.ranges));
        self.workers.run(
            move || match write_detached(&fs, &ranges, ino, offset, &data, direct) {
                Ok(n) => reply.written(n as u32),
                Err(e) => reply.error(e.errno()),
            },
        );
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        fh: u64,
        _flags: i32,
        _lock: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if ino >= CTL_JSON {
            self.handles.remove(&fh);
        } else {
            self.fs().release(ino);
        }
        reply.ok();
    }

    fn fsync(&mut self, _req: &Request<'_>, ino: u64, _fh: u64, _ds: bool, reply: ReplyEmpty) {
        self.fsync_on_worker(ino, reply);
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        let (parent, entries) = if ino == CTL_DIR {
            (
                ROOT,
                vec![
                    (CTL_STATS, Kind::File, "stats".to_string()),
                    (CTL_JSON, Kind::File, "stats.json".to_string()),
                    (CTL_CMD, Kind::File, "control".to_string()),
                ],
            )
        } else {
            let fs = self.fs();
            match fs.readdir(ino).and_then(|e| Ok((fs.parent(ino)?, e))) {
                Ok(x) => x,
                Err(e) => return reply.error(e.errno()),
            }
        };
        let all = [
            (ino, Kind::Dir, ".".to_string()),
            (parent, Kind::Dir, "..".to_string()),
        ]
        .into_iter()
        .chain(entries);
        for (i, (child, kind, name)) in all.enumerate().skip(offset.max(0) as usize) {
            if reply.add(child, (i + 1) as i64, file_type(kind), name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(&mut self, _req: &Request<'_>, ino: u64, _fh: u64, _ds: bool, reply: ReplyEmpty) {
        self.fsync_on_worker(ino, reply);
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        let s = self.fs().statfs();
        reply.statfs(
            s.blocks,
            s.free,
            s.free,
            s.files,
            u64::MAX / 2,
            4096,
            255,
            4096,
        );
    }

    fn create(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let r = name_str(name).and_then(|n| {
            let mut fs = self.fs();
            let a = fs.create(
                parent,
                n,
                Kind::File,
                mode & !umask,
                (req.uid(), req.gid()),
                b"",
            )?;
            fs.open_file(a.ino)?;
            Ok(a)
        });
        match r {
            Ok(a) => reply.created(&TTL, &file_attr(&a), 0, 0, direct_io(flags)),
            Err(e) => reply.error(e.errno()),
        }
    }

    fn fallocate(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        length: i64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if offset < 0 || length <= 0 {
            return reply.error(libc::EINVAL);
        }
        let _blocks = self.ranges.lock(ino, 0, u64::MAX);
        match self.fs().fallocate(ino, offset as u64, length as u64, mode) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e.errno()),
        }
    }
}
