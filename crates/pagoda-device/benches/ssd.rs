//! SSD emulator benchmark (plain main, prints tables; ~1 minute).
//!
//! `cargo bench -p pagoda-device --bench ssd [-- quick] [-- only=a|b|c|d] [-- rows=N]
//! [-- publish=PATH]` — `quick` shortens every run, `only=` picks sections, `rows=N` runs only
//! the first N rows of (a) (for repeated A/B runs of the 1 GiB row), `publish=PATH` writes
//! section (d) as Markdown with the command, machine, commit and load average (a relative
//! PATH is taken from the workspace root; `docs/results/devices.md` is published so).
//! (a) count mode: host 4 KiB writes/s with GC active (op 0.28, uniform random, steady
//!     state), single thread, via `write_units` and via `BlockDevice::write`;
//! (b) emulate mode: QD1 read/write latency vs the preset's nominal figures;
//! (c) emulate mode: random 4 KiB read and write throughput vs threads, 1 … dies;
//! (d) emulate mode: random 4 KiB write IOPS of `sata-ssd` at 512 MiB, 1 GiB and 8 GiB, fresh
//!     (host-write parallelism alone) and preconditioned (GC running, with the preset's one
//!     block size and with the drive's 1 MiB block where it fits), median of 3 runs and the
//!     max/min ratio: capacity must not change the parallelism writes and GC reach.

use pagoda_device::ssd::synth::precondition;
use pagoda_device::ssd::{Ssd, SsdConfig};
use pagoda_device::{BlockDevice, WriteHints, SECTOR_SIZE};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

fn ssd(preset: &str, opts: &[(&str, &str)]) -> Ssd {
    Ssd::from_preset(preset, opts).expect("bench device")
}

/// CPU time of this thread (the machine is shared: wall time includes other processes).
fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn count_mode(quick: bool, rows: usize) {
    println!(
        "## (a) count mode, op=0.28, uniform random 4 KiB writes after preconditioning, 1 thread"
    );
    println!(
        "{:<44} {:>12} {:>14} {:>8}",
        "path", "writes/s", "writes/CPU-s", "WAF"
    );
    let n_writes: u64 = if quick { 2_000_000 } else { 20_000_000 };
    for (label, capacity, backing, buffered) in [
        ("write_units, 1 GiB, backing=none", "1GiB", "none", false),
        (
            "write_units, 256 MiB, backing=none",
            "256MiB",
            "none",
            false,
        ),
        ("write_units, 64 MiB, backing=none", "64MiB", "none", false),
        (
            "BlockDevice::write 4 KiB, 1 GiB, none",
            "1GiB",
            "none",
            true,
        ),
        ("BlockDevice::write 4 KiB, 1 GiB, ram", "1GiB", "ram", true),
    ]
    .into_iter()
    .take(rows)
    {
        let d = ssd(
            "sata-ssd",
            &[
                ("capacity", capacity),
                ("op", "0.28"),
                ("backing", backing),
                ("streams", "1"),
            ],
        );
        precondition(&d, 1).expect("precondition");
        let cap = d.caps().capacity_sectors;
        let mut rng = SmallRng::seed_from_u64(2);
        let buf = vec![0x5Au8; SECTOR_SIZE];
        let n = if backing == "ram" {
            n_writes / 4
        } else {
            n_writes
        };
        let t = Instant::now();
        let c = cpu_seconds();
        for _ in 0..n {
            let lpn = rng.gen_range(0..cap);
            if buffered {
                d.write(lpn, &buf, WriteHints::NORMAL).expect("write");
            } else {
                d.write_units(lpn, 1, WriteHints::NORMAL).expect("write");
            }
        }
        let secs = t.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - c;
        let s = d.stats();
        assert!(s.gc_runs > 0, "GC must be active");
        println!(
            "{label:<44} {:>12.0} {:>14.0} {:>8.3}",
            n as f64 / secs,
            n as f64 / cpu,
            s.waf
        );
    }
}

struct Nominal {
    read_us: f64,
    write_cached_us: f64,
    write_through_us: f64,
}

fn nominal(cfg: &SsdConfig) -> Nominal {
    let unit = SECTOR_SIZE as f64;
    let chan = unit / cfg.channel_mbps;
    let link = unit / cfg.link_mbps;
    Nominal {
        read_us: cfg.cmd_us + cfg.read_us + chan + link,
        write_cached_us: cfg.cmd_us + link,
        write_through_us: cfg.cmd_us + link + chan + cfg.program_us,
    }
}

