//! The file system through a real FUSE mount: create, write, fsync, read back, rename,
//! unlink, mkdir, a power cut through the control file and a remount with the fsynced data;
//! requests served at once (held in the device, counted there).
//! Skipped, with the reason printed, where FUSE cannot be mounted (no /dev/fuse, not root).

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use pagoda_device::spec::DeviceSpec;
use pagoda_device::DeviceRef;
use pagoda_fs::fuse::{PagodaFuse, StatsFn};
use pagoda_fs::{Fs, FsOptions, StreamRules};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

fn fuse_unavailable() -> Option<String> {
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        return Some(format!("cannot open /dev/fuse: {e}"));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (the pure-Rust mount needs root)".into());
    }
    None
}

fn mount(dir: &Path, fs: Arc<Mutex<Fs>>) -> Option<fuser::BackgroundSession> {
    mount_with(dir, fs, pagoda_fs::fuse::DEFAULT_THREADS)
}

fn mount_with(dir: &Path, fs: Arc<Mutex<Fs>>, threads: usize) -> Option<fuser::BackgroundSession> {
    let stats: StatsFn = Arc::new(|fs: &Fs, _json: bool| format!("{:?}\n", fs.device().stats()));
    let opts = [fuser::MountOption::FSName("pagoda-test".into())];
    let fuse = PagodaFuse::new(fs, stats, 3).with_threads(threads);
    match fuser::spawn_mount2(fuse, dir, &opts) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("SKIPPED: FUSE mount failed here: {e}");
            None
        }
    }
}

#[test]
fn mount_write_fsync_cut_remount() {
    if let Some(why) = fuse_unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path();
    let dev: DeviceRef = DeviceSpec::parse("sata-ssd,capacity=64MiB,op=0.25,streams=2")
        .unwrap()
        .open()
        .unwrap();
    let rules = StreamRules::parse(&["dwb=ibdata1:1MiB-3MiB"]).unwrap();
    let opts = FsOptions { rules };
    let fs = Arc::new(Mutex::new(Fs::format(dev.clone(), opts.clone()).unwrap()));
    let Some(session) = mount(mnt, fs.clone()) else {
        return;
    };
    let synced: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 256) as u8).collect();
    std::fs::create_dir(mnt.join("db")).unwrap();
    let mut f = std::fs::File::create(mnt.join("db/t1")).unwrap();
    f.write_all(&synced).unwrap();
    f.sync_all().unwrap();
    drop(f);
    assert_eq!(std::fs::read(mnt.join("db/t1")).unwrap(), synced);
    std::fs::rename(mnt.join("db/t1"), mnt.join("db/t2")).unwrap();
    std::fs::write(mnt.join("gone"), b"x").unwrap();
    std::fs::remove_file(mnt.join("gone")).unwrap();
    let mut ib = std::fs::File::create(mnt.join("ibdata1")).unwrap();
    ib.write_all(&vec![5u8; 4 << 20]).unwrap();
    ib.sync_all().unwrap();
    drop(ib);
    // Directories are synced through fsync of the directory.
    std::fs::File::open(mnt.join("db"))
        .unwrap()
        .sync_all()
        .unwrap();
    let stats = std::fs::read_to_string(mnt.join(".pagoda/stats")).unwrap();
    assert!(stats.contains("host_write_pages"), "{stats}");
    assert_eq!(dev.stats().streams[1].host_write_pages, 512);
    // Written after the last fsync: may be lost.
    std::fs::write(mnt.join("late"), vec![9u8; 50_000]).unwrap();
    std::fs::write(mnt.join(".pagoda/control"), b"power-cut").unwrap();
    assert!(
        std::fs::read(mnt.join("db/t2")).is_err(),
        "down after the cut"
    );
    drop(session);

    let fs = Arc::new(Mutex::new(Fs::open(dev, opts).unwrap()));
    let Some(session) = mount(mnt, fs) else {
        return;
    };
    assert_eq!(std::fs::read(mnt.join("db/t2")).unwrap(), synced);
    assert!(!mnt.join("db/t1").exists());
    assert!(!mnt.join("gone").exists());
    assert_eq!(
        std::fs::read(mnt.join("ibdata1")).unwrap(),
        vec![5u8; 4 << 20]
    );
    drop(session);
}

