//! `pagoda advise buffer`: buffer-pool sizing from one YCSB run (the miss-ratio curve and the
//! throughput model go beyond the buffer-sizing paper, which swept the buffer run by run).
//!
//! The run records the pool's page references ([`pagoda_engine::Db::start_page_trace`]); a
//! short probe of each candidate device gives its read latency and throughput; the engine's
//! [`pagoda_engine::sizing`] turns both into the miss-ratio curve, predicted TPS, the knee and
//! the advice. This command parses flags, runs, probes and prints.

mod probe;

use crate::cmd::bench::{load_and_run_ycsb, YcsbArgs};
use crate::error::{CliError, CliResult};
use crate::report::{thousands, write_json, Table};
use crate::units::Span;
use clap::{Args, Subcommand};
use pagoda_device::units::format_size;
use pagoda_engine::sizing::{extent_pages, Advice, DeviceFigures, Measured, Mrc, ShardsRate};
use serde_json::{json, Value};

const MODEL_HELP: &str = "\
The model, for buffer B (pages) with miss ratio MR(B) from the curve:
  m(B)   = accesses_per_op x MR(B)                               (page reads per operation)
  TPS(B) = min( clients / (cpu_per_op + m(B) x read_latency),    (closed system)
                device_reads_per_s_at_clients / m(B),            (the device saturates)
                cores / cpu_per_op )                             (the CPU saturates)
i.e. the buffer-sizing paper's A*HR + B*(1-HR) per access plus queueing at the device.
cpu_per_op and accesses_per_op are measured in the run; each device's read latency (queue depth
1) and reads/s (as many readers as --threads) by a short random page-read probe. The curve is
pure LRU; the engine's pool is a hot/cold midpoint LRU, so its own hit ratio may differ (both are printed).
The knee is the smallest reported size from which on doubling the buffer buys < 5 % more
predicted TPS on every device.";

/// `pagoda advise ...`
#[derive(Debug, Subcommand)]
pub enum AdviseCommand {
    /// Buffer-pool sizing from one YCSB run: the miss-ratio curve of the engine's own page
    /// references at every buffer size, predicted TPS per device, the knee, and whether a
    /// bigger buffer or a faster device buys more.
    Buffer(Box<BufferArgs>),
}

/// Flags of `advise buffer`: those of `bench ycsb`, and the model's.
#[derive(Debug, Args)]
#[command(after_help = MODEL_HELP)]
pub struct BufferArgs {
    #[command(flatten)]
    ycsb: YcsbArgs,
    /// Devices to model, comma-separated; a key=value part is an option of the device before
    /// it (hdd-15k,time_scale=0.5,sata-ssd). Presets get latency=emulate unless given.
    #[arg(long, default_value = "hdd-15k,raid0-8x-hdd-15k,sata-ssd,nvme-ssd")]
    devices: String,
    /// SHARDS sampling rate of the page trace, in (0, 1]: 1 gives the exact curve; e.g. 0.01
    /// for runs of hundreds of millions of page accesses (16 bytes per kept access). Below 1,
    /// sizes under about 100/R pages rest on few sampled pages (a B+tree's root and inner
    /// pages are in the sample or not) and are rough.
    #[arg(long, default_value_t = 1.0)]
    sample_rate: f64,
    /// Length of each of the two probes per device (tests shorten it).
    #[arg(long, default_value = "1s", hide = true)]
    probe_time: Span,
}

/// Runs an `advise` subcommand.
pub fn run(cmd: AdviseCommand) -> CliResult<()> {
    match cmd {
        AdviseCommand::Buffer(a) => buffer(&a),
    }
}

fn buffer(a: &BufferArgs) -> CliResult<()> {
    // Every flag is checked before the load.
    let rate = ShardsRate::new(a.sample_rate)
        .map_err(|e| CliError::Usage(format!("--sample-rate: {e}")))?;
    let devices = probe::parse_list(&a.devices)?;
    check_flags(a)?;
    let run = traced_run(a, rate)?;
    let mrc = Mrc::from_trace(&run.trace);
    if mrc.rate() < 1.0 {
        eprintln!(
            "advise: sampled at rate {:.4}: hit ratios below about {} pages rest on few sampled \
             pages and are rough (--sample-rate 1 for an exact curve)",
            mrc.rate(),
            thousands((100.0 / mrc.rate()) as u64)
        );
    }
    // The database's extent: the probe reads over it, the advice covers sizes up to it.
    let span_pages = extent_pages(&run.trace, &mrc);
    let m = run.measured(a);
    let page_size = m.page_size;
    let probe_time = a.probe_time.duration();
    let mut figures = Vec::new();
    for (name, spec) in &devices {
        eprintln!("advise: probing {name} ({probe_time:?} at queue depth 1, {probe_time:?} with {} readers)", m.clients);
        figures.push(probe::probe(
            name,
            spec,
            page_size,
            span_pages * page_size,
            m.clients,
            probe_time,
        )?);
    }
    let advice = Advice::new(mrc, m, figures, span_pages);
    print_and_save(a, &run, &advice)
}

