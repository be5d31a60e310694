//! `pagoda ssd synth` and `pagoda ssd replay`: the emulated SSD on its own, without the engine.

use crate::error::{CliError, CliResult};
use crate::progress::Progress;
use crate::report::{thousands, write_json, Table};
use clap::{Args, Subcommand};
use pagoda_device::spec::{DeviceKind, DeviceSpec};
use pagoda_device::ssd::{synth, Ssd, SsdConfig};
use pagoda_device::{BlockDevice, DeviceStats};
use std::path::PathBuf;

/// `pagoda ssd ...`
#[derive(Debug, Subcommand)]
pub enum SsdCommand {
    /// Precondition an emulated SSD to steady state, then run a synthetic write pattern.
    Synth(SynthArgs),
    /// Replay an I/O trace on an emulated SSD.
    Replay(ReplayArgs),
}

/// Flags of `ssd synth`.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Device: sata-ssd | nvme-ssd, with ,key=value options (docs/devices.md; a wrong key's
    /// error lists them all).
    #[arg(long)]
    preset: String,
    /// Logical capacity (overrides the preset's capacity key).
    #[arg(long)]
    capacity: Option<String>,
    /// Over-provisioning, (physical − logical) / logical, e.g. 0.07.
    #[arg(long)]
    op: Option<f64>,
    /// Number of write streams; with 2 and a hot/cold pattern, hot writes go to stream 1.
    #[arg(long)]
    streams: Option<u16>,
    /// uniform | hotcold:HOT%/DATA% (e.g. hotcold:80/20) | sequential.
    #[arg(long)]
    pattern: String,
    /// Measured host writes after preconditioning, as a multiple of the logical capacity.
    #[arg(long, default_value_t = 2.0, allow_negative_numbers = true)]
    writes: f64,
    /// Seed of the pattern's random numbers.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the device counters as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Flags of `ssd replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The trace: pagoda format (`# pagoda-trace v1`, then `time_us op sector sectors flags
    /// stream` per line) or MSR Cambridge CSV.
    trace: PathBuf,
    /// Device: sata-ssd | nvme-ssd, with ,key=value options (docs/devices.md; a wrong key's
    /// error lists them all).
    #[arg(long)]
    preset: String,
    /// Write the device counters as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Runs an `ssd` subcommand.
pub fn run(cmd: SsdCommand) -> CliResult<()> {
    match cmd {
        SsdCommand::Synth(a) => synth_cmd(&a),
        SsdCommand::Replay(a) => replay_cmd(&a),
    }
}

/// Builds an SSD config from a `--preset` string. Counters-only defaults (no data kept, no
/// emulated delay) apply unless the string sets `backing` or `latency` itself.
fn ssd_config(preset: &str, extra: &[(&str, String)]) -> CliResult<SsdConfig> {
    let spec = DeviceSpec::parse(preset)?;
    let name = match &spec.kind {
        DeviceKind::Preset(n) if n.ends_with("-ssd") => n.clone(),
        _ => {
            return Err(CliError::Usage(format!(
                "--preset '{preset}' is not an emulated SSD: use sata-ssd or nvme-ssd with ,key=value options"
            )))
        }
    };
    let mut cfg = SsdConfig::preset(&name)?;
    cfg.set("backing", "none")?;
    cfg.set("latency", "count")?;
    for (k, v) in &spec.options {
        cfg.set(k, v)?;
    }
    for (k, v) in extra {
        cfg.set(k, v)?;
    }
    cfg.validate()?;
    Ok(cfg)
}

