//! End-to-end tests of `pagoda ssd synth` and `pagoda ssd replay` through the real binary.
#![allow(clippy::unwrap_used)] // test helpers: a failure should panic with the cause

use std::process::Command;

fn pagoda() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pagoda"))
}

fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn synth_writes_device_stats_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.json");
    let o = pagoda()
        .args([
            "ssd",
            "synth",
            "--preset",
            "sata-ssd,capacity=1GiB",
            "--op",
            "0.28",
        ])
        .args(["--pattern", "uniform", "--writes", "1", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("WAF"), "{stdout}");
    let v = json(&out);
    for key in [
        "host_read_pages",
        "host_write_pages",
        "flash_reads",
        "flash_programs",
        "erases",
        "gc_runs",
        "copybacks",
        "waf",
        "streams",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    // One capacity of measured writes after preconditioning, and GC was active.
    assert_eq!(v["host_write_pages"], 262_144);
    let waf = v["waf"].as_f64().unwrap();
    assert!(
        waf > 1.5 && waf < 4.0,
        "uniform at op 0.28 should be near 2.5, got {waf}"
    );
    assert_eq!(
        v["flash_programs"].as_u64().unwrap(),
        v["host_write_pages"].as_u64().unwrap() + v["copybacks"].as_u64().unwrap()
    );
}

#[test]
fn synth_hotcold_with_two_streams_tags_hot_writes_stream_1() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.json");
    let o = pagoda()
        .args(["ssd", "synth", "--preset", "nvme-ssd", "--streams", "2"])
        .args(["--pattern", "hotcold:80/20", "--writes", "1", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&out);
    let s = v["streams"].as_array().unwrap();
    assert_eq!(s.len(), 2);
    let hot = s[1]["host_write_pages"].as_f64().unwrap();
    let total = v["host_write_pages"].as_f64().unwrap();
    assert!(
        (hot / total - 0.8).abs() < 0.02,
        "hot share {}",
        hot / total
    );
}

#[test]
fn bad_input_is_one_clear_line_and_nonzero_exit() {
    for args in [
        vec!["ssd", "synth", "--preset", "floppy", "--pattern", "uniform"],
        vec![
            "ssd",
            "synth",
            "--preset",
            "sata-ssd,op=abc",
            "--pattern",
            "uniform",
        ],
        vec![
            "ssd",
            "synth",
            "--preset",
            "sata-ssd",
            "--pattern",
            "zigzag",
        ],
        vec![
            "ssd",
            "synth",
            "--preset",
            "hdd-15k",
            "--pattern",
            "uniform",
        ],
        vec![
            "ssd",
            "synth",
            "--preset",
            "sata-ssd,capacity=64MiB",
            "--pattern",
            "uniform",
        ],
        vec![
            "ssd",
            "synth",
            "--preset",
            "sata-ssd",
            "--pattern",
            "uniform",
            "--writes",
            "-1",
        ],
        vec![
            "ssd",
            "replay",
            "/nonexistent/trace",
            "--preset",
            "sata-ssd",
        ],
    ] {
        let o = pagoda().args(&args).output().unwrap();
        assert!(!o.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&o.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{args:?}: want one line, got {err}");
        assert!(lines[0].starts_with("pagoda: error: "), "{args:?}: {err}");
    }
}

#[test]
fn replay_runs_a_trace_and_rejects_a_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    let mut text = String::from("# pagoda-trace v1\n");
    for i in 0..1000u64 {
        text.push_str(&format!("{i} W {} 4 - 0\n", (i * 4) % 4096));
    }
    text.push_str("1000 F 0 0 - 0\n1001 R 0 4 - 0\n1002 T 0 16 - 0\n");
    std::fs::write(&trace, &text).unwrap();
    let out = dir.path().join("r.json");
    let o = pagoda()
        .args(["ssd", "replay"])
        .arg(&trace)
        .args(["--preset", "sata-ssd", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&out);
    assert_eq!(v["host_write_pages"], 4000);
    assert_eq!(v["host_read_pages"], 4);
    assert_eq!(v["trimmed_pages"], 16);

    std::fs::write(&trace, "# pagoda-trace v1\n0 W 12 x - 0\n").unwrap();
    let o = pagoda()
        .args(["ssd", "replay"])
        .arg(&trace)
        .args(["--preset", "sata-ssd"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(":2:"), "error should name line 2: {err}");
}