fn qd1_latency(quick: bool) {
    println!("\n## (b) emulate mode, QD1 latency (time_scale=1), mean of N requests");
    println!(
        "{:<10} {:<22} {:>12} {:>12}",
        "preset", "op", "measured µs", "nominal µs"
    );
    let reps = if quick { 100 } else { 400 };
    for preset in ["sata-ssd", "nvme-ssd"] {
        let cfg = SsdConfig::preset(preset).expect("preset");
        let nom = nominal(&cfg);
        let common = [
            ("capacity", "1GiB"),
            ("op", "0.28"),
            ("backing", "none"),
            ("streams", "1"),
        ];
        let mut opts = common.to_vec();
        opts.push(("latency", "emulate"));
        let d = ssd(preset, &opts);
        let cap = d.caps().capacity_sectors;
        for l in (0..cap).step_by(64) {
            d.write_units(l, 64.min(cap - l), WriteHints::NORMAL)
                .expect("fill");
        }
        d.flush().expect("flush");
        let mut rng = SmallRng::seed_from_u64(3);
        let mut buf = vec![0u8; SECTOR_SIZE];
        let t = Instant::now();
        for _ in 0..reps {
            d.read(rng.gen_range(0..cap), &mut buf).expect("read");
        }
        let r = t.elapsed().as_secs_f64() * 1e6 / f64::from(reps);
        println!(
            "{preset:<10} {:<22} {r:>12.1} {:>12.1}",
            "random read 4 KiB", nom.read_us
        );
        let mut w = 0.0;
        for _ in 0..reps {
            // Let the cache drain so each write sees an idle device; time only the call.
            std::thread::sleep(Duration::from_micros(300));
            let l = rng.gen_range(0..cap);
            let t = Instant::now();
            d.write_units(l, 1, WriteHints::NORMAL).expect("write");
            w += t.elapsed().as_secs_f64();
        }
        let w = w * 1e6 / f64::from(reps);
        println!(
            "{preset:<10} {:<22} {w:>12.1} {:>12.1}",
            "write 4 KiB (cached)", nom.write_cached_us
        );
        let mut opts = opts.clone();
        opts.push(("cache", "0"));
        let d = ssd(preset, &opts);
        let t = Instant::now();
        for _ in 0..reps / 4 {
            d.write_units(rng.gen_range(0..cap), 1, WriteHints::NORMAL)
                .expect("write");
        }
        let w = t.elapsed().as_secs_f64() * 1e6 / f64::from(reps / 4);
        println!(
            "{preset:<10} {:<22} {w:>12.1} {:>12.1}",
            "write 4 KiB (cache=0)", nom.write_through_us
        );
    }
}

fn throughput(quick: bool) {
    let span = Duration::from_millis(if quick { 150 } else { 400 });
    println!(
        "\n## (c) emulate mode, random 4 KiB throughput vs threads (modeled IOPS = requests / \
         (wall time / time_scale)); capacity 4GiB, op 0.28, 64 MiB working set"
    );
    for (preset, scale) in [("sata-ssd", "4"), ("nvme-ssd", "4")] {
        let cfg = SsdConfig::preset(preset).expect("preset");
        let dies = cfg.channels * cfg.dies_per_channel;
        let scale_f: f64 = scale.parse().expect("scale");
        println!("{preset} (dies {dies}, time_scale {scale}):");
        println!("{:>8} {:>14} {:>14}", "threads", "read IOPS", "write IOPS");
        let d = ssd(
            preset,
            &[
                ("capacity", "4GiB"),
                ("op", "0.28"),
                ("backing", "none"),
                ("streams", "1"),
                ("latency", "emulate"),
                ("time_scale", scale),
            ],
        );
        // Work on the first 64 MiB (striped over all parallel units), so filling is quick.
        let cap = 16384;
        for l in (0..cap).step_by(64) {
            d.write_units(l, 64, WriteHints::NORMAL).expect("fill");
        }

        d.flush().expect("flush");
        let mut threads = 1;
        while threads <= dies {
            let mut row = Vec::new();
            for write in [false, true] {
                let t0 = Instant::now();
                let total: u64 = std::thread::scope(|s| {
                    let hs: Vec<_> = (0..threads)
                        .map(|t| {
                            let d = &d;
                            s.spawn(move || {
                                let mut rng = SmallRng::seed_from_u64(u64::from(t) + 10);
                                let mut buf = vec![0u8; SECTOR_SIZE];
                                let mut n = 0u64;
                                while t0.elapsed() < span {
                                    let l = rng.gen_range(0..cap);
                                    if write {
                                        d.write_units(l, 1, WriteHints::NORMAL).expect("write");
                                    } else {
                                        d.read(l, &mut buf).expect("read");
                                    }
                                    n += 1;
                                }
                                n
                            })
                        })
                        .collect();
                    hs.into_iter().map(|h| h.join().expect("thread")).sum()
                });
                let secs = t0.elapsed().as_secs_f64() / scale_f;
                row.push(total as f64 / secs);
                d.flush().expect("drain");
            }
            println!("{threads:>8} {:>14.0} {:>14.0}", row[0], row[1]);
            threads *= 2;
        }
    }
}

