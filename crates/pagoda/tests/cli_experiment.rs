//! `pagoda experiment`: a user's experiment file runs end to end through the reproduction's
//! runner (cells, repeats, report, plot, `--publish`), its cells rerun one at a time and its
//! report rebuilds from them; a bad file is refused in one line naming its line and key.
//! Two YCSB cells of about a second each, two repeats.
#![allow(clippy::unwrap_used)]

mod common;

use common::{fails_with, pagoda};
use serde_json::Value;
use std::path::Path;

const FILE: &str = r#"
name = "mini"
title = "Pipelined vs synchronous commit, tiny"
repeats = 2

[scales.quick]
window = "1s"

[[cell]]
name = "sync"
args = ["bench", "ycsb", "--workload", "update-only", "--records", "2000", "--threads", "2",
        "--duration", "{window}", "--warmup", "200ms", "--data", "nvme-ssd,latency=emulate",
        "--log", "nvme-ssd,latency=emulate", "--commit", "sync"]
estimate_s = 3
params = { commit = "sync" }

[[cell]]
name = "pipelined"
args = ["bench", "ycsb", "--workload", "update-only", "--records", "2000", "--threads", "2",
        "--duration", "{window}", "--warmup", "200ms", "--data", "nvme-ssd,latency=emulate",
        "--log", "nvme-ssd,latency=emulate", "--commit", "pipelined", "--pipeline-depth", "8"]
estimate_s = 3
params = { commit = "pipelined" }

[[comparison]]
what = "pipelined vs sync"
metric = "throughput"
cells = ["pipelined", "sync"]
expect = "faster"
band = { at_least = 1.5 }

[[comparison]]
what = "pipelined vs sync, impossible band"
metric = "log.host-write-pages"
cells = ["pipelined", "sync"]
band = { at_least = 1000.0 }
"#;

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn an_experiment_file_runs_reports_and_publishes() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("mini.toml");
    std::fs::write(&file, FILE).unwrap();
    let out = tmp.path().join("out");
    let published = tmp.path().join("mini.md");
    let (f, o) = (file.to_str().unwrap(), out.to_str().unwrap());
    let run = pagoda(&[
        "experiment",
        "run",
        f,
        "--out",
        o,
        "--publish",
        published.to_str().unwrap(),
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for cell in ["sync", "pipelined"] {
        for seed in [1, 2] {
            assert!(out.join(format!("cells/mini.{cell}.s{seed}.json")).exists());
        }
    }
    let rec = json(&out.join("report.json"));
    assert_eq!(rec["seeds"], serde_json::json!([1, 2]));
    let rows = rec["experiments"][0]["headlines"].as_array().unwrap();
    assert_eq!(rec["experiments"][0]["experiment"], "mini");
    assert_eq!(rows.len(), 2);
    // The ratio is the per-seed quotient of the cells' own figures.
    let tps = |cell: &str, seed: u64| {
        json(&out.join(format!("cells/mini.{cell}.s{seed}.json")))["result"]["throughput_ops_s"]
            .as_f64()
            .unwrap()
    };
    let per: Vec<f64> = [1, 2]
        .iter()
        .map(|&s| tps("pipelined", s) / tps("sync", s))
        .collect();
    let (lo, hi) = (per[0].min(per[1]), per[0].max(per[1]));
    assert!(
        (rows[0]["min"].as_f64().unwrap() - lo).abs() < 1e-9,
        "{}",
        rows[0]
    );
    assert!(
        (rows[0]["max"].as_f64().unwrap() - hi).abs() < 1e-9,
        "{}",
        rows[0]
    );
    // A band no result reaches is a miss, not a pass.
    assert_eq!(rows[1]["verdict"], "miss", "{}", rows[1]);
    let index = std::fs::read_to_string(out.join("index.md")).unwrap();
    assert!(
        index.starts_with("# Pipelined vs synchronous commit, tiny"),
        "{index}"
    );
    assert!(
        index.contains("| `pipelined` | commit=pipelined |"),
        "{index}"
    );
    assert!(out.join("plots/mini.svg").exists());
    let md = std::fs::read_to_string(&published).unwrap();
    assert!(md.contains("Scale **quick**; seeds [1, 2]"), "{md}");
    assert!(
        md.contains("pipelined vs sync (throughput of `pipelined` / `sync`)"),
        "{md}"
    );

    // One cell again by its command line, then the report from the cells.
    let plan: Value =
        serde_json::from_slice(&pagoda(&["experiment", "plan", f, "--out", o]).stdout).unwrap();
    let cmd = plan["runs"][0]["command"].as_str().unwrap().to_string();
    assert!(
        cmd.starts_with(&format!("pagoda experiment cell {f} mini.sync")),
        "{cmd}"
    );
    let argv: Vec<&str> = cmd.split(' ').skip(1).collect();
    let again = pagoda(&argv);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let rep = pagoda(&["experiment", "report", f, o]);
    assert!(
        rep.status.success(),
        "{}",
        String::from_utf8_lossy(&rep.stderr)
    );
    assert!(String::from_utf8_lossy(&rep.stdout).contains("pipelined vs sync"));
}

#[test]
fn a_bad_experiment_file_is_refused_naming_its_line_and_key() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("bad.toml");
    std::fs::write(
        &file,
        FILE.replace(
            "estimate_s = 3\nparams = { commit = \"sync\" }",
            "estimate_s = 3\nparms = 1",
        ),
    )
    .unwrap();
    let o = pagoda(&["experiment", "plan", file.to_str().unwrap()]);
    fails_with(&o, "parms");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("line 15") && err.contains("bad.toml"), "{err}");
    let missing = pagoda(&["experiment", "run", "/nonexistent/x.toml"]);
    fails_with(&missing, "x.toml");
    std::fs::write(&file, FILE).unwrap();
    fails_with(
        &pagoda(&[
            "experiment",
            "plan",
            file.to_str().unwrap(),
            "--scale",
            "standard",
        ]),
        "no [scales.standard]",
    );
}
