//! `cargo run --release -p pagoda-crashtest --example crashtest -- doublewrite 1000 7 [threads] [device]`
//! (what `pagoda crashtest` runs).
use pagoda_crashtest::{run, CrashTestOptions};
use pagoda_engine::TornMode;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    let torn: TornMode = a.get(1).map_or("doublewrite", String::as_str).parse()?;
    let cycles = a.get(2).map_or(Ok(100), |s| s.parse())?;
    let seed = a.get(3).map_or(Ok(1), |s| s.parse())?;
    let threads = a.get(4).map_or(Ok(4), |s| s.parse())?;
    let device = a
        .get(5)
        .map(|s| pagoda_device::spec::DeviceSpec::parse(s))
        .transpose()?;
    let t0 = std::time::Instant::now();
    let report = run(CrashTestOptions {
        torn,
        cycles,
        seed,
        threads,
        device,
        ..CrashTestOptions::default()
    })?;
    println!("{}", report.summary_line());
    println!("{report:?} in {:.1} s", t0.elapsed().as_secs_f64());
    if report.failed(torn) {
        std::process::exit(1);
    }
    Ok(())
}
