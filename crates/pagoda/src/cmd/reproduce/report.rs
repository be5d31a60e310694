//! The report of a reproduction: `index.md` with one section per seed (the seed's figures,
//! ours beside them, the configuration, the machine and a verdict), `report.json` with the
//! same headline numbers, and the plots each section draws. Every number comes from the
//! cells' JSON files, so `reproduce report` on merged shards gives the same report.

use super::cell::{self, CellResult};
use super::record::{self, ExperimentRecord, HeadlineRecord, RunRecord};
pub(crate) use super::repeats::median;
use super::repeats::{Group, Spread};
use super::ALL;
use crate::error::{CliError, CliResult};
use crate::report::Table;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What a section needs besides its cells.
#[derive(Debug)]
pub(crate) struct Ctx {
    /// Where plots go (`DIR/plots`).
    pub plots: PathBuf,
}

impl Ctx {
    /// The path of a plot and its link from `index.md`.
    pub(crate) fn plot(&self, name: &str) -> (PathBuf, String) {
        (self.plots.join(name), format!("plots/{name}"))
    }
}

/// Whether a result agrees with the seed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Verdict {
    /// Every repeat inside the seed's band.
    Within,
    /// Every repeat outside the band on the same side, with the reason as far as we know it.
    Miss(String),
    /// The repeats straddle an edge of the band.
    Inconclusive(String),
    /// Withheld: the cells were not bound where the seed's experiment was.
    OutOfRegime(String),
    /// Not measured (a cell failed or was not run), with why.
    Missing(String),
}

impl Verdict {
    pub(crate) fn text(&self) -> String {
        match self {
            Verdict::Within => "within".to_string(),
            Verdict::Miss(why) => format!("miss: {why}"),
            Verdict::Inconclusive(why) => format!("inconclusive: {why}"),
            Verdict::OutOfRegime(why) => format!("no verdict, out of regime: {why}"),
            Verdict::Missing(why) => format!("not measured: {why}"),
        }
    }

    pub(crate) fn key(&self) -> &'static str {
        match self {
            Verdict::Within => "within",
            Verdict::Miss(_) => "miss",
            Verdict::Inconclusive(_) => "inconclusive",
            Verdict::OutOfRegime(_) => "out-of-regime",
            Verdict::Missing(_) => "missing",
        }
    }
}

/// The range of values that reproduces a seed's figure, and where it comes from.
#[derive(Clone, Debug)]
pub(crate) struct Band {
    pub lo: f64,
    pub hi: f64,
    /// How the band was set, for the report (`the seed's 1.5–2.2x`, `seed 2.3x ± 25 %`).
    pub rule: String,
}

impl Band {
    /// The seed's stated range.
    pub(crate) fn range(lo: f64, hi: f64, rule: &str) -> Self {
        Self {
            lo,
            hi,
            rule: rule.to_string(),
        }
    }

    /// The verdict of a spread: within when all of it lies in the band, a miss when all of it
    /// lies on one side, inconclusive otherwise.
    pub(crate) fn judge(&self, s: Option<&Spread>, why_low: &str, why_high: &str) -> Verdict {
        match s {
            None => Verdict::Missing("a cell it needs failed or did not run".to_string()),
            Some(s) if s.min >= self.lo && s.max <= self.hi => Verdict::Within,
            Some(s) if s.max < self.lo => Verdict::Miss(why_low.to_string()),
            Some(s) if s.min > self.hi => Verdict::Miss(why_high.to_string()),
            Some(s) => Verdict::Inconclusive(format!(
                "the repeats ({} of them) straddle an edge of the band",
                s.n
            )),
        }
    }
}

/// A headline row as a seed's experiment file declares it: what it shows, the seed's
/// figure, the band it is held against (none for a shape rule, which its code words) and,
/// for a row the seed gives no figure for, where its expectation comes from.
pub(crate) struct SeedRow {
    pub what: String,
    pub seed: String,
    pub band: Option<Band>,
    pub beyond: Option<String>,
}

/// One headline comparison of a section (a row of the summary table).
#[derive(Clone, Debug)]
pub(crate) struct Headline {
    pub what: String,
    /// The seed's figure.
    pub seed: String,
    /// The band and how it was set.
    pub band: String,
    pub ours: String,
    /// The numbers behind `ours` (a ratio, a fraction), for `report.json`.
    pub value: Option<Spread>,
    pub verdict: Verdict,
    /// For a miss: the ablation cell that changes the factor the reason names, and what it
    /// showed.
    pub ablation: Option<String>,
    /// A row the seed reports no figure for (pagoda's test of an argument or an addition):
    /// counted apart from the seeds' own rows.
    pub beyond: bool,
    /// The reason already says whether an ablation found the cause.
    pub caused: bool,
}

