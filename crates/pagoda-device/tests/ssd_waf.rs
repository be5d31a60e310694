//! Steady-state write amplification of greedy GC under uniform random 4 KiB overwrites against
//! the analytic model of Hu et al. (SYSTOR'09) / Desnoyers (SYSTOR'12):
//! `WAF = α / (α + W₀(−α·e^(−α)))`, `α = 1 + OP`.
//!
//! The device: one parallel unit, one stream, one write point, no write cache (so no pinned
//! old versions), `backing=none`, count mode, GC thresholds 2/3 free blocks. The formula is
//! evaluated at the device's effective OP (whole blocks). Warm-up: a full sequential fill and
//! four device-writes of random overwrites; then two device-writes are measured.

use pagoda_device::ssd::model::greedy_waf;
use pagoda_device::ssd::synth::{write_pattern, Pattern};
use pagoda_device::ssd::{Ssd, SsdConfig};
use pagoda_device::{BlockDevice, WriteHints};

fn device(op: f64, units_per_block: u32, blocks: u64) -> Ssd {
    let mut cfg = SsdConfig::preset("sata-ssd").expect("preset");
    let logical = blocks * u64::from(units_per_block);
    for (k, v) in [
        ("capacity", (logical * 4096).to_string()),
        ("op", op.to_string()),
        ("channels", "1".into()),
        ("dies", "1".into()),
        ("planes", "1".into()),
        ("page_size", "4KiB".into()),
        ("spare", "64".into()),
        ("pages_per_block", units_per_block.to_string()),
        ("streams", "1".into()),
        ("stripe", "1".into()),
        ("cache", "0".into()),
        ("gc_low", "2".into()),
        ("gc_high", "3".into()),
        ("backing", "none".into()),
    ] {
        cfg.set(k, &v).expect("key");
    }
    Ssd::new(cfg).expect("device")
}

/// Fill, warm up, measure; returns (measured WAF, effective OP).
fn steady_waf(op: f64, units_per_block: u32, blocks: u64) -> (f64, f64) {
    let d = device(op, units_per_block, blocks);
    let n = d.caps().capacity_sectors;
    for lpn in (0..n).step_by(64) {
        d.write_units(lpn, 64.min(n - lpn), WriteHints::NORMAL)
            .expect("fill");
    }
    write_pattern(&d, &Pattern::Uniform, 4 * n, 1).expect("warm-up");
    d.reset_stats();
    write_pattern(&d, &Pattern::Uniform, 2 * n, 2).expect("measure");
    let s = d.stats();
    assert_eq!(s.host_write_pages, 2 * n);
    assert_eq!(s.flash_programs, s.host_write_pages + s.copybacks);
    (s.waf, d.geometry().effective_op())
}

#[test]
fn greedy_waf_matches_the_large_block_model() {
    for op in [0.07, 0.28, 0.5] {
        let (waf, eff) = steady_waf(op, 256, 1024);
        let model = greedy_waf(eff);
        let err = (waf - model).abs() / model;
        println!(
            "op {op} (effective {eff:.4}): measured WAF {waf:.3}, model {model:.3}, error {:.1} %",
            err * 100.0
        );
        assert!(err < 0.05, "op {op}: WAF {waf:.3} vs model {model:.3}");
    }
}

#[test]
fn small_blocks_measure() {
    for upb in [16, 32, 64, 128] {
        for op in [0.07, 0.28, 0.5] {
            let (waf, eff) = steady_waf(op, upb, 131072 / u64::from(upb));
            println!(
                "upb {upb} op {op}: WAF {waf:.3} model {:.3} ratio {:.3}",
                greedy_waf(eff),
                waf / greedy_waf(eff)
            );
        }
    }
}
