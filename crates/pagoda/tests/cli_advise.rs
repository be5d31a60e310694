//! End-to-end test of `pagoda advise buffer` at a tiny scale: the JSON the reproduction
//! suite reads, a curve that never falls, and the errors a user meets before any work.
#![allow(clippy::unwrap_used)] // test helpers: a failure should panic with the cause

mod common;

use common::{fails_with, pagoda};
use serde_json::Value;

const TINY: [&str; 16] = [
    "advise",
    "buffer",
    "--workload",
    "c",
    "--records",
    "3000",
    "--ops",
    "6000",
    "--threads",
    "2",
    "--data",
    "mem",
    "--log",
    "mem",
    "--probe-time",
    "100ms",
];

fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

#[test]
fn advise_buffer_writes_the_curve_the_predictions_and_the_advice() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("advise.json");
    let mut args = TINY.to_vec();
    let json_arg = json.to_str().unwrap();
    args.extend([
        "--buffer",
        "512KiB",
        "--page-size",
        "16KiB",
        "--devices",
        "mem,sata-ssd,latency=count",
        "--json",
        json_arg,
    ]);
    let o = pagoda(&args);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains("(run)") && stdout.contains("Knee at"),
        "{stdout}"
    );

    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["command"], "advise buffer");
    assert_eq!(v["config"]["records"], 3000);
    let m = &v["measured"];
    assert!(num(m, "tps") > 0.0);
    assert!((0.0..=1.0).contains(&num(m, "hit_ratio")));
    assert_eq!(num(m, "buffer_bytes"), 512.0 * 1024.0);
    assert!(num(m, "cpu_us_per_op") > 0.0);
    // A point read fixes at least the root and a leaf.
    assert!(num(m, "accesses_per_op") >= 2.0, "{m}");
    assert_eq!(num(m, "sample_rate"), 1.0);
    assert!(num(m, "references") >= 2.0 * 6000.0);

    let curve = v["mrc"].as_array().unwrap();
    assert!(curve.len() >= 20, "{} sizes", curve.len());
    assert!(curve
        .iter()
        .any(|p| num(p, "buffer_bytes") == 512.0 * 1024.0));
    let hr: Vec<f64> = curve.iter().map(|p| num(p, "hit_ratio")).collect();
    assert!(hr.windows(2).all(|w| w[0] <= w[1]), "not monotone: {hr:?}");
    let sizes: Vec<f64> = curve.iter().map(|p| num(p, "buffer_bytes")).collect();
    assert!(sizes.windows(2).all(|w| w[0] < w[1]));
    for p in curve {
        assert_eq!(num(p, "buffer_bytes"), num(p, "pages") * 16384.0);
    }
    // The whole database fits at the largest size: only first references miss.
    assert!(*hr.last().unwrap() > 0.9, "{hr:?}");

    let devices = v["devices"].as_array().unwrap();
    let names: Vec<&str> = devices
        .iter()
        .map(|d| d["device"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["mem", "sata-ssd"]);
    for d in devices {
        assert!(num(d, "read_latency_us") > 0.0);
        assert!(num(d, "read_iops_at_concurrency") > 0.0);
        let p = d["predicted"].as_array().unwrap();
        assert_eq!(p.len(), curve.len());
        let tps: Vec<f64> = p.iter().map(|x| num(x, "tps")).collect();
        // Fewer misses never predict less throughput.
        assert!(
            tps.windows(2).all(|w| w[0] <= w[1] * (1.0 + 1e-9)),
            "{tps:?}"
        );
    }
    // The run's own data device was probed too: the model is checked against the run.
    assert_eq!(v["model_check"]["device"], "mem");
    assert!(num(&v["model_check"], "predicted_tps") > 0.0);
    let knee = num(&v["advice"], "knee_bytes");
    assert!(sizes.contains(&knee), "knee {knee} is one of the sizes");
    assert!(v["advice"]["text"].as_str().unwrap().contains("Knee at"));
}

#[test]
fn bad_flags_are_refused_before_any_work_with_the_fix() {
    let cases: [(&[&str], &str); 4] = [
        (&["--sample-rate", "1.5"], "use 1 for an exact curve"),
        (&["--devices", "floppy"], "unknown device 'floppy'"),
        (&["--buffer", "64KiB"], "give a larger buffer"),
        (&["--load-only"], "drop --load-only"),
    ];
    for (extra, needle) in cases {
        let mut args = TINY.to_vec();
        args.extend(extra);
        let o = pagoda(&args);
        fails_with(&o, needle);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !err.contains("engine: pagoda("),
            "{extra:?} opened a database: {err}"
        );
    }
}