impl Headline {
    /// A ratio held against the seed's band; `why_low` / `why_high` explain a miss.
    pub(crate) fn ratio(
        what: &str,
        seed: &str,
        ours: Option<Spread>,
        band: &Band,
        why_low: &str,
        why_high: &str,
    ) -> Self {
        Self::judged(what, seed, ours, band, why_low, why_high, Spread::times)
    }

    /// A value with its own formatting (`Spread::percent` for fractions).
    pub(crate) fn judged(
        what: &str,
        seed: &str,
        ours: Option<Spread>,
        band: &Band,
        why_low: &str,
        why_high: &str,
        fmt: fn(&Spread) -> String,
    ) -> Self {
        Self {
            what: what.to_string(),
            seed: seed.to_string(),
            band: band.rule.clone(),
            ours: ours.as_ref().map_or_else(|| "–".to_string(), fmt),
            verdict: band.judge(ours.as_ref(), why_low, why_high),
            value: ours,
            ablation: None,
            beyond: false,
            caused: false,
        }
    }

    /// A shape rule checked on each repeat (`holds[i]` for repeat i): within when it holds in
    /// all, a miss when in none, inconclusive otherwise. `ours` describes the measurement.
    pub(crate) fn rule(
        what: &str,
        seed: &str,
        rule: &str,
        holds: &[bool],
        ours: String,
        why_not: &str,
    ) -> Self {
        let n = holds.len();
        let k = holds.iter().filter(|h| **h).count();
        let verdict = match (n, k) {
            (0, _) => Verdict::Missing("a cell it needs failed or did not run".to_string()),
            (n, k) if k == n => Verdict::Within,
            (_, 0) => Verdict::Miss(why_not.to_string()),
            (n, k) => Verdict::Inconclusive(format!("the rule holds in {k} of {n} repeats")),
        };
        Self {
            what: what.to_string(),
            seed: seed.to_string(),
            band: rule.to_string(),
            ours: format!("{ours} (holds in {k} of {n})"),
            value: Spread::of(vec![k as f64 / n.max(1) as f64]),
            verdict,
            ablation: None,
            beyond: false,
            caused: false,
        }
    }

    /// A value held against the band of `row` (its what, the seed's figure, and the source
    /// of a row beyond the seed, all from the seed's file); `fmt` formats the value.
    pub(crate) fn of_row(
        row: &SeedRow,
        ours: Option<Spread>,
        why_low: &str,
        why_high: &str,
        fmt: fn(&Spread) -> String,
    ) -> Self {
        let Some(band) = &row.band else {
            panic!("row '{}' has no band in its seed's file", row.what)
        };
        Self::judged(&row.what, &row.seed, ours, band, why_low, why_high, fmt).beyond_if(row)
    }

    /// The shape `rule` of `row` checked on each repeat (see [`Headline::rule`]).
    pub(crate) fn rule_of_row(
        row: &SeedRow,
        rule: &str,
        holds: &[bool],
        ours: String,
        why_not: &str,
    ) -> Self {
        Self::rule(&row.what, &row.seed, rule, holds, ours, why_not).beyond_if(row)
    }

    fn beyond_if(self, row: &SeedRow) -> Self {
        match &row.beyond {
            Some(source) => self.beyond(source),
            None => self,
        }
    }

    /// Withholds the verdict when the cells ran in another regime than the seed's (a missing
    /// result stays missing).
    pub(crate) fn regime(mut self, reason: Option<String>) -> Self {
        if let (Some(r), false) = (reason, matches!(self.verdict, Verdict::Missing(_))) {
            self.verdict = Verdict::OutOfRegime(r);
        }
        self
    }

    /// Adds the figures behind the value to the row's `ours` column.
    pub(crate) fn detail(mut self, text: String) -> Self {
        self.ours = format!("{} ({text})", self.ours);
        self
    }

    /// Marks a row the seed reports no figure for; `source` says where its expectation comes
    /// from (the seed's argument, the FaCE paper, pagoda's own claim).
    pub(crate) fn beyond(mut self, source: &str) -> Self {
        self.beyond = true;
        self.seed = format!("beyond the seed ({source}): {}", self.seed);
        self
    }

