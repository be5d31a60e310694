//! The FUSE adapter: serves an [`Fs`] through the kernel (crate `fuser`, pure-Rust mount).
//!
//! Besides the files, a hidden control directory `/.pagoda` (not listed, reachable by name)
//! holds `stats` and `stats.json` (read: the counters, rendered by the mount's callback) and
//! `control` (write `power-cut [SEED]` to cut the device's power, `sync` to commit,
//! `reset-stats` to zero the device's counters, e.g. after a benchmark's load phase).

use crate::error::FsError;
use crate::fs::{Attr, Fs, SetAttr, ROOT};
use crate::layout::{Kind, Time};
use fuser::{
    FileAttr, FileType, Filesystem, KernelConfig, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
        }
    }

    fn fs(&self) -> MutexGuard<'_, Fs> {
        // A panic while holding the lock left the Fs as it was; keep serving.
        self.fs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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

fn to_system(t: Time) -> SystemTime {
    if t.secs >= 0 {
        UNIX_EPOCH + Duration::new(t.secs as u64, t.nanos)
    } else {
        UNIX_EPOCH
    }
}

fn from_time_or_now(t: TimeOrNow) -> Time {
    let st = match t {
        TimeOrNow::SpecificTime(st) => st,
        TimeOrNow::Now => SystemTime::now(),
    };
    let d = st.duration_since(UNIX_EPOCH).unwrap_or_default();
    Time {
        secs: d.as_secs() as i64,
        nanos: d.subsec_nanos(),
    }
}

fn file_type(k: Kind) -> FileType {
    match k {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
        Kind::Symlink => FileType::Symlink,
    }
}

fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: a.ino,
        size: a.size,
        blocks: a.blocks * 8,
        atime: to_system(a.atime),
        mtime: to_system(a.mtime),
        ctime: to_system(a.ctime),
        crtime: to_system(a.ctime),
        kind: file_type(a.kind),
        perm: a.perm as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn control_attr(ino: u64) -> FileAttr {
    let now = SystemTime::now();
    let (kind, perm, nlink) = if ino == CTL_DIR {
        (FileType::Directory, 0o755, 2)
    } else {
        (
            FileType::RegularFile,
            if ino == CTL_CMD { 0o200 } else { 0o444 },
            1,
        )
    };
    FileAttr {
        ino,
        size: 0,
        blocks: 0,
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind,
        perm,
        nlink,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl PagodaFuse {
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

/// An `O_DIRECT` open bypasses the kernel's page cache (FOPEN_DIRECT_IO), so each write
/// arrives whole, as the program issued it, and can be handed to the device atomically.
fn direct_io(flags: i32) -> u32 {
    if flags & libc::O_DIRECT != 0 {
        fuser::consts::FOPEN_DIRECT_IO
    } else {
        0
    }
}

fn name_str(name: &OsStr) -> Result<&str, FsError> {
    std::str::from_utf8(name.as_bytes())
        .map_err(|_| FsError::BadName(name.to_string_lossy().into_owned()))
}

impl Filesystem for PagodaFuse {
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), libc::c_int> {
        // InnoDB writes 16 KiB pages and larger batches: let them through whole.
        let _ = config.set_max_write(1 << 20);
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
        match self.fs().read(ino, offset.max(0) as u64, size as usize) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(e.errno()),
        }
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
        let r = if flags & libc::O_DIRECT != 0 {
            self.fs().write_direct(ino, offset, data)
        } else {
            self.fs().write(ino, offset, data)
        };
        match r {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e.errno()),
        }
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
        if ino >= CTL_JSON {
            return reply.ok();
        }
        match self.fs().fsync(ino) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e.errno()),
        }
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
        if ino >= CTL_JSON {
            return reply.ok();
        }
        match self.fs().fsync(ino) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e.errno()),
        }
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
        match self.fs().fallocate(ino, offset as u64, length as u64, mode) {
            Ok(()) => reply.ok(),
            Err(FsError::Invalid(_)) => reply.error(libc::EOPNOTSUPP),
            Err(e) => reply.error(e.errno()),
        }
    }
}
