//! Seed 003's ablation cells, read back: each changes one factor of a row that missed, and the
//! atomic-over-none row's cause is computed from what its two ablations measured.

use super::{page_write_bound, MODES};
use crate::cmd::reproduce::cell::CellResult;
use crate::cmd::reproduce::outcome::{fig, Fig, Outcome};
use crate::cmd::reproduce::repeats::{self, Group, Spread};
use crate::cmd::reproduce::report::{find, fmt_num, Band};

/// What the ablation showed: `mode` against InnoDB's double-write with the log on a
/// power-loss-protected cache, so that commits stop waiting on the log sync.
pub(super) fn ablation(results: &[&CellResult], mode: &str) -> Option<(Spread, String)> {
    let get = |mode: &str| find(results, &[("kind", "ablation"), ("mode", mode)]);
    let (full, other) = (get("doublewrite-full")?, get(mode)?);
    let r = repeats::ratio(Some(&other), Some(&full), fig::tpmc)?;
    let in_regime = full
        .runs
        .iter()
        .chain(&other.runs)
        .filter(|r| page_write_bound(r))
        .count();
    let runs = full.runs.len() + other.runs.len();
    let label = MODES.iter().find(|m| m.0 == mode).map_or(mode, |m| m.1);
    let text = format!(
        "with the log on a power-loss-protected SSD (a log sync no longer bounds commits), \
         {label} vs InnoDB double-write is {} tpmC; {in_regime} of {runs} of these runs were \
         bound by page writes as the seed's (data device {:.0} % busy, commit {:.0} % of \
         transaction time, medians of the double-write runs)",
        r.times(),
        full.num(fig::data_busy).unwrap_or(0.0) * 100.0,
        full.num(fig::commit_share).unwrap_or(0.0) * 100.0,
    );
    Some((r, text))
}

/// One ablation of the atomic-over-none row: the factor it changes, the ratio it measured and
/// its report line.
pub(super) struct RowAblation {
    factor: &'static str,
    pub(super) ratio: Spread,
    pub(super) text: String,
}

/// The split ablation: atomic against `none` whose 16 KiB page writes reach the data device
/// as 4 KiB requests in turn, from the first combination of the grid.
pub(super) fn split_ablation(results: &[&CellResult]) -> Option<RowAblation> {
    let split = find(results, &[("kind", "split"), ("mode", "none")])?;
    let atomic = beside(results, &split, "tpcc", "atomic")?;
    let ratio = repeats::ratio(Some(&atomic), Some(&split), fig::tpmc)?;
    let text = format!(
        "with the unprotected mode's 16 KiB page writes reaching the device as 4 KiB requests \
         one after another (`split=4KiB`: a host path whose extents are not aligned to the \
         page), atomic vs none is {} tpmC ({} requests per 16 KiB of data written, against \
         {} for atomic; data device {:.0} % busy, medians)",
        ratio.times(),
        requests_per_page(Some(&split)),
        requests_per_page(Some(&atomic)),
        split.num(fig::data_busy).unwrap_or(0.0) * 100.0,
    );
    Some(RowAblation {
        factor: "4 KiB requests (split)",
        ratio,
        text,
    })
}

/// The page-cache ablation (the seed's own explanation): atomic against `none` whose data
/// device sits behind a host page cache, as the seed's `no_double` ran without O_DIRECT.
pub(super) fn pagecache_ablation(results: &[&CellResult]) -> Option<RowAblation> {
    let cached = find(results, &[("kind", "pagecache"), ("mode", "none")])?;
    let atomic = beside(results, &cached, "tpcc", "atomic")?;
    let direct = beside(results, &cached, "tpcc", "none");
    let ratio = repeats::ratio(Some(&atomic), Some(&cached), fig::tpmc)?;
    let reads = |g: Option<&Group>| fmt_num(g.and_then(|g| g.num(fig::data_read_requests)));
    let page_cache = |o: &Outcome| o.data()?.page_cache.clone();
    let hits = cached.num(|o| Some(page_cache(o)?.read_hit_pages as f64));
    let misses = cached.num(|o| Some(page_cache(o)?.read_miss_pages as f64));
    let hit_share = match (hits, misses) {
        (Some(h), Some(m)) if h + m > 0.0 => format!("{:.0} %", h / (h + m) * 100.0),
        _ => "–".to_string(),
    };
    let text = format!(
        "with the unprotected mode's data device behind a host page cache of {} MiB \
         (`pagecache`: buffered writes copied into RAM and written back sorted and merged at \
         each fsync, without O_DIRECT, as the seed's no_double ran), atomic vs none is {} tpmC \
         ({} requests per 16 KiB of data written, against {} for atomic; data device {:.0} % \
         busy, against {:.0} % for atomic; {hit_share} of the page reads served by the page \
         cache, {} data-device read requests against {} for none without it; medians)",
        fmt_num(
            cached
                .param("pagecache_mib")
                .and_then(serde_json::Value::as_f64)
        ),
        ratio.times(),
        requests_per_page(Some(&cached)),
        requests_per_page(Some(&atomic)),
        cached.num(fig::data_busy).unwrap_or(0.0) * 100.0,
        atomic.num(fig::data_busy).unwrap_or(0.0) * 100.0,
        reads(Some(&cached)),
        reads(direct.as_ref()),
    );
    Some(RowAblation {
        factor: "the host page cache (buffered I/O instead of O_DIRECT)",
        ratio,
        text,
    })
}

