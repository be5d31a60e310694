//! `--publish FILE`: the report's summary as a Markdown result for `docs/results/`, with what
//! a reader needs to trust it at the top (the command, the date, the commit, the machine, the
//! seeds). Written by the tool that measured it, so a published figure is never typed by hand.

use super::agreement;
use super::cell;
use super::record::{self, RunRecord};
use crate::error::CliResult;
use crate::provenance::generated_by;
use crate::report::Table;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// How to read the seeds' published summary.
const SEEDS_NOTE: &str =
    "Each ratio is computed per seed and given as median (min–max). A row is **within** when \
         the whole min–max lies in its band, a **miss** when it lies wholly outside, \
         **inconclusive** otherwise; a row whose cells were not bound where the seed's \
         experiment was gets no verdict. The full report (tables, regime per cell, plots, one \
         command line per cell) is the `index.md` the same run wrote.\n\n";

/// Writes `to` from the report already written in `dir` and its `summary` table.
pub(crate) fn write(dir: &Path, to: &Path, summary: &str, title: Option<&str>) -> CliResult<()> {
    let rec = record::read(dir)?;
    let mut md = header(std::slice::from_ref(&rec), title);
    if title.is_some() {
        md.push_str(
            "Each ratio is computed per seed and given as median (min–max). A row is **within** \
             when the whole min–max lies in its band, a **miss** when it lies wholly outside, \
             **inconclusive** otherwise. The full report (tables, plots, one command line per \
             cell) is the `index.md` the same run wrote.\n\n",
        );
    } else {
        md.push_str(SEEDS_NOTE);
    }
    push_summary(&mut md, summary);
    push_rounds(&mut md, &rec, "Rounds");
    push_plots(&mut md, dir, to, "this run")?;
    save(to, &md)
}

/// Writes `to` for independent runs (`dirs`, each reported, and their agreement `summary`):
/// the rows side by side with the combined verdict, then each run's own table and rounds.
pub(crate) fn write_runs(
    dirs: &[PathBuf],
    to: &Path,
    summary: &str,
    title: Option<&str>,
) -> CliResult<()> {
    let recs = agreement::records(dirs)?;
    let mut md = header(&recs, title);
    let _ = writeln!(
        md,
        "{} independent runs, each every cell once per seed with its own seeds and its own \
         cell order (the second starts the grid half way and runs each repeat in the other \
         direction; the rounds below list which cells ran together). In each run a ratio is \
         computed per seed and given as median (min–max); a row is **within** when the whole \
         min–max lies in its band, a **miss** when it lies wholly outside, **inconclusive** \
         otherwise, and no verdict when its cells were not bound where the seed's experiment \
         was. The verdict of record is **within only when every run is within**; runs that \
         agree keep their common verdict; runs that disagree make the row inconclusive. Each \
         run's reasons and ablations follow the table.\n",
        recs.len()
    );
    push_summary(&mut md, summary);
    for (k, rec) in recs.iter().enumerate() {
        let _ = writeln!(md, "\n## Run {} (seeds {:?})\n", k + 1, rec.seeds);
        push_summary(&mut md, &super::report::summary_table(rec));
        push_rounds(&mut md, rec, &format!("Rounds of run {}", k + 1));
    }
    if let Some(first) = dirs.first() {
        push_plots(&mut md, first, to, "run 1")?;
    }
    save(to, &md)
}

