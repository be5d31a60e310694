//! One worker of the exerciser: its random operations and its models of the files.

use super::{B, CAP, FILES, MAX, SHARED, STRIPE, WORKERS};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// A 4 KiB-aligned buffer, as O_DIRECT wants.
struct Aligned {
    raw: Vec<u8>,
    at: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Self {
        let raw = vec![0u8; len + B];
        let at = raw.as_ptr().align_offset(B);
        Self { raw, at, len }
    }

    fn buf(&mut self) -> &mut [u8] {
        &mut self.raw[self.at..self.at + self.len]
    }
}

/// One file: a buffered descriptor, an O_DIRECT one, and what it must hold.
struct Model {
    path: PathBuf,
    buffered: File,
    direct: File,
    data: Vec<u8>,
}

fn open(path: &Path, direct: bool) -> File {
    open_with(path, if direct { libc::O_DIRECT } else { 0 }, false)
}

fn open_with(path: &Path, flags: i32, truncate: bool) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(truncate)
        .custom_flags(flags)
        .open(path)
        .unwrap_or_else(|e| panic!("open {} (flags {flags:#x}): {e}", path.display()))
}

pub(crate) struct Worker {
    id: usize,
    seed: u64,
    rng: SmallRng,
    files: Vec<Model>,
    /// The shared file; the model is right in this worker's stripes only.
    shared: Model,
    /// Where the workers leave marks for each other (the storm's end, a failure).
    marks: PathBuf,
    /// The latest operations, for the failure message.
    log: Vec<String>,
    /// Operations done, by kind.
    counts: BTreeMap<&'static str, usize>,
}

/// The fallocate modes tried; those the mount does not support must fail with EOPNOTSUPP.
const MODES: [i32; 6] = [
    0,
    libc::FALLOC_FL_KEEP_SIZE,
    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
    libc::FALLOC_FL_ZERO_RANGE,
    libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
    libc::FALLOC_FL_COLLAPSE_RANGE,
];

impl Worker {
    pub(crate) fn new(mnt: &Path, marks: &Path, id: usize, seed: u64) -> Self {
        let dir = mnt.join(format!("w{id}"));
        std::fs::create_dir(&dir).unwrap();
        let files = (0..FILES)
            .map(|f| {
                let path = dir.join(format!("f{f}"));
                Model {
                    buffered: open(&path, false),
                    direct: open(&path, true),
                    path,
                    data: Vec::new(),
                }
            })
            .collect();
        let path = mnt.join("shared");
        let direct = open(&path, true);
        let shared = Model {
            // Its own buffered descriptor after the storm (see `storm`).
            buffered: direct.try_clone().unwrap(),
            direct,
            path,
            data: vec![0; SHARED],
        };
        Self {
            id,
            seed,
            shared,
            marks: marks.to_path_buf(),
            rng: SmallRng::seed_from_u64(seed ^ (id as u64).wrapping_mul(0x9e37_79b9)),
            files,
            log: Vec::new(),
            counts: Default::default(),
        }
    }

    /// Fails the worker with the seed and the operations that led here.
    fn fail(&self, what: String) -> ! {
        // The others stop waiting for this one.
        let _ = std::fs::write(self.marks.join(format!("failed-{}", self.id)), b"");
        panic!(
            "worker {} (seed {:#x}): {what}\nlast operations:\n  {}",
            self.id,
            self.seed,
            self.log.join("\n  ")
        )
    }

    fn note(&mut self, kind: &'static str, op: String) {
        *self.counts.entry(kind).or_default() += 1;
        if self.log.len() == 40 {
            self.log.remove(0);
        }
        self.log.push(op);
    }

    /// An offset: near the end of the file half the time, anywhere below MAX else.
    fn offset(&mut self, f: usize) -> usize {
        let len = self.files[f].data.len();
        if self.rng.gen_bool(0.5) && len > 0 {
            let hi = (len + 3 * B).min(MAX);
            let lo = len.saturating_sub(3 * B).min(hi - 1);
            self.rng.gen_range(lo..hi)
        } else {
            self.rng.gen_range(0..MAX)
        }
    }

