//! `pagoda reproduce --runs 2`: two independent runs of the grid, each with its own seeds and
//! its own cell order, each a complete run in OUT/run-K, and a combined verdict per row that
//! is within only when both runs are. Runs seed 001's tiny cells (a few seconds each)
//! once per run.
#![allow(clippy::unwrap_used)]

mod common;

use common::pagoda;
use serde_json::Value;
use std::path::Path;

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn two_runs_take_their_own_seeds_and_orders_and_combine_row_by_row() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let published = tmp.path().join("docs/results/runs.md");
    let readme = tmp.path().join("README.md");
    std::fs::write(
        &readme,
        "# x\n<!-- reproduce excerpt: begin -->\nold\n<!-- reproduce excerpt: end -->\n",
    )
    .unwrap();
    let o = pagoda(&[
        "reproduce",
        "dwb-ftl",
        "--scale",
        "tiny",
        "--repeats",
        "1",
        "--runs",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--publish",
        published.to_str().unwrap(),
        "--readme",
        readme.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // Each run is complete on its own, with its own seed.
    let (one, two) = (out.join("run-1"), out.join("run-2"));
    let (r1, r2) = (
        json(&one.join("report.json")),
        json(&two.join("report.json")),
    );
    assert_eq!(r1["seeds"], serde_json::json!([1]));
    assert_eq!(r2["seeds"], serde_json::json!([2]));
    assert!(one.join("index.md").exists() && two.join("index.md").exists());
    assert!(one.join("cells/dwb-ftl.dw-separated.s1.json").exists());
    assert!(two.join("cells/dwb-ftl.dw-separated.s2.json").exists());

    // The cells started in another order in the second run.
    let starts = |r: &Value| -> Vec<String> {
        r["rounds"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|x| x["cells"].as_array().unwrap().clone())
            .map(|c| c.as_str().unwrap().to_string())
            .collect()
    };
    let (s1, s2) = (starts(&r1), starts(&r2));
    assert!(s1.len() >= 2, "{s1:?}");
    assert_ne!(s1, s2, "both runs started the cells in one order");
    let (mut a, mut b) = (s1.clone(), s2.clone());
    a.sort();
    b.sort();
    assert_eq!(a, b);

    // The combined verdict of every row follows from the runs' verdicts.
    let agreed = json(&out.join("agreement.json"));
    let rows = agreed["rows"].as_array().unwrap();
    let heads = |r: &Value| r["experiments"][0]["headlines"].as_array().unwrap().len();
    assert_eq!(rows.len(), heads(&r1));
    for row in rows {
        let vs: Vec<&str> = row["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["verdict"].as_str().unwrap_or("missing"))
            .collect();
        assert_eq!(vs.len(), 2);
        let want = if vs[0] == vs[1] {
            vs[0]
        } else {
            "inconclusive"
        };
        assert_eq!(row["verdict"], want, "{row}");
    }

    // The published page shows both runs side by side, then each run's own table.
    let md = std::fs::read_to_string(&published).unwrap();
    assert!(md.contains("Scale **tiny**; run 1: seeds [1], "), "{md}");
    assert!(md.contains("run 2: seeds [2], "), "{md}");
    assert!(
        md.contains(
            "| run 1: median (min–max) | run 1 | run 2: median (min–max) | run 2 | verdict |"
        ),
        "{md}"
    );
    assert!(md.contains("within only when every run is within"), "{md}");
    assert!(
        md.contains("## Run 2 (seeds [2])") && md.contains("## Rounds of run 2"),
        "{md}"
    );
    let excerpt = std::fs::read_to_string(&readme).unwrap();
    assert!(
        excerpt.contains("2 independent runs, seeds [1] and [2]"),
        "{excerpt}"
    );

    // `report` rebuilds the same combined table from the runs' cells.
    let before = std::fs::read_to_string(out.join("index.md")).unwrap();
    let o = pagoda(&["reproduce", "report", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(out.join("index.md")).unwrap(),
        before
    );
}
