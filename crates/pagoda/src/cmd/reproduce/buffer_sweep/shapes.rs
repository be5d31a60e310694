//! The shapes seed 004 reports along its linear buffer sweep, each as a rule one repeat's
//! curve either meets or not: the hit ratio concave with a knee, SSD TPS roughly proportional
//! to the buffer, HDD TPS an S-curve, SSD I/O requests decaying exponentially. Points are
//! `(buffer, value)` sorted by buffer; the rules do not depend on the buffer's unit.

/// Fewest points a rule is judged on (a knee needs three points on each side of it).
pub(super) const MIN_POINTS: usize = 5;
/// Concave: no step gains more hit ratio than the step before it by more than this (noise of
/// a repeat's hit ratio between neighbouring cells is far below it).
pub(super) const CONCAVE_TOL: f64 = 0.005;
/// A knee: the slope after it at most this share of the slope before it.
pub(super) const KNEE_RATIO: f64 = 1.0 / 3.0;
/// A straight line (in y, or in log y for a decay) explains at least this share of the variance.
pub(super) const R2_MIN: f64 = 0.9;
/// An S-curve: its first and last steps at most this share of its steepest step.
pub(super) const S_END_RATIO: f64 = 0.5;

/// A least-squares line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Fit {
    pub slope: f64,
    pub intercept: f64,
    /// Coefficient of determination (1 for a perfect line; 0 when the line explains nothing).
    pub r2: f64,
}

pub(super) fn linear_fit(pts: &[(f64, f64)]) -> Option<Fit> {
    let n = pts.len() as f64;
    if pts.len() < 2 {
        return None;
    }
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = pts.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let sse: f64 = pts
        .iter()
        .map(|p| (p.1 - (my + slope * (p.0 - mx))).powi(2))
        .sum();
    Some(Fit {
        slope,
        intercept: my - slope * mx,
        r2: if syy > 0.0 { 1.0 - sse / syy } else { 1.0 },
    })
}

/// Slope of each step.
fn slopes(pts: &[(f64, f64)]) -> Vec<f64> {
    pts.windows(2)
        .map(|w| (w[1].1 - w[0].1) / (w[1].0 - w[0].0).max(1e-12))
        .collect()
}

/// The hit-ratio curve's shape: concavity and the knee of the best two-line fit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Knee {
    /// No step's gain exceeds the previous step's by more than `CONCAVE_TOL`.
    pub concave: bool,
    /// Where the two lines meet (a sweep point).
    pub at: f64,
    pub slope_before: f64,
    pub slope_after: f64,
}

impl Knee {
    pub(super) fn ratio(&self) -> f64 {
        if self.slope_before > 0.0 {
            self.slope_after / self.slope_before
        } else {
            f64::INFINITY
        }
    }

    /// Concave, and past the knee the curve gains at most a third of what it gained before.
    pub(super) fn holds(&self) -> bool {
        self.concave && self.slope_before > 0.0 && self.ratio() <= KNEE_RATIO
    }
}

/// The knee is the point where two least-squares lines (one through the points up to it, one
/// through those from it, at least three each) fit the curve best: inside the sweep by
/// construction, so what can fail is the bend being too weak or the curve not concave.
pub(super) fn knee(pts: &[(f64, f64)]) -> Option<Knee> {
    if pts.len() < MIN_POINTS {
        return None;
    }
    let s = slopes(pts);
    let step = (pts[pts.len() - 1].0 - pts[0].0) / (pts.len() - 1) as f64;
    let tol = CONCAVE_TOL / step.max(1e-12);
    let concave = s.windows(2).all(|w| w[1] <= w[0] + tol);
    let sse = |p: &[(f64, f64)], f: &Fit| -> f64 {
        p.iter()
            .map(|q| (q.1 - f.intercept - f.slope * q.0).powi(2))
            .sum()
    };
    let mut best: Option<(f64, Knee)> = None;
    for k in 2..pts.len() - 2 {
        let (a, b) = (&pts[..=k], &pts[k..]);
        let (fa, fb) = (linear_fit(a)?, linear_fit(b)?);
        let e = sse(a, &fa) + sse(b, &fb);
        if best.is_none_or(|(e0, _)| e < e0) {
            best = Some((
                e,
                Knee {
                    concave,
                    at: pts[k].0,
                    slope_before: fa.slope,
                    slope_after: fb.slope,
                },
            ));
        }
    }
    best.map(|b| b.1)
}

/// Roughly proportional: a straight line explains the curve and it rises.
pub(super) fn proportional(pts: &[(f64, f64)]) -> Option<(Fit, bool)> {
    if pts.len() < MIN_POINTS {
        return None;
    }
    let f = linear_fit(pts)?;
    Some((f, f.r2 >= R2_MIN && f.slope > 0.0))
}