    /// An ablation of a row not within its band: `factor` is the one thing its cells change,
    /// `within` whether the row, so changed, lands in its band (`None`: the ablation did not
    /// run). The reason of a miss or inconclusive row then names the factor as the measured
    /// cause, or says the cause was not found; `detail` (the ablation's figures) goes to the
    /// list of ablations. A within row is left alone.
    pub(crate) fn ablated(mut self, factor: &str, within: Option<bool>, detail: String) -> Self {
        let Some(within) = within else { return self };
        if self.verdict.key() == "within" {
            return self;
        }
        let cause = if within {
            format!("measured cause: {factor} (changed alone, the row lands in its band)")
        } else {
            format!("cause not found: changing {factor} alone leaves the row outside its band")
        };
        match &mut self.verdict {
            Verdict::Miss(why) | Verdict::Inconclusive(why) => {
                why.push_str(if why.is_empty() { "" } else { "; " });
                why.push_str(&cause);
            }
            _ => {}
        }
        self.caused = true;
        self.ablation(format!("{factor}: {detail}"))
    }

    /// Says so in the reason of a miss or inconclusive row that no ablation isolates.
    pub(crate) fn uncaused(mut self) -> Self {
        if self.caused {
            return self;
        }
        if let Verdict::Miss(why) | Verdict::Inconclusive(why) = &mut self.verdict {
            why.push_str(if why.is_empty() { "" } else { "; " });
            why.push_str("cause not found: no ablation of this run isolates it");
        }
        self.caused = true;
        self
    }

    /// The row as `report.json` keeps it.
    fn record(&self) -> HeadlineRecord {
        HeadlineRecord {
            what: self.what.clone(),
            seed: self.seed.clone(),
            band: self.band.clone(),
            ours: self.ours.clone(),
            median: self.value.map(|v| v.median),
            min: self.value.map(|v| v.min),
            max: self.value.map(|v| v.max),
            repeats: self.value.map(|v| v.n),
            verdict: self.verdict.key().to_string(),
            verdict_text: self.verdict.text(),
            ablation: self.ablation.clone(),
            beyond_the_seed: self.beyond,
        }
    }

    /// Attaches what the ablation of a miss showed.
    pub(crate) fn ablation(mut self, text: String) -> Self {
        self.ablation = Some(match self.ablation.take() {
            Some(before) => format!("{before}; {text}"),
            None => text,
        });
        self
    }
}

/// One seed's section of the report.
#[derive(Debug, Default)]
pub(crate) struct Section {
    pub title: String,
    /// Markdown below the title: tables, configuration, plots.
    pub body: String,
    pub headlines: Vec<Headline>,
}

/// The sections of a report from the cells' results, each with its experiment's name.
pub(crate) type Sections<'f> = &'f dyn Fn(&Ctx, &[CellResult]) -> CliResult<Vec<(String, Section)>>;

/// Writes `index.md` and `report.json` under `dir` from the seeds' cells there; returns the
/// summary table (for the terminal).
pub(crate) fn write(dir: &Path) -> CliResult<String> {
    write_with(dir, None, &|ctx, results| {
        let mut sections = Vec::new();
        for exp in ALL {
            let mine: Vec<&CellResult> = results
                .iter()
                .filter(|r| r.cell.experiment == exp.name())
                .collect();
            if !mine.is_empty() {
                sections.push((exp.name().to_string(), exp.section(ctx, &mine)?));
            }
        }
        Ok(sections)
    })
}

/// Writes `index.md` and `report.json` under `dir` with the sections `sections` makes of the
/// cells there; `title` names an experiment file's report (`None`: the seeds').
pub(crate) fn write_with(dir: &Path, title: Option<&str>, sections: Sections) -> CliResult<String> {
    let results = cell::load_results(dir)?;
    if results.is_empty() {
        return Err(CliError::Usage(format!(
            "no cell results in {}/cells; run `pagoda reproduce all` or `pagoda reproduce cell ID --out {}` first",
            dir.display(),
            dir.display()
        )));
    }
    let plots = dir.join("plots");
    std::fs::create_dir_all(&plots).map_err(|e| cell::io_err(&plots, e))?;
    let scale = results[0].scale;
    let ctx = Ctx { plots };
    let sections: Vec<(String, Section)> = sections(&ctx, &results)?
        .into_iter()
        .map(|(e, mut s)| {
            s.headlines = s.headlines.into_iter().map(Headline::uncaused).collect();
            (e, s)
        })
        .collect();
    let rounds = super::rounds::rows(&results);
    let report = RunRecord {
        title: title.map(str::to_string),
        scale: scale.name().to_string(),
        seeds: results
            .iter()
            .map(|r| r.seed)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        machine: results[0].machine.clone(),
        measured_at: results
            .iter()
            .filter_map(|r| r.machine["commit"].as_str().map(str::to_string))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        cells: results.len(),
        jobs: results.iter().map(|r| r.jobs).max(),
        most_cells_at_once: super::schedule::most_at_once(&results),
        concurrency: super::schedule::concurrency_note(&results),
        busy_start: super::rounds::busy_note(&results, &rounds),
        rounds,
        failed_cells: results
            .iter()
            .filter(|r| !r.usable())
            .map(|r| r.cell.id.clone())
            .collect(),
        experiments: sections
            .iter()
            .map(|(e, s)| ExperimentRecord {
                experiment: e.clone(),
                title: s.title.clone(),
                headlines: s.headlines.iter().map(Headline::record).collect(),
            })
            .collect(),
    };
    record::write_json(&dir.join("report.json"), &report)?;
    let index = dir.join("index.md");
    let md = render(&results, &sections, &report, title);
    std::fs::write(&index, md).map_err(|e| cell::io_err(&index, e))?;
    let mut out = summary_table(&report);
    let _ = writeln!(out, "\nreport: {}", index.display());
    Ok(out)
}

