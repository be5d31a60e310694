//! Beyond the seed: one `pagoda advise buffer` run per repeat predicts the whole sweep (the
//! LRU miss-ratio curve of its own page references, and TPS per device from a probe of each),
//! held against the same repeat's sweep cells.

use super::super::cell::CellResult;
use super::super::repeats::{Group, Spread};
use super::super::report::{median, Band, Headline};
use super::{per_seed, Metric, Sweep, DEVICES};
use serde_json::Value;
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
fn curve(items: Option<&Value>, key: &str) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = items
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|p| Some((p["buffer_bytes"].as_f64()? / MIB, p[key].as_f64()?)))
                .collect()
        })
        .unwrap_or_default();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// One advise run's predictions: the hit-ratio curve and TPS per device of ours.
struct Prediction {
    mrc: Vec<(f64, f64)>,
    tps: [Vec<(f64, f64)>; 2],
}

impl Prediction {
    fn of(run: &CellResult) -> Self {
        let tps = |spec: &str| {
            let preset = spec.split(',').next().unwrap_or(spec);
            let dev = run.result["devices"].as_array().and_then(|ds| {
                ds.iter().find(|d| {
                    d["device"]
                        .as_str()
                        .is_some_and(|n| n.split(',').next() == Some(preset))
                })
            });
            curve(dev.map(|d| &d["predicted"]), "tps")
        };
        Self {
            mrc: curve(Some(&run.result["mrc"]), "hit_ratio"),
            tps: [tps(DEVICES[0].2), tps(DEVICES[1].2)],
        }
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
                .map(|g| g.runs.iter().map(|r| (r.seed, Prediction::of(r))).collect())
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

/// Per repeat, `err(predicted, measured)` over both devices' sweep cells of that repeat,
/// reduced by `reduce`.
fn per_repeat(
    sweep: &Sweep,
    preds: &Predictions,
    m: Metric,
    predict: impl Fn(&Prediction, usize, f64) -> Option<f64>,
    err: impl Fn(f64, f64) -> Option<f64>,
    reduce: impl Fn(&mut Vec<f64>) -> Option<f64>,
) -> Option<Spread> {
    let per: Vec<f64> = preds
        .by_seed
        .iter()
        .filter_map(|(seed, p)| {
            let mut errs: Vec<f64> = sweep
                .rows
                .iter()
                .flat_map(|(pages, _, g)| g.iter().enumerate().map(move |(d, g)| (*pages, d, g)))
                .filter_map(|(pages, d, g)| {
                    let measured = *per_seed(g.as_ref()?, m).get(seed)?;
                    err(predict(p, d, super::mib(pages))?, measured)
                })
                .collect();
            reduce(&mut errs)
        })
        .collect();
    Spread::of(per)
}

pub(super) fn headlines(sweep: &Sweep, advise: Option<&Group>) -> Vec<Headline> {
    let preds = Predictions::new(advise);
    let mae = per_repeat(
        sweep,
        &preds,
        Metric::Hit,
        |p, _, x| interpolate(&p.mrc, x),
        |a, b| Some((a - b).abs()),
        |v| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64),
    );
    let rel = per_repeat(
        sweep,
        &preds,
        Metric::Tps,
        |p, d, x| interpolate(&p.tps[d], x),
        |a, b| (b > 0.0).then(|| ((a - b) / b).abs()),
        |v| median(v),
    );
    vec![
        Headline::judged(
            "hit ratio predicted from one run vs measured (mean abs. error, both devices)",
            "beyond the seed",
            mae,
            &Band::at_most(0.05, "pagoda's addition: ≤ 0.05"),
            "",
            "the pure-LRU curve of one run differs from the pools' measured hit ratios \
             (midpoint LRU; the HDD's window includes its cold fill) by more than 0.05",
            |s| s.fmt(|v| format!("{v:.3}")),
        ),
        Headline::judged(
            "TPS predicted from one run vs measured (median abs. error, both devices)",
            "beyond the seed",
            rel,
            &Band::at_most(0.3, "pagoda's addition: ≤ 30 %"),
            "",
            "the closed-system model misses the measured TPS by more than 30 % (see the table)",
            Spread::percent,
        ),
    ]
}
