//! Seed 000 (FaCE): TPC-C with a DRAM buffer of ~2 % of the database and a flash cache of
//! ~20 % on an emulated 840 Pro-class SSD, data on the same SSD model (in steady state) and on an emulated RAID-0
//! of 8 15k-RPM disks. Original (InnoDB's double-write buffer, every flushed page copied; no
//! cache) against FaCE dirty-only (`--torn none`: the cache makes page writes safe), FaCE-GSC
//! and an LRU flash cache (FaCE vs LRU on a full, preconditioned cache device, aged as the data
//! SSD is, with the fresh device as its ablation); and
//! the restart after a crash with and without the cache (`bench tpcc --crash-restart`).

use super::cell::CellResult;
use super::file::{seed_row, SeedRow};
use super::outcome::{fig, Fig, Outcome};
use super::regime;
use super::repeats::{self, Group, Spread};
use super::report::{find, fmt_frac, fmt_num, Ctx, Headline, Section};
use crate::error::CliResult;
use crate::plot::{bar_chart, BarChart};
use crate::report::Table;
use std::fmt::Write as _;

/// The experiment's name: its file is `experiments/seeds/face.toml`.
const EXP: &str = "face";

/// The seed's baseline: InnoDB's double-write buffer, every flushed page copied.
const ORIGINAL_TORN: &str = "doublewrite-full";
/// The cache device: the data SSD's model, fresh (never written: no garbage collection yet).
const FLASH: &str = "sata-ssd,capacity=4GiB,latency=emulate";
/// The FaCE-vs-LRU rows' cache device: the same model aged (`precondition=1`: every logical page
/// written, then a capacity of random overwrites), so only the 7 % over-provisioning is free.
/// 160 MiB with one stream (the retail 840 Pro has none) is the smallest such device the FTL
/// accepts: the preset's 4 streams need 24 spare blocks, i.e. about 350 MiB at 7 %.
const FLASH_FULL: &str = "sata-ssd,capacity=160MiB,streams=1,precondition=1,latency=emulate";
/// The data SSD in steady state, as a drive that has been written over (the seed's original
/// ran 2.3x below FaCE because random page writes cost it garbage collection). On a fresh
/// device random writes cost what appends do: measured here, original 7,440 against FaCE 6,460
/// tpmC fresh, 1,940 against 4,740 (2.44x) aged, both bound by the data device when aged.
const DATA_SSD: &str = "sata-ssd,capacity=512MiB,precondition=1,latency=emulate";
const DATA: [(&str, &str, &str); 2] = [
    ("ssd", "SSD data", DATA_SSD),
    (
        "hdd",
        "HDD RAID-0 data",
        "raid0-8x-hdd-15k,capacity=4GiB,latency=emulate",
    ),
];
const CONFIGS: [&str; 4] = ["original", "face", "face-gsc", "lru"];
/// The seed's tpmC: (data, original, FaCE dirty-only).
const SEED: [(&str, f64, f64); 2] = [("ssd", 2419.0, 5646.0), ("hdd", 1029.0, 1903.0)];
/// Cells that crash and restart after their run, and on which data device.
const RESTART_DATA: &str = "hdd";
const RESTART_CONFIGS: [&str; 2] = ["original", "face"];
/// Clients: 8 on 2 cores. With 16 on one warehouse the run waits on row conflicts and the
/// commit lock, not on the devices (measured: no device 80 % busy).
const CLIENTS: u32 = 8;

fn get<'a>(results: &[&'a CellResult], data: &str, conf: &str, cache: &str) -> Option<Group<'a>> {
    find(
        results,
        &[("data", data), ("config", conf), ("cache", cache)],
    )
}