/// The headline rows of a run as a Markdown table with their reasons, the counts, and the
/// ablations.
pub(crate) fn summary_table(rec: &RunRecord) -> String {
    let mut t = Table::new(&[
        "experiment",
        "what",
        "seed",
        "band",
        "ours: median (min–max)",
        "verdict",
    ]);
    for (e, h) in rec.rows() {
        t.row(&[e, &h.what, &h.seed, &h.band, &h.ours, &h.verdict_text]);
    }
    let mut out = t.markdown();
    let kinds: &[(bool, &str)] = if rec.title.is_some() {
        &[(false, "Rows")]
    } else {
        &[
            (false, "The seeds' own rows"),
            (true, "Rows beyond the seeds"),
        ]
    };
    for &(beyond, whose) in kinds {
        let counts = |k: &str| {
            rec.rows()
                .filter(|(_, h)| h.beyond_the_seed == beyond && h.verdict == k)
                .count()
        };
        let _ = write!(
            out,
            "{}{whose}: {} within, {} miss, {} inconclusive, {} out of regime, {} not measured.",
            if beyond { " " } else { "\n" },
            counts("within"),
            counts("miss"),
            counts("inconclusive"),
            counts("out-of-regime"),
            counts("missing")
        );
    }
    out.push('\n');
    let ablations: Vec<&HeadlineRecord> = rec
        .rows()
        .map(|(_, h)| h)
        .filter(|h| h.ablation.is_some())
        .collect();
    if !ablations.is_empty() {
        out.push_str(
            "\nAblations (one factor changed for a row that missed, was inconclusive or out of regime):\n\n",
        );
        for h in ablations {
            let _ = writeln!(out, "- {}: {}", h.what, h.ablation.as_deref().unwrap_or(""));
        }
    }
    out
}

/// What the seeds' report says about how to read it.
const SEEDS_INTRO: &str =
    "Every figure below is read from the cells' JSON files in `cells/` (one per run and \
         seed, with its command line). Emulated devices run at their modelled speed on this \
         machine's CPU, so absolute figures depend on the machine; the ratios are the \
         comparison with the seeds. Tables show the median of the repeats; a headline ratio is \
         computed per seed (both configurations of a repeat ran in the same round) and shown \
         as median (min–max). A row is **within** when the whole min–max lies in its band, a \
         **miss** when it lies wholly outside, **inconclusive** otherwise; a row whose cells \
         were not bound where the seed's experiment was (the regime tables) gets no verdict. \
         Bands are the seed's stated range, or its figure ± 25 %, as written beside each row; a \
         row **beyond the seed** (no figure in the seed: pagoda's test of its argument, or an \
         addition) has a band that the result no effect would give fails, and is counted apart. \
         A miss or inconclusive row names the factor an ablation cell changed when that change \
         alone lands it in its band (the measured cause), else says the cause was not found. \
         Rebuild this page from the cells with `pagoda reproduce report DIR`.\n\n## Summary\n\n";