    /// A length: often under a block, often a few blocks, sometimes over a FUSE request
    /// (1 MiB), so the kernel splits it.
    fn length(&mut self) -> usize {
        let top = match self.rng.gen_range(0..16) {
            0..=3 => 16,
            4..=8 => B,
            9..=12 => 16 * B,
            13..=14 => 64 * B,
            _ => 512 * B,
        };
        self.rng.gen_range(1..=top)
    }

    /// An O_DIRECT length: whole blocks, sometimes over a FUSE request.
    fn blocks(&mut self) -> usize {
        let top = if self.rng.gen_ratio(1, 8) { 512 } else { 16 };
        self.rng.gen_range(1..=top) * B
    }

    /// One of the file's descriptors, either.
    fn any(&mut self, f: usize) -> (&File, &'static str) {
        let m = &self.files[f];
        if self.rng.gen_bool(0.5) {
            (&m.direct, " (O_DIRECT fd)")
        } else {
            (&m.buffered, "")
        }
    }

    /// Operations done, by kind.
    pub(crate) fn counts(&self) -> &BTreeMap<&'static str, usize> {
        &self.counts
    }

    /// The workers start together: O_DIRECT writes into their stripes of the shared file,
    /// so that the mount serves writes of several processes to one block at the same time.
    /// The kernel lets O_DIRECT writes to a file run in parallel only while no descriptor of
    /// it uses the page cache: the buffered descriptors open after every worker's storm
    /// (each worker leaves a mark when done).
    pub(crate) fn storm(&mut self, writes: usize) {
        for n in 0..writes {
            self.shared_write(n, Some(true));
            if n % 16 == 15 {
                self.shared_read(n, Some(true));
            }
        }
        let mark = |what: &str, i: usize| self.marks.join(format!("{what}-{i}"));
        std::fs::write(mark("storm-done", self.id), b"").unwrap();
        let t0 = std::time::Instant::now();
        while (0..WORKERS).any(|i| !mark("storm-done", i).exists()) {
            if (0..WORKERS).any(|i| mark("failed", i).exists()) || t0.elapsed().as_secs() > 60 {
                self.fail("another worker failed or did not end its storm".into());
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        self.shared.buffered = open(&self.shared.path, false);
    }

    pub(crate) fn step(&mut self, n: usize) {
        let f = self.rng.gen_range(0..FILES);
        match self.rng.gen_range(0..100) {
            0..=21 => self.write(n, f),
            22..=38 => self.read(n, f),
            39..=48 => self.direct_write(n, f),
            49..=58 => self.direct_read(n, f),
            59..=64 => self.truncate(n, f),
            65..=74 => self.fallocate(n, f),
            75..=76 => self.past_the_largest_file(n, f),
            77..=85 => self.shared_write(n, None),
            86..=89 => self.shared_read(n, None),
            90..=93 => {
                let (file, how) = self.any(f);
                let r = file.sync_all();
                self.note("fsync", format!("{n}: fsync f{f}{how}"));
                r.unwrap_or_else(|e| self.fail(format!("fsync: {e}")));
            }
            94..=97 => self.check_size(n, f),
            _ => {
                // A new open drops the kernel's cached pages of the file.
                let trunc = self.rng.gen_ratio(1, 4);
                self.note("reopen", format!("{n}: reopen f{f}, O_TRUNC: {trunc}"));
                let m = &mut self.files[f];
                m.buffered = open_with(&m.path, 0, trunc);
                m.direct = open(&m.path, true);
                if trunc {
                    m.data.clear();
                }
            }
        }
    }

    /// One of this worker's stripes of the shared file: its byte range.
    fn my_stripe(&mut self) -> (usize, usize) {
        let k = self.rng.gen_range(0..SHARED / STRIPE / WORKERS) * WORKERS + self.id;
        (k * STRIPE, (k + 1) * STRIPE)
    }

    fn shared_fd(&mut self, direct: Option<bool>) -> (&File, &'static str) {
        if direct.unwrap_or_else(|| self.rng.gen_bool(0.5)) {
            (&self.shared.direct, " (O_DIRECT fd)")
        } else {
            (&self.shared.buffered, "")
        }
    }

    /// A write inside one of this worker's stripes: its 4 KiB block holds other workers'
    /// stripes, written at the same time.
    fn shared_write(&mut self, n: usize, direct: Option<bool>) {
        let (lo, hi) = self.my_stripe();
        let at = self.rng.gen_range(lo..hi);
        let len = self.rng.gen_range(1..=hi - at);
        let mut buf = Aligned::new(len);
        self.rng.fill(buf.buf());
        let (file, how) = self.shared_fd(direct);
        let r = file.write_at(buf.buf(), at as u64);
        self.note(
            "shared pwrite",
            format!("{n}: pwrite shared {at}+{len}{how}"),
        );
        match r {
            Ok(k) if k == len => {}
            other => self.fail(format!("pwrite shared: {other:?}, not {len}")),
        }
        self.shared.data[at..at + len].copy_from_slice(buf.buf());
    }

    fn shared_read(&mut self, n: usize, direct: Option<bool>) {
        let (lo, hi) = self.my_stripe();
        let mut buf = Aligned::new(hi - lo);
        let (file, how) = self.shared_fd(direct);
        let r = read_all(file, buf.buf(), lo);
        self.note("shared pread", format!("{n}: pread shared {lo}..{hi}{how}"));
        let got = r.unwrap_or_else(|e| self.fail(format!("pread shared: {e}")));
        self.check_shared(&buf.buf()[..got], lo, hi);
    }

    /// `got` must be the model's bytes `lo..hi` of the shared file, this worker's own.
    fn check_shared(&self, got: &[u8], lo: usize, hi: usize) {
        let want = &self.shared.data[lo..hi];
        if got != want {
            self.fail(format!(
                "shared {lo}..{hi}: {} bytes, the model has {} (first difference at {:?})",
                got.len(),
                want.len(),
                got.iter().zip(want).position(|(a, b)| a != b)
            ));
        }
    }

    fn write(&mut self, n: usize, f: usize) {
        let (at, len) = (self.offset(f), self.length());
        let data: Vec<u8> = (0..len).map(|_| self.rng.gen()).collect();
        self.note("pwrite", format!("{n}: pwrite f{f} {at}+{len}"));
        let r = self.files[f].buffered.write_all_at(&data, at as u64);
        r.unwrap_or_else(|e| self.fail(format!("pwrite: {e}")));
        put(&mut self.files[f].data, at, &data);
    }

    fn direct_write(&mut self, n: usize, f: usize) {
        let at = self.offset(f) / B * B;
        let len = self.blocks();
        let mut buf = Aligned::new(len);
        self.rng.fill(buf.buf());
        self.note(
            "direct pwrite",
            format!("{n}: O_DIRECT pwrite f{f} {at}+{len}"),
        );
        let r = self.files[f].direct.write_at(buf.buf(), at as u64);
        match r {
            Ok(k) if k == len => {}
            other => self.fail(format!("O_DIRECT pwrite: {other:?}, not {len}")),
        }
        put(&mut self.files[f].data, at, buf.buf());
    }

    fn read(&mut self, n: usize, f: usize) {
        let (at, len) = (self.offset(f), self.length());
        self.note("pread", format!("{n}: pread f{f} {at}+{len}"));
        let mut buf = vec![0u8; len];
        let got = read_all(&self.files[f].buffered, &mut buf, at);
        let got = got.unwrap_or_else(|e| self.fail(format!("pread: {e}")));
        self.compare(&buf[..got], f, at, len, "pread");
    }

    fn direct_read(&mut self, n: usize, f: usize) {
        let at = self.offset(f) / B * B;
        let len = self.blocks();
        self.note(
            "direct pread",
            format!("{n}: O_DIRECT pread f{f} {at}+{len}"),
        );
        let mut buf = Aligned::new(len);
        let got = read_all(&self.files[f].direct, buf.buf(), at);
        let got = got.unwrap_or_else(|e| self.fail(format!("O_DIRECT pread: {e}")));
        self.compare(&buf.buf()[..got], f, at, len, "O_DIRECT pread");
    }

    /// `got` must be the model's bytes at `at` (up to `len`, short at the end of the file).
    fn compare(&self, got: &[u8], f: usize, at: usize, len: usize, what: &str) {
        let d = &self.files[f].data;
        let want = &d[at.min(d.len())..(at + len).min(d.len())];
        if got != want {
            self.fail(format!(
                "{what} f{f} {at}+{len}: {} bytes, the model has {} (first difference at \
                 {:?}); file size {}",
                got.len(),
                want.len(),
                got.iter().zip(want).position(|(a, b)| a != b),
                d.len()
            ));
        }
    }

    fn truncate(&mut self, n: usize, f: usize) {
        let size = if self.rng.gen_bool(0.5) {
            self.offset(f)
        } else {
            self.files[f].data.len() / 2
        };
        let (file, how) = self.any(f);
        let r = file.set_len(size as u64);
        self.note("ftruncate", format!("{n}: ftruncate f{f} {size}{how}"));
        r.unwrap_or_else(|e| self.fail(format!("ftruncate: {e}")));
        self.files[f].data.resize(size, 0);
    }

    fn fallocate(&mut self, n: usize, f: usize) {
        let mode = MODES[self.rng.gen_range(0..MODES.len())];
        let (at, len) = (self.offset(f), self.rng.gen_range(1..=256 * B));
        let (file, how) = self.any(f);
        let r = fallocate(file, mode, at, len);
        self.note(
            "fallocate",
            format!("{n}: fallocate f{f} mode {mode:#x} {at}+{len}{how}"),
        );
        if let Err(e) = r {
            // The mount supports 0, KEEP_SIZE and PUNCH_HOLE; the others may be refused, only
            // cleanly (and then change nothing).
            let optional = mode & (libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_COLLAPSE_RANGE);
            if optional != 0 && e.raw_os_error() == Some(libc::EOPNOTSUPP) {
                *self.counts.entry("fallocate refused").or_default() += 1;
                return;
            }
            self.fail(format!("fallocate mode {mode:#x}: {e}"));
        }
        if mode == libc::FALLOC_FL_COLLAPSE_RANGE {
            self.fail("COLLAPSE_RANGE succeeded; model it here".into());
        }
        let d = &mut self.files[f].data;
        let end = at + len;
        let keep_size = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        if !keep_size && end > d.len() {
            d.resize(end, 0);
        }
        if mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE) != 0 {
            let end = end.min(d.len());
            if at < end {
                d[at..end].fill(0);
            }
        }
    }

    /// Growing a file past the largest size (the device's capacity) by a write, a truncate
    /// or an fallocate must fail with EFBIG and change nothing. (A write across the limit may
    /// be short instead, as the kernel splits it: this one starts at the limit.)
    fn past_the_largest_file(&mut self, n: usize, f: usize) {
        let at = CAP - self.rng.gen_range(0..4 * B);
        let len = CAP - at + self.rng.gen_range(1..4 * B);
        let how = self.rng.gen_range(0..4);
        let file = &self.files[f].buffered;
        let (r, what) = match how {
            0 => (file.write_at(&[7u8; 100], CAP as u64).map(drop), "pwrite"),
            1 => (file.set_len((at + len) as u64), "ftruncate"),
            2 => (fallocate(file, 0, at, len), "fallocate"),
            _ => (
                fallocate(file, libc::FALLOC_FL_KEEP_SIZE, at, len),
                "fallocate KEEP_SIZE",
            ),
        };
        self.note("too large", format!("{n}: {what} f{f} to {at}+{len}"));
        match r {
            Err(e) if e.raw_os_error() == Some(libc::EFBIG) => {}
            other => self.fail(format!(
                "{what} past the largest file: {other:?}, not EFBIG"
            )),
        }
    }

    fn check_size(&mut self, n: usize, f: usize) {
        let (file, how) = self.any(f);
        let size = file.metadata().map(|s| s.len());
        self.note("fstat", format!("{n}: fstat f{f}{how}"));
        let size = size.unwrap_or_else(|e| self.fail(format!("fstat: {e}")));
        let m = &self.files[f];
        if size != m.data.len() as u64 {
            self.fail(format!("f{f} size {size}, the model {}", m.data.len()));
        }
    }

    /// Syncs, checks every file whole through both descriptors, saves the models.
    pub(crate) fn finish(&mut self, models: &Path) {
        for f in 0..FILES {
            self.note("end", format!("end: fsync, whole-file compare of f{f}"));
            let m = &self.files[f];
            m.buffered
                .sync_all()
                .unwrap_or_else(|e| self.fail(format!("fsync: {e}")));
            let len = m.data.len();
            let mut buf = vec![0u8; len + B];
            let got = read_all(&open(&m.path, false), &mut buf, 0);
            let got = got.unwrap_or_else(|e| self.fail(format!("read: {e}")));
            self.compare(&buf[..got], f, 0, len + B, "whole read");
            let mut abuf = Aligned::new((len / B + 1) * B);
            let got = read_all(&m.direct, abuf.buf(), 0);
            let got = got.unwrap_or_else(|e| self.fail(format!("O_DIRECT read: {e}")));
            self.compare(&abuf.buf()[..got], f, 0, len + B, "whole O_DIRECT read");
            std::fs::write(models.join(format!("w{}-f{f}", self.id)), &m.data).unwrap();
        }
        self.note("end", "end: fsync, compare of the shared file".into());
        let r = self.shared.direct.sync_all();
        r.unwrap_or_else(|e| self.fail(format!("fsync shared: {e}")));
        for direct in [false, true] {
            let mut buf = Aligned::new(SHARED);
            let file = if direct {
                &self.shared.direct
            } else {
                &open(&self.shared.path, false)
            };
            let got = read_all(file, buf.buf(), 0);
            let got = got.unwrap_or_else(|e| self.fail(format!("read shared: {e}")));
            let all = &buf.buf()[..got];
            if got != SHARED {
                self.fail(format!("shared: {got} bytes, not {SHARED}"));
            }
            for k in (self.id..SHARED / STRIPE).step_by(WORKERS) {
                let (lo, hi) = (k * STRIPE, (k + 1) * STRIPE);
                self.check_shared(&all[lo..hi], lo, hi);
            }
        }
        let path = models.join(format!("w{}-shared", self.id));
        std::fs::write(path, &self.shared.data).unwrap();
    }
}

/// Writes `data` into the model at `at`, zero-filling a gap.
fn put(model: &mut Vec<u8>, at: usize, data: &[u8]) {
    if model.len() < at + data.len() {
        model.resize(at + data.len(), 0);
    }
    model[at..at + data.len()].copy_from_slice(data);
}

fn fallocate(file: &File, mode: i32, at: usize, len: usize) -> std::io::Result<()> {
    // SAFETY: fallocate on an open descriptor; no memory is passed.
    let r = unsafe { libc::fallocate(file.as_raw_fd(), mode, at as i64, len as i64) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Reads until `buf` is full or the end of the file; returns the bytes read.
fn read_all(file: &File, buf: &mut [u8], at: usize) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], (at + done) as u64) {
            Ok(0) => break,
            Ok(k) => done += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}
