//! The flags of a run of the grid and the run itself: every cell once per seed, in rounds,
//! for each independent run, then the report, the agreement of the runs and what is
//! published. Shared by the seeds' experiments (`reproduce`) and experiment files
//! (`experiment run`).

use super::cell::{self, Cell, Scale};
use super::{agreement, publish, rounds, schedule};
use crate::error::{CliError, CliResult};
use clap::Args;
use std::path::{Path, PathBuf};

/// Where a run's results are published beyond its own directory.
#[derive(Debug, Args)]
pub struct PublishArgs {
    /// Also write the summary, with command, date, commit and machine, to this Markdown file
    /// (e.g. docs/results/reproduce-quick.md).
    #[arg(long)]
    publish: Option<PathBuf>,
    /// Also replace the generated excerpt of this README (the lines between its
    /// `<!-- reproduce excerpt: begin -->` and `<!-- reproduce excerpt: end -->` markers)
    /// with the verdicts of this run, linking to the --publish file.
    #[arg(long, requires = "publish")]
    readme: Option<PathBuf>,
}

impl PublishArgs {
    pub(crate) fn write(&self, dir: &Path, summary: &str, title: Option<&str>) -> CliResult<()> {
        let Some(to) = &self.publish else {
            return Ok(());
        };
        publish::write(dir, to, summary, title)?;
        eprintln!("published {}", to.display());
        self.excerpt(dir, to)
    }

    /// For independent runs in `dirs` under `out`, combined in `summary`.
    pub(crate) fn write_runs(
        &self,
        out: &Path,
        dirs: &[PathBuf],
        summary: &str,
        title: Option<&str>,
    ) -> CliResult<()> {
        let Some(to) = &self.publish else {
            return Ok(());
        };
        publish::write_runs(dirs, to, summary, title)?;
        eprintln!("published {}", to.display());
        self.excerpt(out, to)
    }

    fn excerpt(&self, dir: &Path, to: &Path) -> CliResult<()> {
        if let Some(readme) = &self.readme {
            publish::readme_excerpt(dir, readme, to)?;
            eprintln!("updated the excerpt in {}", readme.display());
        }
        Ok(())
    }
}

/// Flags of a reproduction of experiments: one run's, and how many independent runs.
#[derive(Debug, Args)]
pub struct GridArgs {
    #[command(flatten)]
    pub(crate) run: RunArgs,
    /// Independent runs of the whole grid, each with its own seeds and its own cell order,
    /// in OUT/run-1, OUT/run-2, ...; a row is within only when every run is. Default: 1 at
    /// quick, 2 at standard and full (the results of record).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=4))]
    pub(crate) runs: Option<u64>,
}

impl GridArgs {
    pub(crate) fn runs(&self) -> usize {
        let default = match self.run.scale {
            Scale::Tiny | Scale::Quick => 1,
            Scale::Standard | Scale::Full => 2,
        };
        self.runs.map_or(default, |n| n as usize)
    }
}

/// Flags of a reproduction run.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// quick (all experiments, 3 repeats, within about 20 minutes here) | standard (larger
    /// databases, longer windows, about 2 hours) | full (the largest, many hours).
    #[arg(long, value_enum, default_value = "quick")]
    pub(crate) scale: Scale,
    /// Where the report, the cell results and the plots go.
    #[arg(long, default_value = "pagoda-reproduce")]
    pub(crate) out: PathBuf,
    /// Seed of every random choice of the first repeat (written in the report); repeat k
    /// uses seed + k.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Runs of every cell, each with its own seed: the report gives every ratio as median
    /// and min–max over them [default: 3, or an experiment file's `repeats`].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=20))]
    pub(crate) repeats: Option<u64>,
    /// Cells run at once, as child processes taken in the plan's order. 1 (the default) is
    /// the measured setting: concurrent cells share the CPU and change what is measured, and
    /// the report says when they did. With `reproduce cell`: how many cells the batch system
    /// runs at once, recorded in the result.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = parse_jobs)]
    pub(crate) jobs: u64,
    #[command(flatten)]
    pub(crate) publish: PublishArgs,
}

/// `--jobs N`: a whole number of cells, 1 or more.
fn parse_jobs(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(0) => Err(
            "0 cells at a time runs nothing; give 1 (one after another, the measured \
                      default) or more"
                .to_string(),
        ),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "'{s}' is not a number of cells to run at once; give a whole number, 1 or more"
        )),
    }
}

impl RunArgs {
    /// Runs of every cell.
    pub(crate) fn repeats(&self) -> u64 {
        self.repeats.unwrap_or(3)
    }

