//! `pagoda experiment`: experiments written as TOML files (cells, values per scale,
//! comparisons with bands), run by the same runner as the seeds' reproduction: the same
//! rounds and fair neighbours, `--jobs`, independent runs, sharding (`plan`, `cell`,
//! `report`), tables, plots and `--publish`.

mod cells;
mod format;
mod metric;
mod section;

use super::cell::{Cell, Scale};
use super::run::{self, GridArgs, PublishArgs, RunArgs};
use super::{agreement, report};
use crate::error::{CliError, CliResult};
use clap::Subcommand;
use format::ExperimentFile;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `pagoda experiment ...`
#[derive(Debug, Subcommand)]
pub enum ExperimentCommand {
    /// Run every cell of FILE with its repeats, then the report (as `reproduce all`).
    Run {
        /// The experiment file (TOML; see docs/reproduce.md, "Experiment files").
        file: PathBuf,
        #[command(flatten)]
        grid: GridArgs,
    },
    /// Check FILE and print its grid as JSON, one command line per run (for a batch system).
    Plan {
        /// The experiment file.
        file: PathBuf,
        /// The scale whose values fill the cells.
        #[arg(long, value_enum, default_value = "quick")]
        scale: Scale,
        /// Seed of the first repeat.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Runs of every cell [default: the file's `repeats`].
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=20))]
        repeats: Option<u64>,
        /// Output directory written into each cell's command line.
        #[arg(long, default_value = "pagoda-experiment")]
        out: String,
    },
    /// Run one cell of FILE and save its result under --out.
    Cell {
        /// The experiment file.
        file: PathBuf,
        /// The cell's id, as `experiment plan` lists it.
        id: String,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Merge the cell results in DIR (or its runs) into DIR/index.md and plots.
    Report {
        /// The experiment file.
        file: PathBuf,
        /// The directory the cells wrote to.
        dir: PathBuf,
        #[command(flatten)]
        publish: PublishArgs,
    },
}

/// Runs an `experiment` subcommand.
pub fn run(cmd: ExperimentCommand) -> CliResult<()> {
    match cmd {
        ExperimentCommand::Run { file, mut grid } => {
            let f = format::load(&file)?;
            let cells = cells(&f, &file, grid.run.scale)?;
            grid.run.repeats.get_or_insert(f.repeats);
            let comparisons = comparisons(&f, &cells);
            let name = vec![f.name.clone()];
            run::run_grid(&name, &cells, &comparisons, &grid, Some(&f.title), &|dir| {
                write_report(&f, dir)
            })
        }
        ExperimentCommand::Plan {
            file,
            scale,
            seed,
            repeats,
            out,
        } => {
            let f = format::load(&file)?;
            let cells = cells(&f, &file, scale)?;
            let seeds: Vec<u64> = (0..repeats.unwrap_or(f.repeats))
                .map(|k| seed + k)
                .collect();
            let report = format!("pagoda experiment report {} {out}", file.display());
            let plan = super::plan_json(
                &cells,
                &comparisons(&f, &cells),
                scale,
                &seeds,
                &out,
                &report,
            );
            println!("{plan}");
            Ok(())
        }
        ExperimentCommand::Cell { file, id, run } => {
            let f = format::load(&file)?;
            let all = cells(&f, &file, run.scale)?;
            super::run_one_cell(
                &all,
                &id,
                &run,
                &format!("`pagoda experiment plan {}`", file.display()),
            )
        }
        ExperimentCommand::Report { file, dir, publish } => {
            let f = format::load(&file)?;
            let runs = agreement::run_dirs(&dir);
            if runs.is_empty() {
                let summary = write_report(&f, &dir)?;
                print!("{summary}");
                return publish.write(&dir, &summary, Some(&f.title));
            }
            for d in &runs {
                write_report(&f, d)?;
            }
            let summary = agreement::write(&dir, &runs, Some(&f.title))?;
            print!("{summary}");
            publish.write_runs(&dir, &runs, &summary, Some(&f.title))
        }
    }
}

/// The seeds' experiment files, in the binary: `reproduce` runs from anywhere.
const SEEDS: [(&str, &str); 5] = [
    (
        "face",
        include_str!("../../../../experiments/seeds/face.toml"),
    ),
    (
        "dwb-ftl",
        include_str!("../../../../experiments/seeds/dwb-ftl.toml"),
    ),
    (
        "pipelined-commit",
        include_str!("../../../../experiments/seeds/pipelined-commit.toml"),
    ),
    (
        "atomic-write",
        include_str!("../../../../experiments/seeds/atomic-write.toml"),
    ),
    (
        "buffer-sweep",
        include_str!("../../../../experiments/seeds/buffer-sweep.toml"),
    ),
];

