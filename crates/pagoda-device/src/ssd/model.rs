//! Analytic write amplification of greedy GC under uniform random 4 KiB overwrites, used to
//! check the emulator.
//!
//! Hu et al. (SYSTOR'09) and Desnoyers (SYSTOR'12) derive, for blocks large enough that the
//! valid count of the greedy victim is close to its mean-field value,
//! `WAF = α / (α + W₀(−α·e^(−α)))` with `α = physical / logical = 1 + OP` and `W₀` the
//! principal branch of Lambert's W. With few units per block the victim's valid count
//! fluctuates below the mean (greedy picks the luckiest block), so finite blocks give a lower
//! WAF than this formula.

/// Principal branch `W₀(x)` of the Lambert W function for `x ≥ −1/e`, by Halley iteration.
/// Returns NaN below `−1/e`.
pub fn lambert_w0(x: f64) -> f64 {
    let branch = -(-1.0f64).exp();
    if x.is_nan() || x < branch - 1e-15 {
        return f64::NAN;
    }
    if x <= branch {
        return -1.0;
    }
    // Start: series at the branch point near −1/e, log otherwise.
    let mut w = if x < -0.25 {
        let p = (2.0 * (std::f64::consts::E * x + 1.0)).sqrt();
        -1.0 + p - p * p / 3.0 + 11.0 / 72.0 * p * p * p
    } else if x < 3.0 {
        (1.0 + x).ln() * 0.8
    } else {
        let l = x.ln();
        l - l.ln()
    };
    for _ in 0..64 {
        let e = w.exp();
        let f = w * e - x;
        if f == 0.0 {
            break;
        }
        let wp1 = w + 1.0;
        let denom = e * wp1 - (w + 2.0) * f / (2.0 * wp1);
        let step = f / denom;
        w -= step;
        if step.abs() <= 1e-15 * (1.0 + w.abs()) {
            break;
        }
    }
    w
}

/// Steady-state WAF of greedy GC with large blocks at over-provisioning `op`
/// ((physical − logical) / logical).
pub fn greedy_waf(op: f64) -> f64 {
    let a = 1.0 + op;
    a / (a + lambert_w0(-a * (-a).exp()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lambert_w0_inverts_w_exp_w() {
        for &x in &[-0.367_879, -0.3, -0.1, 0.0, 0.5, 1.0, 2.0, 10.0, 1e6] {
            let w = lambert_w0(x);
            assert!(
                (w * w.exp() - x).abs() < 1e-9 * (1.0 + x.abs()),
                "x={x} w={w}"
            );
            assert!(w >= -1.0);
        }
        assert!((lambert_w0(1.0) - 0.567_143_290_409_783_8).abs() < 1e-12);
        assert!(lambert_w0(-1.0).is_nan());
    }

    #[test]
    fn greedy_waf_matches_published_points() {
        // Desnoyers'12 / Hu'09: ~1/(2·OP)+… shape; spot values computed independently.
        let w = greedy_waf(0.28);
        assert!(w > 2.0 && w < 3.0, "op 0.28 -> {w}");
        assert!(greedy_waf(0.07) > greedy_waf(0.28));
        assert!(greedy_waf(0.5) < greedy_waf(0.28));
        assert!(greedy_waf(100.0) < 1.01);
    }
}
