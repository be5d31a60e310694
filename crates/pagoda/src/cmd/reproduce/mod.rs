//! `pagoda reproduce`: every experiment of the five seeds as a grid of independent cells
//! (one `pagoda` command line each), run here one after another or anywhere by a batch
//! system, and merged into one report (`index.md`, one JSON per cell, SVG plots).

mod agreement;
mod atomic;
mod buffer_sweep;
pub(crate) mod cell;
mod dwb_ftl;
mod face;
mod file;
mod outcome;
mod pipelined;
pub(crate) mod publish;
mod record;
mod regime;
mod repeats;
mod report;
mod rounds;
mod run;
mod schedule;

use crate::error::{CliError, CliResult};
use cell::{Cell, CellResult, Scale};
use clap::{Args, Subcommand};
pub use file::{run as run_experiment, ExperimentCommand};
pub use run::{GridArgs, PublishArgs, RunArgs};
use std::path::{Path, PathBuf};

/// `pagoda reproduce ...`
#[derive(Debug, Subcommand)]
pub enum ReproduceCommand {
    /// Every experiment below, then the report.
    All(GridArgs),
    /// Seed 000: FaCE flash cache, TPC-C on SSD and on HDD RAID-0 data.
    Face(GridArgs),
    /// Seed 001: LinkBench on an FTL with the double-write stream mixed vs separated.
    DwbFtl(GridArgs),
    /// Seed 002: pipelined vs synchronous commit, update-only YCSB on NVMe and HDD.
    PipelinedCommit(GridArgs),
    /// Seed 003: TPC-C with the double-write buffer, no protection, and 16 KiB atomic writes.
    AtomicWrite(GridArgs),
    /// Seed 004: YCSB read-only (latest) over buffer sizes on HDD and SSD, with the
    /// miss-ratio-curve prediction from one run.
    BufferSweep(GridArgs),
    /// Print the grid of independent cells as JSON, one command line each.
    Plan(PlanArgs),
    /// Run one cell of the grid and save its result under --out.
    Cell(CellArgs),
    /// Merge whatever cell results are in DIR into DIR/index.md and plots.
    Report {
        /// The directory the cells wrote to.
        dir: PathBuf,
        #[command(flatten)]
        publish: PublishArgs,
    },
}

/// Flags of `reproduce plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// quick | standard | full.
    #[arg(long, value_enum, default_value = "full")]
    scale: Scale,
    /// Seed of the first repeat.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs of every cell, each with its own seed (seed, seed + 1, ...).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=20))]
    repeats: u64,
    /// Output directory written into each cell's command line.
    #[arg(long, default_value = "pagoda-reproduce")]
    out: String,
    /// Only the cells of this experiment (face, dwb-ftl, pipelined-commit, atomic-write,
    /// buffer-sweep).
    #[arg(long)]
    experiment: Option<Experiment>,
}

/// Flags of `reproduce cell`.
#[derive(Debug, Args)]
pub struct CellArgs {
    /// The cell's id, as `reproduce plan` lists it.
    id: String,
    #[command(flatten)]
    run: RunArgs,
}

/// The five experiments, in seed order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Experiment {
    Face,
    DwbFtl,
    PipelinedCommit,
    AtomicWrite,
    BufferSweep,
}

const ALL: [Experiment; 5] = [
    Experiment::Face,
    Experiment::DwbFtl,
    Experiment::PipelinedCommit,
    Experiment::AtomicWrite,
    Experiment::BufferSweep,
];

impl Experiment {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Experiment::Face => "face",
            Experiment::DwbFtl => "dwb-ftl",
            Experiment::PipelinedCommit => "pipelined-commit",
            Experiment::AtomicWrite => "atomic-write",
            Experiment::BufferSweep => "buffer-sweep",
        }
    }

    /// The experiment's cells at `scale`, from its file in `experiments/seeds/`.
    fn cells(self, scale: Scale) -> Vec<Cell> {
        file::seed_grid(self.name(), scale).0
    }

    /// The cells of `cells` (this experiment's) whose figures form one ratio: the scheduler
    /// runs each comparison's cells with the same neighbours (see `schedule`).
    fn comparisons(self, cells: &[Cell]) -> Vec<Vec<String>> {
        file::seed_comparisons(self.name(), cells)
    }

    fn section(self, ctx: &report::Ctx, results: &[&CellResult]) -> CliResult<report::Section> {
        match self {
            Experiment::Face => face::section(ctx, results),
            Experiment::DwbFtl => dwb_ftl::section(ctx, results),
            Experiment::PipelinedCommit => pipelined::section(ctx, results),
            Experiment::AtomicWrite => atomic::section(ctx, results),
            Experiment::BufferSweep => buffer_sweep::section(ctx, results),
        }
    }
}

