//! Runs the grid's cells as child processes under one progress bar, in rounds: the cells of a
//! round start together and the next round starts when all of them have ended, so every cell
//! of a round has the same neighbours. A round holds one unit (a cell, or light cells side by
//! side) with `--jobs 1`, up to `--jobs` units with more.
//!
//! The rule that makes ratios fair: the cells whose figures form one ratio (a comparison, as
//! each experiment declares it) run in one unit; when they cannot share one (a cell that is
//! not light, or more of them than a light cell allows beside it), in a round of their own
//! when `--jobs` gives them a unit each, else each alone in a round. Either way, the arms of
//! a ratio see the same neighbours for the same repeat.

use super::cell::{Cell, CellResult, RoundInfo, Running, Scale};
use crate::error::CliResult;
use crate::progress::Progress;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Cells that start together, and the repeat they run for.
#[derive(Debug)]
struct Round<'a> {
    seed: u64,
    /// In the order they start (the repeat's order: reversed on odd repeats).
    cells: Vec<&'a Cell>,
}

impl Round<'_> {
    /// Together, the cells take the time of the longest.
    fn estimate(&self) -> u64 {
        self.cells.iter().map(|c| c.estimate_s).max().unwrap_or(0)
    }

    fn label(&self, index: usize, rounds: usize) -> String {
        let ids: Vec<&str> = self.cells.iter().map(|c| c.id.as_str()).collect();
        format!(
            "round {index}/{rounds}: {} (seed {})",
            ids.join(" + "),
            self.seed
        )
    }
}

/// Where results go and what each records.
pub(crate) struct Target<'p> {
    pub scale: Scale,
    pub out: &'p Path,
    /// Recorded in every result (`reproduce cell --jobs N` records what the batch system ran).
    pub jobs: u64,
}

/// The 1-minute load average now, from `/proc/loadavg` (`None` where there is none).
pub(crate) fn load_1m() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Runs `rounds` one after another and saves each cell's result in `out/cells/ID.sSEED.json`
/// (also when it fails: the report then says why). About every 200 ms `tick` gets the
/// estimated seconds done and a message naming the running round; `done` sees each result
/// as it is saved. Results come back in the rounds' order.
fn run_rounds(
    rounds: &[Round],
    t: &Target,
    tick: &mut dyn FnMut(u64, String),
    done: &mut dyn FnMut(&CellResult),
) -> CliResult<Vec<CellResult>> {
    let run_started = unix_now();
    let mut out = Vec::new();
    let mut finished_s = 0u64;
    for (i, round) in rounds.iter().enumerate() {
        let info = RoundInfo {
            run_started_unix_s: run_started,
            index: i + 1,
            of: rounds.len(),
            cells: round.cells.iter().map(|c| c.id.clone()).collect(),
            load_1m: load_1m(),
        };
        let label = round.label(i + 1, rounds.len());
        let start = Instant::now();
        let mut children: Vec<Option<Running>> = Vec::with_capacity(round.cells.len());
        let mut results = Vec::new();
        let outcome = (|| -> CliResult<()> {
            for c in &round.cells {
                let run = Running::spawn(c, round.seed, t.jobs, Some(info.clone()), t.out)?;
                children.push(Some(run));
            }
            while children.iter().any(Option::is_some) {
                for slot in &mut children {
                    if let Some(status) = slot.as_mut().map(Running::poll).transpose()?.flatten() {
                        let run = slot.take().expect("polled above");
                        let r = run.finish(status, t.scale)?;
                        done(&r);
                        results.push(r);
                    }
                }
                let into = start.elapsed().as_secs().min(round.estimate());
                tick(finished_s + into, label.clone());
                if children.iter().any(Option::is_some) {
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
            Ok(())
        })();
        if outcome.is_err() {
            // No cell outlives a run that gave up.
            for run in children.iter_mut().flatten() {
                run.kill();
            }
        }
        outcome?;
        // In the round's start order, whichever ended first.
        results.sort_by_key(|r| round.cells.iter().position(|c| c.id == r.cell.id));
        out.extend(results);
        finished_s += round.estimate();
    }
    Ok(out)
}

/// Runs one cell as a child process and saves its result; `tick` gets the seconds elapsed.
pub(crate) fn run_cell(
    cell: &Cell,
    seed: u64,
    t: &Target,
    tick: &mut dyn FnMut(Duration),
) -> CliResult<CellResult> {
    let round = Round {
        seed,
        cells: vec![cell],
    };
    let start = Instant::now();
    let mut r = run_rounds(&[round], t, &mut |_, _| tick(start.elapsed()), &mut |_| {})?;
    Ok(r.remove(0))
}

/// The order the cells of one repeat start in. Run 0 (the first of independent runs) takes
/// the grid's order on even repeats and its reverse on odd ones, so no configuration always
/// starts first or always has the same cells before it; every later run starts the grid at
/// another place (rotated by `run` halves of it) and flips the directions, so two runs see
/// the cells in different orders and a verdict that holds in both does not hang on one.
pub(crate) fn order(cells: &[Cell], repeat: usize, run: usize) -> Vec<&Cell> {
    let mut order: Vec<&Cell> = cells.iter().collect();
    if !order.is_empty() {
        let by = (run * order.len() / 2) % order.len();
        order.rotate_left(by);
    }
    if (repeat + run) % 2 == 1 {
        order.reverse();
    }
    order
}

/// The rounds of every repeat of independent run `run`: each repeat runs every cell once,
/// so the configurations a ratio compares run close in time, in [`order`].
fn plan<'a>(
    cells: &'a [Cell],
    comparisons: &[Vec<String>],
    seeds: &[u64],
    slots: usize,
    run: usize,
) -> Vec<Round<'a>> {
    let mut out = Vec::new();
    for (repeat, &seed) in seeds.iter().enumerate() {
        let order = order(cells, repeat, run);
        for cells in rounds(&order, comparisons, slots) {
            out.push(Round {
                seed,
                cells: cells.into_iter().flatten().collect(),
            });
        }
    }
    out
}

