//! End-to-end tests of `pagoda bench --engine PEER` and `pagoda bench compare`: tiny runs (so
//! they cannot rot, and stay cheap) and the refusals a user meets before any work starts.
#![allow(clippy::unwrap_used)] // test helpers: a failure should panic with the cause

mod common;

use common::{fails_with, pagoda};
use serde_json::Value;
use std::process::Output;

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn ycsb_runs_on_each_peer_with_pagodas_json_keys() {
    let dir = tempfile::tempdir().unwrap();
    // The keys of pagoda's bench JSON, from a run on the engine.
    let pagoda_json = dir.path().join("pagoda.json");
    let base = [
        "bench",
        "ycsb",
        "--records",
        "300",
        "--ops",
        "400",
        "--threads",
        "2",
    ];
    ok(&pagoda(
        &[
            &base[..],
            &[
                "--data",
                "mem",
                "--log",
                "mem",
                "--json",
                pagoda_json.to_str().unwrap(),
            ],
        ]
        .concat(),
    ));
    let want: Vec<String> = read_json(&pagoda_json)
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    for (engine, setting, value) in [
        ("sqlite", "synchronous", "FULL"),
        ("lmdb", "sync", "default (fsync at commit)"),
        ("redb", "durability", "Immediate"),
    ] {
        let json = dir.path().join(format!("{engine}.json"));
        let db = dir.path().join(engine);
        let out = ok(&pagoda(
            &[
                &base[..],
                &[
                    "--engine",
                    engine,
                    "--dir",
                    db.to_str().unwrap(),
                    "--json",
                    json.to_str().unwrap(),
                ],
            ]
            .concat(),
        ));
        assert!(
            out.contains("[OVERALL], Throughput(ops/sec)"),
            "{engine}: {out}"
        );
        let v = read_json(&json);
        let keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, want, "{engine}: the same keys as pagoda's JSON");
        assert_eq!(v["ops"], 400, "{engine}");
        assert_eq!(v["errors"], 0, "{engine}: {}", v["first_error"]);
        assert_eq!(v["engine"]["engine"], engine, "{engine}: {}", v["engine"]);
        assert_eq!(v["engine"][setting], value, "{engine}: {}", v["engine"]);
        // Updates commit: half the 400 operations of workload A, plus the load.
        assert!(v["engine"]["commits"].as_u64().unwrap() >= 150, "{engine}");
        // No device counters are invented for a peer.
        assert!(v["devices"].is_null(), "{engine}: {}", v["devices"]);
        assert_eq!(v["config"]["engine"], engine);
        assert_eq!(v["config"]["durability"], "sync");
        assert!(db
            .join(match engine {
                "sqlite" => "sqlite.db",
                "lmdb" => "lmdb",
                _ => "redb.redb",
            })
            .exists());
    }
}

#[test]
fn peers_load_once_and_run_on_the_load() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let base = [
        "bench",
        "ycsb",
        "--engine",
        "redb",
        "--records",
        "400",
        "--dir",
        d,
    ];
    ok(&pagoda(&[&base[..], &["--load-only"]].concat()));
    let json = dir.path().join("c.json");
    ok(&pagoda(
        &[
            &base[..],
            &["--workload", "c", "--ops", "300", "--run-only"],
            &["--json", json.to_str().unwrap()],
        ]
        .concat(),
    ));
    let v = read_json(&json);
    let read = v["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "READ")
        .unwrap()
        .clone();
    assert_eq!(read["count"], 300, "{read}");
    assert_eq!(read["not_found"], 0, "every key read must exist: {read}");
    fails_with(
        &pagoda(&[&base[..], &["--load-only"]].concat()),
        "already holds",
    );
    fails_with(
        &pagoda(&[
            "bench",
            "ycsb",
            "--engine",
            "redb",
            "--records",
            "9",
            "--dir",
            d,
            "--run-only",
        ]),
        "was loaded with",
    );
    // Another engine finds nothing to run on in this directory, and creates nothing.
    fails_with(
        &pagoda(&[
            "bench",
            "ycsb",
            "--engine",
            "sqlite",
            "--records",
            "400",
            "--dir",
            d,
            "--run-only",
        ]),
        "no loaded benchmark database",
    );
    assert!(!dir.path().join("sqlite.db").exists());
}

/// A tiny compare: the flags that keep it fast, with `--out` and any extra arguments.
fn compare(out_dir: &std::path::Path, extra: &[&str]) -> Output {
    let base = [
        "bench",
        "compare",
        "--threads",
        "1,2",
        "--records",
        "500",
        "--duration",
        "200ms",
        "--warmup",
        "0s",
        "--tpcc-items",
        "500",
        "--tpcc-customers",
        "30",
        "--out",
        out_dir.to_str().unwrap(),
    ];
    pagoda(&[&base[..], extra].concat())
}

const RESULT_FILES: [&str; 3] = ["compare.json", "compare.csv", "compare.svg"];

