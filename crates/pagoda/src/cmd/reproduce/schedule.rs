//! Runs the grid's cells as child processes under one progress bar: one unit (a cell, or
//! light neighbours) at a time by default, or up to `--jobs` units at once. Units start in the
//! plan's order, so with `--jobs 1` the run is the sequential one; with more, the cells share
//! the machine, and the report says so from what each result recorded.

use super::cell::{Cell, CellResult, Running, Scale};
use crate::error::CliResult;
use crate::progress::Progress;
use std::path::Path;
use std::time::{Duration, Instant};

/// Cells that start together and take one of the `--jobs` slots: a cell alone, or light
/// neighbours (each bound by its own emulated disk at a few % of a core).
struct Unit<'a> {
    seed: u64,
    cells: Vec<&'a Cell>,
    /// The 1-based number of its first run among all runs (for the progress message).
    first_run: usize,
}

impl Unit<'_> {
    fn estimate(&self) -> u64 {
        self.cells.iter().map(|c| c.estimate_s).sum()
    }

    /// Together, the unit's estimates elapse in the time of its longest cell.
    fn progress(&self, t: Duration) -> u64 {
        let longest = self.cells.iter().map(|c| c.estimate_s).max().unwrap_or(1);
        let est = self.estimate();
        (t.as_secs() * est / longest.max(1)).min(est)
    }

    fn label(&self, runs: usize) -> String {
        let ids: Vec<&str> = self.cells.iter().map(|c| c.id.as_str()).collect();
        format!(
            "run {}/{runs}: {} (seed {})",
            self.first_run,
            ids.join(" + "),
            self.seed
        )
    }
}

/// A unit whose children are running.
struct Active<'a> {
    unit: usize,
    start: Instant,
    children: Vec<Option<Running<'a>>>,
    results: Vec<CellResult>,
}

/// Where results go and what each records.
pub(crate) struct Target<'p> {
    pub scale: Scale,
    pub out: &'p Path,
    /// Recorded in every result (`reproduce cell --jobs N` records what the batch system ran).
    pub jobs: u64,
}

