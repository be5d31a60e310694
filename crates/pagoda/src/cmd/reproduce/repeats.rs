//! Repeated runs of a cell and what the report makes of them: a cell runs once per seed, a
//! table shows the median of its repeats, and a headline ratio is computed per seed (the two
//! configurations of one repeat ran back to back) and shown as median with min–max. A band
//! is held against the whole min–max, so one lucky run cannot make a verdict.

use super::cell::CellResult;
use super::outcome::Outcome;
use serde_json::Value;
use std::collections::BTreeMap;

// The report's modules take these from here, next to the groups they are computed from.
pub(crate) use crate::spread::{median, Spread};

/// The usable repeats of one cell (one per seed).
#[derive(Clone, Debug)]
pub(crate) struct Group<'a> {
    pub runs: Vec<&'a CellResult>,
}

impl<'a> Group<'a> {
    /// The median over the repeats of a figure of the result.
    pub(crate) fn num(&self, f: impl Fn(&Outcome) -> Option<f64>) -> Option<f64> {
        Spread::of(self.per_seed(f).into_values().collect()).map(|s| s.median)
    }

    /// A figure of each repeat, by seed.
    pub(crate) fn per_seed(&self, f: impl Fn(&Outcome) -> Option<f64>) -> BTreeMap<u64, f64> {
        self.runs
            .iter()
            .filter_map(|r| Some((r.seed, f(r.outcome())?)))
            .collect()
    }

    /// A parameter of the cell (the same in every repeat).
    pub(crate) fn param(&self, key: &str) -> Option<&'a Value> {
        self.runs.first().and_then(|r| r.param(key))
    }

    /// `None` when every repeat was bound by one of `expected`; else why not (for a verdict
    /// that is withheld).
    pub(crate) fn out_of_regime(&self, expected: &[&str], label: &str) -> Option<String> {
        self.off_regime(label, &expected.join(" or "), |r| {
            expected.contains(&r.outcome().bottleneck())
        })
    }

    /// `None` when `in_regime` holds for every repeat; else which bottlenecks the others had.
    pub(crate) fn off_regime(
        &self,
        label: &str,
        expected: &str,
        in_regime: impl Fn(&CellResult) -> bool,
    ) -> Option<String> {
        let off: Vec<&str> = self
            .runs
            .iter()
            .filter(|r| !in_regime(r))
            .map(|r| r.outcome().bottleneck())
            .collect();
        (!off.is_empty()).then(|| {
            format!(
                "{label} was bound by {} in {} of {} repeats where the seed's was bound by {expected}",
                dedup(&off).join("/"),
                off.len(),
                self.runs.len(),
            )
        })
    }
}

fn dedup<'s>(v: &[&'s str]) -> Vec<&'s str> {
    let mut out: Vec<&str> = v.to_vec();
    out.sort_unstable();
    out.dedup();
    out
}

/// `f(a, b)` per seed that both groups ran, as a spread (`a / b` for a ratio).
pub(crate) fn paired(
    a: Option<&Group>,
    b: Option<&Group>,
    fig: impl Fn(&Outcome) -> Option<f64>,
    f: impl Fn(f64, f64) -> Option<f64>,
) -> Option<Spread> {
    let (a, b) = (a?.per_seed(&fig), b?.per_seed(&fig));
    Spread::of(
        a.iter()
            .filter_map(|(seed, x)| f(*x, *b.get(seed)?))
            .collect(),
    )
}

/// `a / b` per seed.
pub(crate) fn ratio(
    a: Option<&Group>,
    b: Option<&Group>,
    fig: impl Fn(&Outcome) -> Option<f64>,
) -> Option<Spread> {
    paired(a, b, fig, |x, y| (y > 0.0).then(|| x / y))
}
