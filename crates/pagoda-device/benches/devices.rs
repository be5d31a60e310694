//! Device benchmarks (plain main, prints a table): `cargo bench -p pagoda-device --bench devices`.
//!
//! * file device: 4 KiB random write + fdatasync per second, 4 KiB random reads per second
//!   (page cache, and O_DIRECT where the filesystem allows it), on a temp file;
//! * hdd-15k in emulate mode: random 4 KiB read IOPS at QD1 and sequential 1 MiB read MB/s,
//!   run at a reduced time scale and reported in modeled time;
//! * raid0-8x-hdd-15k: random 4 KiB read IOPS with 8 threads, against one disk with 8 threads;
//! * trace parsing speed;
//! * hdd-15k command queueing: random 4 KiB read IOPS at queue depths 1, 4, 8 and 32 with
//!   `ncq=1` (arrival order) and `ncq=32`, median of 3 runs; `-- ncq` runs this table alone:
//!   `cargo bench -p pagoda-device --bench devices -- ncq`.

#![allow(clippy::unwrap_used)] // a benchmark that fails should fail loudly

use pagoda_device::file::{FileDevice, FileOptions};
use pagoda_device::hdd::{Hdd, HddConfig};
use pagoda_device::raid::raid0_preset;
use pagoda_device::trace::{parse_trace, write_trace, TraceOp, TraceRecord};
use pagoda_device::{BlockDevice, WriteHints, SECTOR_SIZE};
use rand::{Rng, SeedableRng};
use std::time::Instant;

const SCALE: f64 = 0.1;

fn row(name: &str, value: f64, unit: &str, note: &str) {
    println!("{name:<48} {value:>12.1} {unit:<8} {note}");
}

fn file_bench(direct: bool) {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let opts = FileOptions {
        direct,
        capacity_bytes: Some(256 << 20),
        streams: 1,
        atomic: None,
    };
    let dev = match FileDevice::open(&dir.path().join("bench"), opts) {
        Ok(d) => d,
        Err(e) => {
            println!("file (direct={direct}): skipped: {e}");
            return;
        }
    };
    let cap = dev.caps().capacity_sectors;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let page = vec![0x5Au8; SECTOR_SIZE];
    // Fill so that reads hit allocated blocks.
    let chunk = vec![0x11u8; 1 << 20];
    for i in 0..(cap * SECTOR_SIZE as u64 / (1 << 20)) {
        dev.write(i * 256, &chunk, WriteHints::NORMAL).unwrap();
    }
    dev.flush().unwrap();
    let n = 400;
    let t0 = Instant::now();
    for _ in 0..n {
        dev.write(rng.gen_range(0..cap), &page, WriteHints::NORMAL)
            .unwrap();
        dev.flush().unwrap();
    }
    let tag = if direct { "O_DIRECT" } else { "buffered" };
    row(
        &format!("file {tag}: 4 KiB random write + fdatasync"),
        f64::from(n) / t0.elapsed().as_secs_f64(),
        "ops/s",
        "temp file",
    );
    let n = 50_000;
    let mut buf = vec![0u8; SECTOR_SIZE];
    let t0 = Instant::now();
    for _ in 0..n {
        dev.read(rng.gen_range(0..cap), &mut buf).unwrap();
    }
    row(
        &format!("file {tag}: 4 KiB random read"),
        f64::from(n) / t0.elapsed().as_secs_f64(),
        "ops/s",
        if direct { "device" } else { "page cache" },
    );
}

/// Sequential transfers take well under a millisecond each: they run in real time (scale 1) so
/// that thread wake-ups do not dominate.
const SEQ_SCALE: f64 = 1.0;

fn hdd_cfg_scaled(scale: f64) -> HddConfig {
    let mut c = HddConfig::preset("hdd-15k").unwrap();
    c.set("latency", "emulate").unwrap();
    c.set("time_scale", &scale.to_string()).unwrap();
    c
}

fn hdd_cfg() -> HddConfig {
    hdd_cfg_scaled(SCALE)
}

/// Random 4 KiB reads from `threads` threads, `per_thread` each; modeled IOPS.
fn random_reads(dev: &dyn BlockDevice, threads: u64, per_thread: u32) -> f64 {
    let cap = dev.caps().capacity_sectors;
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(100 + t);
                let mut buf = vec![0u8; SECTOR_SIZE];
                for _ in 0..per_thread {
                    dev.read(rng.gen_range(0..cap), &mut buf).unwrap();
                }
            });
        }
    });
    let modeled_s = t0.elapsed().as_secs_f64() / SCALE;
    (threads as f64 * f64::from(per_thread)) / modeled_s
}