/// Modeled 4 KiB random-write IOPS of one timed run over the whole device (`threads` writers).
fn write_iops(d: &Ssd, threads: u64, span: Duration, scale: f64, seed: u64) -> f64 {
    let cap = d.caps().capacity_sectors;
    let t0 = Instant::now();
    let total: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(seed * 1000 + t);
                    let mut n = 0u64;
                    while t0.elapsed() < span {
                        d.write_units(rng.gen_range(0..cap), 1, WriteHints::NORMAL)
                            .expect("write");
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("thread")).sum()
    });
    let iops = total as f64 / (t0.elapsed().as_secs_f64() / scale);
    // Drain the cache and pending programs so the next run starts from the same state.
    d.flush().expect("drain");
    iops
}

/// One capacity's row of section (d).
struct Row {
    capacity: &'static str,
    g: pagoda_device::ssd::Geometry,
    runs: Vec<f64>,
    waf: f64,
}

impl Row {
    fn median(&self) -> f64 {
        let mut r = self.runs.clone();
        r.sort_by(f64::total_cmp);
        r[r.len() / 2]
    }
    fn block_kib(&self) -> u64 {
        u64::from(self.g.units_per_block) * SECTOR_SIZE as u64 / 1024
    }
}

fn max_over_min(rows: &[Row]) -> f64 {
    let m: Vec<f64> = rows.iter().map(Row::median).collect();
    m.iter().copied().fold(f64::MIN, f64::max) / m.iter().copied().fold(f64::MAX, f64::min)
}

/// The device sets of section (d): label, precondition, explicit `pages_per_block`.
const SETS: [(&str, &str, Option<&str>); 3] = [
    ("fresh, empty device, preset blocks", "0", None),
    (
        "full (precondition=1, GC running), preset blocks",
        "1",
        None,
    ),
    (
        "full, the drive's 1 MiB block where the capacity allows it (pages_per_block=128, \
         halved below: the layout before)",
        "1",
        Some("128"),
    ),
];

fn capacity_scaling(quick: bool) -> Vec<Vec<Row>> {
    let (scale, threads) = ("2", 16u64);
    let span = Duration::from_millis(if quick { 800 } else { 2000 });
    println!(
        "\n## (d) emulate mode, sata-ssd preset (op 0.07, streams 4, cache 512 KiB), uniform \
         random 4 KiB writes over the whole device, {threads} threads, time_scale {scale}, \
         {:.1} s per run, 3 runs",
        span.as_secs_f64()
    );
    // Fresh: every run on a new, empty device, short enough that GC never starts, so the
    // figure is the host-write parallelism alone. Full: one preconditioned device, three runs
    // in a row, with GC running. The preset keeps one block size at every capacity; the last
    // set lays out the drive's block where it fits, so the block grows with capacity.
    let mut sets = Vec::new();
    for (fill, precondition, ppb) in SETS {
        println!("{fill}:");
        println!(
            "{:>9} {:>5} {:>7} {:>7} {:>9} {:>9} {:>9} {:>9} {:>6}",
            "capacity", "pus", "stripe", "blocks", "block", "run 1", "run 2", "run 3", "WAF"
        );
        let mut rows = Vec::new();
        for capacity in ["512MiB", "1GiB", "8GiB"] {
            let mut opts = vec![
                ("capacity", capacity),
                ("backing", "none"),
                ("precondition", precondition),
                ("latency", "emulate"),
                ("time_scale", scale),
            ];
            if let Some(p) = ppb {
                opts.push(("pages_per_block", p));
            }
            let mut d = ssd("sata-ssd", &opts);
            let mut runs = Vec::new();
            for r in 0..3 {
                if r > 0 && precondition == "0" {
                    d = ssd("sata-ssd", &opts);
                }
                runs.push(write_iops(
                    &d,
                    threads,
                    span,
                    scale.parse().expect("scale"),
                    r,
                ));
            }
            // Over all three runs of a full device: the first alone can be a GC burst.
            let row = Row {
                capacity,
                g: d.geometry(),
                runs,
                waf: d.stats().waf,
            };
            println!(
                "{capacity:>9} {:>5} {:>7} {:>7} {:>5} KiB {:>9.0} {:>9.0} {:>9.0} {:>6.2}",
                row.g.pus,
                row.g.stripe,
                row.g.blocks,
                row.block_kib(),
                row.runs[0],
                row.runs[1],
                row.runs[2],
                row.waf,
            );
            rows.push(row);
        }
        let line: Vec<String> = rows
            .iter()
            .map(|r| format!("{} {:.0}", r.capacity, r.median()))
            .collect();
        println!(
            "median write IOPS: {}; max/min {:.3}",
            line.join(", "),
            max_over_min(&rows)
        );
        sets.push(rows);
    }
    sets
}