/// Runs every cell once per seed, in the order of independent run `run`, with one progress
/// bar over the rounds' estimated time.
pub(crate) fn run_all(
    cells: &[Cell],
    comparisons: &[Vec<String>],
    seeds: &[u64],
    t: &Target,
    run: usize,
) -> CliResult<Vec<CellResult>> {
    let slots = usize::try_from(t.jobs).unwrap_or(usize::MAX);
    let rounds = plan(cells, comparisons, seeds, slots, run);
    let total: u64 = rounds.iter().map(Round::estimate).sum();
    let mut bar = Progress::new("reproduce", "s", total.max(1));
    let results = run_rounds(
        &rounds,
        t,
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

/// Seconds one repeat of `cells` should take with `jobs` units a round: the sum of each
/// round's longest cell.
pub(crate) fn wall_estimate_s(cells: &[Cell], comparisons: &[Vec<String>], jobs: u64) -> u64 {
    let slots = usize::try_from(jobs).unwrap_or(usize::MAX);
    plan(cells, comparisons, &[0], slots, 0)
        .iter()
        .map(Round::estimate)
        .sum()
}

/// A run of cells the order keeps together: the cells of one comparison (linked through
/// shared cells), at the place of the first of them, or one cell that is in none.
struct Block<'a> {
    cells: Vec<&'a Cell>,
}

impl Block<'_> {
    /// How many cells may share a unit with these (0 when one of them is not light).
    fn room(&self) -> usize {
        if self.cells.iter().all(|c| c.light) {
            self.cells.iter().map(|c| c.together()).min().unwrap_or(1)
        } else {
            0
        }
    }
}

/// The order's cells as blocks: each comparison's cells (with every comparison that shares
/// a cell with it) together, where the first of them stands in the order.
fn blocks<'a>(order: &[&'a Cell], comparisons: &[Vec<String>]) -> Vec<Block<'a>> {
    // Union-find over the cells' ids: a cell in two comparisons joins them.
    let index: HashMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id.as_str(), i))
        .collect();
    let mut parent: Vec<usize> = (0..order.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for arms in comparisons {
        let ids: Vec<usize> = arms
            .iter()
            .filter_map(|id| index.get(id.as_str()).copied())
            .collect();
        for w in ids.windows(2) {
            let (a, b) = (root(&mut parent, w[0]), root(&mut parent, w[1]));
            parent[a] = b;
        }
    }
    let mut at: HashMap<usize, usize> = HashMap::new();
    let mut out: Vec<Block> = Vec::new();
    for (i, c) in order.iter().enumerate() {
        let r = root(&mut parent, i);
        match at.get(&r) {
            Some(&b) => out[b].cells.push(c),
            None => {
                at.insert(r, out.len());
                out.push(Block { cells: vec![c] });
            }
        }
    }
    out
}

