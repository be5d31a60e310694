//! Beyond the seed: one `pagoda advise buffer` run per repeat predicts the whole sweep (the
//! LRU miss-ratio curve of its own page references, and TPS per device from a probe of each),
//! held against the same repeat's sweep cells.

use super::super::cell::CellResult;
use super::super::file::seed_row;
use super::super::outcome::Advice;
use super::super::repeats::{Group, Spread};
use super::super::report::{median, Headline};
use super::{per_seed, Metric, Sweep, DEVICES, EXP};
use std::collections::BTreeMap;

const MIB: f64 = 1_048_576.0;

/// Linear interpolation of `(x, y)` points (sorted by x) at `x`; clamps at the ends.
pub(super) fn interpolate(points: &[(f64, f64)], x: f64) -> Option<f64> {
    let (first, last) = (points.first()?, points.last()?);
    if x <= first.0 {
        return Some(first.1);
    }
    if x >= last.0 {
        return Some(last.1);
    }
    let w = points.windows(2).find(|w| w[0].0 <= x && x <= w[1].0)?;
    let t = (x - w[0].0) / (w[1].0 - w[0].0).max(1e-12);
    Some(w[0].1 + t * (w[1].1 - w[0].1))
}

/// `(buffer MiB, value)` points of an advise JSON array.
fn curve(points: impl Iterator<Item = (f64, f64)>) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = points.map(|(bytes, y)| (bytes / MIB, y)).collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// One advise run's predictions: the hit-ratio curve and TPS per device of ours.
struct Prediction {
    mrc: Vec<(f64, f64)>,
    tps: [Vec<(f64, f64)>; 2],
}

impl Prediction {
    /// `None`: the run's result is no advice (its reason printed once).
    fn of(run: &CellResult) -> Option<Self> {
        let advice = Advice::of(&run.result)
            .map_err(|e| eprintln!("{}: the advice is unreadable: {e}", run.cell.id))
            .ok()?;
        let tps = |spec: &str| {
            let preset = spec.split(',').next().unwrap_or(spec);
            let dev = advice
                .devices
                .iter()
                .find(|d| d.device.split(',').next() == Some(preset));
            curve(dev.into_iter().flat_map(|d| {
                d.predicted
                    .iter()
                    .filter_map(|p| Some((p.buffer_bytes, p.tps?)))
            }))
        };
        Some(Self {
            mrc: curve(
                advice
                    .mrc
                    .iter()
                    .filter_map(|p| Some((p.buffer_bytes, p.hit_ratio?))),
            ),
            tps: [tps(DEVICES[0].2), tps(DEVICES[1].2)],
        })
    }
}

/// Every repeat's predictions, by seed.
pub(super) struct Predictions {
    by_seed: BTreeMap<u64, Prediction>,
}