fn hdd_bench() {
    let d = Hdd::new(hdd_cfg()).unwrap();
    let iops = random_reads(&d, 1, 300);
    let busy = d.stats().busy_time_us as f64 / 1e6;
    row(
        "hdd-15k: random 4 KiB read, QD1 (emulate)",
        iops,
        "IOPS",
        &format!(
            "modeled, time_scale {SCALE}; busy-time model {:.1}",
            300.0 / busy
        ),
    );
    let d = Hdd::new(hdd_cfg_scaled(SEQ_SCALE)).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let n = 100u64;
    let t0 = Instant::now();
    for i in 0..n {
        d.read(i * 256, &mut buf).unwrap();
    }
    let modeled = t0.elapsed().as_secs_f64() / SEQ_SCALE;
    row(
        "hdd-15k: sequential 1 MiB read, QD1 (emulate)",
        (n as f64) * 1.048_576 / modeled,
        "MB/s",
        "outer zone, real time",
    );
    let d = Hdd::new(hdd_cfg()).unwrap();
    let iops = random_reads(&d, 8, 40);
    row(
        "hdd-15k: random 4 KiB read, 8 threads",
        iops,
        "IOPS",
        "one actuator: no gain",
    );
}

fn raid_bench() {
    let keys: Vec<(String, String)> = [("latency", "emulate"), ("time_scale", &SCALE.to_string())]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let r = raid0_preset("raid0-8x-hdd-15k", &keys).unwrap();
    let iops = random_reads(&r, 8, 100);
    row(
        "raid0-8x-hdd-15k: random 4 KiB read, 8 threads",
        iops,
        "IOPS",
        "modeled",
    );
    let r = raid0_preset("raid0-8x-hdd-15k", &keys).unwrap();
    let iops = random_reads(&r, 32, 40);
    row(
        "raid0-8x-hdd-15k: random 4 KiB read, 32 threads",
        iops,
        "IOPS",
        "modeled",
    );
    let r = raid0_preset("raid0-8x-hdd-15k", &keys).unwrap();
    let iops = random_reads(&r, 1, 150);
    row(
        "raid0-8x-hdd-15k: random 4 KiB read, 1 thread",
        iops,
        "IOPS",
        "modeled",
    );
    let seq_keys: Vec<(String, String)> = [("latency", "emulate"), ("time_scale", "1")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let r = raid0_preset("raid0-8x-hdd-15k", &seq_keys).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let n = 100u64;
    let t0 = Instant::now();
    for i in 0..n {
        r.read(i * 256, &mut buf).unwrap();
    }
    let modeled = t0.elapsed().as_secs_f64();
    row(
        "raid0-8x-hdd-15k: sequential 1 MiB read, QD1",
        (n as f64) * 1.048_576 / modeled,
        "MB/s",
        "real time; 16 chunks over 8 disks",
    );
}

fn trace_bench() {
    let recs: Vec<TraceRecord> = (0..500_000u64)
        .map(|i| TraceRecord {
            time_us: i * 10,
            op: if i % 3 == 0 {
                TraceOp::Read
            } else {
                TraceOp::Write
            },
            sector: (i * 7919) % 1_000_000,
            sectors: 1 + i % 4,
            atomic: false,
            stream: 0,
        })
        .collect();
    let mut text = Vec::new();
    write_trace(&mut text, &recs).unwrap();
    let t0 = Instant::now();
    let back = parse_trace(&text[..], "bench").unwrap();
    assert_eq!(back.len(), recs.len());
    row(
        "trace: parse v1 text",
        recs.len() as f64 / t0.elapsed().as_secs_f64() / 1e6,
        "M rec/s",
        &format!("{} MB", text.len() / 1_000_000),
    );
}

/// Random 4 KiB read IOPS of `hdd-15k` by queue depth (closed-loop threads), FIFO against a
/// 32-deep reordering queue. Two figures per cell: requests per modeled second of the run
/// (wall time over the time scale, so thread wake-ups on a busy machine lower it), and
/// requests per second of the actuator's modeled busy time (the model alone).
fn ncq_bench() {
    println!("\n| queue depth | ncq=1 IOPS | ncq=1 IOPS (busy time) | ncq=32 IOPS | ncq=32 IOPS (busy time) | ncq=32 / ncq=1 |");
    println!("|---|---|---|---|---|---|");
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for qd in [1u64, 4, 8, 32] {
        let mut cells = Vec::new();
        for ncq in ["1", "32"] {
            let (mut wall, mut busy) = (Vec::new(), Vec::new());
            for _ in 0..3 {
                let mut c = hdd_cfg();
                c.set("ncq", ncq).unwrap();
                let d = Hdd::new(c).unwrap();
                let per_thread = (2000 / qd) as u32;
                wall.push(random_reads(&d, qd, per_thread));
                let s = d.stats();
                busy.push(s.host_read_requests as f64 / (s.busy_time_us as f64 / 1e6));
            }
            cells.push((median(wall), median(busy)));
        }
        println!(
            "| {qd} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2}x |",
            cells[0].0,
            cells[0].1,
            cells[1].0,
            cells[1].1,
            cells[1].0 / cells[0].0
        );
    }
}

fn main() {
    if std::env::args().any(|a| a == "ncq") {
        ncq_bench();
        return;
    }
    println!("{:<48} {:>12} {:<8} note", "benchmark", "value", "unit");
    file_bench(false);
    file_bench(true);
    hdd_bench();
    raid_bench();
    trace_bench();
    ncq_bench();
}