/// First line of a command's output ("" if it cannot run).
fn output(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_default()
}

/// A line of /proc/`file` starting with `key`, after the key and its separator.
fn proc_field(file: &str, key: &str) -> String {
    std::fs::read_to_string(format!("/proc/{file}"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with(key)).map(|l| {
                l[key.len()..]
                    .trim_start_matches([' ', '\t', ':'])
                    .to_string()
            })
        })
        .unwrap_or_default()
}

/// Section (d) as Markdown, with the command, machine, commit and load that produced it.
fn markdown(sets: &[Vec<Row>], args: &str, load_start: &str, quick: bool) -> String {
    let load_end = proc_field("loadavg", "");
    let mut m = String::from("# Emulated SSD: write IOPS across capacities\n\n");
    m +=
        &format!(
        "Generated by `cargo bench -p pagoda-device --bench ssd --{args}` on {} at commit {}{}.\
         \n\nMachine: {} ({} cores, {} RAM, Linux {}); load average (1, 5, 15 min) {} when \
         the run started, {} when it ended. Other builds share the machine: compare rows of \
         this run, not with other runs.\n\n",
        output("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
        output("git", &["rev-parse", "--short=10", "HEAD"]),
        if output("git", &["status", "--porcelain", "--untracked-files=no"]).is_empty() {
            ""
        } else {
            " (with uncommitted changes)"
        },
        proc_field("cpuinfo", "model name"),
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        proc_field("meminfo", "MemTotal")
            .trim_end_matches(" kB")
            .parse::<f64>()
            .map_or_else(|_| "unknown".into(), |kb| format!("{:.1} GiB", kb / 1048576.0)),
        output("uname", &["-r"]),
        load_start.split_whitespace().take(3).collect::<Vec<_>>().join(", "),
        load_end.split_whitespace().take(3).collect::<Vec<_>>().join(", "),
    );
    m += &format!(
        "`sata-ssd` preset (op 0.07, 4 streams, 512 KiB cache), `latency=emulate`, \
         `time_scale=2`, `backing=none`: uniform random 4 KiB writes over the whole device \
         from 16 threads, {} s per run, 3 runs per row. IOPS are modeled: requests over \
         (wall time / time_scale). A fresh row uses a new, empty device per run (GC never \
         starts); a full row one device preconditioned to steady state (`precondition=1`), \
         its three runs in a row; its WAF is over the three runs.\n",
        if quick { "0.8" } else { "2" }
    );
    for ((label, ..), rows) in SETS.iter().zip(sets) {
        m += &format!("\n## {label}\n\n");
        m += "| capacity | parallel units | stripe | blocks | blocks per unit | block \
              | run 1 | run 2 | run 3 | median IOPS | WAF |\n";
        m += "|---|---|---|---|---|---|---|---|---|---|---|\n";
        for r in rows {
            m += &format!(
                "| {} | {} | {} | {} | {:.1} | {} KiB | {:.0} | {:.0} | {:.0} | **{:.0}** | {:.2} |\n",
                r.capacity,
                r.g.pus,
                r.g.stripe,
                r.g.blocks,
                f64::from(r.g.blocks) / f64::from(r.g.pus),
                r.block_kib(),
                r.runs[0],
                r.runs[1],
                r.runs[2],
                r.median(),
                r.waf,
            );
        }
        m += &format!("\nmax/min of the medians: **{:.3}**\n", max_over_min(rows));
    }
    m
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "quick");
    let only: Vec<&str> = args
        .iter()
        .filter_map(|a| a.strip_prefix("only="))
        .collect();
    let rows = args
        .iter()
        .find_map(|a| a.strip_prefix("rows="))
        .map_or(usize::MAX, |n| n.parse().expect("rows=N"));
    let run = |s: &str| only.is_empty() || only.contains(&s);
    let t = Instant::now();
    if run("a") {
        count_mode(quick, rows);
    }
    if run("b") {
        qd1_latency(quick);
    }
    if run("c") {
        throughput(quick);
    }
    if run("d") {
        let load = proc_field("loadavg", "");
        let sets = capacity_scaling(quick);
        if let Some(path) = args.iter().find_map(|a| a.strip_prefix("publish=")) {
            let given: String = args[1..]
                .iter()
                .filter(|a| *a != "--bench")
                .map(|a| format!(" {a}"))
                .collect();
            // cargo runs a bench in its package folder: a relative path is the workspace's.
            let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(path);
            std::fs::write(&file, markdown(&sets, &given, &load, quick)).expect("publish=PATH");
            println!("wrote {}", file.display());
        }
    }
    println!(
        "\n(total {:.1} s; shared machine, figures are noisy)",
        t.elapsed().as_secs_f64()
    );
}