/// O_DIRECT writes through the kernel arrive whole and each aligned 16 KiB page becomes one
/// atomic device write, whether O_DIRECT was given at open or set later with fcntl (InnoDB);
/// buffered writes stay plain.
#[test]
fn direct_io_pages_are_atomic_writes() {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    use std::os::unix::io::AsRawFd;
    if let Some(why) = fuse_unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path();
    let dev = DeviceSpec::parse("mem,capacity=64MiB,atomic=16KiB")
        .unwrap()
        .open()
        .unwrap();
    let fs = Arc::new(Mutex::new(Fs::format(dev, FsOptions::default()).unwrap()));
    let Some(session) = mount(mnt, fs.clone()) else {
        return;
    };
    let atomic = || fs.lock().unwrap().stats().atomic_writes;
    // O_DIRECT wants an aligned buffer.
    let mut raw = vec![0u8; 65536 + 4096];
    let at = raw.as_ptr().align_offset(4096);
    let buf = &mut raw[at..at + 65536];
    buf.fill(6);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(mnt.join("ibdata1"))
        .unwrap();
    f.write_all_at(buf, 0).unwrap();
    f.sync_all().unwrap();
    assert_eq!(atomic(), 4, "four 16 KiB pages");
    let g = std::fs::OpenOptions::new()
        .write(true)
        .open(mnt.join("ibdata1"))
        .unwrap();
    g.write_all_at(&buf[..16384], 65536).unwrap();
    g.sync_all().unwrap();
    assert_eq!(atomic(), 4, "buffered: no atomic write");
    // SAFETY: fcntl on a descriptor we own.
    let fd = g.as_raw_fd();
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::fcntl(fd, libc::F_SETFL, fl | libc::O_DIRECT) },
        0
    );
    g.write_all_at(&buf[..16384], 81920).unwrap();
    g.sync_all().unwrap();
    assert_eq!(atomic(), 5, "O_DIRECT set by fcntl");
    drop((f, g));
    let back = std::fs::read(mnt.join("ibdata1")).unwrap();
    assert_eq!(back, vec![6u8; 98304]);
    drop(session);
}

/// `n` bytes of `fill` in a 4 KiB-aligned buffer (O_DIRECT wants one).
fn aligned(n: usize, fill: u8) -> (Vec<u8>, usize) {
    let raw = vec![fill; n + 4096];
    let at = raw.as_ptr().align_offset(4096);
    (raw, at)
}

/// Starts `ops` (each one O_DIRECT request, so it reaches the device rather than the page
/// cache) on threads while the device holds requests of kind `op`; returns whether `want`
/// of them waited in the device at once, then lets them finish.
fn held_at_once(
    dev: &pagoda_device::fault::FaultDevice,
    op: pagoda_device::fault::Op,
    want: u64,
    ops: Vec<Box<dyn FnOnce() + Send>>,
    wait: std::time::Duration,
) -> bool {
    dev.hold(op);
    let threads: Vec<_> = ops.into_iter().map(std::thread::spawn).collect();
    let at_once = dev.wait_until_held(op, want, wait);
    dev.release(op);
    for t in threads {
        t.join().unwrap();
    }
    at_once
}

/// Reads of two files and writes to two pages of one file are in the device at the same
/// time (both wait in a held device); with no worker threads only one ever is.
#[test]
fn requests_are_served_concurrently() {
    use pagoda_device::fault::{FaultDevice, Op};
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    if let Some(why) = fuse_unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let direct = |p: &Path| {
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(p)
            .unwrap()
    };
    for threads in [pagoda_fs::fuse::DEFAULT_THREADS, 0] {
        // Long enough for both to arrive when they can; without workers they never can.
        let wait = std::time::Duration::from_millis(if threads > 0 { 5000 } else { 500 });
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().to_path_buf();
        let mem = DeviceSpec::parse("mem,capacity=64MiB,atomic=16KiB")
            .unwrap()
            .open()
            .unwrap();
        let fault = Arc::new(FaultDevice::new(mem));
        let dev: DeviceRef = fault.clone();
        let fs = Arc::new(Mutex::new(Fs::format(dev, FsOptions::default()).unwrap()));
        let Some(session) = mount_with(&mnt, fs.clone(), threads) else {
            return;
        };
        for (name, fill) in [("a", 1u8), ("b", 2u8)] {
            let (raw, at) = aligned(65536, fill);
            let f = direct(&mnt.join(name));
            f.write_all_at(&raw[at..at + 65536], 0).unwrap();
            f.sync_all().unwrap();
        }
        let reads: Vec<Box<dyn FnOnce() + Send>> = [("a", 1u8), ("b", 2u8)]
            .into_iter()
            .map(|(name, fill)| {
                let f = direct(&mnt.join(name));
                Box::new(move || {
                    let (mut raw, at) = aligned(16384, 0);
                    f.read_exact_at(&mut raw[at..at + 16384], 16384).unwrap();
                    assert!(raw[at..at + 16384].iter().all(|&x| x == fill));
                }) as Box<dyn FnOnce() + Send>
            })
            .collect();
        let reads_at_once = held_at_once(&fault, Op::Read, 2, reads, wait);
        // Two pages of one file: the kernel lets both in (parallel direct writes), and the
        // file system takes them at once (different blocks).
        let writes: Vec<Box<dyn FnOnce() + Send>> = [0u64, 32768]
            .into_iter()
            .map(|off| {
                let f = direct(&mnt.join("a"));
                Box::new(move || {
                    let (raw, at) = aligned(16384, 9);
                    f.write_all_at(&raw[at..at + 16384], off).unwrap();
                }) as Box<dyn FnOnce() + Send>
            })
            .collect();
        let writes_at_once = held_at_once(&fault, Op::Write, 2, writes, wait);
        let back = std::fs::read(mnt.join("a")).unwrap();
        let want: Vec<u8> = (0..65536)
            .map(|i| {
                if i < 16384 || (32768..49152).contains(&i) {
                    9
                } else {
                    1
                }
            })
            .collect();
        assert!(back == want, "both writes landed, nothing else changed");
        let peak = fs.lock().unwrap().stats().peak_io_in_flight;
        drop(session);
        if threads > 0 {
            assert!(reads_at_once, "two reads should wait in the device at once");
            assert!(
                writes_at_once,
                "two writes should wait in the device at once"
            );
            assert!(peak >= 2, "peak {peak}");
        } else {
            assert!(
                !reads_at_once && !writes_at_once,
                "no workers: one at a time"
            );
            assert_eq!(peak, 1, "inline: one request's I/O at a time");
        }
    }
}

