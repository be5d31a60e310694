//! End-to-end tests of `pagoda inspect` and of `pagoda crashtest`'s hand-off to the crash
//! tester's binary, through the real `pagoda` binary.
#![allow(clippy::unwrap_used)] // test helpers: a failure should panic with the cause

use std::process::Command;

fn pagoda() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pagoda"))
}

/// A copy of the `pagoda` binary alone in a directory (with `extra` beside it), so that what
/// `pagoda crashtest` finds next to itself is up to the test.
fn alone(extra: Option<&str>) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("pagoda");
    std::fs::copy(env!("CARGO_BIN_EXE_pagoda"), &bin).unwrap();
    if let Some(script) = extra {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.path().join("pagoda-crashtest");
        std::fs::write(&p, script).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (dir, bin)
}

/// Runs `cmd`, retrying while the kernel says a freshly written executable is busy: another
/// test thread's fork can briefly hold the write descriptor of a file just written (ETXTBSY).
fn output(cmd: &mut Command) -> std::process::Output {
    for _ in 0..100 {
        match cmd.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return r.unwrap(),
        }
    }
    panic!("the copied binary stayed busy (ETXTBSY) for 2 s");
}

#[test]
fn crashtest_without_the_crash_tester_says_how_to_build_it() {
    let (dir, bin) = alone(None);
    let o = output(
        Command::new(&bin)
            .args(["crashtest", "--cycles", "3"])
            .env("PATH", dir.path()),
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cargo build --release -p pagoda-crashtest-cli"),
        "{err}"
    );
}

#[test]
fn crashtest_hands_every_argument_and_the_exit_status_to_the_crash_tester() {
    let (dir, bin) = alone(Some("#!/bin/sh\necho \"args: $*\"\nexit 7\n"));
    let o = output(
        Command::new(&bin)
            .args(["crashtest", "--torn", "atomic", "--cycles", "3", "--help"])
            .env("PATH", dir.path()),
    );
    assert_eq!(o.status.code(), Some(7));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "args: --torn atomic --cycles 3 --help"
    );
}

#[test]
fn inspect_names_corrupt_pages() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = pagoda_engine::Db::open(pagoda_engine::DbOptions::in_dir(dir.path())).unwrap();
        db.create_table("t").unwrap();
        let tx = db.begin_write().unwrap();
        let mut t = tx.open_table("t").unwrap();
        for i in 0..2000u32 {
            t.put(&i.to_be_bytes(), &[7u8; 200]).unwrap();
        }
        drop(t);
        tx.commit().unwrap();
        db.checkpoint().unwrap();
        db.close().unwrap();
    }
    let ok = pagoda().arg("inspect").arg(dir.path()).output().unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );

    let report = String::from_utf8_lossy(&ok.stdout).to_string();
    assert!(report.contains("0 corrupt"), "{report}");

    // Flip one byte inside page 140, a table page (docs/format.md: 16 KiB pages, meta page 132).
    use std::os::unix::fs::FileExt;
    let data = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.path().join("data.pagoda"))
        .unwrap();
    let offset = 140 * 16384 + 9000;
    let mut byte = [0u8; 1];
    data.read_at(&mut byte, offset).unwrap();
    data.write_at(&[byte[0] ^ 0x40], offset).unwrap();
    data.sync_all().unwrap();
    let bad = pagoda().arg("inspect").arg(dir.path()).output().unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("corrupt pages [140]"), "{err}");
}
