//! Seed 004 (does an SSD make a DBMS faster?): YCSB read-only with the `latest` distribution
//! and many clients, the DRAM buffer swept in equal steps from 1/6 of the table to all of it
//! (the seed: 2-12 GB by 1 GB over a ~12 GB working set), data on an emulated 15k-RPM disk
//! and on an emulated SATA SSD. The seed's findings are shapes along that sweep, each judged
//! per repeat by a rule in `shapes`. Beside the sweep, one `pagoda advise buffer` run predicts
//! the whole sweep from the engine's own page references (`advise`).

mod advise;
mod rows;
mod shapes;

use super::cell::CellResult;
use super::outcome::{fig, Advice, Fig, Outcome};
use super::regime;
use super::repeats::{Group, Spread};
use super::report::{find, fmt_frac, fmt_num, median, Ctx, Section};
use crate::error::CliResult;
use crate::plot::{line_chart, LineChart, Series};
use crate::report::Table;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The experiment's name: its file is `experiments/seeds/buffer-sweep.toml`.
const EXP: &str = "buffer-sweep";

/// (id, label, device): HDD first.
const DEVICES: [(&str, &str, &str); 2] = [
    ("hdd", "HDD (hdd-15k)", "hdd-15k,latency=emulate"),
    (
        "ssd",
        "SSD (sata-ssd)",
        "sata-ssd,capacity=2GiB,latency=emulate",
    ),
];
/// The ablation of the HDD S-curve row's miss (its reason: the emulated disk serves its queue
/// in arrival order): the same disk and cells with a 32-deep reordering command queue, the one
/// factor changed. Not at the tiny scale, whose three points no shape rule judges.
const HDD_NCQ: (&str, &str, &str) = (
    "hdd-ncq",
    "HDD (hdd-15k, ncq=32)",
    "hdd-15k,latency=emulate,ncq=32",
);
const PAGE_KIB: u64 = 16;
const THREADS: &str = "32";
/// Random 16 KiB reads per second the emulated 15k-RPM disk serves 32 readers: 446-449 by
/// `advise`'s probe, 440 while a cold pool fills; taken 10 % low so a warm-up of
/// `pages / this` seconds fills the pool before the measured window.
const HDD_FILL_READS_S: f64 = 400.0;
/// The smallest buffers, where the seed's runs were device-bound: up to 4 of its 12 GB.
const SMALL_TWELFTHS: u64 = 4;

/// A number each sweep cell gives.
#[derive(Clone, Copy, Debug)]
enum Metric {
    Tps,
    Hit,
    /// Data-device read requests per second over warm-up and run (the device counters'
    /// span; the regime's window is the run alone).
    ReadsPerS,
    /// Data-device read requests per transaction over the same window: the device's demand
    /// at a fixed transaction rate, free of the closed loop's pace.
    ReadsPerTxn,
}

fn per_seed(g: &Group, m: Metric) -> BTreeMap<u64, f64> {
    match m {
        Metric::Tps => g.per_seed(fig::throughput),
        Metric::Hit => g.per_seed(fig::buffer_hit_ratio),
        Metric::ReadsPerS => g.per_seed(|o| {
            let window = o.regime.as_ref()?.window_s? + o.warmup_s().unwrap_or(0.0);
            (window > 0.0).then_some(fig::data_read_requests(o)? / window)
        }),
        Metric::ReadsPerTxn => g.per_seed(|o| {
            let txns = o.ops? + o.warmup_ops.unwrap_or(0.0);
            (txns > 0.0).then_some(fig::data_read_requests(o)? / txns)
        }),
    }
}

