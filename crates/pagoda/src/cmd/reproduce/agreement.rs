//! Independent runs of the grid and whether their verdicts agree. One run's verdict can hang
//! on its order and seeds (between two quick runs of the same cells, a row went within →
//! miss → within), so the results of record come from runs with other seeds and another cell
//! order (`schedule::order`), each a complete run in `OUT/run-K/`, and a row is within only
//! when it is within in every run.

use super::record::{self, HeadlineRecord, RunRecord};
use crate::error::{CliError, CliResult};
use crate::report::Table;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Where run `run` (0-based) of `runs` writes: `out` itself when there is one.
pub(crate) fn run_dir(out: &Path, run: usize, runs: usize) -> PathBuf {
    if runs <= 1 {
        out.to_path_buf()
    } else {
        out.join(format!("run-{}", run + 1))
    }
}

/// The run directories under `out` (`run-1`, `run-2`, ... while they exist); empty when
/// `out` holds a single run.
pub(crate) fn run_dirs(out: &Path) -> Vec<PathBuf> {
    (1..)
        .map(|k| out.join(format!("run-{k}")))
        .take_while(|d| d.join("cells").is_dir())
        .collect()
}

/// How the runs' verdicts on a row combine, and what each run said.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct AgreedRow {
    pub experiment: String,
    pub what: String,
    pub seed: String,
    pub band: String,
    pub beyond_the_seed: bool,
    /// Each run's row, in run order (`None`: the run has no such row).
    pub runs: Vec<Option<HeadlineRecord>>,
    /// `within` only when every run is within; the runs' common verdict when they agree;
    /// `inconclusive` when they do not; `missing` when a run lacks the row.
    pub verdict: String,
    pub verdict_text: String,
}

/// What `OUT/agreement.json` holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct AgreementRecord {
    pub scale: String,
    /// Each run's directory (relative to OUT) and seeds.
    pub runs: Vec<(String, Vec<u64>)>,
    pub rows: Vec<AgreedRow>,
}

/// The verdict of a row over the runs' rows.
fn combine(rows: &[Option<&HeadlineRecord>]) -> (String, String) {
    let keys: Vec<&str> = rows
        .iter()
        .map(|r| r.map_or("missing", |h| h.verdict.as_str()))
        .collect();
    let n = keys.len();
    if keys.contains(&"missing") {
        let k = keys.iter().filter(|k| **k == "missing").count();
        return (
            "missing".into(),
            format!("not measured in {k} of {n} runs (see each run's report)"),
        );
    }
    if keys.windows(2).all(|w| w[0] == w[1]) {
        let k = keys[0];
        let text = match k {
            "within" => format!("within in all {n} runs"),
            "out-of-regime" => format!("out of regime in all {n} runs"),
            other => format!("{other} in all {n} runs"),
        };
        return (k.to_string(), text);
    }
    (
        "inconclusive".into(),
        format!("the runs disagree ({})", keys.join(" / ")),
    )
}