impl Predictions {
    pub(super) fn new(advise: Option<&Group>) -> Self {
        Self {
            by_seed: advise
                .map(|g| {
                    g.runs
                        .iter()
                        .filter_map(|r| Some((r.seed, Prediction::of(r)?)))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    fn median_of(&self, f: impl Fn(&Prediction) -> Option<f64>) -> Option<f64> {
        let mut v: Vec<f64> = self.by_seed.values().filter_map(f).collect();
        median(&mut v)
    }

    /// The predicted hit ratio at `x` MiB (median over the repeats).
    pub(super) fn hit(&self, x: f64) -> Option<f64> {
        self.median_of(|p| interpolate(&p.mrc, x))
    }

    /// The predicted TPS of device `dev` at `x` MiB (median over the repeats).
    pub(super) fn tps(&self, dev: usize, x: f64) -> Option<f64> {
        self.median_of(|p| interpolate(&p.tps[dev], x))
    }
}

/// Per repeat (by seed), `err(predicted, measured)` over both devices' sweep cells of that
/// repeat, reduced by `reduce`; `predict` gets the repeat's prediction, the device, the buffer
/// (MiB) and the device's measured values of that repeat (for the flat guess).
fn per_repeat(
    sweep: &Sweep,
    preds: &Predictions,
    m: Metric,
    predict: impl Fn(&Prediction, usize, f64, &[f64]) -> Option<f64>,
    err: impl Fn(f64, f64) -> Option<f64>,
    reduce: impl Fn(&mut Vec<f64>) -> Option<f64>,
) -> BTreeMap<u64, f64> {
    preds
        .by_seed
        .iter()
        .filter_map(|(seed, p)| {
            let measured = |d: usize| -> Vec<(u64, f64)> {
                sweep
                    .rows
                    .iter()
                    .filter_map(|(pages, _, g)| {
                        Some((*pages, *per_seed(g.get(d)?.as_ref()?, m).get(seed)?))
                    })
                    .collect()
            };
            let mut errs: Vec<f64> = (0..2)
                .flat_map(|d| {
                    let all = measured(d);
                    let values: Vec<f64> = all.iter().map(|v| v.1).collect();
                    all.iter()
                        .filter_map(|&(pages, v)| {
                            err(predict(p, d, super::mib(pages), &values)?, v)
                        })
                        .collect::<Vec<f64>>()
                })
                .collect();
            Some((*seed, reduce(&mut errs)?))
        })
        .collect()
}

/// The flat guess: the mean of the measured values, the same at every buffer size. It knows
/// more than the prediction (every measurement) and nothing of the curve's shape.
fn flat(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The prediction's error over the flat guess's, per repeat (a prediction as good as a flat
/// line gives 1).
fn over_flat(pred: &BTreeMap<u64, f64>, naive: &BTreeMap<u64, f64>) -> Option<Spread> {
    Spread::of(
        pred.iter()
            .filter_map(|(s, e)| naive.get(s).filter(|n| **n > 0.0).map(|n| e / n))
            .collect(),
    )
}

pub(super) fn headlines(sweep: &Sweep, advise: Option<&Group>) -> Vec<Headline> {
    let preds = Predictions::new(advise);
    let abs = |a: f64, b: f64| Some((a - b).abs());
    let rel = |a: f64, b: f64| (b > 0.0).then(|| ((a - b) / b).abs());
    let mean = |v: &mut Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let hit = per_repeat(
        sweep,
        &preds,
        Metric::Hit,
        |p, _, x, _| interpolate(&p.mrc, x),
        abs,
        mean,
    );
    let hit_flat = per_repeat(sweep, &preds, Metric::Hit, |_, _, _, v| flat(v), abs, mean);
    let tps = per_repeat(
        sweep,
        &preds,
        Metric::Tps,
        |p, d, x, _| interpolate(&p.tps[d], x),
        rel,
        |v| median(v),
    );
    let tps_flat = per_repeat(
        sweep,
        &preds,
        Metric::Tps,
        |_, _, _, v| flat(v),
        rel,
        |v| median(v),
    );
    let errs = |m: &BTreeMap<u64, f64>| Spread::of(m.values().copied().collect());
    vec![
        // How much better than the flat guess a prediction must be: the file's band.
        Headline::of_row(
            &seed_row(EXP, "predict-hit"),
            over_flat(&hit, &hit_flat),
            "",
            "the pure-LRU curve of one run tells the pools' hit ratios (midpoint LRU; the HDD's \
             window includes its cold fill) little better than a flat line",
            Spread::times,
        )
        .detail(format!(
            "error {} against the flat guess's {}",
            errs(&hit).map_or("–".to_string(), |s| s.fmt(|v| format!("{v:.3}"))),
            errs(&hit_flat).map_or("–".to_string(), |s| s.fmt(|v| format!("{v:.3}")))
        )),
        Headline::of_row(
            &seed_row(EXP, "predict-tps"),
            over_flat(&tps, &tps_flat),
            "",
            "the closed-system model tells the measured TPS little better than a flat line \
             (see the table)",
            Spread::times,
        )
        .detail(format!(
            "error {} against the flat guess's {}",
            errs(&tps).map_or("–".to_string(), |s| s.percent()),
            errs(&tps_flat).map_or("–".to_string(), |s| s.percent())
        )),
    ]
}