pub(super) fn section(ctx: &Ctx, results: &[&CellResult]) -> CliResult<Section> {
    let first = results.first();
    let p = |k: &str| {
        first.and_then(|r| r.param(k)).map_or("?".to_string(), |v| {
            v.to_string().trim_matches('"').to_string()
        })
    };
    let mut body = format!(
        "TPC-C (tpcc-mysql mix), 16 KiB pages, latency emulated; devices are emulated, so \
         absolute tpmC depends on this machine. Original: InnoDB's double-write buffer \
         (`--torn {ORIGINAL_TORN}`), no flash cache. FaCE: dirty pages only, `--torn none` (the \
         cache is the torn-write protection). Seed: MySQL 5.6, 100 warehouses, DRAM 2 %, flash \
         cache 20 % on an 840 Pro.\n\n{}",
        regime::settings(&[
            ("DRAM buffer / data", "2 % (200 MB of ~10 GB)",
             format!("about 2 % ({} of about {} MiB; {} warehouse(s))", p("buffer"),
                 120 * first.map_or(1, |r| r.param_f64("warehouses") as u64), p("warehouses"))),
            ("flash cache / data", "20 % (2 GB)", format!("20 % ({})", p("flash_cache_size"))),
            ("cache device vs data device", "both Samsung 840 Pro (SSD case); data on 8 x 15k-RPM RAID-0 (HDD case)",
             format!("the same 840 Pro-class model: cache `{FLASH}`, SSD data `{DATA_SSD}` (in steady state); extra row: cache `{FLASH_FULL}`")),
            ("clients per core", "16 connections (cores not stated)",
             format!("{CLIENTS} on 2 cores (16 on one warehouse wait on row conflicts and the commit lock, not on I/O)")),
            ("run length", "not stated (minutes)", run_length(results)),
            ("redo log", "not stated (MySQL 5.6 default 2 x 48 MB)", "96 MiB".to_string()),
        ])
    );
    let mut table = Table::new(&[
        "data",
        "config",
        "tpmC",
        "vs original",
        "seed tpmC",
        "seed vs original",
        "DRAM hit",
        "flash hit (of DRAM misses)",
        "cache-device WAF",
        "data-device writes (4 KiB)",
    ]);
    let mut bars: Vec<(String, Vec<f64>)> = CONFIGS
        .iter()
        .map(|c| (format!("ours: {c}"), Vec::new()))
        .collect();
    bars.push(("seed: FaCE dirty-only".to_string(), Vec::new()));
    let mut cats = Vec::new();
    let mut headlines = Vec::new();
    for ((data, label, _), (_, s_orig, s_face)) in DATA.iter().zip(SEED) {
        let base = get(results, data, "original", "fresh");
        for (i, conf) in CONFIGS.iter().enumerate() {
            let g = get(results, data, conf, "fresh");
            let rel = repeats::ratio(g.as_ref(), base.as_ref(), fig::tpmc);
            bars[i].1.push(rel.map_or(0.0, |s| s.median));
            let (seed_t, seed_r) = match *conf {
                "original" => (fmt_num(Some(s_orig)), "1.00x".to_string()),
                "face" => (fmt_num(Some(s_face)), format!("{:.2}x", s_face / s_orig)),
                _ => ("–".to_string(), "–".to_string()),
            };
            let n = |f: Fig| g.as_ref().and_then(|g| g.num(f));
            table.row(&[
                (*label).to_string(),
                (*conf).to_string(),
                fmt_num(n(fig::tpmc)),
                rel.map_or("–".to_string(), |s| s.times()),
                seed_t,
                seed_r,
                fmt_frac(n(fig::buffer_hit_ratio)),
                fmt_frac(n(fig::flash_cache_hit_ratio)),
                n(cache_waf).map_or("–".to_string(), |v| format!("{v:.2}")),
                fmt_num(n(fig::data_writes)),
            ]);
        }
        bars[CONFIGS.len()].1.push(s_face / s_orig);
        cats.push(label.to_string());
        headlines.extend(device_headlines(results, data));
    }
    body.push('\n');
    body.push_str(&table.markdown());
    body.push_str(&full_cache_table(results));
    body.push_str(&restart_table(results));
    body.push_str(&regime::cells(results));
    let (path, link) = ctx.plot("face-tpmc.svg");
    bar_chart(
        &path,
        &BarChart {
            title: "Seed 000: TPC-C throughput relative to original (median of repeats)",
            y_label: "tpmC / original's tpmC",
            categories: &cats,
            series: &bars,
        },
    )?;
    let _ = writeln!(body, "\n![tpmC relative to original]({link})");
    Ok(Section {
        title: "Seed 000 — FaCE flash cache (TPC-C)".to_string(),
        body,
        headlines,
    })
}