/// The order's cells in rounds of units (each unit: cells that start together under one of
/// `slots`). A block that fits one unit (all light, no more cells than each allows beside
/// it) stays whole, beside the light blocks next to it while they all fit, and other units
/// fill its round up to `slots`. A block of several cells that does not fit one unit gets a
/// round to itself, one cell a unit, when it has no more cells than `slots`, and else runs
/// each cell alone in a round: so the arms of every ratio share a round, or each is alone.
fn rounds<'a>(
    order: &[&'a Cell],
    comparisons: &[Vec<String>],
    slots: usize,
) -> Vec<Vec<Vec<&'a Cell>>> {
    let slots = slots.max(1);
    let mut out: Vec<Vec<Vec<&Cell>>> = Vec::new();
    // The last round may take more units; its last unit takes up to `room` cells.
    let (mut open, mut room) = (false, 0);
    for b in blocks(order, comparisons) {
        let r = b.room();
        let n = b.cells.len();
        let last = out.last_mut().filter(|_| open);
        if r >= n {
            match last {
                Some(round) => {
                    let unit = round.last_mut().expect("a round holds a unit");
                    if unit.len() + n <= room.min(r) {
                        unit.extend(b.cells);
                        room = room.min(r);
                    } else if round.len() < slots {
                        round.push(b.cells);
                        room = r;
                    } else {
                        out.push(vec![b.cells]);
                        room = r;
                    }
                }
                None => {
                    out.push(vec![b.cells]);
                    room = r;
                }
            }
            open = true;
        } else if n == 1 {
            // A cell that is not light and in no comparison: a unit of its own.
            match last {
                Some(round) if round.len() < slots => round.push(b.cells),
                _ => out.push(vec![b.cells]),
            }
            (open, room) = (true, 0);
        } else if n <= slots {
            out.push(b.cells.into_iter().map(|c| vec![c]).collect());
            (open, room) = (false, 0);
        } else {
            out.extend(b.cells.into_iter().map(|c| vec![vec![c]]));
            (open, room) = (false, 0);
        }
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

/// `Ok` when the arms of every comparison share one round or each is alone in its round, in
/// `rounds` (ids of each round's units); else the first comparison that does not.
#[cfg(test)]
pub(crate) fn fair<S: AsRef<str>>(
    rounds: &[Vec<Vec<S>>],
    comparisons: &[Vec<String>],
) -> Result<(), String> {
    let at = |id: &str| {
        rounds.iter().enumerate().find_map(|(r, units)| {
            units
                .iter()
                .position(|u| u.iter().any(|c| c.as_ref() == id))
                .map(|u| (r, u))
        })
    };
    for arms in comparisons {
        let places: Vec<(usize, usize)> = arms.iter().filter_map(|a| at(a)).collect();
        let one_round = places.windows(2).all(|w| w[0].0 == w[1].0);
        let all_alone = places
            .iter()
            .all(|&(r, _)| rounds[r].iter().map(Vec::len).sum::<usize>() == 1);
        if !one_round && !all_alone {
            return Err(format!("{arms:?} ran beside different cells: {places:?}"));
        }
    }
    Ok(())
}

/// The ids of each round's units in one repeat of independent run `run` (see [`order`]).
#[cfg(test)]
pub(crate) fn plan_ids(
    cells: &[Cell],
    comparisons: &[Vec<String>],
    repeat: usize,
    slots: usize,
    run: usize,
) -> Vec<Vec<Vec<String>>> {
    rounds(&order(cells, repeat, run), comparisons, slots)
        .iter()
        .map(|r| {
            r.iter()
                .map(|u| u.iter().map(|c| c.id.clone()).collect())
                .collect()
        })
        .collect()
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

    /// The ids of each unit the cells run in, with no comparisons and one unit a round.
    fn ids(cells: &[Cell]) -> Vec<Vec<&str>> {
        compared(cells, &[], 1)
            .into_iter()
            .map(|round| round.into_iter().flatten().collect())
            .collect()
    }

    /// The ids of each round's units.
    fn compared<'a>(
        cells: &'a [Cell],
        comparisons: &[&[&str]],
        slots: usize,
    ) -> Vec<Vec<Vec<&'a str>>> {
        let order: Vec<&Cell> = cells.iter().collect();
        let comparisons: Vec<Vec<String>> = comparisons
            .iter()
            .map(|c| c.iter().map(|n| format!("x.{n}")).collect())
            .collect();
        rounds(&order, &comparisons, slots)
            .iter()
            .map(|r| {
                r.iter()
                    .map(|u| u.iter().map(|c| c.id.as_str()).collect())
                    .collect()
            })
            .collect()
    }

    /// The grouping before comparisons counted: [a, b] [c, d] put the arms b and c beside
    /// different cells. Now they share a unit, and what does not fit beside them runs apart.
    #[test]
    fn the_arms_of_a_ratio_share_a_unit() {
        let cells = [
            cell("a", true),
            cell("b", true),
            cell("c", true),
            cell("d", true),
        ];
        assert_eq!(
            compared(&cells, &[&["b", "c"]], 1),
            vec![
                vec![vec!["x.a"]],
                vec![vec!["x.b", "x.c"]],
                vec![vec!["x.d"]]
            ]
        );
        // Wherever the arms stand in the order (a round in reverse included).
        let rev = [
            cell("d", true),
            cell("c", true),
            cell("b", true),
            cell("a", true),
        ];
        let r = compared(&rev, &[&["a", "c"]], 1);
        assert_eq!(r[1], vec![vec!["x.c", "x.a"]], "{r:?}");
        assert_eq!(check(&rev, &[&["a", "c"]], 1), Ok(()));
    }

    /// Four light cells that allow two at a time cannot share one unit: each arm runs alone,
    /// also with `--jobs 2` (which would otherwise put two units in one round).
    #[test]
    fn a_ratio_too_large_for_one_unit_runs_each_arm_alone() {
        let cells = [
            cell("a", true),
            cell("b", true),
            cell("c", true),
            cell("d", true),
            cell("e", false),
            cell("f", false),
        ];
        let cmp: &[&[&str]] = &[&["a", "b"], &["b", "c", "d"]];
        assert_eq!(
            compared(&cells, cmp, 2),
            vec![
                vec![vec!["x.a"]],
                vec![vec!["x.b"]],
                vec![vec!["x.c"]],
                vec![vec!["x.d"]],
                vec![vec!["x.e"], vec!["x.f"]],
            ]
        );
        assert_eq!(check(&cells, cmp, 2), Ok(()));
        // A cell that is not light keeps its comparison's arms apart with one unit a round;
        // with two, they take a round of their own side by side.
        let cells = [cell("a", true), cell("b", false), cell("c", true)];
        assert_eq!(check(&cells, &[&["a", "b"]], 1), Ok(()));
        assert_eq!(compared(&cells, &[&["a", "b"]], 1)[0], vec![vec!["x.a"]]);
        assert_eq!(check(&cells, &[&["a", "b"]], 2), Ok(()));
        assert_eq!(
            compared(&cells, &[&["a", "b"]], 2),
            vec![vec![vec!["x.a"], vec!["x.b"]], vec![vec!["x.c"]]]
        );
    }

    /// The check itself fails the old grouping's rounds.
    #[test]
    fn the_check_catches_arms_beside_different_cells() {
        let old = vec![vec![vec!["x.a", "x.b"]], vec![vec!["x.c", "x.d"]]];
        assert!(fair(&old, &[vec!["x.b".into(), "x.c".into()]]).is_err());
        let alone = vec![vec![vec!["x.b"]], vec![vec!["x.c"]]];
        assert!(fair(&alone, &[vec!["x.b".into(), "x.c".into()]]).is_ok());
    }

    fn check(cells: &[Cell], comparisons: &[&[&str]], slots: usize) -> Result<(), String> {
        let cmp: Vec<Vec<String>> = comparisons
            .iter()
            .map(|c| c.iter().map(|n| format!("x.{n}")).collect())
            .collect();
        fair(&compared(cells, comparisons, slots), &cmp)
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
            round: None,
            typed: Default::default(),
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
        assert_eq!(wall_estimate_s(&cells, &[], 1), 3);
        assert_eq!(wall_estimate_s(&cells, &[], 2), 2);
    }
}