fn render(
    results: &[CellResult],
    sections: &[(String, Section)],
    rec: &RunRecord,
    title: Option<&str>,
) -> String {
    let r0 = &results[0];
    let m = &r0.machine;
    let mut md = format!(
        "# {}\n\n",
        title.unwrap_or("pagoda reproduction of the five seeds")
    );
    let seeds: std::collections::BTreeSet<u64> = results.iter().map(|r| r.seed).collect();
    let _ = writeln!(
        md,
        "Scale **{}**, seeds {} (one repeat of every cell per seed), {} cell runs ({} failed), {:.0} s of runs. Machine: {} ({} cores, {} GiB, Linux {}), load average {} when the first cell started; pagoda {}.\n",
        r0.scale.name(),
        seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
        results.len(),
        results.iter().filter(|r| !r.usable()).count(),
        results.iter().map(|r| r.elapsed_s).sum::<f64>(),
        m["cpu"].as_str().unwrap_or("?"),
        m["cores"],
        m["memory_gib"],
        m["kernel"].as_str().unwrap_or("?"),
        m["load_average_1m_at_start"].as_str().unwrap_or("?"),
        m["pagoda_version"].as_str().unwrap_or("?"),
    );
    let rounds = super::rounds::rows(results);
    if let Some(note) = super::rounds::busy_note(results, &rounds) {
        let _ = writeln!(md, "{note}\n");
    }
    let _ = writeln!(md, "{}\n", super::schedule::concurrency_note(results));
    if title.is_some() {
        md.push_str(
            "Every figure below is read from the cells' JSON files in `cells/` (one per run and \
             seed, with its command line). Tables show the median of the repeats; a ratio is \
             computed per seed and shown as median (min–max). A row is **within** when the \
             whole min–max lies in its band, a **miss** when it lies wholly outside, \
             **inconclusive** otherwise. Rebuild this page from the cells with `pagoda \
             experiment report FILE DIR`.\n\n## Summary\n\n",
        );
    } else {
        md.push_str(SEEDS_INTRO);
    }
    md.push_str(&summary_table(rec));
    for (e, s) in sections {
        let _ = write!(md, "\n## {}\n\n", s.title);
        md.push_str(&s.body);
        let failed: Vec<&CellResult> = results
            .iter()
            .filter(|r| r.cell.experiment == *e && !r.usable())
            .collect();
        if !failed.is_empty() {
            md.push_str("\nCells that failed (their rows are missing above):\n\n");
            for r in failed {
                let _ = writeln!(
                    md,
                    "- `{}`: {}",
                    r.cell.id,
                    r.error.as_deref().unwrap_or("no result written")
                );
            }
        }
        let unread: Vec<String> = results
            .iter()
            .filter(|r| r.cell.experiment == *e && r.usable())
            // Every bench result is read, whether or not the section used it.
            .filter(|r| r.cell.args.first().map(String::as_str) == Some("bench"))
            .filter_map(|r| {
                r.outcome();
                Some(format!(
                    "- `{}` seed {}: {}",
                    r.cell.id,
                    r.seed,
                    r.unread()?
                ))
            })
            .collect();
        if !unread.is_empty() {
            md.push_str(
                "\nResults that could not be read as bench results (their figures show as \"–\" \
                 above):\n\n",
            );
            md.push_str(&unread.join("\n"));
            md.push('\n');
        }
        md.push_str("\nCommands (each with `--seed` and `--json`):\n\n```\n");
        for r in results.iter().filter(|r| r.cell.experiment == *e) {
            let _ = writeln!(md, "{}", r.cell.runs(r.seed));
        }
        md.push_str("```\n");
    }
    if !rounds.is_empty() {
        md.push_str("\n## Rounds\n\n");
        md.push_str(&super::rounds::table(
            &rounds,
            m["cores"].as_f64().unwrap_or(1.0),
        ));
    }
    md
}

/// `a / b` when both are known and `b > 0`.
pub(crate) fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// A number for a table cell: thousands separators for large values, "–" when unknown.
pub(crate) fn fmt_num(v: Option<f64>) -> String {
    match v {
        None => "–".to_string(),
        Some(v) if v.abs() >= 1000.0 => crate::report::thousands(v.round() as u64),
        Some(v) if v.fract() == 0.0 || v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.2}"),
    }
}

/// A fraction (hit ratio) with three decimals, "–" when unknown.
pub(crate) fn fmt_frac(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_string(), |v| format!("{v:.3}"))
}

/// `+6.4 %` style change from `base` to `v`.
pub(crate) fn fmt_change(v: Option<f64>, base: Option<f64>) -> String {
    match ratio(v, base) {
        Some(r) => format!("{:+.1} %", (r - 1.0) * 100.0),
        None => "–".to_string(),
    }
}

/// The usable repeats of the cell whose params match every `(key, value)` pair (`None` when
/// no repeat is usable).
pub(crate) fn find<'a>(results: &[&'a CellResult], want: &[(&str, &str)]) -> Option<Group<'a>> {
    let runs: Vec<&CellResult> = results
        .iter()
        .copied()
        .filter(|r| {
            r.usable()
                && want
                    .iter()
                    .all(|(k, v)| r.param(k).map(value_str).as_deref() == Some(*v))
        })
        .collect();
    (!runs.is_empty()).then_some(Group { runs })
}

fn value_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