#[test]
fn compare_refuses_a_readme_without_markers_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let readme = dir.path().join("README.md");
    std::fs::write(&readme, "# no block\n").unwrap();
    let md = dir.path().join("c.md");
    let out = compare(
        &out_dir,
        &[
            "--engines",
            "pagoda,sqlite",
            "--repeats",
            "1",
            "--publish",
            md.to_str().unwrap(),
            "--readme",
            readme.to_str().unwrap(),
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no `compare targets` markers"), "{err}");
    assert!(!md.exists() && !out_dir.join("compare.json").exists());
}

#[test]
fn compare_writes_table_json_csv_svg_and_the_published_markdown() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let md = dir.path().join("results").join("compare-tiny.md");
    let readme = dir.path().join("README.md");
    std::fs::write(
        &readme,
        "# R\n<!-- compare targets: begin -->\nold\n<!-- compare targets: end -->\ntail\n",
    )
    .unwrap();
    let out = ok(&compare(
        &out_dir,
        &[
            "--engines",
            "pagoda,sqlite,lmdb",
            "--repeats",
            "3",
            "--publish",
            md.to_str().unwrap(),
            "--readme",
            readme.to_str().unwrap(),
        ],
    ));
    let rows = [
        "load",
        "load durable",
        "update 1t",
        "update 2t",
        "read 2t",
        "ycsb-a 2t",
        "tpcc 4t tpmC",
        "no-sync update 1t",
    ];
    for row in rows {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{row} ")))
            .unwrap_or_else(|| panic!("{row}: {out}"));
        let verdict = line.split_whitespace().last().unwrap();
        assert!(
            ["ahead", "behind", "even"].contains(&verdict),
            "verdict column: {line}"
        );
        assert!(line.contains("x ("), "ratio as median (min–max): {line}");
    }
    assert!(
        out.contains("pagoda/best peer") && out.contains("lmdb"),
        "{out}"
    );
    let v = read_json(&out_dir.join("compare.json"));
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3 * 3 * rows.len(), "{v}");
    for c in cells {
        assert!(c["ops_per_s"].as_f64().unwrap() > 0.0, "{c}");
        assert_eq!(c["errors"], 0, "{c}");
    }
    // The order rotates: each engine runs first in one of the three rounds.
    for (round, first) in ["pagoda", "sqlite", "lmdb"].iter().enumerate() {
        let c = cells
            .iter()
            .find(|c| c["repeat"] == round && c["position"] == 0)
            .unwrap();
        assert_eq!(c["engine"], *first, "round {round}");
    }
    let r = &v["summary"]["update 1t"]["pagoda_over_best_peer"];
    let (lo, mid, hi) = (
        r["min"].as_f64().unwrap(),
        r["median"].as_f64().unwrap(),
        r["max"].as_f64().unwrap(),
    );
    assert!(0.0 < lo && lo <= mid && mid <= hi, "{r}");
    let verdict = v["summary"]["update 1t"]["verdict"].as_str().unwrap();
    assert_eq!(verdict == "ahead", lo > 1.0, "{r}: {verdict}");
    assert_eq!(v["engines"]["sqlite"]["stats"]["synchronous"], "FULL");
    // The no-sync phase reopens each engine in its no-sync mode.
    assert_eq!(
        v["engines"]["sqlite"]["stats_no_sync"]["synchronous"],
        "NORMAL"
    );
    assert!(
        v["engines"]["pagoda"]["describe_no_sync"]
            .as_str()
            .unwrap()
            .contains("commit=lazy"),
        "{v}"
    );
    let csv = std::fs::read_to_string(out_dir.join("compare.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + cells.len(), "{csv}");
    assert!(csv.starts_with("repeat,position,engine,phase"), "{csv}");
    let svg = std::fs::read_to_string(out_dir.join("compare.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("sqlite") && svg.contains("update 2t"));
    // The published Markdown: provenance, the table, its plot beside it.
    let text = std::fs::read_to_string(&md).unwrap();
    for want in [
        "Generated by `pagoda bench compare",
        "(UTC) at commit",
        "Machine: ",
        "load durable",
        "compare-tiny.svg",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    assert!(md.with_file_name("compare-tiny.svg").exists());
    // The targets, each judged, in the Markdown and in the README's block, which links to it.
    for want in [
        "## Targets",
        "| update 2t vs best peer | >= 1.5x the best peer |",
        "| read 2t vs lmdb | >= LMDB |",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    let readme = std::fs::read_to_string(&readme).unwrap();
    assert!(
        !readme.contains("\nold\n") && readme.ends_with("<!-- compare targets: end -->\ntail\n"),
        "{readme}"
    );
    assert!(
        readme.contains("| update 1t vs disk ceiling |")
            && readme.contains("(results/compare-tiny.md)"),
        "{readme}"
    );
    // Every cell has its CPU share; pagoda's durable updates also where their time went.
    let upd = cells
        .iter()
        .find(|c| c["engine"] == "pagoda" && c["phase"] == "update 1t")
        .unwrap();
    assert!(upd["profile"]["cpu"].as_f64().unwrap() > 0.0, "{upd}");
    assert!(upd["profile"]["commit_top"].as_str().is_some(), "{upd}");
    assert!(
        upd["profile"]["commits_per_sync"].as_f64().unwrap() >= 1.0,
        "{upd}"
    );
    // The databases are removed once measured.
    assert!(!out_dir.join("db-sqlite").exists());
}

/// A peer that fails in the middle of the run (LMDB's map is too small for the load): one
/// line naming the engine and the phase, and no result file, not even from earlier rounds.
#[test]
fn a_peer_failing_mid_run_leaves_one_line_and_no_result() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let md = dir.path().join("r.md");
    let o = compare(
        &out_dir,
        &[
            "--engines",
            "sqlite,lmdb",
            "--repeats",
            "2",
            "--lmdb-map-size",
            "256KiB",
            "--publish",
            md.to_str().unwrap(),
        ],
    );
    fails_with(&o, "lmdb load (round 1)");
    for f in RESULT_FILES {
        assert!(!out_dir.join(f).exists(), "{f}");
    }
    assert!(!md.exists());
    assert!(!out_dir.join("db-lmdb").exists());
}

#[test]
fn bad_engine_flags_fail_with_one_line() {
    fails_with(
        &pagoda(&["bench", "ycsb", "--engine", "postgres"]),
        "unknown engine `postgres`",
    );
    for (flag, value) in [
        ("--torn", "atomic"),
        ("--data", "sata-ssd"),
        ("--flash-cache", "mem"),
        ("--page-size", "4KiB"),
    ] {
        fails_with(
            &pagoda(&["bench", "ycsb", "--engine", "sqlite", flag, value]),
            &format!("{flag} configures pagoda"),
        );
    }
    fails_with(
        &pagoda(&["bench", "ycsb", "--engine", "lmdb", "--commit", "pipelined"]),
        "--commit pipelined",
    );
    fails_with(
        &pagoda(&["bench", "ycsb", "--engine", "redb", "--run-only"]),
        "--dir",
    );
    fails_with(
        &pagoda(&["bench", "compare", "--engines", "pagoda,oracle"]),
        "unknown engine `oracle`",
    );
    fails_with(
        &pagoda(&["bench", "compare", "--threads", "4,0"]),
        "invalid value '0' for '--threads",
    );
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    for (extra, needle) in [
        (&["--engines", "pagoda,mysql"][..], "unknown engine `mysql`"),
        (&["--repeats", "0"][..], "--repeats"),
        (&["--engines", "sqlite,lmdb,sqlite"][..], "sqlite twice"),
        (&["--publish", "result.txt"][..], "Markdown file"),
    ] {
        fails_with(&compare(&out_dir, extra), needle);
        for f in RESULT_FILES {
            assert!(!out_dir.join(f).exists(), "{needle}: {f}");
        }
    }
}

#[test]
fn tpcc_on_a_peer_passes_its_consistency_check() {
    let out = ok(&pagoda(&[
        "bench",
        "tpcc",
        "--engine",
        "lmdb",
        "--items",
        "500",
        "--customers",
        "30",
        "--threads",
        "2",
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--check",
    ]));
    assert!(out.contains("TpmC"), "{out}");
    for c in 1..=4 {
        assert!(out.contains(&format!("condition {c} [OK]")), "{out}");
    }
}

/// RocksDB is a cargo feature: with it, ycsb runs on it; without it, asking for it says how
/// to turn it on.
#[test]
fn rocksdb_runs_when_built_in_and_says_how_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let args = [
        "bench",
        "ycsb",
        "--engine",
        "rocksdb",
        "--records",
        "300",
        "--ops",
        "400",
        "--threads",
        "2",
        "--json",
        json.to_str().unwrap(),
    ];
    if cfg!(feature = "rocksdb") {
        ok(&pagoda(&args));
        let v = read_json(&json);
        assert_eq!(v["ops"], 400);
        assert_eq!(v["engine"]["engine"], "rocksdb");
        assert_eq!(v["engine"]["sync"], true);
    } else {
        fails_with(&pagoda(&args), "--features rocksdb");
        assert!(!json.exists());
    }
}

/// `bench compare` with RocksDB: every cell measured when it is built in; otherwise one line
/// naming the feature, before any result file or database is made.
#[test]
fn compare_runs_rocksdb_when_built_in_and_says_how_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let o = compare(&out_dir, &["--engines", "sqlite-rowid,rocksdb"]);
    if cfg!(feature = "rocksdb") {
        ok(&o);
        let v = read_json(&out_dir.join("compare.json"));
        let cells = v["cells"].as_array().unwrap();
        let rocks: Vec<_> = cells.iter().filter(|c| c["engine"] == "rocksdb").collect();
        assert_eq!(rocks.len() * 2, cells.len(), "{v}");
        for c in rocks {
            assert!(c["ops_per_s"].as_f64().unwrap() > 0.0, "{c}");
            assert_eq!(c["errors"], 0, "{c}");
        }
        assert_eq!(v["engines"]["rocksdb"]["stats"]["recycle_log_file_num"], 4);
        assert_eq!(v["engines"]["sqlite-rowid"]["stats"]["page_size"], 4096);
    } else {
        fails_with(&o, "--features rocksdb");
        assert!(!out_dir.exists(), "nothing written");
    }
}
