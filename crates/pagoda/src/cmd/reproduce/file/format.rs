//! The experiment file: cells (one `pagoda` command line each, with values per scale) and
//! the comparisons that divide one cell's metric by another's and hold the ratio against a
//! band. Read with `deny_unknown_fields`, so a misspelt key is an error naming its line,
//! never a silently ignored setting.

use super::super::cell::{Cell, Scale};
use super::cells::{CellSpec, Value};
use super::metric::Metric;
use crate::error::{CliError, CliResult};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// An experiment file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExperimentFile {
    /// Names the results: cell ids are `NAME.CELL`. `[a-z0-9-]`.
    pub name: String,
    /// The report's section title.
    pub title: String,
    /// What the experiment asks, for the report (Markdown).
    #[serde(default)]
    pub description: String,
    /// Runs of every cell when `--repeats` is not given.
    #[serde(default = "three")]
    pub repeats: u64,
    /// Values per scale, put into the cells' arguments where they say `{NAME}`; a scale not
    /// listed here cannot be run (unless no scale is listed: then every scale runs as is).
    #[serde(default)]
    pub scales: BTreeMap<Scale, BTreeMap<String, Value>>,
    #[serde(rename = "cell")]
    pub cells: Vec<CellSpec>,
    #[serde(default, rename = "comparison")]
    pub comparisons: Vec<Comparison>,
    /// More sets of cells whose figures a report divides (beyond the comparisons): the
    /// scheduler runs each set beside the same neighbours.
    #[serde(default)]
    pub compared: Vec<Vec<String>>,
    /// Headline rows a seed's report computes in code, with what they are held against: the
    /// seed's figure, the band and where a row beyond the seed takes its expectation from.
    #[serde(default, rename = "row")]
    pub rows: Vec<RowSpec>,
}

/// A headline row the report computes: its text, the seed's figure and the band it is held
/// against (a shape rule has none: the code that checks it words it).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RowSpec {
    /// How the report's code names the row.
    pub id: String,
    pub what: String,
    /// The seed's figure or claim, as the report shows it.
    pub seed: String,
    /// Where the row's value must lie (none for a shape rule, which the report's code checks
    /// and words from the thresholds it uses).
    pub band: Option<BandSpec>,
    /// How the report words the band (derived from it when not given).
    pub rule: Option<String>,
    /// A row the seed reports no figure for: where its expectation comes from.
    pub beyond: Option<String>,
}

fn three() -> u64 {
    3
}

/// One ratio of the report: `metric` of `cells[0]` divided by that of `cells[1]`, per seed.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Comparison {
    pub what: String,
    pub metric: Metric,
    /// Numerator and denominator cell names.
    pub cells: [String; 2],
    /// The figure to compare with (a paper's, a claim), as the report shows it.
    #[serde(default)]
    pub expect: String,
    pub band: BandSpec,
}

/// Where the ratio must lie for the row to be within.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BandSpec {
    pub at_least: Option<f64>,
    pub at_most: Option<f64>,
    /// `around` ± `tolerance` (a fraction of it; 0.25 when not given).
    pub around: Option<f64>,
    pub tolerance: Option<f64>,
}

impl BandSpec {
    /// The band as `lo..=hi` and the rule the report prints, or why it is no band.
    pub(crate) fn bounds(&self) -> Result<(f64, f64, String), String> {
        match (self.at_least, self.at_most, self.around) {
            (None, None, Some(x)) => {
                let t = self.tolerance.unwrap_or(0.25);
                if !(0.0..1.0).contains(&t) {
                    return Err(format!("tolerance {t} is not a fraction in [0, 1)"));
                }
                // A negative figure (a change of -14.6 %) keeps its band in order.
                let (a, b) = (x * (1.0 - t), x * (1.0 + t));
                Ok((a.min(b), a.max(b), format!("{x}x ± {:.0} %", t * 100.0)))
            }
            (lo, hi, None) if (lo.is_some() || hi.is_some()) && self.tolerance.is_none() => {
                let (l, h) = (lo.unwrap_or(f64::NEG_INFINITY), hi.unwrap_or(f64::INFINITY));
                if l > h {
                    return Err(format!("at_least {l} is above at_most {h}"));
                }
                let rule = match (lo, hi) {
                    (Some(l), Some(h)) => format!("{l}x to {h}x"),
                    (Some(l), None) => format!(">= {l}x"),
                    (_, _) => format!("<= {h}x"),
                };
                Ok((l, h, rule))
            }
            _ => Err(
                "give `around` (with an optional `tolerance`), or `at_least` and/or `at_most`"
                    .to_string(),
            ),
        }
    }
}

