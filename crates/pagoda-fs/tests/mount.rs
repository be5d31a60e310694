//! The file system through a real FUSE mount: create, write, fsync, read back, rename,
//! unlink, mkdir, a power cut through the control file and a remount with the fsynced data.
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
    let stats: StatsFn = Arc::new(|fs: &Fs, _json: bool| format!("{:?}\n", fs.device().stats()));
    let opts = [fuser::MountOption::FSName("pagoda-test".into())];
    match fuser::spawn_mount2(PagodaFuse::new(fs, stats, 3), dir, &opts) {
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
