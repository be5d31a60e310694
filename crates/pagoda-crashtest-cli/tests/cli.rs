//! End-to-end tests of the crash tester through its binary (`pagoda crashtest ARGS` runs it
//! with ARGS).
#![allow(clippy::unwrap_used)] // test helpers: a failure should panic with the cause

use std::process::Command;

fn crashtest() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pagoda-crashtest"))
}

#[test]
fn crashtest_prints_the_summary_line_and_passes_in_every_mode() {
    for torn in ["doublewrite", "atomic", "none"] {
        let o = crashtest()
            .args(["--torn", torn, "--cycles", "12", "--seed", "3"])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{torn}: {out} {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let line = out.lines().last().unwrap();
        assert!(
            line.starts_with(
                "crashtest: cycles 12, lost commits 0, uncommitted visible 0, torn pages repaired "
            ),
            "{torn}: {line}"
        );
    }
}

#[test]
fn crashtest_summary_has_the_new_fields_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let o = crashtest()
        .args(["--torn", "doublewrite", "--cycles", "20", "--device", "mem"])
        .args(["--page-size", "4KiB", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let line = out.lines().last().unwrap();
    for field in [
        "transactions checked ",
        "deepest tree ",
        "cuts during recovery ",
        "ddl operations ",
    ] {
        assert!(line.contains(field), "{field} missing from {line}");
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(v["transactions_checked"].as_u64().unwrap() > 20);
    assert!(v["deepest_tree"].as_u64().unwrap() >= 2);
    assert!(v["failures"].as_array().unwrap().is_empty());
}

#[test]
fn crashtest_sabotage_is_caught_and_names_the_replay() {
    let o = crashtest()
        .args([
            "--torn",
            "doublewrite",
            "--cycles",
            "200",
            "--device",
            "mem",
        ])
        .args([
            "--page-size",
            "4KiB",
            "--sabotage",
            "skip-log-sync",
            "--seed",
            "4",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "sabotage not caught: {err}");
    assert!(err.contains("FAILED seed 4 cycle "), "{err}");
    assert!(err.contains("cut: op "), "{err}");
    assert!(err.contains("--replay-cycle"), "{err}");
    assert!(err.contains("with --sabotage skip-log-sync"), "{err}");
}

#[test]
fn crashtest_refuses_bad_flag_combinations() {
    let refuse = |args: &[&str], want: &str| {
        let o = crashtest().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} accepted");
        assert!(err.contains(want), "{args:?}: {err}");
    };
    refuse(
        &["--torn", "none", "--cycles", "0"],
        "invalid value '0' for '--cycles",
    );
    refuse(
        &["--cycles", "5", "--faults", "bitrot,cosmic-rays"],
        "no fault named 'cosmic-rays': use one of bitrot,",
    );
    refuse(
        &[
            "--cycles",
            "5",
            "--faults",
            "eio-read",
            "--fault-chance",
            "2",
        ],
        "--fault-chance is a probability",
    );
    refuse(
        &["--cycles", "5", "--sabotage", "trust-page-id"],
        "give --faults misdirected",
    );
    refuse(
        &["--torn", "none", "--cycles", "5", "--sabotage", "nope"],
        "skip-log-sync",
    );
    refuse(
        &[
            "--torn",
            "atomic",
            "--cycles",
            "5",
            "--sabotage",
            "skip-doublewrite",
        ],
        "--torn doublewrite",
    );
    refuse(
        &[
            "--torn",
            "atomic",
            "--cycles",
            "5",
            "--device",
            "mem,atomic=0",
        ],
        "atomic write unit",
    );
    refuse(
        &["--torn", "none", "--cycles", "5", "--replay-cycle", "9"],
        "--cycles 10",
    );
}

#[test]
fn crashtest_refuses_devices_without_power_cuts() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x");
    let o = crashtest()
        .args(["--torn", "atomic", "--cycles", "1", "--device"])
        .arg(format!("file:{}", file.display()))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot emulate a power cut"));
    assert!(!file.exists(), "a refused device must not be created");
}

#[test]
fn crashtest_refuses_bad_flash_cache_flags() {
    let refuse = |args: &[&str], want: &str| {
        let o = crashtest()
            .args(["--cycles", "5", "--device", "mem"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} accepted");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
    };
    // One flag group with pagoda bench: clap names the flag that is missing.
    let missing = "the following required arguments were not provided: --flash-cache <DEVICE>";
    refuse(&["--flash-cache-size", "1MiB"], missing);
    refuse(&["--flash-cache-policy", "lru"], missing);
    refuse(&["--flash-cache-pages", "all"], missing);
    refuse(
        &["--sabotage", "flash-unsynced-writeback"],
        "--flash-cache DEVICE",
    );
    refuse(
        &["--flash-cache", "mem", "--flash-cache-policy", "fifo"],
        "face, face-gsc or lru",
    );
    refuse(
        &["--flash-cache", "mem", "--flash-cache-pages", "some"],
        "dirty or all",
    );
    refuse(
        &["--flash-cache", "mem", "--flash-cache-size", "0"],
        "give the cache some room",
    );
    refuse(&["--flash-cache", "floppy"], "unknown device");
    // The engine's own reason: a flash cache replaces the double-write buffer.
    refuse(
        &["--flash-cache", "mem", "--torn", "doublewrite"],
        "--torn none",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cache");
    refuse(
        &["--flash-cache", &format!("file:{}", file.display())],
        "cannot emulate a power cut",
    );
    assert!(!file.exists(), "a refused cache device must not be created");
}

#[test]
fn crashtest_with_a_flash_cache_reports_its_counters() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    // No --torn: none is the default with a flash cache. (The run may meet one of the engine's
    // known flash cache defects, see crates/pagoda-crashtest/tests/flash.rs: this test checks
    // the reporting, whatever the verdict.)
    let o = crashtest()
        .args(["--cycles", "12", "--device", "mem", "--threads", "1"])
        .args(["--page-size", "4KiB", "--flash-cache", "mem,atomic=0"])
        .args(["--flash-cache-policy", "face-gsc", "--keep-going", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    let line = out.lines().last().unwrap_or_default();
    assert!(line.starts_with("crashtest: cycles 12, "), "{line} {err}");
    for field in [
        "stale versions served ",
        "flash rebuilds ",
        "pages found in flash ",
        "flash write-backs ",
        "cuts in flash steps ",
    ] {
        assert!(line.contains(field), "{field} missing from {line}");
    }
    assert!(err.contains("flash cache face-gsc (dirty pages"), "{err}");
    assert!(err.contains("cuts during flash append "), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["flash"]["policy"], "face-gsc");
    assert_eq!(v["flash"]["pages"], "dirty");
    assert!(v["flash"]["rebuilds"].as_u64().unwrap() > 0, "{v}");
    assert!(v["flash"]["write_backs"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(
        o.status.success(),
        v["failures"].as_array().unwrap().is_empty(),
        "the exit status follows the verdict: {err}"
    );
}