/// Reads and checks the file at `path`: a parse error names the line and the key; a check
/// names the cell or comparison.
pub(crate) fn load(path: &Path) -> CliResult<ExperimentFile> {
    let text = std::fs::read_to_string(path).map_err(|e| super::super::cell::io_err(path, e))?;
    parse(&text).map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))
}

/// Parses and checks an experiment file's text.
pub(crate) fn parse(text: &str) -> Result<ExperimentFile, String> {
    let f: ExperimentFile = toml::from_str(text).map_err(|e| one_line(text, &e))?;
    f.check()?;
    Ok(f)
}

/// A TOML error as one line: where (line, and the key written there) and what.
fn one_line(text: &str, e: &toml::de::Error) -> String {
    let what = e.message().trim().replace('\n', " ");
    let Some(span) = e.span() else { return what };
    let start = span.start.min(text.len());
    let line = text[..start].matches('\n').count() + 1;
    let written = text.lines().nth(line - 1).unwrap_or("");
    match written.split_once('=') {
        Some((key, _)) => format!("line {line}, key `{}`: {what}", key.trim()),
        None => format!("line {line} (`{}`): {what}", written.trim()),
    }
}

fn file_safe(s: &str, extra: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || extra.contains(c))
}

impl ExperimentFile {
    fn check(&self) -> Result<(), String> {
        if !file_safe(&self.name, "-") {
            return Err(format!(
                "name '{}': use lowercase letters, digits and '-' (it names the result files)",
                self.name
            ));
        }
        if self.cells.is_empty() {
            return Err("no [[cell]]: an experiment runs at least one cell".to_string());
        }
        if !(1..=20).contains(&self.repeats) {
            return Err(format!("repeats = {}: give 1 to 20", self.repeats));
        }
        for (i, c) in self.cells.iter().enumerate() {
            if !file_safe(&c.name, ".-") {
                return Err(format!(
                    "[[cell]] {} name '{}': use lowercase letters, digits, '.' and '-'",
                    i + 1,
                    c.name
                ));
            }
            if self.cells[..i].iter().any(|x| x.name == c.name) {
                return Err(format!("[[cell]] '{}' is named twice", c.name));
            }
        }
        for (i, k) in self.comparisons.iter().enumerate() {
            let at = format!("[[comparison]] {} ('{}')", i + 1, k.what);
            for name in &k.cells {
                if !self.cells.iter().any(|c| c.name == *name) {
                    return Err(format!("{at}: no [[cell]] named '{name}'"));
                }
            }
            k.band.bounds().map_err(|e| format!("{at}, band: {e}"))?;
        }
        for (i, r) in self.rows.iter().enumerate() {
            let at = format!("[[row]] {} ('{}')", i + 1, r.id);
            if self.rows[..i].iter().any(|x| x.id == r.id) {
                return Err(format!("{at}: the id is used twice"));
            }
            if let Some(b) = &r.band {
                b.bounds().map_err(|e| format!("{at}, band: {e}"))?;
            }
        }
        for set in &self.compared {
            for name in set {
                if !self.cells.iter().any(|c| c.name == *name) {
                    return Err(format!("compared: no [[cell]] named '{name}'"));
                }
            }
        }
        let scales: Vec<Scale> = if self.scales.is_empty() {
            vec![Scale::Tiny, Scale::Quick, Scale::Standard, Scale::Full]
        } else {
            self.scales.keys().copied().collect()
        };
        for scale in scales {
            self.cells_at(scale, None)?;
        }
        Ok(())
    }