/// What bounded a ratio's two cells, when one of them was not where the seed's was.
fn off(a: Option<&Group>, a_want: &[&str], b: Option<&Group>, b_want: &[&str]) -> Option<String> {
    let mut why: Vec<String> = Vec::new();
    for (g, want) in [(a, a_want), (b, b_want)] {
        if let Some(g) = g {
            let label = format!("`{}`", g.runs[0].cell.id);
            why.extend(if want == &IO[..] {
                g.off_regime(&label, STORAGE_BOUND, storage_bound)
            } else {
                g.out_of_regime(want, &label)
            });
        }
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// The measured window and warm-up of each kind of cell, as their command lines give them.
fn run_length(results: &[&CellResult]) -> String {
    let arg = |r: &CellResult, flag: &str| {
        let a = &r.cell.args;
        a.iter()
            .position(|x| x == flag)
            .and_then(|i| a.get(i + 1))
            .cloned()
            .unwrap_or_default()
    };
    let mut kinds: Vec<String> = Vec::new();
    for (cache, what) in [
        ("fresh", "the fresh-cache cells"),
        ("full", "the aged-cache cells"),
        ("long", "the GSC ablation"),
    ] {
        let mut seen: Vec<String> = Vec::new();
        for r in results.iter().filter(|r| r.param_str("cache") == cache) {
            let w = format!(
                "{} after {} of warm-up",
                arg(r, "--duration"),
                arg(r, "--warmup")
            );
            if !seen.contains(&w) {
                seen.push(w);
            }
        }
        if !seen.is_empty() {
            kinds.push(format!("{what}: {}", seen.join(" or ")));
        }
    }
    format!("measured windows: {}", kinds.join("; "))
}

const STORAGE_BOUND: &str = "its storage (data and cache device)";

/// A cached configuration splits its misses over two devices, so neither need be saturated
/// for the run to wait on storage: it is storage-bound when one device is the bottleneck, or
/// when the two together are busy at least the whole window (at any moment one of them, on
/// average, serves a request) and the CPU is not the bottleneck.
fn storage_bound(r: &CellResult) -> bool {
    let o = r.outcome();
    let b = o.bottleneck();
    let busy = |d: &str| o.busy(d).unwrap_or(0.0);
    IO.contains(&b) || (b == "none" && busy("data") + busy("flash_cache") >= 1.0)
}

const IO: [&str; 2] = ["data", "flash_cache"];

/// Measured figures of a cell for a miss's reason.
fn figures(g: Option<&Group>) -> String {
    let Some(g) = g else {
        return "not run".to_string();
    };
    format!(
        "`{}`: flash hit {}, cache WAF {}, data busy {:.0} %, cache busy {:.0} %",
        g.runs[0].cell.id,
        fmt_frac(g.num(fig::flash_cache_hit_ratio)),
        g.num(cache_waf)
            .map_or("–".to_string(), |v| format!("{v:.2}")),
        g.num(fig::data_busy).unwrap_or(0.0) * 100.0,
        g.num(cache_busy).unwrap_or(0.0) * 100.0,
    )
}

fn device_headlines(results: &[&CellResult], data: &str) -> Vec<Headline> {
    let orig = get(results, data, "original", "fresh");
    let face = get(results, data, "face", "fresh");
    let gsc = get(results, data, "face-gsc", "fresh");
    let why_vs_orig = format!(
        "measured: original DRAM hit {}, data busy {:.0} %; {}; a database of 1 warehouse against the seed's 100",
        fmt_frac(orig.as_ref().and_then(|g| g.num(fig::buffer_hit_ratio))),
        orig.as_ref().and_then(|g| g.num(fig::data_busy)).unwrap_or(0.0) * 100.0,
        figures(face.as_ref())
    );
    let gsc_row = row(&format!("gsc.{data}"));
    vec![
        Headline::of_row(
            &row(&format!("vs-original.{data}")),
            repeats::ratio(face.as_ref(), orig.as_ref(), fig::tpmc),
            &format!("a smaller gain than the seed's ({why_vs_orig})"),
            &format!("a larger gain than the seed's ({why_vs_orig})"),
            Spread::times,
        )
        .regime(off(face.as_ref(), &IO, orig.as_ref(), &["data"])),
        face_vs_lru(results, data),
        // The seed's claim is about the cache's hit ratio; the tpmC is in the table.
        Headline::of_row(
            &gsc_row,
            repeats::ratio(gsc.as_ref(), face.as_ref(), fig::flash_cache_hit_ratio),
            &format!(
                "second chances keep fewer useful pages than plain FIFO here ({}; {})",
                figures(gsc.as_ref()),
                figures(face.as_ref())
            ),
            "",
            Spread::times,
        )
        .regime(off(gsc.as_ref(), &IO, face.as_ref(), &IO))
        .ablated(
            "the window (longer, so the ring wraps more often)",
            long_run(results, data).map(|(r, _)| within(&gsc_row, &r)),
            long_run(results, data).map_or(String::new(), |(_, t)| t),
        ),
    ]
}

/// Row `id` of this seed's file.
fn row(id: &str) -> SeedRow {
    seed_row(EXP, id)
}

/// Whether `r` lies in the band of `row`.
fn within(row: &SeedRow, r: &Spread) -> bool {
    row.band
        .as_ref()
        .is_some_and(|b| b.judge(Some(r), "", "").key() == "within")
}

/// FaCE vs LRU on a cache device aged as the data device is (the seed's argument: LRU turns
/// cache writes into random writes, which cost an aged flash device garbage collection; the
/// seed reports no LRU figure). Its ablation: the same cells on a fresh cache device.
fn face_vs_lru(results: &[&CellResult], data: &str) -> Headline {
    let face = get(results, data, "face", "full");
    let lru = get(results, data, "lru", "full");
    let fresh = (
        get(results, data, "face", "fresh"),
        get(results, data, "lru", "fresh"),
    );
    let fresh_ratio = repeats::ratio(fresh.0.as_ref(), fresh.1.as_ref(), fig::tpmc);
    let lru_row = row(&format!("vs-lru.{data}"));
    Headline::of_row(
        &lru_row,
        repeats::ratio(face.as_ref(), lru.as_ref(), fig::tpmc),
        &lru_reason(face.as_ref(), lru.as_ref()),
        "",
        Spread::times,
    )
    .regime(off(face.as_ref(), &IO, lru.as_ref(), &IO))
    .ablated(
        "the cache device's age (fresh: no garbage collection)",
        fresh_ratio.map(|r| within(&lru_row, &r)),
        fresh_ratio.map_or(String::new(), |r| {
            format!(
                "on a fresh cache device (`{FLASH}`), FaCE vs LRU is {} tpmC ({}; {})",
                r.times(),
                figures(fresh.0.as_ref()),
                figures(fresh.1.as_ref())
            )
        }),
    )
}

/// What the FaCE and LRU cells measured, compared: hits, the cache device's write
/// amplification, and which device was busy.
fn lru_reason(face: Option<&Group>, lru: Option<&Group>) -> String {
    let n = |g: Option<&Group>, f: Fig| g.and_then(|g| g.num(f)).unwrap_or(0.0);
    let hit = |g| n(g, fig::flash_cache_hit_ratio);
    let waf = |g| n(g, cache_waf);
    let more = |a: f64, b: f64| if a > b { "more" } else { "no more" };
    let parts = [
        format!(
            "LRU keeps {} flash hits ({:.3} against FaCE's {:.3})",
            more(hit(lru), hit(face)),
            hit(lru),
            hit(face)
        ),
        format!(
            "its writes cost the cache device {} (WAF {:.2} against {:.2})",
            more(waf(lru), waf(face)),
            waf(lru),
            waf(face)
        ),
    ];
    format!("{} ({}; {})", parts.join(", "), figures(face), figures(lru))
}

/// The GSC-vs-FaCE row again over a longer window: the one factor a short run on slow data
/// leaves out (the ring wraps a few times only, so second chances have little to keep). The
/// ratio and the text.
fn long_run(results: &[&CellResult], data: &str) -> Option<(Spread, String)> {
    let face = get(results, data, "face", "long")?;
    let gsc = get(results, data, "face-gsc", "long")?;
    let r = repeats::ratio(Some(&gsc), Some(&face), fig::flash_cache_hit_ratio)?;
    let window = face.num(fig::duration).unwrap_or(0.0);
    let text = format!(
        "over a {window:.0} s window, GSC vs FaCE flash-cache hit ratio is {} ({} pages given a \
         second chance; {}; {})",
        r.times(),
        fmt_num(gsc.num(|o| o.detail()?.flash_cache.as_ref()?.gsc_reappends)),
        figures(Some(&gsc)),
        figures(Some(&face))
    );
    Some((r, text))
}

fn full_cache_table(results: &[&CellResult]) -> String {
    let mut body = format!(
        "\nFaCE vs LRU: the flash cache on an aged, full device of the same model \
         (`{FLASH_FULL}`: every logical page written and overwritten once before the run, so \
         garbage collection works within the 7 % over-provisioning), as the SSD data device is \
         aged: the headline rows; on the fresh cache device, their ablation:\n\n"
    );
    let mut table = Table::new(&[
        "data",
        "cache device",
        "config",
        "tpmC",
        "FaCE vs LRU",
        "flash hit",
        "cache-device WAF",
        "cache busy",
    ]);
    for ((data, label, _), cache) in DATA.iter().flat_map(|d| ["fresh", "full"].map(|c| (d, c))) {
        let lru = get(results, data, "lru", cache);
        for conf in ["face", "lru"] {
            let g = get(results, data, conf, cache);
            let n = |f: Fig| g.as_ref().and_then(|g| g.num(f));
            let rel = (conf == "face")
                .then(|| repeats::ratio(g.as_ref(), lru.as_ref(), fig::tpmc))
                .flatten();
            table.row(&[
                (*label).to_string(),
                cache.to_string(),
                conf.to_string(),
                fmt_num(n(fig::tpmc)),
                rel.map_or("–".to_string(), |s| s.times()),
                fmt_frac(n(fig::flash_cache_hit_ratio)),
                n(cache_waf).map_or("–".to_string(), |v| format!("{v:.2}")),
                n(cache_busy).map_or("–".to_string(), |v| format!("{:.0} %", v * 100.0)),
            ]);
        }
    }
    body.push_str(&table.markdown());
    body
}

/// The tpmC of the run right after the restart.
fn after_tpmc(o: &Outcome) -> Option<f64> {
    o.restart.as_ref()?.after.as_ref()?.tpmc
}

/// The flash-cache device's write amplification.
fn cache_waf(o: &Outcome) -> Option<f64> {
    Some(o.device("flash_cache")?.waf)
}

/// The flash-cache device's busy share of the measured window.
fn cache_busy(o: &Outcome) -> Option<f64> {
    o.busy("flash_cache")
}

fn restart_table(results: &[&CellResult]) -> String {
    let mut body = String::from(
        "\nRestart after a crash (`bench tpcc --crash-restart`), HDD RAID-0 data: right after the \
         measured run, with no checkpoint, the database is dropped (DRAM lost) and power is cut \
         on every emulated device; the open that follows is timed (log scan, redo from the last \
         checkpoint, and with the cache the rebuild of its directory from the cache device), \
         then TPC-C runs again with no warm-up. Both cells start from their own run's state: \
         the log since the last checkpoint differs (records replayed).\n\n",
    );
    let mut table = Table::new(&[
        "config",
        "restart (open) ms",
        "of which cache rebuild ms",
        "records replayed",
        "pages read from data",
        "tpmC after restart",
        "vs tpmC before the crash",
    ]);
    for conf in RESTART_CONFIGS {
        let g = get(results, RESTART_DATA, conf, "fresh");
        let n = |f: Fig| g.as_ref().and_then(|g| g.num(f));
        let after = g.as_ref().and_then(|g| {
            let before = g.per_seed(fig::tpmc);
            Spread::of(
                g.per_seed(after_tpmc)
                    .iter()
                    .filter_map(|(s, a)| before.get(s).filter(|b| **b > 0.0).map(|b| a / b))
                    .collect(),
            )
        });
        table.row(&[
            conf.to_string(),
            fmt_num(n(|o| o.restart.as_ref()?.open_ms)),
            fmt_num(n(|o| o.restart.as_ref()?.flash_rebuild_ms)),
            fmt_num(n(|o| o.restart.as_ref()?.records_replayed)),
            fmt_num(n(|o| o.restart.as_ref()?.pages_read_from_data)),
            fmt_num(n(after_tpmc)),
            after.map_or("–".to_string(), |s| s.times()),
        ]);
    }
    body.push_str(&table.markdown());
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bands in face.toml sit on the seed's own figures, which the section's table shows.
    #[test]
    fn the_files_bands_are_the_seeds_figures() {
        for (data, orig, face) in SEED {
            let band = row(&format!("vs-original.{data}")).band.unwrap();
            let centre = (band.lo + band.hi) / 2.0;
            assert!((centre - face / orig).abs() < 1e-9, "{data}: {centre}");
        }
    }
}