/// The atomic-over-none row's cause, from what its ablations measured: the factor whose cell
/// puts every repeat of the ratio inside `band` (with that cell's figure and the grid's), or
/// "cause not found" with every ablation's figure.
pub(super) fn cause(band: &Band, grid: Option<&Spread>, ablations: &[&RowAblation]) -> String {
    let grid = grid.map_or_else(|| "–".to_string(), Spread::times);
    if ablations.is_empty() {
        return "cause not found: no ablation cell of this row ran at this scale".to_string();
    }
    let inside = |a: &&&RowAblation| band.judge(Some(&a.ratio), "", "").key() == "within";
    let moved: Vec<String> = ablations
        .iter()
        .filter(inside)
        .map(|a| format!("{}: atomic vs none {}", a.factor, a.ratio.times()))
        .collect();
    if !moved.is_empty() {
        return format!(
            "measured cause: {} against {grid} without it, inside {}",
            moved.join("; "),
            band.rule
        );
    }
    let figures: Vec<String> = ablations
        .iter()
        .map(|a| format!("{} {}", a.factor, a.ratio.times()))
        .collect();
    let straddle: Vec<&str> = ablations
        .iter()
        .filter(|a| (band.lo..=band.hi).contains(&a.ratio.median))
        .map(|a| a.factor)
        .collect();
    let note = if straddle.is_empty() {
        String::new()
    } else {
        format!(
            "; {} puts the median inside but not every repeat",
            straddle.join(" and ")
        )
    };
    format!(
        "cause not found: no ablation moves atomic vs none into {} (grid {grid}; {}){note}",
        band.rule,
        figures.join(", ")
    )
}

/// What the cheap-flush ablation showed: copy-skipping against InnoDB's double-write with the
/// data on a power-loss-protected SSD, beside the grid's flushes and pages written per mode.
pub(super) fn flush_ablation(results: &[&CellResult]) -> Option<(Spread, String)> {
    let full = find(
        results,
        &[("kind", "plp-data"), ("mode", "doublewrite-full")],
    )?;
    let skip = beside(results, &full, "plp-data", "doublewrite")?;
    let r = repeats::ratio(Some(&skip), Some(&full), fig::tpmc)?;
    let n = |g: Option<Group>, f: Fig| fmt_num(g.and_then(|g| g.num(f)));
    let text = format!(
        "with the data on a power-loss-protected SSD (`plp=1`: a flush costs almost nothing), \
         copy-skipping vs InnoDB's double-write is {} tpmC ({} and {} 4 KiB pages written, \
         data device {:.0} % busy, medians)",
        r.times(),
        n(Some(skip.clone()), fig::data_writes),
        n(Some(full.clone()), fig::data_writes),
        full.num(fig::data_busy).unwrap_or(0.0) * 100.0,
    );
    Some((r, text))
}

/// The cells of `kind` and `mode` in the same combination (warehouses, clients) as `of`.
pub(super) fn beside<'a>(
    results: &[&'a CellResult],
    of: &Group,
    kind: &str,
    mode: &str,
) -> Option<Group<'a>> {
    let key = |k: &str| of.param(k).map(ToString::to_string).unwrap_or_default();
    let (w, c) = (key("warehouses"), key("clients"));
    find(
        results,
        &[
            ("kind", kind),
            ("mode", mode),
            ("warehouses", &w),
            ("clients", &c),
        ],
    )
}

/// Median data-device write requests per 16 KiB written (4 KiB units), as text.
pub(super) fn requests_per_page(g: Option<&Group>) -> String {
    g.and_then(|g| {
        let req = g.num(fig::data_write_requests)?;
        let units = g.num(fig::data_writes)?;
        (units > 0.0).then(|| format!("{:.2}", req * 4.0 / units))
    })
    .unwrap_or_else(|| "–".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(factor: &'static str, min: f64, median: f64, max: f64) -> RowAblation {
        RowAblation {
            factor,
            ratio: Spread {
                median,
                min,
                max,
                n: 3,
            },
            text: String::new(),
        }
    }

    #[test]
    fn the_cause_follows_the_measurements() {
        let band = Band::range(1.1, 1.3, "the seed's 1.1-1.3x");
        let grid = Spread::of(vec![0.97, 0.98, 1.0]);
        let pc = row("page cache", 1.12, 1.2, 1.25);
        let split = row("split", 0.95, 0.97, 0.99);
        let c = cause(&band, grid.as_ref(), &[&pc, &split]);
        assert!(c.starts_with("measured cause: page cache"), "{c}");
        assert!(
            c.contains("1.20x (1.12x–1.25x)") && c.contains("0.98x"),
            "{c}"
        );
        assert!(!c.contains("split"), "{c}");
        let pc = row("page cache", 1.05, 1.15, 1.2);
        let c = cause(&band, grid.as_ref(), &[&pc, &split]);
        assert!(c.starts_with("cause not found"), "{c}");
        assert!(
            c.contains("page cache 1.15x") && c.contains("split 0.97x"),
            "{c}"
        );
        assert!(c.contains("page cache puts the median inside"), "{c}");
        let c = cause(&band, grid.as_ref(), &[&split]);
        assert!(
            c.starts_with("cause not found") && !c.contains("median"),
            "{c}"
        );
        assert!(cause(&band, None, &[]).starts_with("cause not found"));
    }
}