    /// The seeds of independent run `run`: each run its own, after the runs before it.
    pub(crate) fn seeds(&self, run: usize) -> Vec<u64> {
        let first = self.seed + run as u64 * self.repeats();
        (0..self.repeats()).map(|k| first + k).collect()
    }
}

/// Runs `cells` (of the experiments `names`, whose ratios `comparisons` lists) as `g` says:
/// each independent run into its directory, then `report` on each, then their agreement;
/// `title` names an experiment file's report (`None`: the seeds').
pub(crate) fn run_grid(
    names: &[String],
    cells: &[Cell],
    comparisons: &[Vec<String>],
    g: &GridArgs,
    title: Option<&str>,
    report: &dyn Fn(&Path) -> CliResult<String>,
) -> CliResult<()> {
    let a = &g.run;
    if let Some(readme) = &a.publish.readme {
        crate::readme::check_block(readme, publish::BLOCK)?;
    }
    let runs = g.runs();
    let minutes = schedule::wall_estimate_s(cells, comparisons, a.jobs) as f64
        * (a.repeats() as usize * runs) as f64
        / 60.0;
    eprintln!(
        "reproduce: {} cells of {}, scale {}, {runs} independent run(s) of {} repeats (seeds {}-{}), {} at a time, about {minutes:.0} min; results in {}",
        cells.len(),
        names.join(", "),
        a.scale.name(),
        a.repeats(),
        a.seed,
        a.seed + a.repeats() * runs as u64 - 1,
        a.jobs,
        a.out.display()
    );
    warn_if_busy();
    if a.jobs > 1 {
        eprintln!(
            "reproduce: rounds of up to {} units run at once and share the CPU, which changes \
             what they measure; the report says so (`--jobs 1` is the measured default)",
            a.jobs
        );
    }
    let mut failed: Vec<String> = Vec::new();
    let mut dirs = Vec::new();
    for run in 0..runs {
        let dir = agreement::run_dir(&a.out, run, runs);
        // A rerun replaces the results of these experiments, not those of others in --out.
        remove_old_results(&dir, names)?;
        let target = schedule::Target {
            scale: a.scale,
            out: &dir,
            jobs: a.jobs,
        };
        if runs > 1 {
            eprintln!("reproduce: run {} of {runs} in {}", run + 1, dir.display());
        }
        let results = schedule::run_all(cells, comparisons, &a.seeds(run), &target, run)?;
        failed.extend(
            results
                .iter()
                .filter(|r| !r.ok && !r.cell.may_fail)
                .map(|r| format!("{} (seed {})", r.cell.id, r.seed)),
        );
        let summary = report(&dir)?;
        if runs == 1 {
            print!("{summary}");
            a.publish.write(&dir, &summary, title)?;
        }
        dirs.push(dir);
    }
    if runs > 1 {
        let summary = agreement::write(&a.out, &dirs, title)?;
        print!("{summary}");
        a.publish.write_runs(&a.out, &dirs, &summary, title)?;
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::CheckFailed(format!(
            "{} cell(s) failed ({}); their logs are under {}/ and the report says what is missing",
            failed.len(),
            failed.join(", "),
            a.out.display()
        )))
    }
}

/// Emulated devices keep their modelled time by sleeping and yielding, so other work on the
/// machine distorts every cell's regime: a run at a load average of 31 on 2 cores found 9
/// rows out of regime that were in regime on the quiet machine. Says so before it starts.
/// The report repeats it at its top when the first round started above the threshold.
fn warn_if_busy() {
    let m = crate::provenance::machine();
    let load = schedule::load_1m().unwrap_or(0.0);
    let cores = m["cores"].as_f64().unwrap_or(1.0);
    if load > rounds::busy_threshold(cores) {
        eprintln!(
            "reproduce: warning: load average {load:.1} on {cores:.0} cores, above {:.0}; other \
             work on this machine distorts the cells' regimes (the report says so at its top \
             and lists the load at the start of each round)",
            rounds::busy_threshold(cores)
        );
    }
}

/// Removes the cell results of the experiments `names` from `out`, so a rerun replaces them
/// and keeps those of others.
fn remove_old_results(out: &Path, names: &[String]) -> CliResult<()> {
    let Ok(entries) = std::fs::read_dir(out.join("cells")) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if names.iter().any(|x| name.starts_with(&format!("{x}."))) {
            std::fs::remove_file(e.path()).map_err(|err| cell::io_err(&e.path(), err))?;
        }
    }
    Ok(())
}