fn synth_cmd(a: &SynthArgs) -> CliResult<()> {
    if !(a.writes.is_finite() && a.writes > 0.0 && a.writes <= 1000.0) {
        return Err(CliError::Usage(format!(
            "--writes {} is out of range: give a multiple of capacity in (0, 1000], e.g. 2",
            a.writes
        )));
    }
    let pattern: synth::Pattern = a.pattern.parse()?;
    let mut extra = Vec::new();
    if let Some(c) = &a.capacity {
        extra.push(("capacity", c.clone()));
    }
    if let Some(op) = a.op {
        extra.push(("op", op.to_string()));
    }
    if let Some(s) = a.streams {
        extra.push(("streams", s.to_string()));
    }
    let cfg = ssd_config(&a.preset, &extra)?;
    let ssd = Ssd::new(cfg)?;
    eprintln!("device: {}", ssd.describe());
    let capacity_units = ssd.caps().capacity_sectors;
    eprintln!(
        "preconditioning (full fill, one capacity of uniform overwrites, one of the pattern) ..."
    );
    let t0 = std::time::Instant::now();
    synth::precondition(&ssd, a.seed)?;
    synth::write_pattern(&ssd, &pattern, capacity_units, a.seed ^ 0x0057_A12D)?;
    ssd.reset_stats();
    eprintln!(
        "preconditioned in {:.1}s; measuring {} x capacity of {} writes",
        t0.elapsed().as_secs_f64(),
        a.writes,
        a.pattern
    );

    // Write in slices so that the bar moves; the pattern is address-based (the hot set is a
    // fixed key range), so slicing does not change the workload.
    const SLICES: u64 = 50;
    let total_units = (a.writes * capacity_units as f64) as u64;
    let mut progress = Progress::new("ssd synth", "writes", total_units);
    let t1 = std::time::Instant::now();
    let mut done = 0;
    for i in 0..SLICES {
        let upto = total_units * (i + 1) / SLICES;
        synth::write_pattern(&ssd, &pattern, upto - done, a.seed.wrapping_add(i + 1))?;
        done = upto;
        progress.set(done);
    }
    progress.finish();
    let secs = t1.elapsed().as_secs_f64();
    let stats = ssd.stats();
    print_stats(&stats);
    println!(
        "measured {} host writes in {secs:.2}s ({:.2} M writes/s, count mode)",
        thousands(stats.host_write_pages),
        stats.host_write_pages as f64 / secs / 1e6
    );
    if let Some(path) = &a.json {
        write_json(path, &stats)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

fn replay_cmd(a: &ReplayArgs) -> CliResult<()> {
    let cfg = ssd_config(&a.preset, &[])?;
    let ssd = Ssd::new(cfg)?;
    let file = std::fs::File::open(&a.trace).map_err(|e| CliError::Io {
        path: a.trace.clone(),
        source: e,
    })?;
    let records = pagoda_device::trace::parse_trace(
        std::io::BufReader::new(file),
        &a.trace.display().to_string(),
    )?;
    eprintln!(
        "device: {}; replaying {} requests",
        ssd.describe(),
        records.len()
    );
    let t0 = std::time::Instant::now();
    pagoda_device::trace::replay(&records, &ssd, &Default::default())?;
    let stats = ssd.stats();
    print_stats(&stats);
    println!(
        "replayed {} requests in {:.2}s",
        thousands(records.len() as u64),
        t0.elapsed().as_secs_f64()
    );
    if let Some(path) = &a.json {
        write_json(path, &stats)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Prints the device counters as a table: totals, then one row per stream.
fn print_stats(s: &DeviceStats) {
    print!("{}", stats_tables(s));
}

/// The device counters as text tables: totals, then one row per stream (also `pagoda mount`).
pub(crate) fn stats_tables(s: &DeviceStats) -> String {
    let mut out = String::new();
    let mut t = Table::new(&["counter", "value"]);
    t.row(&["host read pages (4 KiB)", &thousands(s.host_read_pages)]);
    t.row(&["host write pages (4 KiB)", &thousands(s.host_write_pages)]);
    t.row(&["flash reads", &thousands(s.flash_reads)]);
    t.row(&["flash programs", &thousands(s.flash_programs)]);
    t.row(&["erases", &thousands(s.erases)]);
    t.row(&["gc runs", &thousands(s.gc_runs)]);
    t.row(&["copybacks", &thousands(s.copybacks)]);
    t.row(&["WAF", &format!("{:.3}", s.waf)]);
    if let Some(e) = &s.erase_count {
        t.row(&[
            "erase count min/mean/max",
            &format!("{}/{:.1}/{}", e.min, e.mean, e.max),
        ]);
    }
    out.push_str(&t.render());
    if s.streams.len() > 1 {
        let mut t = Table::new(&["stream", "host write pages", "gc runs", "copybacks"]);
        for st in &s.streams {
            t.row(&[
                st.id.to_string(),
                thousands(st.host_write_pages),
                thousands(st.gc_runs),
                thousands(st.copybacks),
            ]);
        }
        out.push_str(&t.render());
    }
    out
}
