//! What the report says about how the cells shared the machine: per round, the cells that
//! started together and the load average then, and at the top whether a run started above
//! the tool's load threshold. Read from the round each result recorded, so a report merged
//! from shards shows every run's rounds.

use super::cell::CellResult;
use crate::report::Table;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The 1-minute load average above which other work distorts the cells' regimes: emulated
/// devices keep their modelled time by sleeping and yielding, and a run at a load average
/// of 31 on 2 cores found 9 rows out of regime that were in regime on the quiet machine.
pub(crate) fn busy_threshold(cores: f64) -> f64 {
    2.0 * cores.max(1.0)
}

/// One round as the report lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Row {
    /// When its run started (Unix seconds), telling merged runs apart.
    pub run_started_unix_s: f64,
    pub index: usize,
    pub of: usize,
    pub seed: u64,
    /// Every cell started in the round, in start order.
    pub cells: Vec<String>,
    pub load_1m: Option<f64>,
    /// Seconds from the run's start to the round's, and until its last cell ended.
    pub started_s: Option<f64>,
    pub elapsed_s: f64,
}

/// The rounds the results recorded, in the runs' order (none for results older than the
/// record).
pub(crate) fn rows(results: &[CellResult]) -> Vec<Row> {
    let mut by: BTreeMap<(u64, usize), Row> = BTreeMap::new();
    let mut ends: BTreeMap<(u64, usize), f64> = BTreeMap::new();
    for r in results {
        let Some(info) = &r.round else { continue };
        let key = (info.run_started_unix_s.to_bits(), info.index);
        let row = by.entry(key).or_insert_with(|| Row {
            run_started_unix_s: info.run_started_unix_s,
            index: info.index,
            of: info.of,
            seed: r.seed,
            cells: info.cells.clone(),
            load_1m: info.load_1m,
            started_s: None,
            elapsed_s: 0.0,
        });
        if let Some(s) = r.started_unix_s {
            let off = s - info.run_started_unix_s;
            row.started_s = Some(row.started_s.map_or(off, |x: f64| x.min(off)));
            let end = ends.entry(key).or_insert(off);
            *end = end.max(off + r.elapsed_s);
        }
    }
    // Positive floats order as their bits do: runs in the order they started.
    by.into_iter()
        .map(|(key, mut row)| {
            if let (Some(s), Some(e)) = (row.started_s, ends.get(&key)) {
                row.elapsed_s = e - s;
            }
            row
        })
        .collect()
}

/// A sentence for the top of the report when a run started above the load threshold, or
/// `None`. Results without rounds fall back to the load their first cell recorded.
pub(crate) fn busy_note(results: &[CellResult], rows: &[Row]) -> Option<String> {
    let cores = results
        .first()
        .and_then(|r| r.machine["cores"].as_f64())
        .unwrap_or(1.0);
    let limit = busy_threshold(cores);
    let mut starts: Vec<f64> = rows
        .iter()
        .filter(|r| r.index == 1)
        .filter_map(|r| r.load_1m)
        .collect();
    if rows.is_empty() {
        starts.extend(
            results
                .iter()
                .filter_map(|r| Some((r.started_unix_s?, r)))
                .min_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, r)| r)
                .and_then(|r| r.machine["load_average_1m_at_start"].as_str())
                .and_then(|s| s.parse::<f64>().ok()),
        );
    }
    let busy: Vec<String> = starts
        .iter()
        .filter(|l| **l > limit)
        .map(|l| format!("{l:.1}"))
        .collect();
    if busy.is_empty() {
        return None;
    }
    let above = rows
        .iter()
        .filter(|r| r.load_1m.is_some_and(|l| l > limit))
        .count();
    let rounds = if rows.is_empty() {
        String::new()
    } else {
        format!("; {above} of {} rounds started above it", rows.len())
    };
    let which = if starts.len() == 1 {
        format!("This run started at a load average of {}", busy[0])
    } else {
        format!(
            "{} of the {} runs merged here started above it (load averages {})",
            busy.len(),
            starts.len(),
            busy.join(", ")
        )
    };
    Some(format!(
        "**Started on a busy machine.** {which}, above this tool's threshold of {limit:.0} (2 \
         per core on {cores:.0} cores){rounds}. Other work on the machine distorts the emulated \
         devices' timing and so the cells' regimes; the rounds at the end list the load at the \
         start of each."
    ))
}

