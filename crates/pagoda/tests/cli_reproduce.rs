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

fn cell(dir: &Path, id: &str) -> Value {
    json(&dir.join("cells").join(format!("{id}.json")))
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
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("| experiment | what | seed | ours | verdict |"),
        "{stdout}"
    );

    // Every cell of the plan left a result, none failed unexpectedly.
    let plan = pagoda(&["reproduce", "plan", "--scale", "tiny"]);
    let plan: Value = serde_json::from_slice(&plan.stdout).unwrap();
    let ids: Vec<&str> = plan["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert!(ids.len() >= 15, "{ids:?}");
    for id in &ids {
        let c = cell(&out, id);
        assert!(
            c["ok"] == Value::Bool(true) || c["cell"]["may_fail"] == Value::Bool(true),
            "{id}: {}",
            c["error"]
        );
        assert!(c["result"].is_object(), "{id} wrote no JSON");
        assert_eq!(c["seed"], 1);
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

    // The report's numbers are the cells' JSON.
    let orig = cell(&out, "face.ssd.original");
    let tpmc = orig["result"]["tpmC"].as_f64().unwrap();
    assert!(
        index.contains(&format!("| SSD data | original | {} |", thousands(tpmc))),
        "face row does not show tpmC {tpmc}"
    );
    let one = cell(&out, "dwb-ftl.one-stream");
    let sep = cell(&out, "dwb-ftl.separated");
    let cb = |c: &Value| {
        c["result"]["devices"]["data"]["copybacks"]
            .as_f64()
            .unwrap()
    };
    assert!(index.contains(&format!("| ours: one-stream | {} |", {
        let r = one["result"]["devices"]["data"]["flash_reads"]
            .as_f64()
            .unwrap();
        thousands(r)
    })));
    let report = json(&out.join("report.json"));
    let dwb = report["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["experiment"] == "dwb-ftl")
        .unwrap();
    let copyback = dwb["headlines"][0]["value"].as_f64();
    if cb(&one) > 0.0 {
        let want = (cb(&sep) / cb(&one) - 1.0) * 100.0;
        assert!(
            (copyback.unwrap() - want).abs() < 1e-9,
            "{copyback:?} vs {want}"
        );
    }

    // The same seed and scale give the same FTL counters (dwb-ftl runs one client without a
    // background thread, so its I/O sequence is a function of the seed).
    let again = tmp.path().join("again");
    let o = pagoda(&[
        "reproduce",
        "cell",
        "dwb-ftl.separated",
        "--scale",
        "tiny",
        "--out",
        again.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (a, b) = (
        &sep["result"]["devices"]["data"],
        &cell(&again, "dwb-ftl.separated")["result"]["devices"]["data"],
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
    let o = pagoda(&["reproduce", "report", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(out.join("index.md")).unwrap(),
        before
    );
    let shard = tmp.path().join("shard");
    std::fs::create_dir_all(shard.join("cells")).unwrap();
    for id in ids.iter().filter(|i| i.starts_with("dwb-ftl.")) {
        let f = format!("{id}.json");
        std::fs::copy(out.join("cells").join(&f), shard.join("cells").join(&f)).unwrap();
    }
    let o = pagoda(&["reproduce", "report", shard.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let part = std::fs::read_to_string(shard.join("index.md")).unwrap();
    assert!(part.contains("## Seed 001") && !part.contains("## Seed 000"));
}

#[test]
fn plan_cell_and_report_refuse_bad_input() {
    let o = pagoda(&["reproduce", "plan", "--scale", "quick"]);
    assert!(o.status.success());
    let plan: Value = serde_json::from_slice(&o.stdout).unwrap();
    let cells = plan["cells"].as_array().unwrap();
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
    // The quick scale is planned to fit in 15 minutes here.
    assert!(plan["estimate_s"].as_u64().unwrap() <= 15 * 60);

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
    let c = cell(&out, "atomic-write.crash.none");
    assert!(c["result"]["cycles"].as_u64().unwrap() > 0);
}