/// The cells of `exps` at `scale`, and the comparisons among them.
fn grid(exps: &[Experiment], scale: Scale) -> (Vec<Cell>, Vec<Vec<String>>) {
    let mut cells = Vec::new();
    let mut comparisons = Vec::new();
    for e in exps {
        let mine = e.cells(scale);
        comparisons.extend(e.comparisons(&mine));
        cells.extend(mine);
    }
    (cells, comparisons)
}

/// Runs a `reproduce` subcommand.
pub fn run(cmd: ReproduceCommand) -> CliResult<()> {
    let (exps, g): (Vec<Experiment>, GridArgs) = match cmd {
        ReproduceCommand::All(a) => (ALL.to_vec(), a),
        ReproduceCommand::Face(a) => (vec![Experiment::Face], a),
        ReproduceCommand::DwbFtl(a) => (vec![Experiment::DwbFtl], a),
        ReproduceCommand::PipelinedCommit(a) => (vec![Experiment::PipelinedCommit], a),
        ReproduceCommand::AtomicWrite(a) => (vec![Experiment::AtomicWrite], a),
        ReproduceCommand::BufferSweep(a) => (vec![Experiment::BufferSweep], a),
        ReproduceCommand::Plan(p) => return plan(&p),
        ReproduceCommand::Cell(c) => return one_cell(&c),
        ReproduceCommand::Report { dir, publish } => return report_only(&dir, &publish),
    };
    let (cells, comparisons) = grid(&exps, g.run.scale);
    let names: Vec<String> = exps.iter().map(|e| e.name().to_string()).collect();
    run::run_grid(&names, &cells, &comparisons, &g, None, &report::write)
}

fn plan(p: &PlanArgs) -> CliResult<()> {
    let exps: Vec<Experiment> = match p.experiment {
        Some(e) => vec![e],
        None => ALL.to_vec(),
    };
    let seeds: Vec<u64> = (0..p.repeats).map(|k| p.seed + k).collect();
    let (cells, comparisons) = grid(&exps, p.scale);
    let report = format!("pagoda reproduce report {}", p.out);
    println!(
        "{}",
        plan_json(&cells, &comparisons, p.scale, &seeds, &p.out, &report)
    );
    Ok(())
}

/// The plan of `cells` for a batch system, as pretty JSON: one command line per cell and
/// seed, the estimates, and the command that merges the results.
fn plan_json(
    cells: &[Cell],
    comparisons: &[Vec<String>],
    scale: Scale,
    seeds: &[u64],
    out: &str,
    report: &str,
) -> String {
    let runs: Vec<serde_json::Value> = seeds
        .iter()
        .flat_map(|&seed| {
            cells.iter().map(move |c| {
                serde_json::json!({
                    "id": c.id,
                    "seed": seed,
                    "experiment": c.experiment,
                    "estimate_s": c.estimate_s,
                    "command": c.command(scale, seed, out),
                    "runs": c.runs(seed),
                })
            })
        })
        .collect();
    let total: u64 = runs.iter().filter_map(|c| c["estimate_s"].as_u64()).sum();
    // What `reproduce all` takes one round at a time: light neighbours share their time.
    let wall = schedule::wall_estimate_s(cells, comparisons, 1) * seeds.len() as u64;
    let plan = serde_json::json!({
        "scale": scale.name(),
        "seeds": seeds,
        "out": out,
        "estimate_s": total,
        "wall_estimate_s": wall,
        "runs": runs,
        "report": report,
    });
    serde_json::to_string_pretty(&plan).unwrap_or_default()
}