/// The Markdown list of rounds: which cells ran together, and the load when they started.
pub(crate) fn table(rows: &[Row], cores: f64) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let limit = busy_threshold(cores);
    let mut out = format!(
        "The cells of a round started together and the next round started when all of them had \
         ended, so the cells of one round had the same neighbours; the arms of every ratio ran \
         in one round, or each alone in a round of its own. Load: the 1-minute load average \
         (`/proc/loadavg`) just before the round started; above {limit:.0} (2 per core) is \
         marked **busy**.\n\n"
    );
    let mut t = Table::new(&[
        "run",
        "round",
        "seed",
        "started (s)",
        "took (s)",
        "load",
        "cells that ran together",
    ]);
    let mut runs: Vec<u64> = rows
        .iter()
        .map(|r| r.run_started_unix_s.to_bits())
        .collect();
    runs.dedup();
    for r in rows {
        let run = runs
            .iter()
            .position(|x| *x == r.run_started_unix_s.to_bits())
            .map_or(0, |i| i + 1);
        let load = r.load_1m.map_or("–".to_string(), |l| {
            if l > limit {
                format!("**{l:.2} busy**")
            } else {
                format!("{l:.2}")
            }
        });
        let cells: Vec<String> = r.cells.iter().map(|c| format!("`{c}`")).collect();
        t.row(&[
            run.to_string(),
            format!("{}/{}", r.index, r.of),
            r.seed.to_string(),
            r.started_s.map_or("–".to_string(), |s| format!("{s:.0}")),
            format!("{:.0}", r.elapsed_s),
            load,
            cells.join(" + "),
        ]);
    }
    out.push_str(&t.markdown());
    out
}

#[cfg(test)]
mod tests {
    use super::super::cell::{Cell, CellResult, RoundInfo, Scale};
    use super::*;
    use serde_json::{json, Value};

    fn result(id: &str, start: f64, elapsed_s: f64, round: Option<RoundInfo>) -> CellResult {
        CellResult {
            cell: Cell::new("x", id, &[], 1, Value::Null),
            scale: Scale::Quick,
            seed: 1,
            machine: json!({ "cores": 2, "load_average_1m_at_start": "6.80" }),
            elapsed_s,
            ok: true,
            error: None,
            result: Value::Null,
            jobs: 1,
            started_unix_s: Some(start),
            round,
            typed: Default::default(),
        }
    }

    fn info(index: usize, cells: &[&str], load: f64) -> Option<RoundInfo> {
        Some(RoundInfo {
            run_started_unix_s: 1000.0,
            index,
            of: 2,
            cells: cells.iter().map(ToString::to_string).collect(),
            load_1m: Some(load),
        })
    }

    #[test]
    fn rounds_list_their_cells_and_the_load_they_started_at() {
        let r1 = info(1, &["x.a", "x.b"], 6.8);
        let r2 = info(2, &["x.c"], 1.2);
        let results = [
            result("a", 1000.5, 10.0, r1.clone()),
            result("b", 1000.6, 12.0, r1),
            result("c", 1013.0, 3.0, r2),
        ];
        let rows = rows(&results);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].cells, ["x.a", "x.b"]);
        assert_eq!(rows[0].started_s, Some(0.5));
        assert!((rows[0].elapsed_s - 12.1).abs() < 1e-9);
        let md = table(&rows, 2.0);
        assert!(
            md.contains("| 1 | 1/2 | 1 | 0 | 12 | **6.80 busy** | `x.a` + `x.b` |"),
            "{md}"
        );
        assert!(
            md.contains("| 1 | 2/2 | 1 | 13 | 3 | 1.20 | `x.c` |"),
            "{md}"
        );
        let note = busy_note(&results, &rows).unwrap_or_default();
        assert!(
            note.contains("load average of 6.8, above this tool's threshold of 4"),
            "{note}"
        );
        assert!(note.contains("1 of 2 rounds"), "{note}");
    }

    #[test]
    fn a_quiet_start_says_nothing_and_old_results_fall_back_to_the_machine_record() {
        let quiet = [result("a", 1.0, 1.0, info(1, &["x.a"], 0.5))];
        assert_eq!(busy_note(&quiet, &rows(&quiet)), None);
        let old = [result("a", 1.0, 1.0, None)];
        assert!(rows(&old).is_empty());
        assert!(busy_note(&old, &[]).is_some_and(|n| n.contains("6.8")));
    }
}
