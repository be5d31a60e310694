//! End-to-end tests of the flash cache flags of `pagoda bench` (FaCE): the combinations
//! that cannot work are refused with one clear line before any work, a configured cache shows
//! in the table and the JSON, and a cache on a file comes back warm in a `--run-only` process.
#![allow(clippy::unwrap_used)] // test helpers: a failure should panic with the cause

use std::path::Path;
mod common;

use common::{fails_with, pagoda};
use std::process::Output;

fn ycsb(extra: &[&str]) -> Output {
    pagoda(
        &[
            &["bench", "ycsb", "--records", "200", "--ops", "200"],
            extra,
        ]
        .concat(),
    )
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn flash_flags_without_a_flash_cache_are_refused() {
    // Clap refuses them (one flag group, `requires`), naming the flag that is missing.
    let missing = "the following required arguments were not provided: --flash-cache <DEVICE>";
    fails_with(&ycsb(&["--flash-cache-size", "8MiB"]), missing);
    fails_with(&ycsb(&["--flash-cache-policy", "lru"]), missing);
    fails_with(
        &ycsb(&["--flash-cache-pages", "all", "--torn", "none"]),
        missing,
    );
    for cmd in [
        &["tpcc", "--warehouses", "1"][..],
        &["linkbench", "--nodes", "100"],
    ] {
        fails_with(
            &pagoda(&[&["bench"], cmd, &["--flash-cache-size", "8MiB"]].concat()),
            missing,
        );
    }
}

#[test]
fn bad_flash_values_are_refused() {
    fails_with(
        &ycsb(&[
            "--flash-cache",
            "mem,capacity=8MiB",
            "--flash-cache-policy",
            "fifo",
        ]),
        "use face, face-gsc or lru",
    );
    fails_with(
        &ycsb(&[
            "--flash-cache",
            "mem,capacity=8MiB",
            "--flash-cache-pages",
            "clean",
        ]),
        "use dirty or all",
    );
    fails_with(
        &ycsb(&["--flash-cache", "mem", "--torn", "none"]),
        "names no capacity: give --flash-cache-size",
    );
    fails_with(
        &ycsb(&["--flash-cache", "floppy", "--flash-cache-size", "8MiB"]),
        "unknown device",
    );
    fails_with(
        &ycsb(&[
            "--flash-cache",
            "mem",
            "--flash-cache-size",
            "0",
            "--torn",
            "none",
        ]),
        "--flash-cache-size 0",
    );
}

#[test]
fn a_flash_cache_with_the_doublewrite_buffer_is_refused_naming_torn_none() {
    for torn in [&[][..], &["--torn", "doublewrite"]] {
        fails_with(
            &ycsb(
                &[
                    &["--flash-cache", "mem", "--flash-cache-size", "8MiB"],
                    torn,
                ]
                .concat(),
            ),
            "--torn none",
        );
    }
}

#[test]
fn the_cache_cannot_be_the_data_or_log_device() {
    let dir = tempfile::tempdir().unwrap();
    let d = path(dir.path());
    // The data file of --dir, under another spelling.
    let data = format!("file:{d}/./data.pagoda");
    fails_with(
        &ycsb(&[
            "--dir",
            d,
            "--torn",
            "none",
            "--flash-cache",
            &data,
            "--flash-cache-size",
            "8MiB",
        ]),
        "also the data device",
    );
    let log = format!("file:{d}/log.pagoda");
    fails_with(
        &ycsb(&[
            "--dir",
            d,
            "--torn",
            "none",
            "--flash-cache",
            &log,
            "--flash-cache-size",
            "8MiB",
        ]),
        "also the log device",
    );
    // Named devices: the same file, or an emulated SSD's backing file.
    let x = format!("file:{d}/x.pagoda");
    fails_with(
        &ycsb(&[
            "--data",
            &x,
            "--torn",
            "none",
            "--flash-cache",
            &format!("{x},capacity=8MiB"),
        ]),
        "also the data device",
    );
    let backed = format!("sata-ssd,backing={d}/b.flash");
    fails_with(
        &ycsb(&[
            "--data",
            &backed,
            "--torn",
            "none",
            "--flash-cache",
            &format!("{backed},capacity=64MiB,op=0.5"),
        ]),
        "also the data device",
    );
    // Refused before anything was created.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn without_a_flash_cache_the_json_has_the_open_time_and_no_flash_figures() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("y.json");
    let o = ycsb(&["--data", "mem", "--log", "mem", "--json", path(&json)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("open time (recovery)"), "{out}");
    assert!(!out.contains("flash"), "{out}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(
        v["engine"]["open_ms"].as_f64().unwrap() >= 0.0,
        "{}",
        v["engine"]
    );
    assert!(v["engine"].get("flash_cache_hit_ratio").is_none());
    assert!(v["engine"].get("flash_cache").is_none());
    assert!(v["devices"].get("flash_cache").is_none());
    assert!(v["config"]["flash_cache"].is_null());
}

/// The small configuration of these tests: 4 KiB pages and a 1 MiB buffer (256 frames), so
/// that 2,000 records overflow DRAM and the flash cache sees traffic.
const SMALL: [&str; 8] = [
    "--torn",
    "none",
    "--buffer",
    "1MiB",
    "--page-size",
    "4KiB",
    "--flash-cache-size",
    "8MiB",
];

fn ok(o: &Output) -> (String, String) {
    assert!(
        o.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

#[test]
fn ycsb_with_a_flash_cache_reports_it_in_the_table_and_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("y.json");
    let (out, _) = ok(&pagoda(
        &[
            &["bench", "ycsb", "--records", "2000", "--ops", "2000"][..],
            &["--flash-cache", "mem", "--json", path(&json)],
            &SMALL,
        ]
        .concat(),
    ));
    for line in [
        "flash hit ratio",
        "flash ring writes",
        "flash write-backs",
        "GSC re-appends",
        "invalid slots",
        "dir checkpoints",
        "flash start",
        "open time (recovery)",
    ] {
        assert!(out.contains(line), "'{line}' in: {out}");
    }
    let v = read_json(&json);
    let ratio = v["engine"]["flash_cache_hit_ratio"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&ratio), "{}", v["engine"]);
    let fc = &v["engine"]["flash_cache"];
    assert_eq!(fc["policy"], "face", "{fc}");
    assert_eq!(fc["pages"], "dirty", "{fc}");
    assert_eq!(fc["hit_ratio"].as_f64().unwrap(), ratio);
    assert!(fc["ring_page_writes"].as_u64().unwrap() > 0, "{fc}");
    assert!(v["engine"]["open_ms"].is_number());
    assert!(
        v["devices"]["flash_cache"]["host_write_pages"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(v["config"]["flash_cache"], "mem,capacity=8MiB");
    assert_eq!(v["config"]["flash_cache_size_bytes"], 8 << 20);
    assert_eq!(v["config"]["flash_cache_policy"], "face");
    assert_eq!(v["config"]["flash_cache_pages"], "dirty");
}

#[test]
fn every_policy_and_linkbench_run_with_a_flash_cache() {
    for (policy, pages) in [("face-gsc", "all"), ("lru", "dirty")] {
        let (out, _) = ok(&pagoda(
            &[
                &["bench", "ycsb", "--records", "1000", "--ops", "1000"][..],
                &["--flash-cache", "mem", "--flash-cache-policy", policy],
                &["--flash-cache-pages", pages],
                &SMALL,
            ]
            .concat(),
        ));
        assert!(out.contains(&format!("{policy}, {pages} pages")), "{out}");
    }
    let (out, _) = ok(&pagoda(
        &[
            &[
                "bench",
                "linkbench",
                "--nodes",
                "1000",
                "--requests",
                "1000",
            ][..],
            &["--flash-cache", "sata-ssd,capacity=64MiB,op=0.5"],
            &SMALL,
        ]
        .concat(),
    ));
    assert!(out.contains("flash hit ratio"), "{out}");
}

#[test]
fn a_flash_cache_on_a_file_comes_back_warm_in_a_run_only_process() {
    let dir = tempfile::tempdir().unwrap();
    let d = path(dir.path());
    let cache = format!("file:{d}/cache.pagoda");
    let json = dir.path().join("run.json");
    let base = [
        &["bench", "ycsb", "--records", "2000", "--dir", d][..],
        &["--flash-cache", &cache],
        &SMALL,
    ]
    .concat();
    ok(&pagoda(&[&base[..], &["--load-only"]].concat()));
    let (out, err) = ok(&pagoda(
        &[
            &base[..],
            &["--run-only", "--ops", "2000", "--json", path(&json)],
        ]
        .concat(),
    ));
    assert!(!err.contains("starts cold"), "{err}");
    let v = read_json(&json);
    let fc = &v["engine"]["flash_cache"];
    assert_eq!(fc["warm_start"], true, "{fc}");
    assert!(out.contains("flash start") && out.contains("warm"), "{out}");
    assert!(v["engine"]["open_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(v["config"]["flash_cache_keeps_data"], true);
}

#[test]
fn a_volatile_flash_cache_with_run_only_starts_cold_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let d = path(dir.path());
    let json = dir.path().join("run.json");
    let base = [
        &["bench", "ycsb", "--records", "1000", "--dir", d][..],
        &["--flash-cache", "mem"],
        &SMALL,
    ]
    .concat();
    let (_, err) = ok(&pagoda(&[&base[..], &["--load-only"]].concat()));
    assert!(
        err.contains("note: the flash cache on mem ends with this process"),
        "{err}"
    );
    let (_, err) = ok(&pagoda(
        &[
            &base[..],
            &["--run-only", "--ops", "500", "--json", path(&json)],
        ]
        .concat(),
    ));
    assert!(
        err.contains("note: the flash cache on mem starts cold"),
        "{err}"
    );
    let v = read_json(&json);
    assert_eq!(v["engine"]["flash_cache"]["warm_start"], false);
}