    /// The scales the file runs at (every scale when it lists none).
    pub(crate) fn runs_at(&self, scale: Scale) -> Result<(), String> {
        if self.scales.is_empty() || self.scales.contains_key(&scale) {
            Ok(())
        } else {
            Err(format!(
                "this experiment has no [scales.{}]; it runs at {}",
                scale.name(),
                self.scales
                    .keys()
                    .map(|s| s.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    }

    /// The grid's cells at `scale`, their variables filled in; `file` goes into each cell's
    /// command line (how a batch system reruns it).
    pub(crate) fn cells_at(&self, scale: Scale, file: Option<&Path>) -> Result<Vec<Cell>, String> {
        self.runs_at(scale)?;
        let vars = self.scales.get(&scale);
        let mut out = Vec::new();
        for c in &self.cells {
            if let Some(mut cell) = c.at(&self.name, scale, vars)? {
                cell.file = file.map(|p| p.display().to_string());
                out.push(cell);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"
title = "T"
[scales.quick]
n = "100"
[[cell]]
name = "a"
args = ["bench", "ycsb", "--records", "{n}"]
estimate_s = 3
[[cell]]
name = "b"
args = ["bench", "ycsb", "--records", "{n}0"]
estimate_s = { quick = 4 }
params = { size = "{n}" }
[[comparison]]
what = "a vs b"
metric = "throughput"
cells = ["a", "b"]
band = { around = 2.0, tolerance = 0.1 }
"#;

    fn err(text: &str) -> String {
        parse(text).expect_err("a bad file")
    }

    #[test]
    fn a_good_file_fills_its_cells_for_a_scale() {
        let f = parse(GOOD).unwrap();
        let cells = f.cells_at(Scale::Quick, None).unwrap();
        assert_eq!(cells[0].id, "t.a");
        assert_eq!(cells[0].args, ["bench", "ycsb", "--records", "100"]);
        assert_eq!(cells[1].args[3], "1000");
        assert_eq!(cells[1].estimate_s, 4);
        assert_eq!(cells[1].params["size"], "100");
        let (lo, hi, rule) = f.comparisons[0].band.bounds().unwrap();
        assert!((lo - 1.8).abs() < 1e-9 && (hi - 2.2).abs() < 1e-9, "{rule}");
        let e = f.cells_at(Scale::Standard, None).unwrap_err();
        assert!(
            e.contains("no [scales.standard]") && e.contains("quick"),
            "{e}"
        );
    }

    /// A cell that names a peer's feature is in the grid only where that feature is built;
    /// a feature pagoda does not have is refused by name.
    #[test]
    fn a_cell_that_needs_a_feature_runs_only_where_it_is_built() {
        let text = GOOD.replace(
            "estimate_s = 3\n",
            "estimate_s = 3\nneeds = \"wiredtiger\"\n",
        );
        let cells = parse(&text).unwrap().cells_at(Scale::Quick, None).unwrap();
        let built = cfg!(feature = "wiredtiger");
        assert_eq!(cells.iter().any(|c| c.id == "t.a"), built);
        assert!(cells.iter().any(|c| c.id == "t.b"));
        let e = err(&GOOD.replace("estimate_s = 3\n", "estimate_s = 3\nneeds = \"pg\"\n"));
        assert!(
            e.contains("needs = \"pg\"") && e.contains("wiredtiger"),
            "{e}"
        );
    }

    /// A parse error names the line and the key; a check names the cell or comparison.
    #[test]
    fn a_bad_file_is_refused_with_its_line_and_key() {
        let e = err(&GOOD.replace("estimate_s = 3", "estimte_s = 3"));
        assert!(e.contains("line 9") && e.contains("estimte_s"), "{e}");
        let e = err(&GOOD.replace("metric = \"throughput\"", "metric = \"tps\""));
        assert!(
            e.contains("line 17") && e.contains("unknown metric 'tps'"),
            "{e}"
        );
        let e = err(&GOOD.replace("estimate_s = 3", "estimate_s = \"3\""));
        assert!(e.contains("line 9") && e.contains("estimate_s"), "{e}");
        let e = err(&GOOD.replace("cells = [\"a\", \"b\"]", "cells = [\"a\", \"c\"]"));
        assert!(
            e.contains("'a vs b'") && e.contains("no [[cell]] named 'c'"),
            "{e}"
        );
        let e = err(&GOOD.replace("{n}0", "{m}"));
        assert!(e.contains("'b' at scale quick") && e.contains("{m}"), "{e}");
        let e = err(&GOOD.replace("band = { around = 2.0, tolerance = 0.1 }", "band = {}"));
        assert!(e.contains("band: give `around`"), "{e}");
        let e = err(&GOOD.replace(
            "\"ycsb\", \"--records\", \"{n}\"]",
            "\"ycsb\", \"--seed\", \"1\"]",
        ));
        assert!(e.contains("leave out --seed"), "{e}");
        let e = err(&GOOD.replace("name = \"b\"", "name = \"a\""));
        assert!(e.contains("'a' is named twice"), "{e}");
        let e = err(&GOOD.replace("name = \"t\"", "name = \"T t\""));
        assert!(e.contains("name 'T t'"), "{e}");
    }

    proptest::proptest! {
        /// Any text, and the good file with any one byte replaced, is a file or an error,
        /// never a panic.
        #[test]
        fn no_text_makes_the_parser_panic(
            text in ".{0,200}",
            at in 0usize..400,
            byte in proptest::prelude::any::<u8>(),
        ) {
            let _ = parse(&text);
            let mut good = GOOD.as_bytes().to_vec();
            let i = at % good.len();
            good[i] = byte;
            if let Ok(t) = String::from_utf8(good) {
                if let Ok(f) = parse(&t) {
                    let _ = f.cells_at(Scale::Quick, None);
                }
            }
        }
    }
}