/// Refuses the flags that cannot give advice.
fn check_flags(a: &BufferArgs) -> CliResult<()> {
    if a.ycsb.phase.load_only {
        return Err(CliError::Usage(
            "advise buffer needs a measured run: drop --load-only".to_string(),
        ));
    }
    if a.ycsb.engine.flash.given() {
        return Err(CliError::Usage(
            "advise buffer models the DRAM pool over one data device: drop the --flash-cache flags"
                .to_string(),
        ));
    }
    Ok(())
}

/// What one traced run measured: its report, the pool's counters around it, the page trace
/// and the CPU it used.
struct TracedRun {
    report: pagoda_workload::RunReport,
    hits: u64,
    fixes: u64,
    trace: pagoda_engine::sizing::PageTrace,
    cpu: Option<pagoda_engine::stats::CpuUsage>,
}

/// Loads and runs the YCSB workload with the page trace on for the measured window.
fn traced_run(a: &BufferArgs, rate: ShardsRate) -> CliResult<TracedRun> {
    let mut before = None;
    let (bench, report) = load_and_run_ycsb(&a.ycsb, |db| {
        // The load's commits may have spilled past the buffer; a checkpoint writes them and
        // brings the pool back to its size, so the run measures the buffer asked for.
        db.checkpoint()?;
        before = Some(db.stats().buffer);
        db.start_page_trace(rate);
        Ok(())
    })?;
    let db = bench.store.db();
    let trace = db.take_page_trace();
    let after = db.stats().buffer;
    let cpu = bench.cpu;
    bench.close()?;
    let (Some(report), Some(before)) = (report, before) else {
        return Err(CliError::Other("the workload did not run".to_string()));
    };
    if trace.dropped > 0 {
        eprintln!(
            "advise: the trace was full and dropped {} page accesses; rerun with a lower \
             --sample-rate for a curve of the whole run",
            thousands(trace.dropped)
        );
    }
    let hits = after.hits - before.hits;
    let fixes = (hits + after.misses - before.misses).max(1);
    Ok(TracedRun {
        report,
        hits,
        fixes,
        trace,
        cpu,
    })
}

impl TracedRun {
    /// The figures the model takes from the run.
    fn measured(&self, a: &BufferArgs) -> Measured {
        let e = &a.ycsb.engine;
        let ops = (self.report.ops + self.report.warmup_ops).max(1) as f64;
        let cpu_s = self.cpu.as_ref().map_or(0.0, |c| c.user_s + c.sys_s);
        Measured {
            clients: a.ycsb.phase.threads,
            cores: self.cpu.as_ref().map_or(1, |c| c.cores.max(1)),
            cpu_s_per_op: cpu_s / ops,
            accesses_per_op: self.fixes as f64 / ops,
            page_size: e.page_size.bytes(),
            buffer_pages: e.buffer.bytes() / e.page_size.bytes(),
        }
    }
}

