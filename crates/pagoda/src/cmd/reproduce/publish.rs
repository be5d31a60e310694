//! `--publish FILE`: the report's summary as a Markdown result for `docs/results/`, with what
//! a reader needs to trust it at the top (the command, the date, the commit, the machine, the
//! seeds). Written by the tool that measured it, so a published figure is never typed by hand.

use super::cell;
use crate::error::{CliError, CliResult};
use crate::provenance::generated_by;
use crate::report::Table;
use serde_json::Value;
use std::fmt::Write as _;
use std::path::Path;

/// Writes `to` from the report already written in `dir` and its `summary` table.
pub(crate) fn write(dir: &Path, to: &Path, summary: &str) -> CliResult<()> {
    let path = dir.join("report.json");
    let report: Value = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| {
            CliError::Other(format!(
                "{} is missing or unreadable; run `pagoda reproduce report {}` first",
                path.display(),
                dir.display()
            ))
        })?;
    let m = &report["machine"];
    let mut md = String::from("# Seed reproduction\n\n");
    md.push_str(&generated_by());
    let _ = writeln!(
        md,
        "The cells were measured at commit {}.\n",
        report["measured_at"]
            .as_array()
            .filter(|a| !a.is_empty())
            .map_or("unknown (cells older than this record)".to_string(), |a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
    );
    let _ = writeln!(
        md,
        "Scale **{}**, seeds {}, {} cell runs (failed: {}). Machine: {} ({} cores, {} GiB, Linux {}); load average {} when the first cell started.\n",
        report["scale"].as_str().unwrap_or("?"),
        report["seeds"],
        report["cells"],
        report["failed_cells"].as_array().map_or(0, Vec::len),
        m["cpu"].as_str().unwrap_or("?"),
        m["cores"],
        m["memory_gib"],
        m["kernel"].as_str().unwrap_or("?"),
        m["load_average_1m_at_start"].as_str().unwrap_or("?"),
    );
    // A run on a busy machine says so before any figure.
    if let Some(note) = report["busy_start"].as_str() {
        let _ = writeln!(md, "{note}\n");
    }
    // A published page must not pass cells that shared the CPU off as the measured setting.
    if report["jobs"].as_u64().is_some_and(|j| j > 1) {
        let _ = writeln!(md, "{}\n", report["concurrency"].as_str().unwrap_or(""));
    }
    md.push_str(
        "Each ratio is computed per seed and given as median (min–max). A row is **within** when \
         the whole min–max lies in its band, a **miss** when it lies wholly outside, \
         **inconclusive** otherwise; a row whose cells were not bound where the seed's \
         experiment was gets no verdict. The full report (tables, regime per cell, plots, one \
         command line per cell) is the `index.md` the same run wrote.\n\n",
    );
    // The summary ends with the local path of index.md, which means nothing in the repository.
    for line in summary.lines().filter(|l| !l.starts_with("report: ")) {
        md.push_str(line);
        md.push('\n');
    }
    if let Some(parent) = to.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| cell::io_err(parent, e))?;
    }
    let rounds: Vec<super::rounds::Row> =
        serde_json::from_value(report["rounds"].clone()).unwrap_or_default();
    if !rounds.is_empty() {
        md.push_str("\n## Rounds\n\n");
        md.push_str(&super::rounds::table(
            &rounds,
            m["cores"].as_f64().unwrap_or(1.0),
        ));
    }
    let plots = copy_plots(dir, to)?;
    if !plots.is_empty() {
        md.push_str("\nPlots of this run (medians of the repeats):\n\n");
        for p in plots {
            let _ = writeln!(md, "![{p}]({p})");
        }
    }
    std::fs::write(to, md).map_err(|e| cell::io_err(to, e))
}

