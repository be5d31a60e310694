//! A file-system exerciser through a real FUSE mount. Worker processes (this test binary,
//! started again as `worker`) run seeded random operations at once:
//!
//! * on files of their own: pwrite at random offsets and lengths (some over a FUSE request,
//!   so the kernel splits them), reads, ftruncate up and down, fallocate (every mode; modes
//!   the mount does not support must fail with EOPNOTSUPP and change nothing), growing past
//!   the largest file (EFBIG), fsync, reopen (with O_TRUNC or not), and O_DIRECT reads and
//!   writes from 4 KiB-aligned buffers on a second descriptor of the same file;
//! * on one shared file, whose 1000-byte stripes belong to the workers in turn: writes (plain
//!   and O_DIRECT) into their own stripes, so writes of several processes meet in one 4 KiB
//!   block, which the mount must read, modify and write back without losing either.
//!
//! An O_DIRECT open is served with FOPEN_DIRECT_IO (that descriptor bypasses the page cache,
//! so each write reaches the mount whole); the buffered descriptor of the same file must
//! still read what the O_DIRECT one wrote, and the other way round.
//!
//! Each worker keeps a model of what it wrote and checks every read, every size, and at the
//! end each file whole through both descriptors. The mount's image sits in
//! `common::VolatileImage`: after the workers' last fsync the mount goes away without a sync,
//! a kill drops every unsynced change, and every file must still read as its model, so what
//! the FUSE fsync path acknowledged was durable.
//!
//! Shown to fail, each by a temporary edit: without the FUSE adapter's block-range lock
//! (`Ranges::lock`), workers lose bytes of their shared stripes (each seed tried: the
//! default, 1 to 8); without the zeroing of a truncated block's tail, or of a punched hole's
//! partial first block, reads differ from the model; with the image's fdatasync only in the
//! format's flushes, the files are gone after the kill. It found fallocate past the largest
//! file answered EOPNOTSUPP instead of EFBIG (`fallocate.rs`).
//!
//! Seed: `PAGODA_EXERCISER_SEED` (default below), printed on failure; operations per worker:
//! `PAGODA_EXERCISER_OPS`. Skipped, with the reason printed, where FUSE cannot be mounted
//! (no /dev/fuse, not root).

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

#[path = "../common/mod.rs"]
mod common;
mod worker;

use common::VolatileImage;
use pagoda_device::spec::DeviceSpec;
use pagoda_device::DeviceRef;
use pagoda_fs::backing::ImageDevice;
use pagoda_fs::fuse::{PagodaFuse, StatsFn};
use pagoda_fs::{Fs, FsOptions, ROOT};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use worker::Worker;

const DEFAULT_SEED: u64 = 0x5eed_0042;
const WORKERS: usize = 3;
/// Files of each worker's own.
const FILES: usize = 2;
const OPS: usize = 3000;
/// O_DIRECT writes of each worker to the shared file, all at once, before the other ops.
const STORM: usize = 2000;
/// Random offsets in a worker's own files land below this.
const MAX: usize = 3 << 20;
/// The device's capacity, the largest file size too.
const CAP: usize = 128 << 20;
/// The shared file's size and its stripes: stripe `k` belongs to worker `k % WORKERS`.
const SHARED: usize = 16 << 10;
const STRIPE: usize = 1000;
const B: usize = 4096;
/// The worker's parameters, from the parent: mount, model directory, worker id, seed.
const ENV: &str = "PAGODA_EXERCISER_WORKER";

fn seed() -> u64 {
    std::env::var("PAGODA_EXERCISER_SEED")
        .ok()
        .and_then(|s| match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => s.parse().ok(),
        })
        .unwrap_or(DEFAULT_SEED)
}

fn device() -> DeviceRef {
    // atomic=16KiB: aligned O_DIRECT pages take the atomic-write path.
    DeviceSpec::parse(&format!("mem,capacity={}MiB,atomic=16KiB", CAP >> 20))
        .unwrap()
        .open()
        .unwrap()
}

