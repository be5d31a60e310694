//! Real atomic writes on Linux: a small XFS file system with reflink on a loop device, a file
//! device writing 16 KiB pages with `RWF_ATOMIC`, the engine in `--torn atomic` on its files
//! (commit, close, reopen) and a tiny `pagoda bench`.
//!
//! Runs only where the machine allows it (root, a free loop device, mkfs.xfs, the mount works,
//! statx reports atomic writes covering 16 KiB: Linux >= 6.16); otherwise it prints
//! `skipped: <reason>` and passes. A guard unmounts and detaches on every exit, panics included.
//!
//! The other half, the refusal where the file system offers no atomic writes, is tested on the
//! temp dir below (ext4, overlayfs or tmpfs on most machines).
#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use pagoda_device::file::{FileDevice, FileOptions};
use pagoda_device::{BlockDevice, DeviceError, WriteHints, SECTOR_SIZE};
use pagoda_engine::{Db, DbOptions, TornMode};
use std::path::{Path, PathBuf};
use std::process::Command;

const PAGE: usize = 16 * 1024;

/// A mounted XFS image; dropping it unmounts, detaches the loop device and deletes the image.
struct Xfs {
    dir: tempfile::TempDir,
    loop_dev: Option<String>,
    mounted: bool,
}

impl Xfs {
    fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }

    /// Builds the file system, or says why this machine cannot.
    fn new() -> Result<Xfs, String> {
        if !cfg!(target_os = "linux") {
            return Err("not Linux".into());
        }
        if ok(Command::new("id").arg("-u")).is_none_or(|o| o.trim() != "0") {
            return Err("not root (losetup and mount need it)".into());
        }
        if !Path::new("/dev/loop-control").exists() {
            return Err("no loop devices (/dev/loop-control)".into());
        }
        if ok(Command::new("mkfs.xfs").arg("-V")).is_none() {
            return Err("no mkfs.xfs (apt-get install xfsprogs)".into());
        }
        let fs = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
        if !fs.split_whitespace().any(|w| w == "xfs") {
            return Err("the kernel has no XFS loaded".into());
        }
        let dir = tempfile::Builder::new()
            .prefix("pagoda-xfs-test-")
            .tempdir()
            .map_err(|e| format!("no temp dir: {e}"))?;
        let mut x = Xfs {
            dir,
            loop_dev: None,
            mounted: false,
        };
        let img = x.dir.path().join("xfs.img");
        // 512 MiB sparse: above mkfs.xfs's 300 MiB floor, costs a few MiB of real space.
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(512 << 20))
            .map_err(|e| format!("cannot create the image: {e}"))?;
        ok(Command::new("mkfs.xfs")
            .args(["-q", "-f", "-m", "reflink=1", "-b", "size=4096"])
            .arg(&img))
        .ok_or("mkfs.xfs -m reflink=1 failed")?;
        let dev = ok(Command::new("losetup").args(["-f", "--show"]).arg(&img))
            .ok_or("no free loop device")?;
        x.loop_dev = Some(dev.trim().to_string());
        std::fs::create_dir(x.mnt()).map_err(|e| format!("mkdir: {e}"))?;
        ok(Command::new("mount")
            .args(["-t", "xfs"])
            .arg(dev.trim())
            .arg(x.mnt()))
        .ok_or("mount -t xfs failed")?;
        x.mounted = true;
        Ok(x)
    }
}

impl Drop for Xfs {
    fn drop(&mut self) {
        if self.mounted {
            let mnt = self.mnt();
            if ok(Command::new("umount").arg(&mnt)).is_none() {
                std::thread::sleep(std::time::Duration::from_millis(500));
                if ok(Command::new("umount").arg(&mnt)).is_none() {
                    // Busy: detach it from the tree anyway, so that nothing stays mounted.
                    let _ = ok(Command::new("umount").arg("-l").arg(&mnt));
                }
            }
        }
        if let Some(dev) = &self.loop_dev {
            let _ = ok(Command::new("losetup").args(["-d", dev]));
        }
    }
}

