//! Hunting aid for rare crash-test findings: runs many seeds with cuts biased into checkpoints
//! (workload) and into the checkpoint that ends recovery.
//!
//! `cargo run --release -p pagoda-engine --example hunt` with env: SEED0, SEEDS, CYCLES,
//! THREADS, RCUT (recovery cut chance), OPENCKPT (0/1), CKPTCUT (chance), CKPTOPS, MAXOPS,
//! PAGE, BUFFER (bytes), TORN, DEVICE (e.g. mem; unset = RAM devices), SABOTAGE.
use pagoda_engine::crashtest::{run, CrashTestOptions};
use pagoda_engine::TornMode;

fn env<T: std::str::FromStr>(k: &str, d: T) -> T {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seed0: u64 = env("SEED0", 1);
    let seeds: u64 = env("SEEDS", 10);
    let cycles: u64 = env("CYCLES", 2000);
    let threads: usize = env("THREADS", 1);
    let torn: TornMode = std::env::var("TORN")
        .unwrap_or_else(|_| "doublewrite".into())
        .parse()?;
    let device = std::env::var("DEVICE")
        .ok()
        .map(|s| pagoda_device::spec::DeviceSpec::parse(&s))
        .transpose()?;
    let sabotage = std::env::var("SABOTAGE")
        .ok()
        .map(|s| s.parse())
        .transpose()?;
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
            page_size: env("PAGE", 4096),
            buffer_bytes: std::env::var("BUFFER").ok().and_then(|b| b.parse().ok()),
            recovery_cut_chance: env("RCUT", 0.8),
            bias_open_checkpoint: env("OPENCKPT", 1) == 1,
            bias_checkpoint_cut: env("CKPTCUT", 0.3),
            bias_checkpoint_ops: env("CKPTOPS", 40),
            max_ops_before_cut: env("MAXOPS", 400),
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
