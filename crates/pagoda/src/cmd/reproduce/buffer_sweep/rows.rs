//! The seed's shapes as summary rows: each rule of `shapes` applied to every repeat's own
//! curve, and withheld when the cells at small buffers were not bound by the device as the
//! seed's were.

use super::super::cell::CellResult;
use super::super::file::seed_row;
use super::super::outcome::fig;
use super::super::repeats::{Group, Spread};
use super::super::report::{fmt_frac, fmt_num, Headline};
use super::{shapes, Metric, Sweep, DEVICES, EXP, HDD_NCQ, SMALL_TWELFTHS};
use std::collections::BTreeMap;

/// `median (min–max)` of per-repeat values, or `–`.
fn spread_text(v: Vec<f64>, f: impl Fn(f64) -> String) -> String {
    Spread::of(v).map_or("–".to_string(), |s| s.fmt(f))
}

/// The seed's four shapes, each judged on every repeat's own curve.
pub(super) fn shapes(sweep: &Sweep) -> Vec<Headline> {
    vec![
        hit_ratio_row(sweep),
        ssd_tps_row(sweep),
        hdd_tps_row(sweep),
        ssd_reads_row(sweep),
    ]
}

/// `x` MiB as a share of the table.
fn pct_of_table(sweep: &Sweep, x: f64) -> String {
    format!("{:.0} %", x / sweep.table_mib().max(1e-9) * 100.0)
}

/// Why device `dev`'s small-buffer cells are out of the seed's regime, if they are.
fn off(sweep: &Sweep, dev: usize) -> Option<String> {
    let g = sweep.small(dev);
    let label = format!("{} at ≤ {SMALL_TWELFTHS}/12 of the table", DEVICES[dev].1);
    g.out_of_regime(&["data"], &label)
        .map(|why| format!("{why}; {}", off_regime_detail(&g)))
}

/// The hit ratio's shape: concave with a knee.
fn hit_ratio_row(sweep: &Sweep) -> Headline {
    let pct = |x: f64| pct_of_table(sweep, x);
    // Hit ratio (SSD cells: their warm-up fills the pool within milliseconds, so the window's
    // hit ratio is the steady one). What bounds throughput does not change a hit ratio, so
    // this row has no regime condition.
    let knees: Vec<shapes::Knee> = sweep
        .by_seed(1, Metric::Hit)
        .values()
        .filter_map(|c| shapes::knee(c))
        .collect();
    Headline::rule_of_row(
        &seed_row(EXP, "hit-ratio"),
        &format!(
            "concave (no step gains more than {} above the step before) and a knee: at the best \
             two-line fit's break, the slope after ≤ {:.2} of the slope before",
            shapes::CONCAVE_TOL,
            shapes::KNEE_RATIO
        ),
        &knees.iter().map(shapes::Knee::holds).collect::<Vec<_>>(),
        format!(
            "knee at {} of the table; slope after/before {}; concave in {} of {}",
            spread_text(knees.iter().map(|k| k.at).collect(), pct),
            spread_text(
                knees.iter().map(shapes::Knee::ratio).collect(),
                |v| format!("{v:.2}")
            ),
            knees.iter().filter(|k| k.concave).count(),
            knees.len()
        ),
        "the hit ratio bends too little (or somewhere gains more than the step before)",
    )
}