/// The sweep's cells: per buffer size, each device's repeats.
struct Sweep<'a> {
    /// (buffer pages, twelfths of the table, [HDD, SSD]) by buffer size.
    rows: Vec<(u64, u64, [Option<Group<'a>>; 2])>,
    /// The ablation's disk with a reordering queue ([`HDD_NCQ`]), by the same buffer sizes.
    ncq: Vec<Option<Group<'a>>>,
    table_pages: u64,
    records: u64,
}

fn mib(pages: u64) -> f64 {
    (pages * PAGE_KIB) as f64 / 1024.0
}

impl<'a> Sweep<'a> {
    fn new(results: &[&'a CellResult]) -> Self {
        let sweep: Vec<&CellResult> = results
            .iter()
            .copied()
            .filter(|r| r.param_str("kind") == "sweep")
            .collect();
        let mut sizes: Vec<(u64, u64)> = sweep
            .iter()
            .map(|r| {
                (
                    r.param_f64("buffer_pages") as u64,
                    r.param_f64("twelfths") as u64,
                )
            })
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        let g = |dev: &str, pages: u64| {
            find(
                results,
                &[
                    ("kind", "sweep"),
                    ("device", dev),
                    ("buffer_pages", &pages.to_string()),
                ],
            )
        };
        let rows: Vec<_> = sizes
            .into_iter()
            .map(|(pages, tw)| (pages, tw, [g(DEVICES[0].0, pages), g(DEVICES[1].0, pages)]))
            .collect();
        let ncq = rows.iter().map(|r| g(HDD_NCQ.0, r.0)).collect();
        let first = sweep.first();
        Self {
            rows,
            ncq,
            table_pages: first.map_or(0, |r| r.param_f64("table_pages") as u64),
            records: first.map_or(0, |r| r.param_f64("records") as u64),
        }
    }

    /// Median over the repeats at each buffer size (MiB) where the device's cell ran.
    fn median(&self, dev: usize, m: Metric) -> Vec<(f64, f64)> {
        self.rows
            .iter()
            .filter_map(|(p, _, g)| {
                let v: Vec<f64> = per_seed(g[dev].as_ref()?, m).into_values().collect();
                Some((mib(*p), Spread::of(v)?.median))
            })
            .collect()
    }

    /// Each repeat's own curve (buffer MiB, value), for the repeats that have every point.
    fn by_seed(&self, dev: usize, m: Metric) -> BTreeMap<u64, Vec<(f64, f64)>> {
        self.curves(self.rows.iter().map(|(p, _, g)| (*p, g[dev].as_ref())), m)
    }

    /// [`Sweep::by_seed`] of the ablation's disk with a reordering queue.
    fn ncq_by_seed(&self, m: Metric) -> BTreeMap<u64, Vec<(f64, f64)>> {
        let pages = self.rows.iter().map(|r| r.0);
        self.curves(pages.zip(self.ncq.iter().map(Option::as_ref)), m)
    }

    fn curves<'g>(
        &self,
        points: impl Iterator<Item = (u64, Option<&'g Group<'a>>)>,
        m: Metric,
    ) -> BTreeMap<u64, Vec<(f64, f64)>>
    where
        'a: 'g,
    {
        let mut out: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
        for (p, g) in points {
            for (seed, v) in g.map(|g| per_seed(g, m)).unwrap_or_default() {
                out.entry(seed).or_default().push((mib(p), v));
            }
        }
        out.retain(|_, c| c.len() == self.rows.len());
        out
    }

    /// Median TPS over the repeats of the ablation's disk, by buffer size (MiB).
    fn ncq_median_tps(&self) -> Vec<(f64, f64)> {
        self.rows
            .iter()
            .zip(&self.ncq)
            .filter_map(|((p, _, _), g)| {
                let v: Vec<f64> = per_seed(g.as_ref()?, Metric::Tps).into_values().collect();
                Some((mib(*p), Spread::of(v)?.median))
            })
            .collect()
    }

    /// The repeats of a device's cells at the smallest buffers, as one group.
    fn small(&self, dev: usize) -> Group<'a> {
        Group {
            runs: self
                .rows
                .iter()
                .filter(|(_, tw, _)| *tw <= SMALL_TWELFTHS)
                .filter_map(|(_, _, g)| g[dev].as_ref())
                .flat_map(|g| g.runs.iter().copied())
                .collect(),
        }
    }

    fn table_mib(&self) -> f64 {
        mib(self.table_pages)
    }
}

