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

/// Steady-state WAF of greedy GC with `units_per_block` units per block, from a mean-field
/// (fluid) model of the block population, in the spirit of Van Houdt (SIGMETRICS'13) and the
/// Markov models of Bux & Iliadis (2010): `n[v]` is the (real-valued) number of closed blocks
/// with `v` valid units. One cycle removes one block's mass from the lowest non-empty buckets
/// (the greedy victim, `v*` valid), and `b − v*` host writes each invalidate a uniformly random
/// valid unit, moving mass `n[v]·v/W` per write from bucket `v` to `v − 1` (W = valid units);
/// the refilled block enters bucket `b`. Iterated to its fixed point, `WAF = b / (b − v*)`.
///
/// Unlike the large-block formula this keeps the spread of valid counts among blocks of the
/// same age (a death process per unit), which is what lets greedy find victims below the mean
/// when blocks are small. For large `b` it converges to [`greedy_waf`].
pub fn greedy_waf_finite(op: f64, units_per_block: u32) -> f64 {
    let b = units_per_block as usize;
    let bf = f64::from(units_per_block);
    // 400 blocks of logical data; only ratios matter.
    let logical_blocks = 400.0f64;
    let mass = logical_blocks * (1.0 + op); // the mean-field limit: open blocks negligible
    let mut n = vec![0.0f64; b + 1];
    n[b] = logical_blocks;
    n[0] = mass - logical_blocks;
    let mut v_sum = 0.0;
    let mut v_cnt = 0.0;
    let cycles = (30.0 * mass) as usize;
    for cycle in 0..cycles {
        // Greedy victim: one block's mass from the bottom buckets.
        let mut need = 1.0;
        let mut victim_valid = 0.0;
        for (v, nv) in n.iter_mut().enumerate() {
            if need <= 0.0 {
                break;
            }
            let take = nv.min(need);
            *nv -= take;
            need -= take;
            victim_valid += take * v as f64;
        }
        let h = bf - victim_valid;
        // h invalidations in a few Euler steps (each moves a small fraction of any bucket).
        let steps = (h / 4.0).ceil().max(1.0) as usize;
        let k = h / steps as f64;
        for _ in 0..steps {
            let w: f64 = n.iter().enumerate().map(|(v, nv)| v as f64 * nv).sum();
            if w <= 0.0 {
                break;
            }
            let mut carry = 0.0;
            for v in (1..=b).rev() {
                let out = (k * v as f64 * n[v] / w).min(n[v]);
                n[v] = n[v] - out + carry;
                carry = out;
            }
            n[0] += carry;
        }
        n[b] += 1.0;
        if cycle >= cycles / 2 {
            v_sum += victim_valid;
            v_cnt += 1.0;
        }
    }
    bf / (bf - v_sum / v_cnt)
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
    fn finite_model_is_below_and_converges_to_the_large_block_formula() {
        for op in [0.07, 0.28] {
            let f16 = greedy_waf_finite(op, 16);
            let f64_ = greedy_waf_finite(op, 64);
            let f256 = greedy_waf_finite(op, 256);
            let large = greedy_waf(op);
            assert!(f16 < f64_ && f64_ < f256 && f256 < large, "op {op}");
            assert!((large - f256) / large < 0.04, "op {op}: {f256} vs {large}");
        }
    }

    #[test]
    fn greedy_waf_matches_independent_values() {
        // Reference values from a separate Halley-iteration implementation (Python, double).
        for (op, want) in [
            (0.07, 7.817_159_681_236_522),
            (0.28, 2.481_360_987_046_534),
            (0.5, 1.715_820_214_858_719_4),
        ] {
            let got = greedy_waf(op);
            assert!((got - want).abs() < 1e-9, "op {op}: {got} vs {want}");
        }
        assert!(greedy_waf(100.0) < 1.01);
    }
}