fn one_cell(c: &CellArgs) -> CliResult<()> {
    let all: Vec<Cell> = ALL.iter().flat_map(|e| e.cells(c.run.scale)).collect();
    let lists = format!("`pagoda reproduce plan --scale {}`", c.run.scale.name());
    run_one_cell(&all, &c.id, &c.run, &lists)
}

/// Runs the cell `id` of `all` as `run` says and saves its result; `lists` names the command
/// that lists the ids (for the error when there is no such cell).
fn run_one_cell(all: &[Cell], id: &str, run: &RunArgs, lists: &str) -> CliResult<()> {
    let Some(cell) = all.iter().find(|x| x.id == id) else {
        return Err(CliError::Usage(format!(
            "no cell '{id}' at scale {}; {lists} lists the ids",
            run.scale.name(),
        )));
    };
    let mut bar = crate::progress::Progress::new(&cell.id, "s", cell.estimate_s.max(1));
    let target = schedule::Target {
        scale: run.scale,
        out: &run.out,
        jobs: run.jobs,
    };
    let r = schedule::run_cell(cell, run.seed, &target, &mut |t| {
        bar.set(t.as_secs().min(cell.estimate_s));
    })?;
    bar.finish();
    let stem = format!("{}/cells/{}.s{}", run.out.display(), cell.id, run.seed);
    match &r.error {
        Some(e) if !cell.may_fail => Err(CliError::CheckFailed(format!(
            "cell {} (seed {}) failed: {e} (log: {stem}.log)",
            cell.id, run.seed
        ))),
        _ => {
            println!("cell {} done in {:.0} s: {stem}.json", cell.id, r.elapsed_s);
            Ok(())
        }
    }
}