/// The rows of `records` matched by experiment and what they measure, in the first run's
/// order (rows only a later run has come after).
pub(crate) fn agree(records: &[RunRecord]) -> Vec<AgreedRow> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in records {
        for (e, h) in r.rows() {
            let key = (e.to_string(), h.what.clone());
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys.into_iter()
        .map(|(e, what)| {
            let rows: Vec<Option<&HeadlineRecord>> = records
                .iter()
                .map(|r| {
                    r.rows()
                        .find(|(x, h)| *x == e && h.what == what)
                        .map(|x| x.1)
                })
                .collect();
            let first = rows.iter().flatten().next().expect("a row of some run");
            let (verdict, verdict_text) = combine(&rows);
            AgreedRow {
                experiment: e,
                what,
                seed: first.seed.clone(),
                band: first.band.clone(),
                beyond_the_seed: first.beyond_the_seed,
                runs: rows
                    .into_iter()
                    .map(Option::<&HeadlineRecord>::cloned)
                    .collect(),
                verdict,
                verdict_text,
            }
        })
        .collect()
}

/// Reads each run's record in `dirs`.
pub(crate) fn records(dirs: &[PathBuf]) -> CliResult<Vec<RunRecord>> {
    dirs.iter().map(|d| record::read(d)).collect()
}

/// Writes `out/agreement.json` and `out/index.md` from the runs in `dirs` (each already
/// reported) and returns the summary: the rows side by side, then the counts. `title` names
/// an experiment file's report (`None`: the seeds').
pub(crate) fn write(out: &Path, dirs: &[PathBuf], title: Option<&str>) -> CliResult<String> {
    let records = records(dirs)?;
    let rows = agree(&records);
    let rec = AgreementRecord {
        scale: records
            .first()
            .map(|r| r.scale.clone())
            .ok_or_else(|| CliError::Usage(format!("no runs under {}", out.display())))?,
        runs: dirs
            .iter()
            .zip(&records)
            .map(|(d, r)| {
                let name = d.strip_prefix(out).unwrap_or(d);
                (name.display().to_string(), r.seeds.clone())
            })
            .collect(),
        rows,
    };
    record::write_json(&out.join("agreement.json"), &rec)?;
    let summary = summary(&rec);
    let mut md = format!(
        "# {}: independent runs\n\n",
        title.unwrap_or("pagoda reproduction of the five seeds")
    );
    for (name, seeds) in &rec.runs {
        let _ = writeln!(md, "- [{name}]({name}/index.md): seeds {seeds:?}");
    }
    md.push('\n');
    md.push_str(&summary);
    let index = out.join("index.md");
    std::fs::write(&index, md).map_err(|e| super::cell::io_err(&index, e))?;
    Ok(summary)
}

/// The side-by-side table and the counts of the combined verdicts.
pub(crate) fn summary(rec: &AgreementRecord) -> String {
    let mut head: Vec<String> = ["experiment", "what", "seed", "band"]
        .map(String::from)
        .to_vec();
    for k in 1..=rec.runs.len() {
        head.push(format!("run {k}: median (min–max)"));
        head.push(format!("run {k}"));
    }
    head.push("verdict".into());
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut t = Table::new(&head);
    for r in &rec.rows {
        let mut cells = vec![
            r.experiment.clone(),
            r.what.clone(),
            r.seed.clone(),
            r.band.clone(),
        ];
        for h in &r.runs {
            cells.push(h.as_ref().map_or("–".into(), |h| h.ours.clone()));
            cells.push(h.as_ref().map_or("missing".into(), |h| short(&h.verdict)));
        }
        cells.push(if r.verdict == "within" {
            "within".into()
        } else {
            format!("{}: {}", short(&r.verdict), r.verdict_text)
        });
        t.row(&cells);
    }
    let mut out = t.markdown();
    for (beyond, whose) in [
        (false, "The seeds' own rows"),
        (true, "Rows beyond the seeds"),
    ] {
        let count = |k: &str| {
            rec.rows
                .iter()
                .filter(|r| r.beyond_the_seed == beyond && r.verdict == k)
                .count()
        };
        let _ = write!(
            out,
            "{}{whose}: {} within in every run, {} miss, {} inconclusive (of which {} because \
             the runs disagree), {} out of regime, {} not measured.",
            if beyond { " " } else { "\n" },
            count("within"),
            count("miss"),
            count("inconclusive"),
            rec.rows
                .iter()
                .filter(|r| r.beyond_the_seed == beyond && r.verdict_text.contains("disagree"))
                .count(),
            count("out-of-regime"),
            count("missing"),
        );
    }
    out.push('\n');
    out
}

fn short(key: &str) -> String {
    key.replace("out-of-regime", "out of regime")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(what: &str, verdict: &str) -> HeadlineRecord {
        record::fixtures::headline(what, verdict)
    }

    fn run(rows: &[(&str, &str)]) -> RunRecord {
        record::fixtures::run(
            "standard",
            vec![1, 2, 3],
            rows.iter().map(|(w, v)| row(w, v)).collect(),
        )
    }

    /// Within needs every run within; agreement keeps the common verdict; a disagreement is
    /// inconclusive and names both; a row one run lacks is not measured.
    #[test]
    fn a_row_is_within_only_when_every_run_is() {
        let a = run(&[
            ("a", "within"),
            ("b", "within"),
            ("c", "miss"),
            ("d", "within"),
        ]);
        let b = run(&[("a", "within"), ("b", "miss"), ("c", "miss")]);
        let rows = agree(&[a, b]);
        let v: Vec<(&str, &str)> = rows
            .iter()
            .map(|r| (r.what.as_str(), r.verdict.as_str()))
            .collect();
        assert_eq!(
            v,
            [
                ("a", "within"),
                ("b", "inconclusive"),
                ("c", "miss"),
                ("d", "missing")
            ]
        );
        assert!(rows[1].verdict_text.contains("within / miss"));
        let rec = AgreementRecord {
            scale: "standard".into(),
            runs: vec![
                ("run-1".into(), vec![1, 2, 3]),
                ("run-2".into(), vec![4, 5, 6]),
            ],
            rows,
        };
        let s = summary(&rec);
        assert!(
            s.contains("1 within in every run, 1 miss, 1 inconclusive (of which 1 because the runs disagree), 0 out of regime, 1 not measured"),
            "{s}"
        );
        assert!(
            s.contains("| run 2: median (min–max) | run 2 | verdict |"),
            "{s}"
        );
    }
}