/// Runs `units`, keeping up to `slots` of them running, and saves each cell's result in
/// `out/cells/ID.sSEED.json` (also when it fails: the report then says why). About every
/// 200 ms `tick` gets the estimated seconds done and a message naming the running units;
/// `done` sees each result as it is saved. Results come back in the units' order.
fn run_units(
    units: &[Unit],
    t: &Target,
    slots: usize,
    tick: &mut dyn FnMut(u64, String),
    done: &mut dyn FnMut(&CellResult),
) -> CliResult<Vec<CellResult>> {
    let runs: usize = units.iter().map(|u| u.cells.len()).sum();
    let mut next = 0;
    let mut active: Vec<Active> = Vec::new();
    let mut finished: Vec<Vec<CellResult>> = units.iter().map(|_| Vec::new()).collect();
    let mut finished_s = 0u64;
    let outcome = (|| -> CliResult<()> {
        while next < units.len() || !active.is_empty() {
            while active.len() < slots.max(1) && next < units.len() {
                let u = &units[next];
                let mut children = Vec::with_capacity(u.cells.len());
                for c in &u.cells {
                    children.push(Some(Running::spawn(c, u.seed, t.jobs, t.out)?));
                }
                active.push(Active {
                    unit: next,
                    start: Instant::now(),
                    children,
                    results: Vec::new(),
                });
                next += 1;
            }
            for a in &mut active {
                for slot in &mut a.children {
                    if let Some(status) = slot.as_mut().map(Running::poll).transpose()?.flatten() {
                        let run = slot.take().expect("polled above");
                        let r = run.finish(status, t.scale)?;
                        done(&r);
                        a.results.push(r);
                    }
                }
            }
            // Completed units leave their slot; their results are kept in the plan's order.
            let mut i = 0;
            while i < active.len() {
                if active[i].children.iter().all(Option::is_none) {
                    let a = active.remove(i);
                    finished_s += units[a.unit].estimate();
                    finished[a.unit] = a.results;
                } else {
                    i += 1;
                }
            }
            let into: u64 = active
                .iter()
                .map(|a| units[a.unit].progress(a.start.elapsed()))
                .sum();
            let labels: Vec<String> = active.iter().map(|a| units[a.unit].label(runs)).collect();
            tick(finished_s + into, labels.join(" | "));
            if !active.is_empty() {
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        Ok(())
    })();
    if outcome.is_err() {
        // No cell outlives a run that gave up.
        for a in &mut active {
            for run in a.children.iter_mut().flatten() {
                run.kill();
            }
        }
    }
    outcome?;
    Ok(finished.into_iter().flatten().collect())
}

/// Runs one cell as a child process and saves its result; `tick` gets the seconds elapsed.
pub(crate) fn run_cell(
    cell: &Cell,
    seed: u64,
    t: &Target,
    tick: &mut dyn FnMut(Duration),
) -> CliResult<CellResult> {
    let unit = Unit {
        seed,
        cells: vec![cell],
        first_run: 1,
    };
    let start = Instant::now();
    let mut r = run_units(
        &[unit],
        t,
        1,
        &mut |_, _| tick(start.elapsed()),
        &mut |_| {},
    )?;
    Ok(r.remove(0))
}

/// Runs every cell once per seed with one progress bar over their estimated time, in rounds:
/// each round runs every cell once, so the configurations a ratio compares run close in time;
/// odd rounds run the cells in reverse, so no configuration always runs first. Two light cells
/// next to each other run at the same time; `t.jobs` units run at once.
pub(crate) fn run_all(cells: &[Cell], seeds: &[u64], t: &Target) -> CliResult<Vec<CellResult>> {
    let mut units = Vec::new();
    let mut first_run = 1;
    for (round, &seed) in seeds.iter().enumerate() {
        let order: Vec<&Cell> = if round % 2 == 1 {
            cells.iter().rev().collect()
        } else {
            cells.iter().collect()
        };
        for g in groups(&order) {
            let n = g.len();
            units.push(Unit {
                seed,
                cells: g,
                first_run,
            });
            first_run += n;
        }
    }
    let total: u64 = units.iter().map(Unit::estimate).sum();
    let mut bar = Progress::new("reproduce", "s", total.max(1));
    let slots = usize::try_from(t.jobs).unwrap_or(usize::MAX);
    let results = run_units(
        &units,
        t,
        slots,
        &mut |at, msg| bar.set_with_message(at, msg),
        &mut |r| {
            if let (Some(e), false) = (&r.error, r.cell.may_fail) {
                eprintln!(
                    "reproduce: cell {} (seed {}) failed: {e}",
                    r.cell.id, r.seed
                );
            }
        },
    )?;
    bar.finish();
    Ok(results)
}

/// Seconds one round of `cells` should take with `jobs` units at once, light pairs counted
/// once (by the longer).
pub(crate) fn wall_estimate_s(cells: &[Cell], jobs: u64) -> u64 {
    let order: Vec<&Cell> = cells.iter().collect();
    let sum: u64 = groups(&order)
        .iter()
        .map(|g| g.iter().map(|c| c.estimate_s).max().unwrap_or(0))
        .sum();
    sum.div_ceil(jobs.max(1))
}

/// The order's cells in groups run together: light cells next to each other, as many as
/// each of them allows (two unless it says more), else one.
fn groups<'a>(order: &[&'a Cell]) -> Vec<Vec<&'a Cell>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let mut group = vec![order[i]];
        let mut room = if order[i].light {
            order[i].together()
        } else {
            1
        };
        while let Some(c) = order.get(i + group.len()) {
            if !c.light || group.len() >= room.min(c.together()) {
                break;
            }
            room = room.min(c.together());
            group.push(c);
        }
        i += group.len();
        out.push(group);
    }
    out
}

/// The most results whose runs overlapped in time (from their start times and durations;
/// `None` when some result does not record its start).
pub(crate) fn most_at_once(results: &[CellResult]) -> Option<usize> {
    let mut edges = Vec::with_capacity(results.len() * 2);
    for r in results {
        let s = r.started_unix_s?;
        edges.push((s + r.elapsed_s, -1i32));
        edges.push((s, 1));
    }
    // Ends sort before starts at the same instant: back-to-back cells did not overlap.
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    usize::try_from(most).ok()
}