#[test]
fn the_mount_passes_the_exerciser() {
    if let Some(why) = common::fuse_unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let seed = seed();
    let dir = tempfile::tempdir().unwrap();
    let (mnt, models) = (dir.path().join("mnt"), dir.path().join("models"));
    std::fs::create_dir(&mnt).unwrap();
    std::fs::create_dir(&models).unwrap();
    let store = VolatileImage::default();
    let (img, _) =
        ImageDevice::open_in(Box::new(store.clone()), Path::new("img"), device()).unwrap();
    let fs = Arc::new(Mutex::new(
        Fs::format(Arc::new(img), FsOptions::default()).unwrap(),
    ));
    let stats: StatsFn = Arc::new(|fs: &Fs, _| format!("{:?}\n", fs.stats()));
    let fuse = PagodaFuse::new(fs.clone(), stats, 1);
    let opts = [fuser::MountOption::FSName("pagoda-exerciser".into())];
    let session = match fuser::spawn_mount2(fuse, &mnt, &opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("SKIPPED: FUSE mount failed here: {e}");
            return;
        }
    };
    let shared = std::fs::File::create(mnt.join("shared")).unwrap();
    shared.set_len(SHARED as u64).unwrap();
    shared.sync_all().unwrap();
    // Open, it would keep the workers' O_DIRECT writes from running in parallel.
    drop(shared);
    let failed = run_workers(&mnt, &models, seed);
    let want_shared = shared_model(&models);
    let through_mount = failed
        .is_empty()
        .then(|| std::fs::read(mnt.join("shared")).unwrap());
    drop(session);
    let why = format!("exerciser seed {seed:#x} (rerun: PAGODA_EXERCISER_SEED={seed:#x})");
    assert!(failed.is_empty(), "{why}:\n{failed}");
    same(
        &through_mount.unwrap(),
        &want_shared,
        &format!("{why}: shared"),
    );
    assert_eq!(fs.lock().unwrap().down_reason(), None);

    // The mount's process dies: no sync, nothing unsynced kept.
    std::mem::forget(fs);
    store.kill(None);
    let (img, _) = ImageDevice::open_in(Box::new(store), Path::new("img"), device()).unwrap();
    let mut fs = Fs::open(Arc::new(img), FsOptions::default()).unwrap();
    let got = read(&mut fs, ROOT, "shared", &why);
    same(
        &got,
        &want_shared,
        &format!("{why}: after the kill, shared"),
    );
    for id in 0..WORKERS {
        let d = lookup(&mut fs, ROOT, &format!("w{id}"), &why);
        for f in 0..FILES {
            let name = format!("f{f}");
            let want = std::fs::read(models.join(format!("w{id}-{name}"))).unwrap();
            let got = read(&mut fs, d, &name, &why);
            same(&got, &want, &format!("{why}: after the kill, w{id}/{name}"));
        }
    }
}

fn lookup(fs: &mut Fs, dir: u64, name: &str, why: &str) -> u64 {
    fs.lookup(dir, name)
        .unwrap_or_else(|e| panic!("{why}: after the kill, {name}: {e}"))
        .ino
}

fn read(fs: &mut Fs, dir: u64, name: &str, why: &str) -> Vec<u8> {
    let ino = lookup(fs, dir, name, why);
    fs.read(ino, 0, CAP).unwrap()
}

fn same(got: &[u8], want: &[u8], what: &str) {
    assert!(
        got == want,
        "{what}: {} bytes, the model {} (first difference at {:?})",
        got.len(),
        want.len(),
        got.iter().zip(want).position(|(a, b)| a != b)
    );
}

/// Runs the workers to the end; returns the output of those that failed.
fn run_workers(mnt: &Path, models: &Path, seed: u64) -> String {
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..WORKERS)
        .map(|id| {
            Command::new(&exe)
                .args(["--exact", "worker", "--ignored", "--nocapture"])
                .env("RUST_BACKTRACE", "0")
                .env(
                    ENV,
                    format!("{}\n{}\n{id}\n{seed}", mnt.display(), models.display()),
                )
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let mut failed = String::new();
    for (id, out) in outputs.iter().enumerate() {
        let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
        match text.lines().find(|l| l.starts_with("worker done")) {
            Some(done) if out.status.success() => eprintln!("worker {id}: {done}"),
            _ => failed += &format!("--- worker {id} ({}):\n{text}\n", out.status),
        }
    }
    failed
}

/// The shared file as the workers' models say: each stripe from its owner's model.
fn shared_model(models: &Path) -> Vec<u8> {
    let parts: Vec<Vec<u8>> = (0..WORKERS)
        .map(|id| std::fs::read(models.join(format!("w{id}-shared"))).unwrap_or_default())
        .collect();
    (0..SHARED)
        .map(|i| {
            let part = &parts[i / STRIPE % WORKERS];
            part.get(i).copied().unwrap_or(0)
        })
        .collect()
}

/// One worker process of `the_mount_passes_the_exerciser`, which starts it with its
/// parameters; on its own it has nothing to do.
#[test]
#[ignore = "a worker process started by the_mount_passes_the_exerciser"]
fn worker() {
    let Ok(params) = std::env::var(ENV) else {
        eprintln!("not started by the_mount_passes_the_exerciser: nothing to do");
        return;
    };
    let p: Vec<&str> = params.lines().collect();
    let (mnt, models) = (PathBuf::from(p[0]), PathBuf::from(p[1]));
    let (id, seed): (usize, u64) = (p[2].parse().unwrap(), p[3].parse().unwrap());
    let mut w = Worker::new(&mnt, &models, id, seed);
    w.storm(STORM);
    let ops = std::env::var("PAGODA_EXERCISER_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(OPS);
    for n in 0..ops {
        w.step(n);
    }
    w.finish(&models);
    println!("worker done: {:?}", w.counts());
}
