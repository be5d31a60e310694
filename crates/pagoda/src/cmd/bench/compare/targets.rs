//! pagoda's performance targets against its peers, judged on a `bench compare` run, and for
//! each missed one what bounded pagoda in that cell (its CPU share and where its transactions
//! spent their time), so a miss comes with the profile that explains it.

use super::Cell;
use crate::report::Table;
use crate::spread::Spread;
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write as _;

/// What pagoda did in one cell besides its ops/s: measured for every engine (CPU), and for
/// pagoda from its own phase profile.
#[derive(Debug, Clone, Default, Serialize)]
pub(super) struct CellProfile {
    /// Process CPU over the cell (user + system of all threads) / (wall × cores).
    pub(super) cpu: f64,
    /// pagoda only: each top-level phase's share of the summed transaction time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) phases: Option<Vec<(String, f64)>>,
    /// pagoda only: the commit sub-phase with the most time (e.g. `log.sync`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) commit_top: Option<String>,
    /// pagoda only: commits per log sync over the cell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) commits_per_sync: Option<f64>,
}

/// pagoda's profile between two `stats_json()` snapshots (the phase totals are cumulative).
pub(super) fn pagoda_profile(before: &Value, after: &Value, cpu: f64) -> CellProfile {
    let totals = |v: &Value| -> Vec<(String, f64)> {
        v["detail"]["profile"]["phases"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p["phase"].as_str()?.to_string(), p["total_ms"].as_f64()?)))
            .collect()
    };
    let (b, a) = (totals(before), totals(after));
    let delta: Vec<(String, f64)> = a
        .into_iter()
        .map(|(name, t)| {
            let was = b.iter().find(|(n, _)| *n == name).map_or(0.0, |x| x.1);
            (name, (t - was).max(0.0))
        })
        .collect();
    let top: Vec<&(String, f64)> = delta.iter().filter(|(n, _)| !n.contains('.')).collect();
    let sum: f64 = top.iter().map(|x| x.1).sum();
    let phases = (sum > 0.0).then(|| {
        top.iter()
            .filter(|x| x.1 / sum >= 0.005)
            .map(|(n, t)| (n.clone(), t / sum))
            .collect()
    });
    let commit_top = delta
        .iter()
        .filter(|(n, t)| (n.starts_with("commit.") || n.starts_with("log.")) && *t > 0.0)
        .max_by(|x, y| x.1.total_cmp(&y.1))
        .map(|x| x.0.clone());
    let d = |k: &str| after[k].as_f64().unwrap_or(0.0) - before[k].as_f64().unwrap_or(0.0);
    let (commits, syncs) = (d("commits"), d("log_syncs"));
    CellProfile {
        cpu,
        phases,
        commit_top,
        commits_per_sync: (syncs > 0.0).then(|| commits / syncs),
    }
}

