//! `pagoda reproduce --jobs N`: cells run in parallel leave the same result files and the same
//! report as the sequential run, the report says they ran concurrently, and a bad N is refused
//! in one line. Runs seed 001's four tiny cells (a few seconds each) twice: one unit of four
//! light cells per round.
#![allow(clippy::unwrap_used)]

mod common;

use common::{fails_with, pagoda};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn run(out: &Path, jobs: &str) {
    let o = pagoda(&[
        "reproduce",
        "dwb-ftl",
        "--scale",
        "tiny",
        "--repeats",
        "2",
        "--jobs",
        jobs,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn files(out: &Path) -> BTreeSet<String> {
    std::fs::read_dir(out.join("cells"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect()
}

/// The report's skeleton: its headings and the first column of every table row (numbers
/// measured on a shared CPU differ, the rows do not).
fn skeleton(index: &str) -> Vec<String> {
    index
        .lines()
        .filter_map(|l| {
            if l.starts_with('#') {
                Some(l.to_string())
            } else {
                l.strip_prefix('|')
                    .and_then(|r| r.split('|').next())
                    .map(|c| c.trim().to_string())
            }
        })
        .collect()
}

#[test]
fn parallel_cells_give_the_sequential_files_and_report() {
    let tmp = tempfile::tempdir().unwrap();
    let (one, two) = (tmp.path().join("one"), tmp.path().join("two"));
    run(&one, "1");
    run(&two, "2");

    let names = files(&one);
    assert_eq!(names, files(&two), "the same result files");
    let results: Vec<&String> = names.iter().filter(|n| n.ends_with(".s1.json")).collect();
    assert_eq!(results.len(), 5, "{names:?}");
    for n in results {
        let (a, b) = (
            json(&one.join("cells").join(n)),
            json(&two.join("cells").join(n)),
        );
        assert_eq!(a["cell"], b["cell"], "{n}");
        assert_eq!(
            (a["ok"].clone(), b["ok"].clone()),
            (true.into(), true.into())
        );
        assert_eq!((a["jobs"].as_u64(), b["jobs"].as_u64()), (Some(1), Some(2)));
        // Each child wrote its own result: seed 001's FTL counters are a function of the
        // seed, so a result saved under another cell's name would show here.
        let (da, db) = (
            &a["result"]["devices"]["data"],
            &b["result"]["devices"]["data"],
        );
        for k in ["host_write_pages", "flash_programs", "copybacks", "erases"] {
            assert_eq!(da[k], db[k], "{n}: {k}");
        }
    }

    let (ia, ib) = (
        std::fs::read_to_string(one.join("index.md")).unwrap(),
        std::fs::read_to_string(two.join("index.md")).unwrap(),
    );
    assert_eq!(skeleton(&ia), skeleton(&ib));
    assert!(ia.contains("Cells ran one at a time (`--jobs 1`"), "{ia}");
    assert!(
        ib.contains("Cells ran **concurrently**, up to 2 at a time (`--jobs 2`"),
        "{ib}"
    );
    // The start times show the overlap: a repeat's five light cells side by side, one round
    // each. A round never spans two repeats and the five form one comparison (one unit), so
    // two jobs run no more at once here than one.
    let (ra, rb) = (
        json(&one.join("report.json")),
        json(&two.join("report.json")),
    );
    assert_eq!(
        (ra["jobs"].as_u64(), rb["jobs"].as_u64()),
        (Some(1), Some(2))
    );
    assert!(ra["most_cells_at_once"].as_u64().unwrap() <= 5, "{ra}");
    assert!(rb["most_cells_at_once"].as_u64().unwrap() <= 5, "{rb}");
    // Each run lists its two rounds, the five cells of a repeat in each.
    for r in [&ra, &rb] {
        let rounds = r["rounds"].as_array().unwrap();
        assert_eq!(rounds.len(), 2, "{r}");
        assert!(rounds
            .iter()
            .all(|x| x["cells"].as_array().unwrap().len() == 5));
    }
    assert!(ia.contains("## Rounds"), "{ia}");
    let whats = |r: &Value| -> Vec<Value> {
        r["experiments"][0]["headlines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["what"].clone())
            .collect()
    };
    assert_eq!(whats(&ra), whats(&rb));

    // `reproduce report` rebuilds the parallel run's page from its cells alone, and a page
    // published from it says the cells ran concurrently.
    let published = tmp.path().join("published.md");
    let o = pagoda(&[
        "reproduce",
        "report",
        two.to_str().unwrap(),
        "--publish",
        published.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(two.join("index.md")).unwrap(), ib);
    let md = std::fs::read_to_string(&published).unwrap();
    assert!(md.contains("Cells ran **concurrently**, up to 2"), "{md}");
}

#[test]
fn a_bad_job_count_is_refused_in_one_line() {
    fails_with(
        &pagoda(&["reproduce", "all", "--jobs", "0"]),
        "0 cells at a time runs nothing",
    );
    fails_with(
        &pagoda(&["reproduce", "face", "--jobs", "two"]),
        "'two' is not a number of cells to run at once",
    );
    fails_with(
        &pagoda(&["reproduce", "cell", "x", "--jobs", ""]),
        "is not a number",
    );
}
