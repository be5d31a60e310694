//! The grid of a reproduction: independent cells, each one `pagoda` command line whose
//! `--json` result is saved with what the report needs (the cell, the seed, the machine).
//! A cell runs as a child process of the same binary, so a cell run by hand, by a batch
//! system or by `reproduce all` is the same run.

use super::outcome::Outcome;
use crate::error::{CliError, CliResult};
use crate::provenance::machine;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Instant;

/// How large a reproduction is.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Scale {
    /// Seconds per cell: the test suite's scale (checks that everything runs, not the effect).
    #[value(hide = true)]
    Tiny,
    /// All experiments with their repeats in about 20 minutes on a 2-core machine: every
    /// effect's direction and each regime, on databases of tens of MiB and runs of seconds.
    Quick,
    /// Longer runs on larger databases (about 2 hours with 3 repeats): narrower spreads and
    /// checkpoints well inside each window.
    Standard,
    /// The largest scale that fits one machine in a few hours.
    Full,
}

impl Scale {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Scale::Tiny => "tiny",
            Scale::Quick => "quick",
            Scale::Standard => "standard",
            Scale::Full => "full",
        }
    }
}

/// One independent run of the grid.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Cell {
    /// `experiment.rest`, only `[a-z0-9.-]` (it names the result file).
    pub id: String,
    pub experiment: String,
    /// The `pagoda` arguments, without `--seed` and `--json` (the runner adds them).
    pub args: Vec<String>,
    /// Expected seconds on a 2-core machine (for the progress bar's time left).
    pub estimate_s: u64,
    /// What the report needs to place the result (device, mode, threads ...).
    pub params: Value,
    /// The command fails by design (a sabotage-free crash test of an unsafe mode): its JSON is
    /// the result and the failure is the finding.
    #[serde(default)]
    pub may_fail: bool,
    /// The cell's measured window uses little CPU (it waits on an emulated disk at a few % of
    /// one core), so two light cells may run at once: each is bound by its own emulated
    /// device, and its regime table shows whether it stayed so.
    #[serde(default)]
    pub light: bool,
    /// How many light cells may run at once with this one (two when not set): more for cells
    /// that barely use a core at any point of their run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub together: Option<usize>,
    /// The experiment file the cell comes from (`None`: the seeds' built-in grid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

impl Cell {
    pub(crate) fn new(
        experiment: &str,
        name: &str,
        args: &[&str],
        estimate_s: u64,
        params: Value,
    ) -> Self {
        Self {
            id: format!("{experiment}.{name}"),
            experiment: experiment.to_string(),
            args: args.iter().map(ToString::to_string).collect(),
            estimate_s,
            params,
            may_fail: false,
            light: false,
            together: None,
            file: None,
        }
    }

    /// Marks the cell light (see [`Cell::light`]).
    #[cfg(test)]
    pub(crate) fn light(mut self) -> Self {
        self.light = true;
        self
    }

    /// Marks the cell light, to run with up to `n - 1` other light cells at once.
    #[cfg(test)]
    pub(crate) fn light_among(mut self, n: usize) -> Self {
        self.light = true;
        self.together = Some(n.max(1));
        self
    }

    /// The most light cells that may run at once with this one.
    pub(crate) fn together(&self) -> usize {
        self.together.unwrap_or(2)
    }

    /// The command line a user (or a batch system) runs for this cell alone.
    pub(crate) fn command(&self, scale: Scale, seed: u64, out: &str) -> String {
        match &self.file {
            Some(f) => format!(
                "pagoda experiment cell {f} {} --scale {} --seed {seed} --out {out}",
                self.id,
                scale.name()
            ),
            None => format!(
                "pagoda reproduce cell {} --scale {} --seed {seed} --out {out}",
                self.id,
                scale.name()
            ),
        }
    }

    /// What the cell runs, as a shell line.
    pub(crate) fn runs(&self, seed: u64) -> String {
        let mut s = String::from("pagoda");
        for a in &self.args {
            s.push(' ');
            s.push_str(a);
        }
        s.push_str(&format!(" --seed {seed} --json RESULT.json"));
        s
    }