/// The seed experiment `name`'s file, parsed once. The files are part of the binary and a
/// test loads each, so a failure here is a build that skipped the tests.
fn seed_file(name: &str) -> &'static ExperimentFile {
    static FILES: OnceLock<Vec<(&'static str, ExperimentFile)>> = OnceLock::new();
    let files = FILES.get_or_init(|| {
        SEEDS
            .iter()
            .map(|(n, text)| {
                let f = format::parse(text)
                    .unwrap_or_else(|e| panic!("experiments/seeds/{n}.toml: {e}"));
                (*n, f)
            })
            .collect()
    });
    &files
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no seed experiment '{name}'"))
        .1
}

pub(crate) use super::report::SeedRow;

/// Row `id` of seed experiment `name`'s file (the tiny reproduction, run by the tests,
/// reads every row the reports use).
pub(crate) fn seed_row(name: &str, id: &str) -> SeedRow {
    let f = seed_file(name);
    let r = f
        .rows
        .iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("experiments/seeds/{name}.toml has no [[row]] '{id}'"));
    let band = r.band.as_ref().map(|b| {
        let (lo, hi, rule) = b.bounds().expect("checked when the file was read");
        super::report::Band::range(lo, hi, r.rule.as_deref().unwrap_or(&rule))
    });
    SeedRow {
        what: r.what.clone(),
        seed: r.seed.clone(),
        band,
        beyond: r.beyond.clone(),
    }
}

/// The seed experiment `name`'s cells at `scale`, and the sets its ratios compare.
pub(crate) fn seed_grid(name: &str, scale: Scale) -> (Vec<Cell>, Vec<Vec<String>>) {
    let f = seed_file(name);
    let cells = f
        .cells_at(scale, None)
        .unwrap_or_else(|e| panic!("experiments/seeds/{name}.toml: {e}"));
    let comps = comparisons(f, &cells);
    (cells, comps)
}

/// The sets of `cells` (of seed experiment `name`) its ratios compare.
pub(crate) fn seed_comparisons(name: &str, cells: &[Cell]) -> Vec<Vec<String>> {
    comparisons(seed_file(name), cells)
}

fn cells(f: &ExperimentFile, file: &Path, scale: Scale) -> CliResult<Vec<Cell>> {
    f.cells_at(scale, Some(file))
        .map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))
}

/// Each comparison's cells and each `compared` set, by id, as far as they are among `cells`:
/// the scheduler runs each set beside the same neighbours.
fn comparisons(f: &ExperimentFile, cells: &[Cell]) -> Vec<Vec<String>> {
    f.comparisons
        .iter()
        .map(|k| k.cells.to_vec())
        .chain(f.compared.iter().cloned())
        .map(|set| {
            set.iter()
                .map(|c| format!("{}.{c}", f.name))
                .filter(|id| cells.iter().any(|x| x.id == *id))
                .collect::<Vec<String>>()
        })
        .filter(|set| !set.is_empty())
        .collect()
}

fn write_report(f: &ExperimentFile, dir: &Path) -> CliResult<String> {
    report::write_with(dir, Some(&f.title), &|ctx, results| {
        let mine: Vec<&super::cell::CellResult> = results
            .iter()
            .filter(|r| r.cell.experiment == f.name)
            .collect();
        Ok(vec![(f.name.clone(), section::section(f, ctx, &mine)?)])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shipped experiment file loads, and every cell of it, at each scale it lists,
    /// parses as a `pagoda` command line.
    #[test]
    fn the_shipped_experiment_files_load_and_their_cells_parse() {
        use clap::Parser as _;
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments");
        let mut seen = 0;
        for e in std::fs::read_dir(&dir).expect("experiments/") {
            let path = e.expect("an entry").path();
            if path.extension().and_then(|x| x.to_str()) != Some("toml") {
                continue;
            }
            seen += 1;
            let f = format::load(&path).unwrap_or_else(|e| panic!("{e}"));
            for scale in f.scales.keys() {
                for c in cells(&f, &path, *scale).unwrap_or_else(|e| panic!("{e}")) {
                    let argv = std::iter::once("pagoda".to_string())
                        .chain(c.args.iter().cloned())
                        .chain([
                            "--seed".into(),
                            "1".into(),
                            "--json".into(),
                            "r.json".into(),
                        ]);
                    if let Err(e) = crate::Cli::try_parse_from(argv) {
                        panic!("{} {} at {scale:?}: {e}", path.display(), c.id);
                    }
                }
            }
        }
        assert!(seen > 0, "no experiment files in {}", dir.display());
    }

    /// docs/reproduce.md shows the example file as it is shipped.
    #[test]
    fn the_documented_example_is_the_shipped_file() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let file =
            std::fs::read_to_string(root.join("crates/pagoda/experiments/flash-cache-sweep.toml"))
                .expect("the example");
        let doc = std::fs::read_to_string(root.join("docs/reproduce.md")).expect("the doc");
        assert!(
            doc.contains(&format!("```toml\n{file}```")),
            "docs/reproduce.md no longer shows experiments/flash-cache-sweep.toml as shipped"
        );
    }
}