/// A power cut through the control file while four writers write and fsync their own files
/// at once (appends that commit, overwrites that only flush) on an emulated SSD: after the
/// remount every page holds what its last fsynced write put there, or a later write's bytes.
#[test]
fn power_cut_under_concurrent_writers_keeps_what_was_fsynced() {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    use std::sync::atomic::{AtomicU64, Ordering};
    if let Some(why) = fuse_unavailable() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    const PAGE: usize = 16384;
    const WRITERS: u64 = 4;
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().to_path_buf();
    let dev: DeviceRef = DeviceSpec::parse("sata-ssd,capacity=64MiB,op=0.25,streams=2")
        .unwrap()
        .open()
        .unwrap();
    let fs = Arc::new(Mutex::new(
        Fs::format(dev.clone(), FsOptions::default()).unwrap(),
    ));
    let Some(session) = mount(&mnt, fs) else {
        return;
    };
    // Round r writes page r % 8 of its file, every byte r; acked[w]: its last fsynced round.
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (acked, path) = (acked.clone(), mnt.join(format!("f{w}")));
            std::thread::spawn(move || {
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .custom_flags(libc::O_DIRECT)
                    .open(path)
                    .unwrap();
                for r in 1..250u64 {
                    let (raw, at) = aligned(PAGE, r as u8);
                    let off = (r % 8) * PAGE as u64;
                    if f.write_all_at(&raw[at..at + PAGE], off).is_err() || f.sync_data().is_err() {
                        return;
                    }
                    acked[w as usize].store(r, Ordering::SeqCst);
                }
            })
        })
        .collect();
    let t0 = std::time::Instant::now();
    while acked.iter().any(|a| a.load(Ordering::SeqCst) < 40)
        && t0.elapsed() < std::time::Duration::from_secs(20)
    {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    std::fs::write(mnt.join(".pagoda/control"), b"power-cut 7").unwrap();
    for t in writers {
        t.join().unwrap();
    }
    drop(session);
    let mut fs = Fs::open(dev, FsOptions::default()).unwrap();
    for w in 0..WRITERS {
        let done = acked[w as usize].load(Ordering::SeqCst);
        assert!(done >= 8, "writer {w} got only {done} rounds fsynced");
        let ino = fs.lookup(pagoda_fs::ROOT, &format!("f{w}")).unwrap().ino;
        let data = fs.read(ino, 0, 8 * PAGE).unwrap();
        assert_eq!(data.len(), 8 * PAGE, "file {w}: the size was committed");
        for p in 0..8u64 {
            // The last fsynced round that wrote page p (rounds run from 1: page 0 first at 8).
            let last = (p..=done).rev().find(|r| r % 8 == p && *r > 0).unwrap();
            for (s, sector) in data[p as usize * PAGE..(p as usize + 1) * PAGE]
                .chunks(4096)
                .enumerate()
            {
                let v = u64::from(sector[0]);
                assert!(
                    sector.iter().all(|&x| u64::from(x) == v) && v % 8 == p && v >= last,
                    "file {w} page {p} sector {s}: {v}, want round {last} or later"
                );
            }
        }
    }
}
