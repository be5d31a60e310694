//! Hunting aid for rare crash-test findings: runs many seeds with cuts biased into checkpoints
//! (workload) and into the checkpoint that ends recovery.
//!
//! `cargo run --release -p pagoda-crashtest --example hunt -- [--NAME VALUE]...` with names
//! (defaults in brackets): seed0 [1], seeds [10], cycles [2000], threads [1], rcut (recovery cut
//! chance) [0.8], openckpt (0/1) [1], ckptcut (chance) [0.3], ckptops [40], maxops [400],
//! page [4096], buffer (bytes) [harness default], torn [doublewrite], device (e.g. mem)
//! [RAM devices], sabotage [none].
use pagoda_crashtest::{run, CrashTestOptions};
use pagoda_engine::TornMode;
use std::collections::HashMap;

/// `--name value` pairs of the command line.
struct Args(HashMap<String, String>);

impl Args {
    fn parse() -> Result<Self, String> {
        let mut map = HashMap::new();
        let mut it = std::env::args().skip(1);
        while let Some(k) = it.next() {
            let name = k
                .strip_prefix("--")
                .ok_or_else(|| format!("expected --NAME VALUE, found {k}"))?;
            let v = it.next().ok_or_else(|| format!("--{name} needs a value"))?;
            map.insert(name.to_string(), v);
        }
        Ok(Self(map))
    }

    fn str(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str)
    }

    fn get<T: std::str::FromStr>(&self, k: &str, d: T) -> Result<T, String> {
        self.str(k).map_or(Ok(d), |v| {
            v.parse().map_err(|_| format!("--{k}: cannot parse {v}"))
        })
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = Args::parse()?;
    let seed0: u64 = a.get("seed0", 1)?;
    let seeds: u64 = a.get("seeds", 10)?;
    let cycles: u64 = a.get("cycles", 2000)?;
    let threads: usize = a.get("threads", 1)?;
    let torn: TornMode = a.str("torn").unwrap_or("doublewrite").parse()?;
    let device = a
        .str("device")
        .map(pagoda_device::spec::DeviceSpec::parse)
        .transpose()?;
    let sabotage = a.str("sabotage").map(str::parse).transpose()?;
    let page_size = a.get("page", 4096)?;
    let buffer_bytes = a.str("buffer").map(|_| a.get("buffer", 0)).transpose()?;
    let recovery_cut_chance = a.get("rcut", 0.8)?;
    let bias_open_checkpoint = a.get("openckpt", 1)? == 1;
    let bias_checkpoint_cut = a.get("ckptcut", 0.3)?;
    let bias_checkpoint_ops = a.get("ckptops", 40)?;
    let max_ops_before_cut = a.get("maxops", 400)?;
    let t0 = std::time::Instant::now();
    let mut total = 0;
    let mut failed = 0;
    for seed in seed0..seed0 + seeds {
        let report = run(CrashTestOptions {
            torn,
            cycles,
            seed,
            threads,
            device: device.clone(),
            page_size,
            buffer_bytes,
            recovery_cut_chance,
            bias_open_checkpoint,
            bias_checkpoint_cut,
            bias_checkpoint_ops,
            max_ops_before_cut,
            sabotage,
            stop_on_failure: true,
            ..CrashTestOptions::default()
        })?;
        total += report.cycles;
        let cuts_open_ckpt = report
            .cut_phases
            .get("open: checkpoint")
            .copied()
            .unwrap_or(0);
        let cuts_ckpt = report.cut_phases.get("checkpoint").copied().unwrap_or(0);
        println!(
            "seed {seed}: cycles {} open-ckpt cuts {cuts_open_ckpt} ckpt cuts {cuts_ckpt} torn512 {} repaired {} ({:.0} s total)",
            report.cycles,
            report.torn_512_sectors,
            report.torn_pages_repaired,
            t0.elapsed().as_secs_f64()
        );
        for f in &report.failures {
            failed += 1;
            println!("FAILURE {f}");
        }
    }
    println!("total cycles {total}, failed seeds {failed}");
    Ok(())
}