/// The title and what a reader needs to trust the figures: command, date, commits, scale,
/// seeds, machine and the load when each run started (a busy start said first).
fn header(recs: &[RunRecord], title: Option<&str>) -> String {
    let mut md = format!("# {}\n\n", title.unwrap_or("Seed reproduction"));
    md.push_str(&generated_by());
    let commits: BTreeSet<&str> = recs
        .iter()
        .flat_map(|r| r.measured_at.iter().map(String::as_str))
        .collect();
    let _ = writeln!(
        md,
        "The cells were measured at commit {}.\n",
        if commits.is_empty() {
            "unknown (cells older than this record)".to_string()
        } else {
            commits.into_iter().collect::<Vec<_>>().join(", ")
        }
    );
    let Some(r0) = recs.first() else { return md };
    let m = &r0.machine;
    let runs: Vec<String> = recs
        .iter()
        .map(|r| {
            format!(
                "seeds {:?}, {} cell runs (failed: {}), load average {} when its first cell \
                 started",
                r.seeds,
                r.cells,
                r.failed_cells.len(),
                r.machine["load_average_1m_at_start"]
                    .as_str()
                    .unwrap_or("?")
            )
        })
        .collect();
    let _ = writeln!(
        md,
        "Scale **{}**; {}. Machine: {} ({} cores, {} GiB, Linux {}).\n",
        r0.scale,
        if runs.len() == 1 {
            runs[0].clone()
        } else {
            runs.iter()
                .enumerate()
                .map(|(k, r)| format!("run {}: {r}", k + 1))
                .collect::<Vec<_>>()
                .join("; ")
        },
        m["cpu"].as_str().unwrap_or("?"),
        m["cores"],
        m["memory_gib"],
        m["kernel"].as_str().unwrap_or("?"),
    );
    for r in recs {
        // A run on a busy machine says so before any figure.
        if let Some(note) = &r.busy_start {
            let _ = writeln!(md, "{note}\n");
        }
        // A published page must not pass cells that shared the CPU off as the measured setting.
        if r.jobs.is_some_and(|j| j > 1) {
            let _ = writeln!(md, "{}\n", r.concurrency);
        }
    }
    md
}

/// The summary without the local path of `index.md`, which means nothing in the repository.
fn push_summary(md: &mut String, summary: &str) {
    for line in summary.lines().filter(|l| !l.starts_with("report: ")) {
        md.push_str(line);
        md.push('\n');
    }
}

fn push_rounds(md: &mut String, rec: &RunRecord, title: &str) {
    if !rec.rounds.is_empty() {
        let _ = write!(md, "\n## {title}\n\n");
        md.push_str(&super::rounds::table(&rec.rounds, rec.cores()));
    }
}

fn push_plots(md: &mut String, dir: &Path, to: &Path, whose: &str) -> CliResult<()> {
    let plots = copy_plots(dir, to)?;
    if !plots.is_empty() {
        let _ = write!(md, "\nPlots of {whose} (medians of the repeats):\n\n");
        for p in plots {
            let _ = writeln!(md, "![{p}]({p})");
        }
    }
    Ok(())
}

fn save(to: &Path, md: &str) -> CliResult<()> {
    if let Some(parent) = to.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| cell::io_err(parent, e))?;
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

/// Replaces the README's excerpt with the verdicts of the run in `dir` (or of its
/// independent runs, combined): the counts and one line per headline row (paper, what,
/// seed, ours, verdict), linking to `published`.
pub(crate) fn readme_excerpt(dir: &Path, readme: &Path, published: &Path) -> CliResult<()> {
    let runs = agreement::run_dirs(dir);
    let dirs = if runs.is_empty() {
        vec![dir.to_path_buf()]
    } else {
        runs
    };
    let recs = agreement::records(&dirs)?;
    let md = excerpt(&recs, &crate::readme::link(readme, published));
    crate::readme::replace_block(readme, BLOCK, &md)
}