pub(super) fn section(ctx: &Ctx, results: &[&CellResult]) -> CliResult<Section> {
    let sweep = Sweep::new(results);
    let advise = find(results, &[("kind", "advise")]);
    let pred = advise::Predictions::new(advise.as_ref());
    let mut body = format!(
        "YCSB workload C (read-only), `latest` distribution, {} records of 1 KB, {THREADS} \
         clients, 16 KiB pages; the buffer swept in equal steps, data on an emulated 15k-RPM \
         disk and on an emulated SATA SSD (latency emulated); loaded with a large buffer, then \
         reopened with the swept one and warmed up (on the disk until a cold pool has filled). \
         Seed: CUBRID, 60 clients, 2–12 GB buffers by 1 GB over a ~12 GB working set, 2 HDDs \
         vs 4 SSDs. Predicted: from one `pagoda advise buffer` run per repeat on the SSD at \
         {:.1} MiB (miss-ratio curve of its own page references, pure LRU, and a probe of each \
         device).\n\n{}",
        sweep.records,
        advise
            .as_ref()
            .and_then(|g| g.param("buffer_pages"))
            .and_then(serde_json::Value::as_u64)
            .map_or(0.0, mib),
        settings(&sweep, results)
    );
    let mut table = Table::new(&[
        "step (of 12)",
        "buffer (MiB)",
        "HDD TPS",
        "HDD hit",
        "HDD reads/s",
        "SSD TPS",
        "SSD hit",
        "SSD reads/s",
        "SSD/HDD",
        "predicted hit (LRU curve)",
        "predicted HDD TPS",
        "predicted SSD TPS",
    ]);
    for (pages, tw, g) in &sweep.rows {
        let x = mib(*pages);
        let n = |d: usize, m: Metric| {
            g[d].as_ref()
                .and_then(|g| Spread::of(per_seed(g, m).into_values().collect()))
                .map(|s| s.median)
        };
        let ratio = super::repeats::ratio(g[1].as_ref(), g[0].as_ref(), fig::throughput);
        table.row(&[
            tw.to_string(),
            format!("{x:.1}"),
            fmt_num(n(0, Metric::Tps)),
            fmt_frac(n(0, Metric::Hit)),
            fmt_num(n(0, Metric::ReadsPerS)),
            fmt_num(n(1, Metric::Tps)),
            fmt_frac(n(1, Metric::Hit)),
            fmt_num(n(1, Metric::ReadsPerS)),
            ratio.map_or("–".to_string(), |r| format!("{:.1}x", r.median)),
            fmt_frac(pred.hit(x)),
            fmt_num(pred.tps(0, x)),
            fmt_num(pred.tps(1, x)),
        ]);
    }
    body.push('\n');
    body.push_str(&table.markdown());
    if let Some(text) = advise
        .as_ref()
        .and_then(|g| Advice::of(&g.runs[0].result).ok())
        .map(|a| a.advice.text)
    {
        let _ = writeln!(
            body,
            "\nAdvice (`pagoda advise buffer`, first repeat): {text}"
        );
    }
    let sweep_cells: Vec<&CellResult> = results
        .iter()
        .copied()
        .filter(|r| r.param_str("kind") == "sweep")
        .collect();
    body.push_str(&regime::cells(&sweep_cells));
    plots(ctx, &sweep, &pred, &mut body)?;
    let mut headlines = rows::shapes(&sweep);
    headlines.extend(advise::headlines(&sweep, advise.as_ref()));
    Ok(Section {
        title: "Seed 004 — buffer size vs device (YCSB read-only, latest)".to_string(),
        body,
        headlines,
    })
}