    /// `ID.sSEED`: the stem of this cell's files for one repeat.
    fn stem(&self, seed: u64) -> String {
        format!("{}.s{seed}", self.id)
    }
}

/// A cell's saved result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct CellResult {
    pub cell: Cell,
    pub scale: Scale,
    pub seed: u64,
    pub machine: Value,
    pub elapsed_s: f64,
    /// The command's exit status was success.
    pub ok: bool,
    /// Why it failed (the last line of its stderr), when it did.
    pub error: Option<String>,
    /// The command's `--json` output (`null` when it wrote none).
    pub result: Value,
    /// Cells the runner let run at once (`--jobs`): above 1, cells shared the machine.
    #[serde(default = "one")]
    pub jobs: u64,
    /// When the cell started (Unix seconds), so the report can tell which cells overlapped;
    /// absent in results saved before it was recorded.
    #[serde(default)]
    pub started_unix_s: Option<f64>,
    /// The round the cell started in (the cells started with it, the load then), so the
    /// report can list who ran beside whom; absent in results saved before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<RoundInfo>,
    /// `result` read as a bench result, on first use (the error when it is none).
    #[serde(skip)]
    pub typed: OnceLock<Result<Outcome, String>>,
}

/// Cells started together, as one result records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct RoundInfo {
    /// When the run that scheduled the round started (Unix seconds): it tells the rounds of
    /// two runs merged into one directory apart.
    pub run_started_unix_s: f64,
    /// 1-based, in the run's order.
    pub index: usize,
    /// The rounds of the run.
    pub of: usize,
    /// The ids of every cell of the round, this one included, in the order they started.
    pub cells: Vec<String>,
    /// The 1-minute load average (`/proc/loadavg`) just before the round's cells started.
    pub load_1m: Option<f64>,
}

fn one() -> u64 {
    1
}

impl CellResult {
    /// The result read as a bench result (an empty one when it is none: see [`Self::unread`]).
    pub(crate) fn outcome(&self) -> &Outcome {
        static NONE: OnceLock<Outcome> = OnceLock::new();
        match self.typed.get_or_init(|| Outcome::of(&self.result)) {
            Ok(o) => o,
            Err(_) => NONE.get_or_init(Outcome::default),
        }
    }

    /// A figure of the result (`None`: the result does not have it).
    pub(crate) fn num(&self, f: impl Fn(&Outcome) -> Option<f64>) -> Option<f64> {
        f(self.outcome())
    }

    /// Why the result could not be read as a bench result, once a section asked for it.
    pub(crate) fn unread(&self) -> Option<&str> {
        self.typed.get()?.as_ref().err().map(String::as_str)
    }

    /// A parameter of the cell.
    pub(crate) fn param(&self, key: &str) -> Option<&Value> {
        self.cell.params.get(key)
    }

    pub(crate) fn param_str(&self, key: &str) -> &str {
        self.param(key).and_then(Value::as_str).unwrap_or("")
    }

    pub(crate) fn param_f64(&self, key: &str) -> f64 {
        self.param(key).and_then(Value::as_f64).unwrap_or(0.0)
    }

    /// The result is usable: the command succeeded, or failed by design and wrote its JSON.
    pub(crate) fn usable(&self) -> bool {
        (self.ok || self.cell.may_fail) && !self.result.is_null()
    }
}

/// A cell's child process, started.
pub(crate) struct Running<'a> {
    cell: &'a Cell,
    seed: u64,
    jobs: u64,
    child: std::process::Child,
    start: Instant,
    started_unix_s: f64,
    json: PathBuf,
    log_path: PathBuf,
    path: PathBuf,
    machine: Value,
    round: Option<RoundInfo>,
}