/// The excerpt's Markdown: counts, then a table of every headline row.
fn excerpt(recs: &[RunRecord], link: &str) -> String {
    let rows = agreement::agree(recs);
    let counts = |beyond: bool| {
        let mine: Vec<_> = rows
            .iter()
            .filter(|r| r.beyond_the_seed == beyond)
            .collect();
        let count = |k: &str| mine.iter().filter(|r| r.verdict == k).count();
        format!(
            "**{} within, {} miss, {} inconclusive, {} out of regime** of {}",
            count("within"),
            count("miss"),
            count("inconclusive"),
            count("out-of-regime"),
            mine.len()
        )
    };
    let seeds: Vec<String> = recs.iter().map(|r| format!("{:?}", r.seeds)).collect();
    let runs = if recs.len() == 1 {
        format!("seeds {}", seeds[0])
    } else {
        format!(
            "{} independent runs, seeds {}; a row is within only when every run is",
            recs.len(),
            seeds.join(" and ")
        )
    };
    let mut md = format!(
        "Generated by `pagoda reproduce` (scale {}, {runs}; full table with bands and reasons \
         in [{link}]({link})): the seeds' own rows {}; rows beyond the seeds (no figure in the \
         seed: pagoda's test of an argument, or an addition) {}.\n\n",
        recs.first().map_or("?", |r| r.scale.as_str()),
        counts(false),
        counts(true),
    );
    let ours = if recs.len() == 1 {
        "ours: median (min–max)".to_string()
    } else {
        format!("ours: median (min–max), runs 1-{}", recs.len())
    };
    let mut t = Table::new(&["paper", "what", "paper's figure", &ours, "verdict"]);
    for r in &rows {
        let ours: Vec<String> = r
            .runs
            .iter()
            .map(|h| h.as_ref().map_or("–".into(), |h| h.ours.clone()))
            .collect();
        t.row(&[
            r.experiment.clone(),
            r.what.clone(),
            r.seed.clone(),
            ours.join("; "),
            r.verdict.replace("out-of-regime", "out of regime"),
        ]);
    }
    md.push_str(&t.markdown());
    md
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn rec(seeds: Vec<u64>, rows: &[(&str, &str, &str, bool)]) -> RunRecord {
        let h = |(what, ours, verdict, beyond): &(&str, &str, &str, bool)| record::HeadlineRecord {
            seed: "2.3x".into(),
            band: "b".into(),
            ours: (*ours).into(),
            median: None,
            min: None,
            max: None,
            repeats: None,
            beyond_the_seed: *beyond,
            ..record::fixtures::headline(what, verdict)
        };
        record::fixtures::run("quick", seeds, rows.iter().map(h).collect())
    }

    #[test]
    fn the_excerpt_counts_the_verdicts_and_lists_every_row() {
        let one = rec(
            vec![1, 2, 3],
            &[
                ("FaCE vs original", "2.25x (2.2x–2.7x)", "within", false),
                ("FaCE vs LRU", "0.73x", "out-of-regime", false),
                ("GSC vs FaCE", "1.2x", "within", true),
            ],
        );
        let md = excerpt(std::slice::from_ref(&one), "docs/results/r.md");
        assert!(md.contains(
            "own rows **1 within, 0 miss, 0 inconclusive, 1 out of regime** of 2; rows beyond"
        ));
        assert!(md.contains("**1 within, 0 miss, 0 inconclusive, 0 out of regime** of 1."));
        assert!(md.contains("| face | FaCE vs LRU | 2.3x | 0.73x | out of regime |"));
        assert!(md.contains("[docs/results/r.md](docs/results/r.md)"));
    }

    /// With two runs the excerpt counts the combined verdicts and shows both runs' figures.
    #[test]
    fn the_excerpt_of_two_runs_combines_their_verdicts() {
        let a = rec(
            vec![1, 2, 3],
            &[("FaCE vs original", "2.2x", "within", false)],
        );
        let b = rec(
            vec![4, 5, 6],
            &[("FaCE vs original", "2.9x", "miss", false)],
        );
        let md = excerpt(&[a, b], "r.md");
        assert!(
            md.contains("2 independent runs, seeds [1, 2, 3] and [4, 5, 6]"),
            "{md}"
        );
        assert!(
            md.contains("own rows **0 within, 0 miss, 1 inconclusive"),
            "{md}"
        );
        assert!(md.contains("| 2.2x; 2.9x | inconclusive |"), "{md}");
    }
}