/// SSD TPS roughly proportional to the buffer.
fn ssd_tps_row(sweep: &Sweep) -> Headline {
    let pct = |x: f64| pct_of_table(sweep, x);
    let fits: Vec<(shapes::Fit, bool)> = sweep
        .by_seed(1, Metric::Tps)
        .values()
        .filter_map(|c| shapes::proportional(c))
        .collect();
    let ssd = sweep.median(1, Metric::Tps);
    let top = ssd.iter().map(|p| p.1).fold(0.0, f64::max);
    let flat_from = ssd.iter().find(|p| p.1 >= 0.9 * top).map(|p| p.0);
    Headline::rule_of_row(
        &seed_row(EXP, "ssd-tps"),
        &format!(
            "a straight line fits TPS vs buffer with R² ≥ {} and rising",
            shapes::R2_MIN
        ),
        &fits.iter().map(|f| f.1).collect::<Vec<_>>(),
        format!(
            "R² {}, slope {} TPS per MiB",
            spread_text(fits.iter().map(|f| f.0.r2).collect(), |v| format!("{v:.2}")),
            spread_text(fits.iter().map(|f| f.0.slope).collect(), |v| fmt_num(Some(
                v
            )))
        ),
        &format!(
            "TPS reaches 90 % of its top ({}) at {} of the table and stays there (medians); \
                 the regime table says what bounds those cells",
            fmt_num(Some(top)),
            flat_from.map_or("–".to_string(), pct)
        ),
    )
    .regime(off(sweep, 1))
    .ablated(
        "the sweep's last point (the whole table in the buffer)",
        proportional_below_the_table(sweep).map(|a| a.0),
        proportional_below_the_table(sweep).map_or(String::new(), |a| a.1),
    )
}

/// HDD TPS an S-curve.
fn hdd_tps_row(sweep: &Sweep) -> Headline {
    let pct = |x: f64| pct_of_table(sweep, x);
    let ss: Vec<shapes::SCurve> = sweep
        .by_seed(0, Metric::Tps)
        .values()
        .filter_map(|c| shapes::s_curve(c))
        .collect();
    let where_steepest = |s: &shapes::SCurve| {
        if s.steepest == 0 {
            "the first step"
        } else if s.steepest + 1 == s.steps {
            "the last step"
        } else {
            "inside"
        }
    };
    let mut places: Vec<&str> = ss.iter().map(where_steepest).collect();
    places.dedup();
    // The steepest step of the median curve, with the hit ratios around it.
    let hdd = sweep.median(0, Metric::Tps);
    let hdd_hit = sweep.median(0, Metric::Hit);
    let steepest = hdd
        .windows(2)
        .enumerate()
        .max_by(|a, b| (a.1[1].1 - a.1[0].1).total_cmp(&(b.1[1].1 - b.1[0].1)))
        .map_or("–".to_string(), |(k, w)| {
            let h = |i: usize| fmt_frac(hdd_hit.get(i).map(|p| p.1));
            format!(
                "{} → {} TPS from {} to {} of the table (hit ratio {} → {})",
                fmt_num(Some(w[0].1)),
                fmt_num(Some(w[1].1)),
                pct(w[0].0),
                pct(w[1].0),
                h(k),
                h(k + 1)
            )
        });
    Headline::rule_of_row(
        &seed_row(EXP, "hdd-tps"),
        &format!(
            "the steepest step is neither the first nor the last, and the first and last \
                 steps are each ≤ {} of its slope",
            shapes::S_END_RATIO
        ),
        &ss.iter().map(shapes::SCurve::holds).collect::<Vec<_>>(),
        format!(
            "inflection (steepest step) at {} of the table; first/last step {} / {} of it",
            spread_text(ss.iter().map(|s| s.at).collect(), pct),
            spread_text(ss.iter().map(|s| s.first).collect(), |v| format!("{v:.2}")),
            spread_text(ss.iter().map(|s| s.last).collect(), |v| format!("{v:.2}")),
        ),
        &format!(
            "the steepest step is {} of the sweep (medians: {steepest}), or an end is more \
                 than half as steep",
            places.join(" / ")
        ),
    )
    .regime(off(sweep, 0))
    .ablated(
        "the sweep's last point (the whole table in the buffer)",
        s_curve_below_the_table(sweep).map(|a| a.0),
        s_curve_below_the_table(sweep).map_or(String::new(), |a| a.1),
    )
    .ablated(
        "the disk's queue (reordered, 32 deep)",
        s_curve_with_ncq(sweep).map(|a| a.0),
        s_curve_with_ncq(sweep).map_or(String::new(), |a| a.1),
    )
}

