//! The report section of an experiment file: a table of every cell (the median of its
//! repeats for each metric the comparisons use, and what bound it), one headline row per
//! comparison (the ratio per seed as median and min–max, held against the file's band),
//! and a bar chart of the ratios.

use super::super::cell::CellResult;
use super::super::outcome::Outcome;
use super::super::repeats::Spread;
use super::super::report::{Band, Ctx, Headline, Section};
use super::format::{Comparison, ExperimentFile};
use super::metric::Metric;
use crate::error::{CliError, CliResult};
use crate::plot::{bar_chart, short_number, BarChart};
use crate::report::Table;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Each cell's typed outcomes by seed (a failed or unreadable repeat left out, with why).
struct Outcomes {
    by_cell: BTreeMap<String, BTreeMap<u64, Outcome>>,
    unreadable: Vec<String>,
}

fn outcomes(f: &ExperimentFile, results: &[&CellResult]) -> Outcomes {
    let mut by_cell: BTreeMap<String, BTreeMap<u64, Outcome>> = BTreeMap::new();
    let mut unreadable = Vec::new();
    for r in results.iter().filter(|r| r.usable()) {
        let name = r
            .cell
            .id
            .strip_prefix(&format!("{}.", f.name))
            .unwrap_or(&r.cell.id);
        match Outcome::of(&r.result) {
            Ok(o) => {
                by_cell
                    .entry(name.to_string())
                    .or_default()
                    .insert(r.seed, o);
            }
            Err(e) => unreadable.push(format!("`{}` seed {}: {e}", r.cell.id, r.seed)),
        }
    }
    Outcomes {
        by_cell,
        unreadable,
    }
}

impl Outcomes {
    fn per_seed(&self, cell: &str, m: Metric) -> BTreeMap<u64, f64> {
        self.by_cell
            .get(cell)
            .into_iter()
            .flatten()
            .filter_map(|(s, o)| Some((*s, m.of(o)?)))
            .collect()
    }

    fn median(&self, cell: &str, m: Metric) -> Option<f64> {
        Spread::of(self.per_seed(cell, m).into_values().collect()).map(|s| s.median)
    }

    /// `a / b` per seed both ran.
    fn ratio(&self, a: &str, b: &str, m: Metric) -> Option<Spread> {
        let (x, y) = (self.per_seed(a, m), self.per_seed(b, m));
        Spread::of(
            x.iter()
                .filter_map(|(s, v)| {
                    let d = *y.get(s)?;
                    (d > 0.0).then(|| v / d)
                })
                .collect(),
        )
    }
}

/// The section of `f` from its cells' `results`.
pub(crate) fn section(
    f: &ExperimentFile,
    ctx: &Ctx,
    results: &[&CellResult],
) -> CliResult<Section> {
    let o = outcomes(f, results);
    let mut body = String::new();
    if !f.description.is_empty() {
        let _ = writeln!(body, "{}\n", f.description.trim());
    }
    body.push_str(&cells_table(f, results, &o));
    if !o.unreadable.is_empty() {
        body.push_str("\nResults that are no bench result (left out above):\n\n");
        for u in &o.unreadable {
            let _ = writeln!(body, "- {u}");
        }
    }
    let mut headlines = Vec::new();
    let (mut cats, mut vals) = (Vec::new(), Vec::new());
    for k in &f.comparisons {
        let s = o.ratio(&k.cells[0], &k.cells[1], k.metric);
        if let Some(s) = &s {
            cats.push(k.what.clone());
            vals.push(s.median);
        }
        headlines.push(headline(k, s)?);
    }
    if !cats.is_empty() {
        let (path, link) = ctx.plot(&format!("{}.svg", f.name));
        bar_chart(
            &path,
            &BarChart {
                title: &f.title,
                y_label: "ratio (median of the repeats)",
                categories: &cats,
                series: &[("ratio".to_string(), vals)],
            },
        )?;
        let _ = writeln!(body, "\n![{}]({link})", f.title);
    }
    Ok(Section {
        title: f.title.clone(),
        body,
        headlines,
    })
}

/// Every cell: its params as it ran them, the median of each metric the comparisons use
/// (and throughput), and what bound it.
fn cells_table(f: &ExperimentFile, results: &[&CellResult], o: &Outcomes) -> String {
    let mut metrics: Vec<Metric> = vec![Metric::Throughput];
    for k in &f.comparisons {
        if !metrics.contains(&k.metric) {
            metrics.push(k.metric);
        }
    }
    let mut head: Vec<String> = vec!["cell".into(), "params".into()];
    head.extend(metrics.iter().map(|m| format!("{m} (median)")));
    head.push("bound by".into());
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut t = Table::new(&head);
    for c in &f.cells {
        // The params as the cells ran them (their `{NAME}`s filled for the scale).
        let id = format!("{}.{}", f.name, c.name);
        let params = results
            .iter()
            .find(|r| r.cell.id == id)
            .and_then(|r| r.cell.params.as_object())
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("?")))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        let mut row = vec![format!("`{}`", c.name), params];
        row.extend(
            metrics
                .iter()
                .map(|m| o.median(&c.name, *m).map_or("–".into(), short_number)),
        );
        let mut bound: Vec<String> = o
            .by_cell
            .get(&c.name)
            .into_iter()
            .flatten()
            .filter_map(|(_, x)| x.regime.as_ref()?.bottleneck.clone())
            .collect();
        bound.sort();
        bound.dedup();
        row.push(if bound.is_empty() {
            "–".into()
        } else {
            bound.join("/")
        });
        t.row(&row);
    }
    t.markdown()
}

/// The row of comparison `k` with its per-seed ratios `s`.
fn headline(k: &Comparison, s: Option<Spread>) -> CliResult<Headline> {
    let (lo, hi, rule) = k
        .band
        .bounds()
        .map_err(|e| CliError::Usage(format!("comparison '{}': {e}", k.what)))?;
    let what = format!(
        "{} ({} of `{}` / `{}`)",
        k.what, k.metric, k.cells[0], k.cells[1]
    );
    let expect = if k.expect.is_empty() {
        "–"
    } else {
        &k.expect
    };
    Ok(Headline::ratio(
        &what,
        expect,
        s,
        &Band::range(lo, hi, &rule),
        "below the band",
        "above the band",
    ))
}