/// Runs a command; its stdout when it succeeded.
fn ok(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn page(seed: u8) -> Vec<u8> {
    (0..PAGE)
        .map(|i| seed.wrapping_add((i / 97) as u8))
        .collect()
}

#[test]
fn sixteen_kib_atomic_writes_on_xfs() {
    let xfs = match Xfs::new() {
        Ok(x) => x,
        Err(reason) => {
            println!("skipped: {reason}");
            return;
        }
    };
    let mnt = xfs.mnt();
    let opts = FileOptions {
        capacity_bytes: Some(64 << 20),
        atomic: Some(PAGE),
        ..FileOptions::default()
    };
    let d = match FileDevice::open(&mnt.join("dev"), opts) {
        Ok(d) => d,
        Err(e @ DeviceError::NoAtomicWrites { .. }) => {
            println!("skipped: this kernel's XFS offers no 16 KiB atomic writes: {e}");
            return;
        }
        Err(e) => panic!("opening a file on XFS: {e}"),
    };
    assert_eq!(d.caps().atomic_write_unit, Some(PAGE));
    assert!(d.is_direct());
    let per = (PAGE / SECTOR_SIZE) as u64;
    for i in 0..8u64 {
        d.write(i * per, &page(i as u8), WriteHints::atomic(0))
            .unwrap();
    }
    // Overwrite one: the copy-on-write path of a block that already has data.
    d.write(3 * per, &page(99), WriteHints::atomic(0)).unwrap();
    d.flush().unwrap();
    for i in 0..8u64 {
        let mut back = vec![0u8; PAGE];
        d.read(i * per, &mut back).unwrap();
        let want = if i == 3 { page(99) } else { page(i as u8) };
        assert!(back == want, "page {i} reads back what was written");
    }
    // A write across two units is not atomic: refused before the kernel sees it.
    let e = d
        .write(per / 2, &page(1), WriteHints::atomic(0))
        .unwrap_err();
    assert!(matches!(e, DeviceError::AtomicRejected(_)), "{e}");
    drop(d);

    // The engine in --torn atomic on its own files there: commit, close, reopen.
    let dir = mnt.join("db");
    let open = || {
        Db::open(
            DbOptions::in_dir(&dir)
                .page_size(PAGE)
                .buffer_bytes(64 * PAGE)
                .torn(TornMode::Atomic)
                .background(false),
        )
        .unwrap()
    };
    let db = open();
    db.create_table("t").unwrap();
    for i in 0..300u32 {
        let tx = db.begin_write().unwrap();
        tx.open_table("t")
            .unwrap()
            .put(format!("k{i:04}").as_bytes(), &[i as u8; 200])
            .unwrap();
        tx.commit().unwrap();
    }
    db.checkpoint().unwrap();
    let (data, _) = db.device_stats();
    assert!(data.host_write_pages > 0, "pages went to the XFS file");
    db.close().unwrap();
    let db = open();
    let r = db.begin_read().unwrap();
    let t = r.open_table("t").unwrap();
    assert_eq!(t.get(b"k0123").unwrap().unwrap(), vec![123u8; 200]);
    assert_eq!(t.range(..).count(), 300);
    drop(t);
    drop(r);
    db.close().unwrap();

    // The CLI: a tiny bench with file: devices there and --torn atomic.
    let out = Command::new(env!("CARGO_BIN_EXE_pagoda"))
        .args([
            "bench",
            "ycsb",
            "--records",
            "200",
            "--ops",
            "200",
            "--threads",
            "2",
        ])
        .args(["--buffer", "2MiB", "--torn", "atomic"])
        .arg("--data")
        .arg(format!("file:{}", mnt.join("bench.data").display()))
        .arg("--log")
        .arg(format!(
            "file:{},capacity=16MiB",
            mnt.join("bench.log").display()
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench --torn atomic on XFS: {err}");
    assert!(err.contains("torn=atomic"), "{err}");
    drop(xfs);
}

/// `--torn atomic` with `file:` devices where the file system has no atomic writes is refused
/// with what statx reported (skipped when the temp dir happens to offer them).
#[test]
fn torn_atomic_on_a_file_system_without_atomic_writes_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = Command::new(env!("CARGO_BIN_EXE_pagoda"))
        .args([
            "bench",
            "ycsb",
            "--records",
            "50",
            "--ops",
            "50",
            "--threads",
            "1",
        ])
        .args(["--buffer", "1MiB", "--torn", "atomic"])
        .arg("--data")
        .arg(format!("file:{}", data.display()))
        .arg("--log")
        .arg(format!(
            "file:{},capacity=16MiB",
            dir.path().join("log").display()
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        println!("skipped: the temp dir offers 16 KiB atomic writes (XFS?): {err}");
        return;
    }
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.starts_with("pagoda: error: no 16 KiB atomic writes"),
        "{err}"
    );
    assert!(
        err.contains("statx reports")
            || err.contains("statx does not report")
            || err.contains("O_DIRECT"),
        "says what the kernel reported: {err}"
    );
    assert!(err.contains(&data.display().to_string()), "{err}");
    assert!(err.contains("scripts/xfs-atomic.sh"), "{err}");
    assert!(!data.exists(), "a refused open leaves no data file behind");
    // The engine's own files (--dir) are refused the same way, before the log is written.
    let db = dir.path().join("db");
    let out = Command::new(env!("CARGO_BIN_EXE_pagoda"))
        .args([
            "bench",
            "ycsb",
            "--records",
            "50",
            "--ops",
            "50",
            "--threads",
            "1",
        ])
        .args(["--buffer", "1MiB", "--torn", "atomic", "--dir"])
        .arg(&db)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("no 16 KiB atomic writes"), "{err}");
    assert!(!db.join("log.pagoda").exists(), "no log preallocated");
}