/// Prints the measured figures, the devices, the table and the advice, checks the model
/// against the run's own device, and writes `--json`.
fn print_and_save(a: &BufferArgs, run: &TracedRun, advice: &Advice) -> CliResult<()> {
    let e = &a.ycsb.engine;
    let report = &run.report;
    let (m, mrc, figures) = (advice.measured(), advice.mrc(), advice.devices());
    let tps = |d: usize, pages: f64| advice.tps(&figures[d], pages);
    let (sizes, knee, text) = (advice.sizes(), advice.knee_pages(), advice.text());
    let own_hr = run.hits as f64 / run.fixes as f64;
    println!(
        "measured: {:.0} ops/s, pool hit ratio {:.4} (LRU curve at this size {:.4}), {:.1} µs CPU \
         per op, {:.2} page accesses per op, {} traced accesses (rate {})",
        report.throughput_ops_s,
        own_hr,
        mrc.hit_ratio(m.buffer_pages as f64),
        1e6 * m.cpu_s_per_op,
        m.accesses_per_op,
        thousands(mrc.references()),
        mrc.rate()
    );
    for f in figures {
        println!(
            "device {}: read latency {:.1} µs at queue depth 1, {:.0} reads/s with {} readers",
            f.name,
            1e6 * f.read_latency_s,
            f.iops,
            m.clients
        );
    }
    print!("{}", table(sizes, m, mrc, figures, knee, &tps));
    println!("{text}");
    // The run's own data device among those probed: the model at the run's buffer against
    // what the run measured.
    let run_device = e.data.as_deref().and_then(|d| d.split(',').next());
    let check = figures
        .iter()
        .position(|f| Some(f.name.as_str()) == run_device)
        .map(|d| {
            let predicted = tps(d, m.buffer_pages as f64);
            println!(
                "model check: {:.0} ops/s predicted on {} at the run's buffer, {:.0} measured \
                 ({:+.1} %)",
                predicted,
                figures[d].name,
                report.throughput_ops_s,
                100.0 * (predicted / report.throughput_ops_s - 1.0)
            );
            json!({ "device": figures[d].name, "predicted_tps": predicted,
                "measured_tps": report.throughput_ops_s })
        });

    if let Some(path) = &e.json {
        let mut v = to_json(a, report, m, own_hr, mrc, sizes, figures, knee, text, &tps);
        if let (Some(obj), Some(c)) = (v.as_object_mut(), check) {
            obj.insert("model_check".to_string(), c);
        }
        write_json(path, &v)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

fn table(
    sizes: &[u64],
    m: &Measured,
    mrc: &Mrc,
    figures: &[DeviceFigures],
    knee: u64,
    tps: &dyn Fn(usize, f64) -> f64,
) -> String {
    let mut header = vec!["buffer".to_string(), "pages".into(), "hit ratio".into()];
    header.extend(figures.iter().map(|f| format!("{} ops/s", f.name)));
    let mut t = Table::new(&header);
    for &b in sizes {
        let mut mark = String::new();
        if b == m.buffer_pages {
            mark.push_str(" (run)");
        }
        if b == knee {
            mark.push_str(" (knee)");
        }
        let mut row = vec![
            format!("{}{mark}", format_size(b * m.page_size)),
            thousands(b),
            format!("{:.4}", mrc.hit_ratio(b as f64)),
        ];
        row.extend((0..figures.len()).map(|d| format!("{:.0}", tps(d, b as f64))));
        t.row(&row);
    }
    t.render()
}

#[allow(clippy::too_many_arguments)]
fn to_json(
    a: &BufferArgs,
    report: &pagoda_workload::RunReport,
    m: &Measured,
    own_hr: f64,
    mrc: &Mrc,
    sizes: &[u64],
    figures: &[DeviceFigures],
    knee: u64,
    text: &str,
    tps: &dyn Fn(usize, f64) -> f64,
) -> Value {
    let (y, e) = (&a.ycsb, &a.ycsb.engine);
    let bytes = |pages: u64| pages * m.page_size;
    let config = json!({
        "workload": y.workload, "distribution": y.distribution, "records": y.records,
        "threads": y.phase.threads, "ops": y.ops, "duration": y.phase.duration,
        "data": e.data, "log": e.log, "buffer_bytes": bytes(m.buffer_pages),
        "page_size": m.page_size, "seed": e.seed, "devices": a.devices,
        "sample_rate": a.sample_rate, "probe_time": a.probe_time,
    });
    let curve: Vec<Value> = sizes
        .iter()
        .map(|&b| json!({ "buffer_bytes": bytes(b), "pages": b, "hit_ratio": mrc.hit_ratio(b as f64) }))
        .collect();
    let devices: Vec<Value> = figures
        .iter()
        .enumerate()
        .map(|(d, f)| {
            let predicted: Vec<Value> = sizes
                .iter()
                .map(|&b| json!({ "buffer_bytes": bytes(b), "tps": tps(d, b as f64) }))
                .collect();
            json!({ "device": f.name, "read_latency_us": 1e6 * f.read_latency_s,
                "read_iops_at_concurrency": f.iops, "predicted": predicted })
        })
        .collect();
    json!({
        "command": "advise buffer",
        "config": config,
        "measured": {
            "tps": report.throughput_ops_s, "hit_ratio": own_hr,
            "buffer_bytes": bytes(m.buffer_pages), "cpu_us_per_op": 1e6 * m.cpu_s_per_op,
            "accesses_per_op": m.accesses_per_op, "sample_rate": mrc.rate(),
            "references": mrc.references(),
            "predicted_hit_ratio": mrc.hit_ratio(m.buffer_pages as f64),
        },
        "mrc": curve,
        "devices": devices,
        "advice": { "knee_bytes": bytes(knee), "text": text },
    })
}
