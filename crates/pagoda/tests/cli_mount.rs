//! `pagoda mount` through the real binary: bad input gives one clear line; where FUSE works,
//! a mount, a write, SIGTERM, and the final report with the device counters.
#![allow(clippy::unwrap_used)] // test helpers: a failure should panic with the cause

use std::process::Command;
use std::time::{Duration, Instant};

fn pagoda() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pagoda"))
}

fn one_error_line(args: &[&str], mnt: &std::path::Path, want: &str) {
    let o = pagoda().arg("mount").arg(mnt).args(args).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("pagoda: error: ") && err.contains(want),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_input_is_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("m");
    std::fs::create_dir(&mnt).unwrap();
    let dev = ["--device", "mem,capacity=64MiB"];
    one_error_line(
        &[&dev[..], &["--stream", "dwb"]].concat(),
        &mnt,
        "has no '='",
    );
    one_error_line(
        &[&dev[..], &["--stream", "dwb=ibdata1:3MiB-1MiB"]].concat(),
        &mnt,
        "END must exceed START",
    );
    one_error_line(
        &["--device", "mem,capacity=256KiB"],
        &mnt,
        "device too small",
    );
    one_error_line(
        &[
            "--device",
            "mem,capacity=64MiB,streams=1",
            "--stream",
            "dwb=ibdata1:1MiB-3MiB",
        ],
        &mnt,
        "add streams=2",
    );
    one_error_line(
        &dev,
        &dir.path().join("missing"),
        "create an empty directory",
    );
    std::fs::write(mnt.join("x"), b"x").unwrap();
    one_error_line(&dev, &mnt, "is not empty");
}

fn fuse_available() -> bool {
    let ok = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .is_ok()
        // SAFETY: geteuid has no preconditions.
        && unsafe { libc::geteuid() } == 0;
    if !ok {
        eprintln!("SKIPPED: FUSE unavailable here (needs /dev/fuse and root)");
    }
    ok
}

fn wait_mounted(mnt: &std::path::Path) {
    let t0 = Instant::now();
    while !mnt.join(".pagoda/stats").exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "mount did not come up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A temporary directory holding an empty mount point, or `None` where FUSE cannot work.
fn mount_dir() -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    if !fuse_available() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("m");
    std::fs::create_dir(&mnt).unwrap();
    Some((dir, mnt))
}

/// Starts `pagoda mount MNT ARGS...` and waits until it serves.
fn mount(mnt: &std::path::Path, args: &[&str]) -> std::process::Child {
    let child = pagoda().arg("mount").arg(mnt).args(args).spawn().unwrap();
    wait_mounted(mnt);
    child
}

fn stop(child: &mut std::process::Child) {
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
}

#[test]
fn power_cut_after_n_writes_then_remount_from_the_backing_image() {
    let Some((dir, mnt)) = mount_dir() else {
        return;
    };
    let img = dir.path().join("dev.img");
    let trace = dir.path().join("t.trace");
    let dev = "sata-ssd,capacity=256MiB,op=0.25,streams=2";
    let (img_s, trace_s) = (img.to_str().unwrap(), trace.to_str().unwrap());
    let mut child = mount(
        &mnt,
        &[
            "--device",
            dev,
            "--power-cut-after",
            "40",
            "--backing",
            img_s,
            "--trace",
            trace_s,
        ],
    );
    let a = std::fs::File::create(mnt.join("a")).unwrap();
    std::io::Write::write_all(&mut &a, &[7u8; 40_000]).unwrap();
    a.sync_all().unwrap();
    let b = std::fs::File::create(mnt.join("b")).unwrap();
    let cut = (0..200).any(|_| std::io::Write::write_all(&mut &b, &[8u8; 8192]).is_err());
    assert!(cut, "writes fail once the power is cut");
    drop((a, b));
    stop(&mut child);
    assert!(std::fs::read_to_string(&trace)
        .unwrap()
        .starts_with("# pagoda-trace v1"));
    let mut child = mount(&mnt, &["--device", dev, "--backing", img_s]);
    assert_eq!(std::fs::read(mnt.join("a")).unwrap(), vec![7u8; 40_000]);
    stop(&mut child);
}

#[test]
fn mount_reports_counters_at_sigterm() {
    let Some((dir, mnt)) = mount_dir() else {
        return;
    };
    let json = dir.path().join("r.json");
    let mut child = pagoda()
        .arg("mount")
        .arg(&mnt)
        .args(["--device", "sata-ssd,capacity=256MiB,op=0.25,streams=2"])
        .args(["--stream", "dwb=ibdata1:1MiB-3MiB", "--json"])
        .arg(&json)
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !mnt.join(".pagoda/stats").exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "mount did not come up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let f = std::fs::File::create(mnt.join("ibdata1")).unwrap();
    std::io::Write::write_all(&mut &f, &vec![1u8; 4 << 20]).unwrap();
    f.sync_all().unwrap();
    drop(f);
    stop(&mut child);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let s = &v["device_stats"];
    assert!(s["host_write_pages"].as_u64().unwrap() >= 1024, "{v}");
    assert_eq!(s["streams"][1]["host_write_pages"], 512, "{v}");
    assert!(!mnt.join(".pagoda").exists(), "unmounted");
}

/// A mount killed with SIGKILL runs no exit path, and the next mount reads its fsynced file
/// back from the backing image. This shows the image is written through (no save at exit is
/// needed), not that the fsync made it durable: the kernel keeps a killed process's writes in
/// its page cache, so this passes without the fdatasync too. That the sync is there is shown
/// by pagoda-fs's `tests/kill.rs`, on an image store that drops what was not synced.
#[test]
fn fsynced_data_survives_kill_9_of_the_mount() {
    let Some((dir, mnt)) = mount_dir() else {
        return;
    };
    let img = dir.path().join("dev.img");
    let args = [
        "--device",
        "sata-ssd,capacity=256MiB,op=0.25",
        "--backing",
        img.to_str().unwrap(),
    ];
    let mut child = mount(&mnt, &args);
    let data: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    std::fs::create_dir(mnt.join("db")).unwrap();
    let f = std::fs::File::create(mnt.join("db/t")).unwrap();
    std::io::Write::write_all(&mut &f, &data).unwrap();
    f.sync_all().unwrap();
    drop(f);
    // Not fsynced: may be lost.
    std::fs::write(mnt.join("late"), vec![3u8; 100_000]).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    detach(&mnt);
    let mut child = mount(&mnt, &args);
    assert_eq!(std::fs::read(mnt.join("db/t")).unwrap(), data);
    stop(&mut child);
}

/// Detaches a mount whose server is gone, so the directory can be mounted again.
fn detach(mnt: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(mnt.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a valid C string.
    let r = unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    assert_eq!(r, 0, "umount -l: {}", std::io::Error::last_os_error());
}