/// Whom a target compares pagoda with.
#[derive(Debug, Clone, Copy)]
pub(super) enum Against {
    /// The fastest peer of the same repeat.
    BestPeer,
    /// One named peer of the same repeat.
    Peer(&'static str),
    /// This disk's one-thread write + fdatasync rate, measured in the run.
    Ceiling,
}

/// One target: a phase, whom it compares with, and the least ratio that meets it.
struct Target {
    phase: String,
    against: Against,
    at_least: f64,
    rule: String,
}

/// The targets that apply to the phases this run measured.
fn targets(labels: &[String]) -> Vec<Target> {
    let mut out = Vec::new();
    let t = |phase: &str, against, at_least, rule: &str| Target {
        phase: phase.to_string(),
        against,
        at_least,
        rule: rule.to_string(),
    };
    for l in labels {
        match l.as_str() {
            "update 1t" => {
                out.push(t(l, Against::BestPeer, 1.2, ">= 1.2x the best peer"));
                out.push(t(
                    l,
                    Against::Ceiling,
                    0.95,
                    ">= 95 % of the disk's 1-thread write+fdatasync rate",
                ));
            }
            "load durable" => out.push(t(l, Against::BestPeer, 1.0, ">= the fastest peer")),
            "no-sync update 1t" => out.push(t(l, Against::BestPeer, 1.0, ">= the best peer")),
            "tpcc 4t tpmC" => out.push(t(l, Against::BestPeer, 1.5, ">= 1.5x the best peer")),
            "read 2t" => out.push(t(l, Against::Peer("lmdb"), 1.0, ">= LMDB")),
            s if s.starts_with("update ") && s != "update 1t" => {
                out.push(t(l, Against::BestPeer, 1.5, ">= 1.5x the best peer"));
            }
            _ => {}
        }
    }
    out
}

/// pagoda over `against` per repeat (`ceiling` is used by [`Against::Ceiling`] only).
pub(super) fn ratios(cells: &[Cell], phase: &str, against: Against, ceiling: f64) -> Vec<f64> {
    let repeats = cells.iter().map(|c| c.repeat + 1).max().unwrap_or(0);
    (0..repeats)
        .filter_map(|r| {
            let of = |c: &&Cell| c.phase == phase && c.repeat == r;
            let ours = cells.iter().filter(of).find(|c| c.engine == "pagoda")?;
            let other = match against {
                Against::Ceiling => ceiling,
                Against::Peer(name) => {
                    cells
                        .iter()
                        .filter(of)
                        .find(|c| c.engine == name)?
                        .ops_per_s
                }
                Against::BestPeer => cells
                    .iter()
                    .filter(of)
                    .filter(|c| c.engine != "pagoda")
                    .map(|c| c.ops_per_s)
                    .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))?,
            };
            (other > 0.0).then(|| ours.ops_per_s / other)
        })
        .collect()
}

/// What bounded pagoda in a phase, from its profile in the repeat closest to the median.
fn explain(cells: &[Cell], phase: &str) -> String {
    let mut ours: Vec<&Cell> = cells
        .iter()
        .filter(|c| c.phase == phase && c.engine == "pagoda")
        .collect();
    ours.sort_by(|a, b| a.ops_per_s.total_cmp(&b.ops_per_s));
    let Some(p) = ours.get(ours.len() / 2).and_then(|c| c.profile.as_ref()) else {
        return "no profile recorded".to_string();
    };
    let mut s = format!("CPU {:.0} % of all cores", p.cpu * 100.0);
    if let Some(ph) = &p.phases {
        let mut ph = ph.clone();
        ph.sort_by(|a, b| b.1.total_cmp(&a.1));
        let parts: Vec<String> = ph
            .iter()
            .take(3)
            .map(|(n, f)| format!("{n} {:.0} %", f * 100.0))
            .collect();
        let _ = write!(s, "; transaction time: {}", parts.join(", "));
    }
    if let Some(top) = &p.commit_top {
        let _ = write!(s, "; most of commit in `{top}`");
    }
    if let Some(c) = p.commits_per_sync {
        let _ = write!(s, "; {c:.1} commits per log sync");
    }
    s
}

