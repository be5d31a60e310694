//! Seed 000 (FaCE): TPC-C with 16 clients, a DRAM buffer of ~2 % of the database and a flash
//! cache of ~20 %, data on an emulated SATA SSD and on an emulated RAID-0 of 8 15k-RPM disks.
//! Original (double-write buffer, no cache) against FaCE dirty-only (`--torn none`: the cache
//! makes page writes safe), with face-gsc and the LRU cache as extra rows.

use super::cell::{Cell, CellResult, Scale};
use super::plot::{bar_chart, BarChart};
use super::report::{find, fmt_frac, fmt_num, ratio, Ctx, Headline, Section};
use crate::error::CliResult;
use serde_json::json;
use std::fmt::Write as _;

const EXP: &str = "face";
const LOG: &str = "sata-ssd,capacity=1GiB,latency=emulate";
const FLASH: &str = "sata-ssd,capacity=4GiB,latency=emulate";
const DATA: [(&str, &str, &str); 2] = [
    ("ssd", "SSD data", "sata-ssd,capacity=4GiB,latency=emulate"),
    (
        "hdd",
        "HDD RAID-0 data",
        "raid0-8x-hdd-15k,capacity=4GiB,latency=emulate",
    ),
];
const CONFIGS: [&str; 4] = ["original", "face", "face-gsc", "lru"];
/// The seed's tpmC: (data, original, FaCE dirty-only).
const SEED: [(&str, f64, f64); 2] = [("ssd", 2419.0, 5646.0), ("hdd", 1029.0, 1903.0)];

pub(super) fn cells(scale: Scale) -> Vec<Cell> {
    let (warehouses, duration, estimate, configs) = scale.pick(
        (1u32, "2s", 9u64, &CONFIGS[..2]),
        (1, "15s", 31, &CONFIGS[..2]),
        (8, "5m", 420, &CONFIGS[..]),
    );
    // About 120 MiB of 16 KiB pages per warehouse: DRAM 2 %, flash cache 20 % of that.
    let db_mib = 120 * warehouses;
    let buffer = format!("{}MiB", (db_mib * 2).div_ceil(100).max(3));
    let flash_size = format!("{}MiB", db_mib * 20 / 100);
    let w = warehouses.to_string();
    let mut out = Vec::new();
    for (data, _, device) in DATA {
        for &conf in configs {
            let mut args = vec![
                "bench",
                "tpcc",
                "--warehouses",
                &w,
                "--threads",
                "16",
                "--duration",
                duration,
                "--buffer",
                &buffer,
                "--page-size",
                "16KiB",
                "--data",
                device,
                "--log",
                LOG,
            ];
            args.extend(scale.tpcc_size());
            if conf == "original" {
                args.extend(["--torn", "doublewrite"]);
            } else {
                args.extend([
                    "--torn",
                    "none",
                    "--flash-cache",
                    FLASH,
                    "--flash-cache-size",
                    &flash_size,
                    "--flash-cache-policy",
                    conf,
                ]);
            }
            out.push(Cell::new(
                EXP,
                &format!("{data}.{conf}"),
                &args,
                estimate,
                json!({ "data": data, "config": conf, "warehouses": warehouses,
                        "buffer": buffer, "flash_cache_size": flash_size }),
            ));
        }
    }
    out
}