/// Rebuilds the report of one run in `dir`, or of each independent run under it and their
/// agreement.
fn report_only(dir: &Path, publish: &PublishArgs) -> CliResult<()> {
    let dirs = agreement::run_dirs(dir);
    if dirs.is_empty() {
        let summary = report::write(dir)?;
        print!("{summary}");
        return publish.write(dir, &summary, None);
    }
    for d in &dirs {
        report::write(d)?;
    }
    let summary = agreement::write(dir, &dirs, None)?;
    print!("{summary}");
    publish.write_runs(dir, &dirs, &summary, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every cell's command line parses as a `pagoda` command and names devices that parse:
    /// a wrong flag or device string would otherwise show only as failed cells of a run.
    #[test]
    fn every_cell_command_line_parses() {
        use clap::Parser as _;
        for scale in [Scale::Tiny, Scale::Quick, Scale::Standard, Scale::Full] {
            for c in ALL.iter().flat_map(|e| e.cells(scale)) {
                let argv = std::iter::once("pagoda".to_string())
                    .chain(c.args.iter().cloned())
                    .chain([
                        "--seed".into(),
                        "1".into(),
                        "--json".into(),
                        "r.json".into(),
                    ]);
                if let Err(e) = crate::Cli::try_parse_from(argv) {
                    panic!("{} at {scale:?}: {e}", c.id);
                }
                for w in c.args.windows(2) {
                    let partition = w[0] == "--log"
                        && crate::cmd::bench::log_partition::parse(Some(&w[1]))
                            .unwrap_or_else(|e| panic!("{} at {scale:?}: {e}", c.id))
                            .is_some();
                    if !partition
                        && ["--data", "--log", "--flash-cache", "--device"].contains(&w[0].as_str())
                    {
                        pagoda_device::spec::DeviceSpec::parse(&w[1])
                            .unwrap_or_else(|e| panic!("{} at {scale:?}: {e}", c.id));
                    }
                }
            }
        }
    }

    #[test]
    fn cell_ids_are_unique_and_file_safe() {
        for scale in [Scale::Tiny, Scale::Quick, Scale::Standard, Scale::Full] {
            let cells: Vec<Cell> = ALL.iter().flat_map(|e| e.cells(scale)).collect();
            let mut ids: Vec<&str> = cells.iter().map(|c| c.id.as_str()).collect();
            ids.sort_unstable();
            let n = ids.len();
            ids.dedup();
            assert_eq!(ids.len(), n, "duplicate cell ids at {scale:?}");
            for c in &cells {
                assert!(
                    c.id.chars().all(|ch| ch.is_ascii_lowercase()
                        || ch.is_ascii_digit()
                        || ".-".contains(ch)),
                    "{}",
                    c.id
                );
                assert!(c.id.starts_with(&format!("{}.", c.experiment)));
                assert!(!c.args.iter().any(|a| a == "--seed" || a == "--json"));
            }
        }
    }

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(report::median(&mut [1.5, 1.0]), Some(1.25));
        assert_eq!(report::median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(report::median(&mut []), None);
    }

    /// A guard against growth: the quick scale with its three repeats stays within 18 minutes
    /// of runs here by its cells' estimates (measured: 17 min 9 s on a quiet machine). The goal
    /// is 16, which would leave 4 for the build in 20.
    #[test]
    fn quick_scale_with_its_repeats_stays_within_eighteen_minutes_of_runs() {
        let (cells, comparisons) = grid(&ALL, Scale::Quick);
        let total = schedule::wall_estimate_s(&cells, &comparisons, 1);
        assert!(total * 3 <= 18 * 60, "quick estimate {total} s per repeat");
    }

    /// The rule of the schedule on the real grid: at every scale, in both directions of a
    /// repeat and with one or two units a round, the arms of every ratio share one unit or
    /// each runs alone. (With the grouping before comparisons counted, FaCE on SSD data ran
    /// beside the original while LRU ran beside GSC, and this failed.)
    #[test]
    fn every_ratio_runs_its_arms_beside_the_same_cells() {
        for scale in [Scale::Tiny, Scale::Quick, Scale::Standard, Scale::Full] {
            let (cells, comparisons) = grid(&ALL, scale);
            for c in comparisons.iter().flatten() {
                assert!(
                    cells.iter().any(|x| x.id == *c),
                    "{c} is no cell at {scale:?}"
                );
            }
            for (repeat, slots, run) in [
                (0, 1, 0),
                (1, 1, 0),
                (0, 2, 0),
                (1, 2, 0),
                (0, 1, 1),
                (1, 1, 1),
                (0, 2, 1),
            ] {
                let rounds = schedule::plan_ids(&cells, &comparisons, repeat, slots, run);
                if let Err(e) = schedule::fair(&rounds, &comparisons) {
                    panic!("{scale:?}, run {run}, repeat {repeat}, {slots} a round: {e}");
                }
            }
        }
    }

    /// The standard scale, two independent runs of three repeats each, stays within 2 hours
    /// on a fresh clone: 110 minutes of cells leave 10 for the build.
    #[test]
    fn standard_scale_with_its_runs_and_repeats_stays_within_two_hours() {
        let (cells, comparisons) = grid(&ALL, Scale::Standard);
        let total = schedule::wall_estimate_s(&cells, &comparisons, 1);
        assert!(
            total * 3 * 2 <= 110 * 60,
            "standard estimate {total} s per repeat"
        );
    }

    /// A second run starts the grid elsewhere and in the other direction: no cell has the
    /// same cell before it in both runs' first repeats, and every cell runs in each.
    #[test]
    fn independent_runs_take_the_cells_in_different_orders() {
        let (cells, _) = grid(&ALL, Scale::Standard);
        let ids = |run| -> Vec<&str> {
            schedule::order(&cells, 0, run)
                .iter()
                .map(|c| c.id.as_str())
                .collect()
        };
        let (a, b) = (ids(0), ids(1));
        assert_ne!(a[0], b[0]);
        let mut sa = a.clone();
        let mut sb = b.clone();
        sa.sort_unstable();
        sb.sort_unstable();
        assert_eq!(sa, sb);
        let before = |o: &[&str], id: &str| {
            o.iter()
                .position(|x| *x == id)
                .and_then(|i| i.checked_sub(1))
                .map(|i| o[i].to_string())
        };
        let same = a
            .iter()
            .filter(|id| before(&a, id).is_some() && before(&a, id) == before(&b, id))
            .count();
        assert_eq!(same, 0, "cells with the same predecessor in both runs");
    }
}
