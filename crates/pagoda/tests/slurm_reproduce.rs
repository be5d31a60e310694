//! `scripts/slurm-reproduce.sh` end to end: a one-node Slurm runs seed 004's tiny plan as a
//! job array, two tasks at a time, and the report is written from the array's cells; every
//! daemon and temporary file is gone afterwards.
//!
//! Runs only where the machine allows it (root, Debian's slurm-wlm and munge, jq); otherwise it
//! prints `skipped: <reason>` and passes (the script itself installs the packages, the test
//! does not). Bad options are refused on any machine.
#![allow(clippy::unwrap_used)]

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Output};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/slurm-reproduce.sh")
}

fn run(args: &[&str]) -> Output {
    Command::new("bash")
        .arg(script())
        .args(args)
        .output()
        .unwrap()
}

/// Why this machine cannot run a Slurm, if it cannot.
fn unavailable() -> Option<String> {
    let root = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&root.stdout).trim() != "0" {
        return Some("not root (the script starts munged, slurmctld and slurmd)".into());
    }
    for b in ["munged", "mungekey", "slurmctld", "slurmd", "sbatch", "jq"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {b}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Some(format!("{b} missing (apt-get install slurm-wlm munge jq)"));
        }
    }
    None
}

#[test]
fn a_job_array_runs_the_plan_and_the_report_is_written() {
    if let Some(why) = unavailable() {
        println!("skipped: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("grid");
    // A stale result of the same experiment is replaced, as `reproduce all` does (left there,
    // it would fail the report: it is no cell result).
    let stale = out.join("cells/buffer-sweep.gone.s9.json");
    std::fs::create_dir_all(stale.parent().unwrap()).unwrap();
    std::fs::write(&stale, "{ stale").unwrap();
    let o = run(&[
        "--experiment",
        "buffer-sweep",
        "--scale",
        "tiny",
        "--repeats",
        "1",
        "--parallel",
        "2",
        "--timeout",
        "15",
        "--pagoda",
        env!("CARGO_BIN_EXE_pagoda"),
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{stdout}\n{stderr}");

    // One array task per run of the plan, each completed, each a result of its own.
    let plan = Command::new(env!("CARGO_BIN_EXE_pagoda"))
        .args(["reproduce", "plan", "--scale", "tiny", "--repeats", "1"])
        .args(["--experiment", "buffer-sweep"])
        .output()
        .unwrap();
    let plan: Value = serde_json::from_slice(&plan.stdout).unwrap();
    let ids: BTreeSet<String> = plan["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{}.s1.json", r["id"].as_str().unwrap()))
        .collect();
    let n = ids.len();
    assert!(
        stdout.contains(&format!("{n} of {n} tasks completed")),
        "{stdout}"
    );
    let files: BTreeSet<String> = std::fs::read_dir(out.join("cells"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|f| f.ends_with(".json"))
        .collect();
    assert_eq!(files, ids, "one result per planned run, the stale one gone");
    for f in &files {
        let r: Value =
            serde_json::from_slice(&std::fs::read(out.join("cells").join(f)).unwrap()).unwrap();
        assert_eq!(r["ok"], true, "{f}: {}", r["error"]);
        assert_eq!(r["jobs"], 2, "{f} does not record the array's throttle");
    }
    assert_eq!(std::fs::read_dir(out.join("slurm")).unwrap().count(), n);

    // The report is the array's: its section, and it says how the cells shared the machine.
    let index = std::fs::read_to_string(out.join("index.md")).unwrap();
    assert!(index.contains("## Seed 004"), "{index}");
    assert!(index.contains("up to 2 at a time (`--jobs 2`"), "{index}");
    let report: Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert!(
        report["most_cells_at_once"].as_u64().unwrap() <= 2,
        "{report}"
    );

    // Nothing of the private Slurm is left: its directory is gone, no process names it.
    let work = stdout
        .split_whitespace()
        .find_map(|w| w.strip_suffix("/slurm.conf"))
        .unwrap_or_else(|| panic!("no config path in: {stdout}"))
        .to_string();
    assert!(!std::path::Path::new(&work).exists(), "{work} left behind");
    let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
    let ps = String::from_utf8_lossy(&ps.stdout);
    assert!(
        !ps.lines().any(|l| l.contains(&work)),
        "a process still names {work}:\n{ps}"
    );
}

#[test]
fn bad_options_are_refused_in_one_line() {
    for (args, needle) in [
        (&["--parallel", "0"][..], "--parallel 0 runs nothing"),
        (&["--repeats", "two"][..], "'two' is not a whole number"),
        (&["--frobnicate", "1"][..], "unknown option --frobnicate"),
        (&["--scale"][..], "--scale needs a value"),
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("slurm-reproduce: cannot run: ") && err.contains(needle),
            "{args:?}: {err}"
        );
    }
}