/// Copies the run's SVG plots to `STEM-plots/` beside `to` (replacing an older set), and
/// returns their paths relative to `to`'s directory.
fn copy_plots(dir: &Path, to: &Path) -> CliResult<Vec<String>> {
    let Ok(entries) = std::fs::read_dir(dir.join("plots")) else {
        return Ok(Vec::new());
    };
    let stem = to.file_stem().and_then(|s| s.to_str()).unwrap_or("results");
    let name = format!("{stem}-plots");
    let dest = to.with_file_name(&name);
    if dest.exists() {
        std::fs::remove_dir_all(&dest).map_err(|e| cell::io_err(&dest, e))?;
    }
    std::fs::create_dir_all(&dest).map_err(|e| cell::io_err(&dest, e))?;
    let mut out = Vec::new();
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().to_string();
        if file.ends_with(".svg") {
            let target = dest.join(&file);
            std::fs::copy(e.path(), &target).map_err(|err| cell::io_err(&target, err))?;
            out.push(format!("{name}/{file}"));
        }
    }
    out.sort();
    Ok(out)
}

/// The README block the reproduction's excerpt goes to.
pub(crate) const BLOCK: &str = "reproduce excerpt";

/// Replaces the README's excerpt with this run's verdicts: the counts and one line per
/// headline row (paper, what, seed, ours, verdict), linking to `published`.
pub(crate) fn readme_excerpt(dir: &Path, readme: &Path, published: &Path) -> CliResult<()> {
    let path = dir.join("report.json");
    let report: Value = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| CliError::Other(format!("{} is missing or unreadable", path.display())))?;
    let md = excerpt(&report, &crate::readme::link(readme, published));
    crate::readme::replace_block(readme, BLOCK, &md)
}

/// The excerpt's Markdown: counts, then a table of every headline row.
fn excerpt(report: &Value, link: &str) -> String {
    let rows: Vec<&Value> = report["experiments"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|e| e["headlines"].as_array().into_iter().flatten())
        .collect();
    let counts = |beyond: bool| {
        let mine: Vec<&&Value> = rows
            .iter()
            .filter(|h| h["beyond_the_seed"].as_bool().unwrap_or(false) == beyond)
            .collect();
        let count = |k: &str| mine.iter().filter(|h| h["verdict"] == k).count();
        format!(
            "**{} within, {} miss, {} inconclusive, {} out of regime** of {}",
            count("within"),
            count("miss"),
            count("inconclusive"),
            count("out-of-regime"),
            mine.len()
        )
    };
    let mut md = format!(
        "Generated by `pagoda reproduce` (scale {}, seeds {}; full table with bands and reasons \
         in [{link}]({link})): the seeds' own rows {}; rows beyond the seeds (no figure in the \
         seed: pagoda's test of an argument, or an addition) {}.\n\n",
        report["scale"].as_str().unwrap_or("?"),
        report["seeds"],
        counts(false),
        counts(true),
    );
    let mut t = Table::new(&[
        "paper",
        "what",
        "paper's figure",
        "ours: median (min–max)",
        "verdict",
    ]);
    for e in report["experiments"].as_array().into_iter().flatten() {
        for h in e["headlines"].as_array().into_iter().flatten() {
            let s = |k: &str| h[k].as_str().unwrap_or("–").replace('|', "/");
            t.row(&[
                e["experiment"].as_str().unwrap_or("?").to_string(),
                s("what"),
                s("seed"),
                s("ours"),
                s("verdict").replace("out-of-regime", "out of regime"),
            ]);
        }
    }
    md.push_str(&t.markdown());
    md
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_excerpt_counts_the_verdicts_and_lists_every_row() {
        let report = serde_json::json!({
            "scale": "quick", "seeds": [1, 2, 3],
            "experiments": [{ "experiment": "face", "headlines": [
                { "what": "FaCE vs original", "seed": "2.3x", "ours": "2.25x (2.2x–2.7x)",
                  "verdict": "within" },
                { "what": "FaCE vs LRU", "seed": "FaCE > LRU", "ours": "0.73x",
                  "verdict": "out-of-regime" },
                { "what": "GSC vs FaCE", "seed": "beyond", "ours": "1.2x",
                  "verdict": "within", "beyond_the_seed": true }]}]
        });
        let md = excerpt(&report, "docs/results/r.md");
        assert!(md.contains(
            "own rows **1 within, 0 miss, 0 inconclusive, 1 out of regime** of 2; rows beyond"
        ));
        assert!(md.contains("**1 within, 0 miss, 0 inconclusive, 0 out of regime** of 1."));
        assert!(md.contains("| face | FaCE vs LRU | FaCE > LRU | 0.73x | out of regime |"));
        assert!(md.contains("[docs/results/r.md](docs/results/r.md)"));
    }
}