/// Decaying exponentially: a straight line explains log y and it falls.
pub(super) fn exp_decay(pts: &[(f64, f64)]) -> Option<(Fit, bool)> {
    if pts.len() < MIN_POINTS || pts.iter().any(|p| p.1 <= 0.0) {
        return None;
    }
    let logs: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1.ln())).collect();
    let f = linear_fit(&logs)?;
    Some((f, f.r2 >= R2_MIN && f.slope < 0.0))
}

/// An S-curve's steepest step and how flat its ends are beside it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct SCurve {
    /// Index of the steepest step (between points `steepest` and `steepest + 1`).
    pub steepest: usize,
    pub steps: usize,
    /// The middle of the steepest step: the inflection.
    pub at: f64,
    /// First and last step's slope over the steepest's.
    pub first: f64,
    pub last: f64,
}

impl SCurve {
    /// Slope first rising then falling: the steepest step is neither the first nor the last,
    /// and both ends are at most half as steep.
    pub(super) fn holds(&self) -> bool {
        self.steepest > 0
            && self.steepest + 1 < self.steps
            && self.first <= S_END_RATIO
            && self.last <= S_END_RATIO
    }
}

pub(super) fn s_curve(pts: &[(f64, f64)]) -> Option<SCurve> {
    if pts.len() < MIN_POINTS {
        return None;
    }
    let s = slopes(pts);
    let (steepest, &max) = s.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1))?;
    if max <= 0.0 {
        return None;
    }
    Some(SCurve {
        steepest,
        steps: s.len(),
        at: (pts[steepest].0 + pts[steepest + 1].0) / 2.0,
        first: s[0] / max,
        last: s[s.len() - 1] / max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Eleven equal steps from 2 to 12, as the seed's sweep.
    fn curve(f: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
        (2..=12).map(|x| (f64::from(x), f(f64::from(x)))).collect()
    }

    #[test]
    fn a_bent_concave_hit_ratio_has_a_knee_and_a_straight_one_does_not() {
        // Steep to 8, then nearly flat: the seed's shape.
        let bent = curve(|x| {
            if x <= 8.0 {
                0.5 + 0.07 * (x - 2.0)
            } else {
                0.92 + 0.01 * (x - 8.0)
            }
        });
        let k = knee(&bent).unwrap();
        assert!(k.holds(), "{k:?}");
        assert_eq!(k.at, 8.0);
        // Concave but only gently: after the best bend still more than a third of before.
        let gentle = curve(|x| 0.5 + 0.06 * x - 0.0015 * x * x);
        let k = knee(&gentle).unwrap();
        assert!(k.concave && !k.holds(), "{k:?}");
        // Convex somewhere: a step gaining much more than the one before.
        let mut bumpy = bent.clone();
        bumpy[5].1 -= 0.04;
        let k = knee(&bumpy).unwrap();
        assert!(!k.concave && !k.holds(), "{k:?}");
        assert!(knee(&bent[..4]).is_none());
    }

    #[test]
    fn proportional_needs_a_rising_straight_line() {
        let line = curve(|x| 1000.0 * x + 50.0 * (x * 7.0).sin());
        assert!(proportional(&line).unwrap().1);
        // Saturating at once: most of the rise in the first steps.
        let capped = curve(|x| 100_000.0 * (1.0 - (-(x - 1.0)).exp()));
        let (f, ok) = proportional(&capped).unwrap();
        assert!(!ok && f.r2 < R2_MIN, "{f:?}");
        let falling = curve(|x| 20_000.0 - 1000.0 * x);
        assert!(!proportional(&falling).unwrap().1);
    }

    #[test]
    fn an_s_curve_rises_steepest_inside_and_flattens_at_both_ends() {
        let logistic = curve(|x| 1000.0 + 100_000.0 / (1.0 + (-(x - 10.0) * 1.5).exp()));
        let s = s_curve(&logistic).unwrap();
        assert!(s.holds(), "{s:?}");
        assert!((9.0..=11.0).contains(&s.at), "{s:?}");
        // Convex to the end: the steepest step is the last one.
        let convex = curve(|x| 1000.0 * (x * 0.6).exp());
        assert!(!s_curve(&convex).unwrap().holds());
        // A straight line: the ends are as steep as the middle.
        let line = curve(|x| 1000.0 * x + 10.0 * (x * 3.0).sin());
        assert!(!s_curve(&line).unwrap().holds());
    }

    #[test]
    fn an_exponential_decay_is_a_falling_line_in_log() {
        let decay = curve(|x| 30_000.0 * (-0.4 * x).exp() * (1.0 + 0.05 * (x * 5.0).sin()));
        let (f, ok) = exp_decay(&decay).unwrap();
        assert!(ok && f.slope < 0.0, "{f:?}");
        // Flat while the device is saturated, then a cliff: log y is no straight line.
        let cliff = curve(|x| {
            if x < 9.0 {
                30_000.0
            } else {
                30_000.0 * 0.05f64.powf(x - 8.0)
            }
        });
        assert!(!exp_decay(&cliff).unwrap().1);
        let rising = curve(|x| 100.0 * (0.3 * x).exp());
        assert!(!exp_decay(&rising).unwrap().1);
    }
}