/// SSD read requests decaying exponentially.
fn ssd_reads_row(sweep: &Sweep) -> Headline {
    let decays: Vec<(shapes::Fit, bool)> = sweep
        .by_seed(1, Metric::ReadsPerS)
        .values()
        .filter_map(|c| shapes::exp_decay(c))
        .collect();
    let io = sweep.median(1, Metric::ReadsPerS);
    let io_at = |k: usize| io.get(k).map_or("–".to_string(), |p| fmt_num(Some(p.1)));
    Headline::rule_of_row(
        &seed_row(EXP, "ssd-reads"),
        &format!(
            "a straight line fits log(reads/s) vs buffer with R² ≥ {} and falling",
            shapes::R2_MIN
        ),
        &decays.iter().map(|f| f.1).collect::<Vec<_>>(),
        format!(
            "R² {}, halving every {} MiB",
            spread_text(decays.iter().map(|f| f.0.r2).collect(), |v| format!(
                "{v:.2}"
            )),
            spread_text(
                decays
                    .iter()
                    .filter(|f| f.0.slope < 0.0)
                    .map(|f| -std::f64::consts::LN_2 / f.0.slope)
                    .collect(),
                |v| format!("{v:.1}")
            ),
        ),
        &format!(
            "log(reads/s) is no falling straight line: {} / {} / {} reads/s at the first, \
                 middle and last buffer (medians)",
            io_at(0),
            io_at(io.len() / 2),
            io_at(io.len().saturating_sub(1))
        ),
    )
    .regime(off(sweep, 1))
    .ablated(
        "the closed loop's pace (reads per transaction instead of per second)",
        decay_per_transaction(sweep).map(|a| a.0),
        decay_per_transaction(sweep).map_or(String::new(), |a| a.1),
    )
}

/// A rule applied to each repeat's curve without its last point (the whole table in the
/// buffer, where the device drops out of the run).
fn below_the_table<T>(
    curves: &BTreeMap<u64, Vec<(f64, f64)>>,
    rule: impl Fn(&[(f64, f64)]) -> Option<T>,
) -> Vec<T> {
    curves
        .values()
        .filter_map(|c| rule(&c[..c.len().saturating_sub(1)]))
        .collect()
}

/// The S-curve rule on each repeat's curve without its last step: there the whole table
/// fits, the disk drops out of the run and TPS jumps to the CPU's rate, a step the seed's
/// sweep (up to 12 GB, its hit ratio still below 1) did not take.
fn s_curve_below_the_table(sweep: &Sweep) -> Option<(bool, String)> {
    let ss = below_the_table(&sweep.by_seed(0, Metric::Tps), shapes::s_curve);
    if ss.is_empty() {
        return None;
    }
    let table = sweep.table_mib().max(1e-9);
    let held = ss.iter().filter(|s| s.holds()).count();
    let text = format!(
        "the sweep without its last point (buffer below the table, hit ratio below 1): the \
         S-curve rule holds in {held} of {}; inflection at {} of the table; first/last step {} \
         / {} of the steepest",
        ss.len(),
        spread_text(ss.iter().map(|s| s.at).collect(), |x| format!(
            "{:.0} %",
            x / table * 100.0
        )),
        spread_text(ss.iter().map(|s| s.first).collect(), |v| format!("{v:.2}")),
        spread_text(ss.iter().map(|s| s.last).collect(), |v| format!("{v:.2}")),
    );
    Some((held == ss.len(), text))
}

/// The SSD's straight-line rule on each repeat's curve without its last step (the whole table
/// in the buffer, where the device drops out of the run, as on the disk).
fn proportional_below_the_table(sweep: &Sweep) -> Option<(bool, String)> {
    let fits = below_the_table(&sweep.by_seed(1, Metric::Tps), shapes::proportional);
    if fits.is_empty() {
        return None;
    }
    let held = fits.iter().filter(|f| f.1).count();
    let text = format!(
        "the sweep without its last point (buffer below the table, hit ratio below 1): the \
         straight-line rule holds in {held} of {}; R² {}",
        fits.len(),
        spread_text(fits.iter().map(|f| f.0.r2).collect(), |v| format!("{v:.2}")),
    );
    Some((held == fits.len(), text))
}