impl<'a> Running<'a> {
    /// Starts `cell` for `seed`; `jobs` and `round` are recorded with its result.
    pub(crate) fn spawn(
        cell: &'a Cell,
        seed: u64,
        jobs: u64,
        round: Option<RoundInfo>,
        out: &Path,
    ) -> CliResult<Self> {
        let dir = out.join("cells");
        fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        let stem = cell.stem(seed);
        let json = dir.join(format!("{stem}.run.json"));
        let log_path = dir.join(format!("{stem}.log"));
        let _ = fs::remove_file(&json);
        let log = fs::File::create(&log_path).map_err(|e| io_err(&log_path, e))?;
        let log_err = log.try_clone().map_err(|e| io_err(&log_path, e))?;
        let exe = std::env::current_exe().map_err(|e| {
            CliError::Other(format!(
                "cannot find the pagoda binary to run cell {}: {e}",
                cell.id
            ))
        })?;
        let machine = machine();
        let start = Instant::now();
        let started_unix_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let child = Command::new(exe)
            .args(&cell.args)
            .arg("--seed")
            .arg(seed.to_string())
            .arg("--json")
            .arg(&json)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| CliError::Other(format!("cannot start cell {}: {e}", cell.id)))?;
        Ok(Self {
            cell,
            seed,
            jobs,
            child,
            start,
            started_unix_s,
            json,
            log_path,
            path: dir.join(format!("{stem}.json")),
            machine,
            round,
        })
    }

    /// The exit status once the child has ended, without blocking.
    pub(crate) fn poll(&mut self) -> CliResult<Option<std::process::ExitStatus>> {
        self.child
            .try_wait()
            .map_err(|e| CliError::Other(format!("cell {}: {e}", self.cell.id)))
    }

    /// Ends the child early (the run is giving up on an error), so no cell outlives it.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Saves the result of the ended child.
    pub(crate) fn finish(
        self,
        status: std::process::ExitStatus,
        scale: Scale,
    ) -> CliResult<CellResult> {
        let elapsed_s = self.start.elapsed().as_secs_f64();
        let result: Value = fs::read(&self.json)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
        let _ = fs::remove_file(&self.json);
        let error = (!status.success()).then(|| {
            let text = fs::read_to_string(&self.log_path).unwrap_or_default();
            let last = text
                .lines()
                .rev()
                .find(|l| l.contains("error"))
                .or_else(|| text.lines().rev().find(|l| !l.trim().is_empty()))
                .unwrap_or("no output");
            format!("{status}: {}", last.trim())
        });
        let r = CellResult {
            cell: self.cell.clone(),
            scale,
            seed: self.seed,
            machine: self.machine,
            elapsed_s,
            ok: status.success(),
            error,
            result,
            jobs: self.jobs,
            started_unix_s: Some(self.started_unix_s),
            round: self.round,
            typed: OnceLock::new(),
        };
        let text = serde_json::to_string_pretty(&r).map_err(|e| CliError::Other(e.to_string()))?;
        fs::write(&self.path, text).map_err(|e| io_err(&self.path, e))?;
        Ok(r)
    }
}

/// Every saved cell result under `out/cells`, sorted by id. Files that do not parse are
/// named in the error (a half-copied shard should not vanish silently).
pub(crate) fn load_results(out: &Path) -> CliResult<Vec<CellResult>> {
    let dir = out.join("cells");
    let entries = fs::read_dir(&dir).map_err(|e| {
        CliError::Usage(format!(
            "{}: {e}; give the --out directory of `pagoda reproduce` or `reproduce cell`",
            dir.display()
        ))
    })?;
    let mut results = Vec::new();
    for e in entries {
        let path = e.map_err(|e| io_err(&dir, e))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !name.ends_with(".json") || name.ends_with(".run.json") {
            continue;
        }
        let bytes = fs::read(&path).map_err(|e| io_err(&path, e))?;
        let r: CellResult = serde_json::from_slice(&bytes).map_err(|e| {
            CliError::Usage(format!(
                "{} is not a cell result ({e}); remove it or run the cell again",
                path.display()
            ))
        })?;
        results.push(r);
    }
    results.sort_by(|a, b| (&a.cell.id, a.seed).cmp(&(&b.cell.id, b.seed)));
    Ok(results)
}

pub(crate) fn io_err(path: &Path, source: std::io::Error) -> CliError {
    CliError::Io {
        path: path.to_path_buf(),
        source,
    }
}