pub(super) fn section(ctx: &Ctx, results: &[&CellResult]) -> CliResult<Section> {
    let mut body = String::from(
        "TPC-C (tpcc-mysql mix), 16 clients, 16 KiB pages, latency emulated. Original: \
         double-write buffer on, no flash cache. FaCE: dirty pages only, `--torn none` (the \
         flash cache is the torn-write protection). Seed: MySQL 5.6, 100 warehouses, DRAM 2 %, \
         flash cache 20 % on an 840 Pro.\n\n\
         | data | config | tpmC | vs original | seed tpmC | seed vs original | DRAM hit | flash hit | data-device writes (4 KiB) |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let mut headlines = Vec::new();
    let mut bars: Vec<(String, Vec<f64>)> = CONFIGS
        .iter()
        .map(|c| (format!("ours: {c}"), Vec::new()))
        .collect();
    bars.push(("seed: FaCE dirty-only".to_string(), Vec::new()));
    let mut cats = Vec::new();
    for ((data, label, _), (_, s_orig, s_face)) in DATA.iter().zip(SEED) {
        let tpmc = |conf: &str| {
            find(results, &[("data", data), ("config", conf)]).and_then(|r| r.num("tpmC"))
        };
        let base = tpmc("original");
        for (i, conf) in CONFIGS.iter().enumerate() {
            let Some(r) = find(results, &[("data", data), ("config", conf)]) else {
                bars[i].1.push(0.0);
                continue;
            };
            let t = r.num("tpmC");
            let (seed_t, seed_r) = match *conf {
                "original" => (fmt_num(Some(s_orig)), "1.00x".to_string()),
                "face" => (fmt_num(Some(s_face)), format!("{:.2}x", s_face / s_orig)),
                _ => ("–".to_string(), "–".to_string()),
            };
            let rel = ratio(t, base);
            bars[i].1.push(rel.unwrap_or(0.0));
            let _ = writeln!(
                body,
                "| {label} | {conf} | {} | {} | {seed_t} | {seed_r} | {} | {} | {} |",
                fmt_num(t),
                rel.map_or("–".to_string(), |v| format!("{v:.2}x")),
                fmt_frac(r.num("engine/buffer_hit_ratio")),
                fmt_frac(r.num("engine/flash_cache_hit_ratio")),
                fmt_num(r.num("devices/data/host_write_pages")),
            );
        }
        bars[CONFIGS.len()].1.push(s_face / s_orig);
        cats.push(label.to_string());
        let seed_ratio = s_face / s_orig;
        let hits = |conf: &str, key: &str| {
            find(results, &[("data", data), ("config", conf)])
                .and_then(|r| r.num(key))
                .map_or("–".to_string(), |v| format!("{v:.3}"))
        };
        let measured = format!(
            "DRAM hit ratio {} (original), the flash cache answers {} of DRAM misses; a \
             database of {} warehouse(s) against the seed's 100",
            hits("original", "engine/buffer_hit_ratio"),
            hits("face", "engine/flash_cache_hit_ratio"),
            find(results, &[("data", data), ("config", "original")]).map_or("?".to_string(), |r| r
                .param("warehouses")
                .map_or("?".to_string(), ToString::to_string)),
        );
        headlines.push(Headline::ratio(
            &format!("FaCE vs original tpmC, {label}"),
            &format!("{seed_ratio:.1}x"),
            ratio(tpmc("face"), base).and_then(|v| super::repeats::Spread::of(vec![v])),
            &super::report::Band::range(seed_ratio / 1.5, seed_ratio * 1.5, ""),
            &format!("a smaller gain than the seed's (measured: {measured})"),
            &format!("a larger gain than the seed's (measured: {measured})"),
        ));
    }
    // Only configurations that ran (quick runs original and face).
    bars.retain(|(_, v)| v.iter().any(|&x| x > 0.0));
    let (path, link) = ctx.plot("face-tpmc.svg");
    bar_chart(
        &path,
        &BarChart {
            title: "Seed 000: TPC-C throughput relative to original",
            y_label: "tpmC / original's tpmC",
            categories: &cats,
            series: &bars,
        },
    )?;
    let _ = write!(
        body,
        "\nThe band: a single-number result of the seed counts as reproduced when ours is within \
         a factor 1.5 of it, in the same direction.\n\n![tpmC relative to original]({link})\n"
    );
    Ok(Section {
        title: "Seed 000 — FaCE flash cache (TPC-C)".to_string(),
        body,
        headlines,
    })
}
