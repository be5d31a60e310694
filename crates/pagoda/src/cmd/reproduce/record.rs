//! `report.json`, typed: what one run of the grid found, written by `report::write` and read
//! back by the publisher and by the agreement of independent runs, so no reader walks JSON
//! paths that a rename would silently turn into "?".

use super::cell;
use super::rounds::Row;
use crate::error::{CliError, CliResult};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// One run of the grid (every cell once per seed) and its verdicts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct RunRecord {
    /// The experiment file's title (`None`: the seeds' reproduction).
    #[serde(default)]
    pub title: Option<String>,
    pub scale: String,
    pub seeds: Vec<u64>,
    /// What `provenance::machine` recorded for the first cell.
    pub machine: Value,
    /// The commits the cells were measured at.
    pub measured_at: Vec<String>,
    /// Cell runs (cells times seeds).
    pub cells: usize,
    pub jobs: Option<u64>,
    pub most_cells_at_once: Option<usize>,
    pub concurrency: String,
    #[serde(default)]
    pub rounds: Vec<Row>,
    pub busy_start: Option<String>,
    pub failed_cells: Vec<String>,
    pub experiments: Vec<ExperimentRecord>,
}

/// One experiment's headline rows.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ExperimentRecord {
    pub experiment: String,
    pub title: String,
    pub headlines: Vec<HeadlineRecord>,
}

/// One row of the summary: the seed's figure, ours and the verdict.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct HeadlineRecord {
    pub what: String,
    pub seed: String,
    pub band: String,
    pub ours: String,
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub repeats: Option<usize>,
    /// `within`, `miss`, `inconclusive`, `out-of-regime` or `missing`.
    pub verdict: String,
    pub verdict_text: String,
    pub ablation: Option<String>,
    #[serde(default)]
    pub beyond_the_seed: bool,
}

impl RunRecord {
    /// The machine's core count (1 when not recorded).
    pub(crate) fn cores(&self) -> f64 {
        self.machine["cores"].as_f64().unwrap_or(1.0)
    }

    /// Every headline row with its experiment's name, in the report's order.
    pub(crate) fn rows(&self) -> impl Iterator<Item = (&str, &HeadlineRecord)> {
        self.experiments
            .iter()
            .flat_map(|e| e.headlines.iter().map(move |h| (e.experiment.as_str(), h)))
    }
}

/// The record `report::write` left in `dir`.
pub(crate) fn read(dir: &Path) -> CliResult<RunRecord> {
    let path = dir.join("report.json");
    let bytes = std::fs::read(&path).map_err(|e| {
        CliError::Usage(format!(
            "{}: {e}; run `pagoda reproduce report {}` first",
            path.display(),
            dir.display()
        ))
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        CliError::Usage(format!(
            "{} is no reproduction record ({e}); rebuild it with `pagoda reproduce report {}`",
            path.display(),
            dir.display()
        ))
    })
}

/// Writes `value` as pretty JSON to `path`.
pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> CliResult<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| CliError::Other(e.to_string()))?;
    std::fs::write(path, text).map_err(|e| cell::io_err(path, e))
}

/// Records for the tests of the modules that read them.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::{ExperimentRecord, HeadlineRecord, RunRecord};

    /// A row of `what` with `verdict`, held against a 1.5-2.5x band (median 2x, 1.9-2.1x).
    pub(crate) fn headline(what: &str, verdict: &str) -> HeadlineRecord {
        HeadlineRecord {
            what: what.into(),
            seed: "2x".into(),
            band: "1.5-2.5x".into(),
            ours: "2x (1.9x–2.1x)".into(),
            median: Some(2.0),
            min: Some(1.9),
            max: Some(2.1),
            repeats: Some(3),
            verdict: verdict.into(),
            verdict_text: verdict.into(),
            ablation: None,
            beyond_the_seed: false,
        }
    }

    /// A run at `scale` over `seeds` whose one experiment (`face`) has `headlines`.
    pub(crate) fn run(scale: &str, seeds: Vec<u64>, headlines: Vec<HeadlineRecord>) -> RunRecord {
        RunRecord {
            title: None,
            scale: scale.into(),
            seeds,
            machine: serde_json::Value::Null,
            measured_at: vec![],
            cells: 3,
            jobs: Some(1),
            most_cells_at_once: None,
            concurrency: String::new(),
            rounds: vec![],
            busy_start: None,
            failed_cells: vec![],
            experiments: vec![ExperimentRecord {
                experiment: "face".into(),
                title: "FaCE".into(),
                headlines,
            }],
        }
    }
}