/// The S-curve rule on the ablation's disk, which reorders a 32-deep queue: the factor the
/// miss names changed and nothing else.
fn s_curve_with_ncq(sweep: &Sweep) -> Option<(bool, String)> {
    let curves = sweep.ncq_by_seed(Metric::Tps);
    if curves.is_empty() {
        return None;
    }
    let whole: Vec<shapes::SCurve> = curves.values().filter_map(|c| shapes::s_curve(c)).collect();
    let below = below_the_table(&curves, shapes::s_curve);
    let held = |v: &[shapes::SCurve]| v.iter().filter(|s| s.holds()).count();
    let table = sweep.table_mib().max(1e-9);
    let fifo = sweep.median(0, Metric::Tps);
    let ncq = sweep.ncq_median_tps();
    let first = |v: &[(f64, f64)]| fmt_num(v.first().map(|p| p.1));
    let text = format!(
        "with a reordering queue ({}, `{}`): the S-curve rule holds in {} of {} (without the \
         last point in {} of {}); inflection at {} of the table; first/last step {} / {} of the \
         steepest; TPS at the smallest buffer {} against {} in arrival order (medians)",
        HDD_NCQ.1,
        HDD_NCQ.2,
        held(whole.as_slice()),
        whole.len(),
        held(below.as_slice()),
        below.len(),
        spread_text(whole.iter().map(|s| s.at).collect(), |x| format!(
            "{:.0} %",
            x / table * 100.0
        )),
        spread_text(whole.iter().map(|s| s.first).collect(), |v| format!(
            "{v:.2}"
        )),
        spread_text(whole.iter().map(|s| s.last).collect(), |v| format!(
            "{v:.2}"
        )),
        first(ncq.as_slice()),
        first(fifo.as_slice()),
    );
    Some((held(whole.as_slice()) == whole.len(), text))
}

/// The decay rule on read requests per transaction: the SSD cells keep their device busy
/// (closed-loop clients issue the next read as soon as one completes), so reads per second
/// stay at the device's rate while the buffer grows; per transaction they show what the
/// buffer saves.
fn decay_per_transaction(sweep: &Sweep) -> Option<(bool, String)> {
    let decays: Vec<(shapes::Fit, bool)> = sweep
        .by_seed(1, Metric::ReadsPerTxn)
        .values()
        .filter_map(|c| shapes::exp_decay(c))
        .collect();
    if decays.is_empty() {
        return None;
    }
    let held = decays.iter().filter(|d| d.1).count();
    let io = sweep.median(1, Metric::ReadsPerTxn);
    let at = |k: usize| io.get(k).map_or("–".to_string(), |p| format!("{:.2}", p.1));
    let text = format!(
        "per transaction instead of per second (the closed loop's pace taken out): the decay \
         rule holds in {held} of {}; R² {}; {} / {} / {} reads per transaction at the first, \
         middle and last buffer (medians)",
        decays.len(),
        spread_text(decays.iter().map(|f| f.0.r2).collect(), |v| format!(
            "{v:.2}"
        )),
        at(0),
        at(io.len() / 2),
        at(io.len().saturating_sub(1)),
    );
    Some((held == decays.len(), text))
}

/// What the repeats that were not device-bound measured, beside the others: neither their
/// device nor our CPU saturated points at the CPU other processes took (the load average).
fn off_regime_detail(g: &Group) -> String {
    let bound = |r: &&CellResult| r.outcome().bottleneck() == "data";
    let load = |r: &&CellResult| {
        r.machine["load_average_1m_at_start"]
            .as_str()
            .and_then(|l| l.parse::<f64>().ok())
    };
    let (on, off): (Vec<&CellResult>, Vec<&CellResult>) =
        g.runs.iter().copied().partition(|r| bound(r));
    let num = |rs: &[&CellResult], f: &dyn Fn(&&CellResult) -> Option<f64>, pct: bool| {
        spread_text(rs.iter().filter_map(f).collect(), |v| {
            if pct {
                format!("{:.0} %", v * 100.0)
            } else {
                format!("{v:.1}")
            }
        })
    };
    format!(
        "in those the data device was busy {} and the CPU {} of all cores, at a load average of \
         {} when they started ({} in the device-bound ones)",
        num(&off, &|r| r.num(fig::data_busy), true),
        num(
            &off,
            &|r| r.num(|o| o.regime.as_ref()?.cpu_utilisation),
            true
        ),
        num(&off, &load, false),
        num(&on, &load, false)
    )
}