fn settings(sweep: &Sweep, results: &[&CellResult]) -> String {
    let (lo, hi) = (
        sweep.rows.first().map_or(0, |r| r.0),
        sweep.rows.last().map_or(0, |r| r.0),
    );
    let step = sweep.rows.get(1).map_or(0, |r| r.0) - lo;
    let table = sweep.table_pages.max(1) as f64;
    let cores = results
        .first()
        .and_then(|r| r.machine["cores"].as_u64())
        .unwrap_or(1);
    // Sorted values of a number over one device's cells.
    let vals = |dev: &str, f: Fig| -> Vec<f64> {
        let mut v: Vec<f64> = results
            .iter()
            .filter(|r| r.param_str("device") == dev)
            .filter_map(|r| r.num(f))
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let hw = vals("hdd", Outcome::warmup_s);
    let (hw0, hw1) = (
        hw.first().copied().unwrap_or(0.0),
        hw.last().copied().unwrap_or(0.0),
    );
    let sw = median(&mut vals("ssd", Outcome::warmup_s)).unwrap_or(0.0);
    let dur = median(&mut vals("ssd", fig::duration));
    regime::settings(&[
        (
            "working set",
            "about 12 GB",
            format!(
                "the table: {} records in about {} pages of 16 KiB ({:.1} MiB)",
                sweep.records,
                sweep.table_pages,
                sweep.table_mib()
            ),
        ),
        (
            "buffer range",
            "2–12 GB: 1/6 of the working set to all of it",
            format!(
                "{:.1}–{:.1} MiB: {:.2} to {:.2} of the table",
                mib(lo),
                mib(hi),
                lo as f64 / table,
                hi as f64 / table
            ),
        ),
        (
            "steps",
            "linear, 1 GB (11 points)",
            format!(
                "linear, {step} pages = {:.2} MiB ({} points)",
                mib(step),
                sweep.rows.len()
            ),
        ),
        (
            "clients per core",
            "60 clients (the server's cores are not in our notes of the seed)",
            format!("{THREADS} clients on {cores} cores"),
        ),
        (
            "devices",
            "2 HDDs vs 4 SSDs",
            "one emulated 15k-RPM disk vs one emulated SATA SSD".to_string(),
        ),
        (
            "run length",
            "not in our notes of the seed",
            format!(
                "{:.1} s measured after a warm-up of {sw:.1} s (SSD) or {hw0:.1}–{hw1:.1} s \
                 (HDD: until a cold pool fills at {HDD_FILL_READS_S} reads/s)",
                dur.unwrap_or(0.0)
            ),
        ),
        (
            "regime at small buffers",
            "device-bound",
            format!(
                "the cells at ≤ {SMALL_TWELFTHS}/12 of the table: see their bottleneck in the \
                 regime table below"
            ),
        ),
    ])
}

fn series(name: &str, points: Vec<(f64, f64)>, dashed: bool, color: usize) -> Series {
    Series {
        name: name.to_string(),
        points,
        dashed,
        color,
    }
}

/// TPS (measured solid, predicted dashed), hit ratio and reads per second, against the buffer
/// in MiB on a linear axis as the seed's figures; medians of the repeats.
fn plots(ctx: &Ctx, sweep: &Sweep, pred: &advise::Predictions, body: &mut String) -> CliResult<()> {
    let xs: Vec<f64> = sweep.rows.iter().map(|r| mib(r.0)).collect();
    let at = |f: &dyn Fn(f64) -> Option<f64>| -> Vec<(f64, f64)> {
        xs.iter().filter_map(|&x| Some((x, f(x)?))).collect()
    };
    let (mut tps, mut hits, mut io) = (Vec::new(), Vec::new(), Vec::new());
    for (i, (_, label, _)) in DEVICES.iter().enumerate() {
        let m = format!("{label}, measured");
        tps.push(series(&m, sweep.median(i, Metric::Tps), false, i));
        hits.push(series(&m, sweep.median(i, Metric::Hit), false, i));
        io.push(series(label, sweep.median(i, Metric::ReadsPerS), false, i));
    }
    for (i, (_, label, _)) in DEVICES.iter().enumerate() {
        let p = at(&|x| pred.tps(i, x));
        tps.push(series(&format!("{label}, predicted"), p, true, i));
    }
    let ncq = format!("{}, measured (ablation)", HDD_NCQ.1);
    tps.push(series(&ncq, sweep.ncq_median_tps(), false, 2));
    let mrc = at(&|x| pred.hit(x));
    hits.push(series("LRU miss-ratio curve (one run)", mrc, true, 2));
    for (name, title, y, s, log_y) in [
        (
            "buffer-sweep-tps.svg",
            "Seed 004: TPS vs buffer size",
            "TPS",
            &tps,
            false,
        ),
        (
            "buffer-sweep-hit.svg",
            "Seed 004: buffer hit ratio vs buffer size",
            "hit ratio",
            &hits,
            false,
        ),
        (
            "buffer-sweep-io.svg",
            "Seed 004: device reads per second vs buffer size",
            "reads/s (log scale)",
            &io,
            true,
        ),
    ] {
        let s: Vec<Series> = s.iter().filter(|x| !x.points.is_empty()).cloned().collect();
        if s.is_empty() {
            continue;
        }
        let (path, link) = ctx.plot(name);
        line_chart(
            &path,
            &LineChart {
                title,
                x_label: "buffer (MiB)",
                y_label: y,
                series: &s,
                log_y,
            },
        )?;
        let _ = writeln!(body, "\n![{title}]({link})");
    }
    Ok(())
}
