//! A median with its spread over a compare's repeats, and the verdict it implies.

use serde::Serialize;

/// A median with the smallest and largest value it was taken from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(super) struct Spread {
    pub(super) median: f64,
    pub(super) min: f64,
    pub(super) max: f64,
}

impl Spread {
    /// `None` for no values.
    pub(super) fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }

    /// How pagoda stands when `self` is pagoda/peer over the repeats: ahead only when even
    /// the worst repeat is above 1, behind only when even the best is below 1.
    pub(super) fn verdict(&self) -> &'static str {
        if self.min > 1.0 {
            "ahead"
        } else if self.max < 1.0 {
            "behind"
        } else {
            "even"
        }
    }
}