/// One sentence for the report on how the cells shared the machine.
pub(crate) fn concurrency_note(results: &[CellResult]) -> String {
    let jobs = results.iter().map(|r| r.jobs).max().unwrap_or(1);
    let seen = most_at_once(results).map_or_else(String::new, |k| {
        format!(", at most {k} at once by their start and end times")
    });
    if jobs > 1 {
        format!(
            "Cells ran **concurrently**, up to {jobs} at a time (`--jobs {jobs}`{seen}): they \
             shared this machine's CPU, which changes what is measured (each cell's regime table \
             shows its load); `--jobs 1` is the measured default."
        )
    } else {
        format!(
            "Cells ran one at a time (`--jobs 1`; `reproduce all` runs light cells side by \
             side, two at once or four that barely use a core{seen})."
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn cell(name: &str, light: bool) -> Cell {
        let c = Cell::new("x", name, &[], 1, Value::Null);
        if light {
            c.light()
        } else {
            c
        }
    }

    /// The ids of each group the cells run in.
    fn ids(cells: &[Cell]) -> Vec<Vec<&str>> {
        let order: Vec<&Cell> = cells.iter().collect();
        groups(&order)
            .iter()
            .map(|g| g.iter().map(|c| c.id.as_str()).collect())
            .collect()
    }

    #[test]
    fn a_group_holds_no_more_than_each_member_allows() {
        let four = |n: &str| Cell::new("x", n, &[], 1, Value::Null).light_among(4);
        let cells = [
            four("a"),
            four("b"),
            four("c"),
            four("d"),
            four("e"),
            four("f"),
            cell("g", true),
            four("h"),
            four("i"),
        ];
        assert_eq!(
            ids(&cells),
            vec![
                vec!["x.a", "x.b", "x.c", "x.d"],
                vec!["x.e", "x.f"],
                vec!["x.g", "x.h"],
                vec!["x.i"],
            ]
        );
    }

    #[test]
    fn only_neighbouring_light_cells_run_together() {
        let cells = [
            cell("a", true),
            cell("b", true),
            cell("c", true),
            cell("d", false),
            cell("e", true),
            cell("f", false),
        ];
        assert_eq!(
            ids(&cells),
            vec![
                vec!["x.a", "x.b"],
                vec!["x.c"],
                vec!["x.d"],
                vec!["x.e"],
                vec!["x.f"]
            ]
        );
    }

    fn ran(start: f64, elapsed_s: f64) -> CellResult {
        CellResult {
            cell: cell("a", false),
            scale: Scale::Tiny,
            seed: 1,
            machine: Value::Null,
            elapsed_s,
            ok: true,
            error: None,
            result: Value::Null,
            jobs: 1,
            started_unix_s: Some(start),
        }
    }

    #[test]
    fn overlap_counts_runs_alive_at_one_instant() {
        // Back to back: never two at once.
        assert_eq!(most_at_once(&[ran(0.0, 5.0), ran(5.0, 5.0)]), Some(1));
        // Two runs inside the first, one after the other: two at once, not three.
        let r = [ran(0.0, 10.0), ran(1.0, 1.0), ran(2.5, 5.0), ran(20.0, 1.0)];
        assert_eq!(most_at_once(&r), Some(2));
        let r = [ran(0.0, 10.0), ran(1.0, 5.0), ran(2.0, 1.0)];
        assert_eq!(most_at_once(&r), Some(3));
        let mut old = ran(0.0, 1.0);
        old.started_unix_s = None;
        assert_eq!(most_at_once(&[old]), None);
    }

    #[test]
    fn the_estimate_divides_by_the_jobs() {
        let cells = [cell("a", false), cell("b", false), cell("c", false)];
        assert_eq!(wall_estimate_s(&cells, 1), 3);
        assert_eq!(wall_estimate_s(&cells, 2), 2);
    }
}
