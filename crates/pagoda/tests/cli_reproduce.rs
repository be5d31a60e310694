//! End-to-end tests of `pagoda reproduce` at the tiny scale (seconds per cell): every
//! experiment runs and writes its JSON and plots, the report's numbers are the cells' JSON,
//! a report merged from shards is the same report, and bad input is refused clearly.
#![allow(clippy::unwrap_used)]

mod common;

use common::{fails_with, pagoda};
use serde_json::Value;
use std::path::Path;

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The result of one repeat (seed) of a cell.
fn cell(dir: &Path, id: &str, seed: u64) -> Value {
    json(&dir.join("cells").join(format!("{id}.s{seed}.json")))
}

/// 12345.6 -> "12,346" as the report prints counts and rates.
fn thousands(v: f64) -> String {
    let s = (v.round() as u64).to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[test]
fn all_experiments_write_report_json_and_plots() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("r");
    let o = pagoda(&[
        "reproduce",
        "all",
        "--scale",
        "tiny",
        "--repeats",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("| experiment | what | seed | band | ours: median (min–max) | verdict |"),
        "{stdout}"
    );

    // Every cell of the plan left a result for each seed, none failed unexpectedly.
    let plan = pagoda(&["reproduce", "plan", "--scale", "tiny", "--repeats", "2"]);
    let plan: Value = serde_json::from_slice(&plan.stdout).unwrap();
    let runs = plan["runs"].as_array().unwrap();
    let mut ids: Vec<&str> = runs.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), runs.len());
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len() * 2, runs.len(), "one run per cell and seed");
    assert!(ids.len() >= 15, "{ids:?}");
    for id in &ids {
        for seed in [1, 2] {
            let c = cell(&out, id, seed);
            assert!(
                c["ok"] == Value::Bool(true) || c["cell"]["may_fail"] == Value::Bool(true),
                "{id}: {}",
                c["error"]
            );
            assert!(c["result"].is_object(), "{id} wrote no JSON");
            assert_eq!(c["seed"], seed);
        }
    }

    // One section per seed, each plot it links exists and is an SVG.
    let index = std::fs::read_to_string(out.join("index.md")).unwrap();
    for title in [
        "## Seed 000",
        "## Seed 001",
        "## Seed 002",
        "## Seed 003",
        "## Seed 004",
    ] {
        assert!(index.contains(title), "{title} missing from the report");
    }
    let links: Vec<&str> = index
        .split("](plots/")
        .skip(1)
        .map(|s| &s[..s.find(')').unwrap()])
        .collect();
    assert!(links.len() >= 6, "{links:?}");
    for l in &links {
        let svg = std::fs::read_to_string(out.join("plots").join(l)).unwrap();
        assert!(svg.starts_with("<svg") || svg.contains("<svg"), "{l}");
    }

    // The report's numbers are the cells' JSON: a table shows the median of the repeats (of
    // two, the mean of both), a headline the per-seed change with its min and max.
    let both = |id: &str, f: &dyn Fn(&Value) -> f64| [f(&cell(&out, id, 1)), f(&cell(&out, id, 2))];
    let flash_reads = |c: &Value| {
        c["result"]["devices"]["data"]["flash_reads"]
            .as_f64()
            .unwrap()
    };
    let fr = both("dwb-ftl.one-stream", &flash_reads);
    assert!(
        index.contains(&format!(
            "| ours: one-stream | {} |",
            thousands((fr[0] + fr[1]) / 2.0)
        )),
        "dwb-ftl row does not show the median flash reads of {fr:?}"
    );
    let cb = |c: &Value| {
        c["result"]["devices"]["data"]["copybacks"]
            .as_f64()
            .unwrap()
    };
    let (one, sep) = (
        both("dwb-ftl.one-stream", &cb),
        both("dwb-ftl.dw-separated", &cb),
    );
    let report = json(&out.join("report.json"));
    let dwb = report["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["experiment"] == "dwb-ftl")
        .unwrap();
    let h = &dwb["headlines"][0];
    if one.iter().all(|&v| v > 0.0) {
        let per: Vec<f64> = (0..2).map(|i| (sep[i] / one[i] - 1.0) * 100.0).collect();
        let (lo, hi) = (per[0].min(per[1]), per[0].max(per[1]));
        assert!(
            (h["min"].as_f64().unwrap() - lo).abs() < 1e-9,
            "{h} vs {per:?}"
        );
        assert!(
            (h["max"].as_f64().unwrap() - hi).abs() < 1e-9,
            "{h} vs {per:?}"
        );
        assert_eq!(h["repeats"], 2);
    }

    // The same seed and scale give the same FTL counters (dwb-ftl runs one client without a
    // background thread, so its I/O sequence is a function of the seed).
    let again = tmp.path().join("again");
    let o = pagoda(&[
        "reproduce",
        "cell",
        "dwb-ftl.dw-separated",
        "--scale",
        "tiny",
        "--out",
        again.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let first = cell(&out, "dwb-ftl.dw-separated", 1);
    let (a, b) = (
        &first["result"]["devices"]["data"],
        &cell(&again, "dwb-ftl.dw-separated", 1)["result"]["devices"]["data"],
    );
    for k in [
        "host_write_pages",
        "host_read_pages",
        "flash_programs",
        "flash_reads",
        "gc_runs",
        "copybacks",
        "erases",
        "streams",
    ] {
        assert_eq!(a[k], b[k], "{k} differs between two runs of the same seed");
    }
    assert!(a["gc_runs"].as_u64().unwrap() > 0, "GC never ran: {a}");

    // `report` alone rebuilds the same page from the cells; a shard with a subset of the cells
    // gives the sections it has.
    let before = index.clone();
    let published = tmp.path().join("docs/results/reproduce-tiny.md");
    let o = pagoda(&[
        "reproduce",
        "report",
        out.to_str().unwrap(),
        "--publish",
        published.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(out.join("index.md")).unwrap(),
        before
    );
    // The published summary says how it was made and carries the run's table and plots.
    let md = std::fs::read_to_string(&published).unwrap();
    assert!(md.contains("Generated by `pagoda reproduce report"), "{md}");
    assert!(
        md.contains("at commit ") && md.contains("Scale **tiny**; seeds [1, 2], "),
        "{md}"
    );
    assert!(md.contains("| experiment | what | seed | band |"), "{md}");
    assert!(!md.contains("report: "), "a local path leaked: {md}");
    let plot = tmp
        .path()
        .join("docs/results/reproduce-tiny-plots/dwb-ftl.svg");
    assert!(
        plot.exists() && md.contains("(reproduce-tiny-plots/dwb-ftl.svg)"),
        "{md}"
    );
    let shard = tmp.path().join("shard");
    std::fs::create_dir_all(shard.join("cells")).unwrap();
    for id in ids.iter().filter(|i| i.starts_with("dwb-ftl.")) {
        for seed in [1, 2] {
            let f = format!("{id}.s{seed}.json");
            std::fs::copy(out.join("cells").join(&f), shard.join("cells").join(&f)).unwrap();
        }
    }
    let o = pagoda(&["reproduce", "report", shard.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let part = std::fs::read_to_string(shard.join("index.md")).unwrap();
    assert!(part.contains("## Seed 001") && !part.contains("## Seed 000"));
    assert!(!part.contains("could not be read"), "{part}");

    // A result whose figure has the wrong type is listed as unreadable, not shown as "–"
    // without a word.
    let id = ids.iter().find(|i| i.starts_with("dwb-ftl.")).unwrap();
    let f = shard.join("cells").join(format!("{id}.s2.json"));
    let mut r = json(&f);
    r["result"]["throughput_ops_s"] = Value::from("fast");
    std::fs::write(&f, serde_json::to_vec(&r).unwrap()).unwrap();
    let o = pagoda(&["reproduce", "report", shard.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let part = std::fs::read_to_string(shard.join("index.md")).unwrap();
    assert!(
        part.contains("could not be read as bench results")
            && part.contains(&format!("`{id}` seed 2: invalid type")),
        "{part}"
    );
}

#[test]
fn plan_cell_and_report_refuse_bad_input() {
    let o = pagoda(&["reproduce", "plan", "--scale", "quick"]);
    assert!(o.status.success());
    let plan: Value = serde_json::from_slice(&o.stdout).unwrap();
    let cells = plan["runs"].as_array().unwrap();
    for c in cells {
        let cmd = c["command"].as_str().unwrap();
        assert!(cmd.starts_with("pagoda reproduce cell ") && cmd.contains("--scale quick"));
        assert!(c["runs"].as_str().unwrap().starts_with("pagoda "));
    }
    for exp in [
        "face",
        "dwb-ftl",
        "pipelined-commit",
        "atomic-write",
        "buffer-sweep",
    ] {
        assert!(
            cells.iter().any(|c| c["experiment"] == exp),
            "{exp} has no cells"
        );
    }
    // The quick scale, with its three repeats, is planned within 20 minutes when run as
    // `reproduce all` runs it (light cells side by side), and its runs add up to more.
    let wall = plan["wall_estimate_s"].as_u64().unwrap();
    assert!(wall <= 20 * 60, "{wall} s");
    assert!(plan["estimate_s"].as_u64().unwrap() > wall);
    assert_eq!(plan["seeds"], serde_json::json!([1, 2, 3]));

    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().to_str().unwrap();
    fails_with(
        &pagoda(&["reproduce", "cell", "nope", "--scale", "tiny", "--out", d]),
        "no cell 'nope'",
    );
    fails_with(&pagoda(&["reproduce", "report", d]), "reproduce");
    std::fs::create_dir_all(tmp.path().join("cells")).unwrap();
    std::fs::write(tmp.path().join("cells/x.json"), "{ not json").unwrap();
    fails_with(&pagoda(&["reproduce", "report", d]), "is not a cell result");
    fails_with(&pagoda(&["reproduce", "all", "--scale", "huge"]), "huge");

    // One cell on its own (a crash test of the unsafe mode: it may fail by design).
    let out = tmp.path().join("one");
    let o = pagoda(&[
        "reproduce",
        "cell",
        "atomic-write.crash.none",
        "--scale",
        "tiny",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let c = cell(&out, "atomic-write.crash.none", 1);
    assert!(c["result"]["cycles"].as_u64().unwrap() > 0);
}