/// The targets as a Markdown table: rule, measured median (min–max), met or missed, and for a
/// miss the profile that explains it. A target is met only when every repeat meets it.
pub(super) fn table(cells: &[Cell], labels: &[String], ceiling: [f64; 2]) -> String {
    // The slower of the two ceiling measurements: the disk was at least that fast.
    let ceiling = ceiling[0].min(ceiling[1]);
    let mut table = Table::new(&[
        "target",
        "rule",
        "measured: pagoda / reference, median (min–max)",
        "",
        "what bounded pagoda (median repeat)",
    ]);
    for t in targets(labels) {
        let r = ratios(cells, &t.phase, t.against, ceiling);
        let Some(s) = Spread::of(r) else {
            continue;
        };
        let met = s.min >= t.at_least;
        let against = match t.against {
            Against::BestPeer => "best peer".to_string(),
            Against::Peer(n) => n.to_string(),
            Against::Ceiling => "disk ceiling".to_string(),
        };
        table.row(&[
            format!("{} vs {against}", t.phase),
            t.rule.clone(),
            s.with_range(2, "x"),
            if met { "met" } else { "**missed**" }.to_string(),
            if met {
                String::new()
            } else {
                explain(cells, &t.phase)
            },
        ]);
    }
    table.markdown()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn cell(repeat: usize, engine: &str, phase: &str, ops_per_s: f64) -> Cell {
        Cell {
            repeat,
            position: 0,
            engine: engine.to_string(),
            phase: phase.to_string(),
            threads: 1,
            ops: 1,
            ops_per_s,
            p50_us: None,
            p99_us: None,
            conflicts: 0,
            errors: 0,
            first_error: None,
            profile: Some(CellProfile {
                cpu: 0.25,
                phases: Some(vec![("commit".into(), 0.9), ("search".into(), 0.1)]),
                commit_top: Some("log.sync".into()),
                commits_per_sync: Some(1.0),
            }),
        }
    }

    #[test]
    fn a_target_is_met_only_when_every_repeat_meets_it_and_a_miss_says_why() {
        let labels = vec!["update 4t".to_string(), "read 2t".to_string()];
        let cells = vec![
            cell(0, "pagoda", "update 4t", 160.0),
            cell(0, "rocksdb", "update 4t", 100.0),
            cell(1, "pagoda", "update 4t", 140.0),
            cell(1, "rocksdb", "update 4t", 100.0),
            cell(0, "pagoda", "read 2t", 120.0),
            cell(0, "lmdb", "read 2t", 100.0),
            cell(0, "redb", "read 2t", 500.0),
        ];
        let md = table(&cells, &labels, [1000.0, 900.0]);
        // 1.6x and 1.4x: the low end misses 1.5x.
        assert!(md.contains("| update 4t vs best peer | >= 1.5x the best peer | 1.50x (1.40–1.60) | **missed** | CPU 25 % of all cores; transaction time: commit 90 %, search 10 %; most of commit in `log.sync`; 1.0 commits per log sync |"), "{md}");
        // Reads compare with LMDB, not with the faster redb.
        assert!(
            md.contains("| read 2t vs lmdb | >= LMDB | 1.20x (1.20–1.20) | met |  |"),
            "{md}"
        );
    }

    #[test]
    fn the_ceiling_target_uses_the_slower_ceiling_measurement() {
        let cells = vec![
            cell(0, "pagoda", "update 1t", 950.0),
            cell(0, "sqlite", "update 1t", 500.0),
        ];
        let md = table(&cells, &["update 1t".to_string()], [1200.0, 1000.0]);
        assert!(md.contains("| update 1t vs disk ceiling | >= 95 % of the disk's 1-thread write+fdatasync rate | 0.95x (0.95–0.95) | met |"), "{md}");
        assert!(
            md.contains(
                "| update 1t vs best peer | >= 1.2x the best peer | 1.90x (1.90–1.90) | met |"
            ),
            "{md}"
        );
    }

    #[test]
    fn the_profile_of_a_cell_is_the_difference_of_two_snapshots() {
        let snap = |commit: f64, sync: f64, search: f64, commits: f64, syncs: f64| {
            json!({ "commits": commits, "log_syncs": syncs, "detail": { "profile": { "phases": [
                { "phase": "commit", "total_ms": commit },
                { "phase": "log.sync", "total_ms": sync },
                { "phase": "search", "total_ms": search } ] } } })
        };
        let p = pagoda_profile(
            &snap(100.0, 80.0, 100.0, 10.0, 5.0),
            &snap(400.0, 300.0, 200.0, 110.0, 25.0),
            0.5,
        );
        assert_eq!(p.commit_top.as_deref(), Some("log.sync"));
        assert_eq!(p.commits_per_sync, Some(5.0));
        let ph = p.phases.unwrap();
        assert!((ph.iter().find(|x| x.0 == "commit").unwrap().1 - 0.75).abs() < 1e-9);
    }
}
