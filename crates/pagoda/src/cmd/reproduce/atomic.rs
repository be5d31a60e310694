//! Seed 003 (16 KiB atomic writes): TPC-C on an emulated SATA SSD that writes 16 KiB pages
//! atomically, with a buffer large relative to the database, in three torn-write modes —
//! the double-write buffer, no protection, atomic page writes — and, per mode, a power-cut
//! crash test that shows what `none` costs.

use super::cell::{Cell, CellResult, Scale};
use super::plot::{bar_chart, BarChart};
use super::report::{find, fmt_num, median, ratio, Ctx, Headline, Section};
use crate::error::CliResult;
use serde_json::json;
use std::fmt::Write as _;

const EXP: &str = "atomic-write";
const DEVICE: &str = "sata-ssd,capacity=8GiB,atomic=16KiB,latency=emulate";
const MODES: [&str; 3] = ["doublewrite", "none", "atomic"];

struct Grid {
    warehouses: &'static [u32],
    clients: &'static [u32],
    buffer: &'static str,
    duration: &'static str,
    estimate: fn(u32) -> u64,
    cycles: &'static str,
}

fn grid(scale: Scale) -> Grid {
    scale.pick(
        Grid {
            warehouses: &[1],
            clients: &[4],
            buffer: "256MiB",
            duration: "2s",
            estimate: |_| 8,
            cycles: "20",
        },
        Grid {
            warehouses: &[1, 2],
            clients: &[20],
            // 0.8 and 0.4 of the data (the seed's 1 GB buffer was 2 to 0.33 of it).
            buffer: "96MiB",
            duration: "10s",
            estimate: |w| 16 + 10 * u64::from(w),
            cycles: "300",
        },
        // The seed: 500 MB–3 GB of data, a 1 GB buffer, 20/50/100 connections, 10 minutes.
        Grid {
            warehouses: &[4, 12, 25],
            clients: &[20, 50, 100],
            buffer: "1GiB",
            duration: "3m",
            estimate: |w| 190 + 10 * u64::from(w),
            cycles: "2000",
        },
    )
}

pub(super) fn cells(scale: Scale) -> Vec<Cell> {
    let g = grid(scale);
    let mut out = Vec::new();
    for &w in g.warehouses {
        for &c in g.clients {
            for mode in MODES {
                let (ws, cs) = (w.to_string(), c.to_string());
                let mut args = vec![
                    "bench",
                    "tpcc",
                    "--warehouses",
                    &ws,
                    "--threads",
                    &cs,
                    "--duration",
                    g.duration,
                    "--buffer",
                    g.buffer,
                    "--page-size",
                    "16KiB",
                    "--torn",
                    mode,
                    "--data",
                    DEVICE,
                    "--log",
                    "sata-ssd,capacity=1GiB,latency=emulate",
                ];
                args.extend(scale.tpcc_size());
                out.push(Cell::new(
                    EXP,
                    &format!("w{w}.c{c}.{mode}"),
                    &args,
                    (g.estimate)(w),
                    json!({ "kind": "tpcc", "warehouses": w, "clients": c, "mode": mode }),
                ));
            }
        }
    }
    for mode in MODES {
        let mut cell = Cell::new(
            EXP,
            &format!("crash.{mode}"),
            &[
                "crashtest",
                "--torn",
                mode,
                "--cycles",
                g.cycles,
                "--device",
                "sata-ssd,atomic=16KiB",
                "--keep-going",
            ],
            scale.pick(2, 8, 45),
            json!({ "kind": "crash", "mode": mode }),
        );
        cell.may_fail = true;
        out.push(cell);
    }
    out
}

pub(super) fn section(ctx: &Ctx, results: &[&CellResult]) -> CliResult<Section> {
    let mut body = format!(
        "TPC-C, 16 KiB pages, data on `{DEVICE}` (16 KiB atomic writes), log on its own \
         emulated SATA SSD, latency emulated. Seed: MariaDB 5.5 on an 840 Pro, 1 GB buffer, \
         500 MB–3 GB of data, 20/50/100 connections.\n\n\
         | warehouses | clients | doublewrite tpmC | none tpmC | atomic tpmC | none / dw | atomic / dw | atomic / none | data writes dw → atomic (4 KiB) |\n\
         |---|---|---|---|---|---|---|---|---|\n"
    );
    let mut none_dw = Vec::new();
    let mut atomic_dw = Vec::new();
    let mut atomic_none = Vec::new();
    let mut cats = Vec::new();
    let mut bars: Vec<(String, Vec<f64>)> =
        MODES.iter().map(|m| (m.to_string(), Vec::new())).collect();
    let mut combos: Vec<(String, String)> = results
        .iter()
        .filter(|r| r.param_str("kind") == "tpcc")
        .map(|r| {
            (
                r.param("warehouses")
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                r.param("clients")
                    .map(ToString::to_string)
                    .unwrap_or_default(),
            )
        })
        .collect();
    combos.sort_by_key(|(w, c)| (w.parse::<u32>().unwrap_or(0), c.parse::<u32>().unwrap_or(0)));
    combos.dedup();
    for (w, c) in &combos {
        let get = |mode: &str| {
            find(
                results,
                &[
                    ("kind", "tpcc"),
                    ("warehouses", w),
                    ("clients", c),
                    ("mode", mode),
                ],
            )
        };
        let t = |mode: &str| get(mode).and_then(|r| r.num("tpmC"));
        let writes = |mode: &str| get(mode).and_then(|r| r.num("devices/data/host_write_pages"));
        let (dw, none, at) = (t("doublewrite"), t("none"), t("atomic"));
        let (a, b, c2) = (ratio(none, dw), ratio(at, dw), ratio(at, none));
        none_dw.extend(a);
        atomic_dw.extend(b);
        atomic_none.extend(c2);
        let x = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.2}x"));
        let _ = writeln!(
            body,
            "| {w} | {c} | {} | {} | {} | {} | {} | {} | {} → {} |",
            fmt_num(dw),
            fmt_num(none),
            fmt_num(at),
            x(a),
            x(b),
            x(c2),
            fmt_num(writes("doublewrite")),
            fmt_num(writes("atomic")),
        );
        cats.push(format!("{w} wh, {c} clients"));
        for (i, m) in MODES.iter().enumerate() {
            bars[i].1.push(t(m).unwrap_or(0.0));
        }
    }
    body.push_str(
        "\nPower-cut crash test per mode (same emulated SSD with 16 KiB atomic writes; random \
         cut points in commits, checkpoints, page write-back and recovery; every transaction \
         checked all or nothing against an exact oracle):\n\n\
         | mode | cycles | cycles that lost the database to a torn page | torn pages repaired | lost commits | partial transactions | verdict |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for mode in MODES {
        match find(results, &[("kind", "crash"), ("mode", mode)]) {
            Some(r) => {
                let lost = r.num("corruption_detected").unwrap_or(0.0)
                    + r.num("undetected_torn").unwrap_or(0.0);
                let bad = r.num("lost_commits").unwrap_or(0.0)
                    + r.num("partial_transactions").unwrap_or(0.0)
                    + r.num("uncommitted_visible").unwrap_or(0.0);
                let verdict = if lost > 0.0 || bad > 0.0 {
                    "loses pages: not an option"
                } else {
                    "safe"
                };
                let _ = writeln!(
                    body,
                    "| {mode} | {} | {} | {} | {} | {} | {verdict} |",
                    fmt_num(r.num("cycles")),
                    fmt_num(Some(lost)),
                    fmt_num(r.num("torn_pages_repaired")),
                    fmt_num(r.num("lost_commits")),
                    fmt_num(r.num("partial_transactions")),
                );
            }
            None => {
                let _ = writeln!(body, "| {mode} | – | – | – | – | – | not run |");
            }
        }
    }
    let (path, link) = ctx.plot("atomic-write-tpmc.svg");
    if !cats.is_empty() {
        bar_chart(
            &path,
            &BarChart {
                title: "Seed 003: TPC-C by torn-write protection",
                y_label: "tpmC",
                categories: &cats,
                series: &bars,
            },
        )?;
        let _ = writeln!(body, "\n![tpmC per mode]({link})");
    }
    // Measured facts for the verdicts: how much the buffer holds, and what the double-write
    // buffer adds to the data device's writes.
    let tpcc: Vec<&&CellResult> = results
        .iter()
        .filter(|r| r.param_str("kind") == "tpcc")
        .collect();
    let mut hit: Vec<f64> = tpcc
        .iter()
        .filter_map(|r| r.num("engine/buffer_hit_ratio"))
        .collect();
    let writes = |m: &str| -> f64 {
        tpcc.iter()
            .filter(|r| r.param_str("mode") == m)
            .filter_map(|r| r.num("devices/data/host_write_pages"))
            .sum()
    };
    let extra = ratio(Some(writes("doublewrite")), Some(writes("atomic")));
    let facts = format!(
        "the double-write buffer writes {} the data of atomic mode, but the buffer hit ratio \
         is {} (median), so page writes are made by the cleaner in the background and are \
         rarely what a transaction waits for",
        extra.map_or("?".to_string(), |v| format!("{v:.1}x")),
        median(&mut hit).map_or("?".to_string(), |v| format!("{v:.4}"))
    );
    let headlines = vec![
        Headline::ratio(
            "none vs doublewrite tpmC (median over the grid)",
            "1.5–2.2x",
            median(&mut none_dw),
            (1.5, 2.2),
            &format!("a smaller gain than the seed's: {facts}"),
            "the double-write buffer costs more here than in the seed",
        ),
        Headline::ratio(
            "atomic vs doublewrite tpmC (median)",
            "1.5–2.2x",
            median(&mut atomic_dw),
            (1.5, 2.2),
            &format!("a smaller gain than the seed's: {facts}"),
            "the double-write buffer costs more here than in the seed",
        ),
        Headline::ratio(
            "atomic vs none tpmC (median)",
            "1.1–1.3x",
            median(&mut atomic_none),
            (1.1, 1.3),
            "atomic is not faster than none here: both write each page once in place (none \
             merges consecutive pages into one request, atomic issues one per page); the \
             seed measured its gain on MariaDB with direct I/O",
            "atomic is faster than none by more than the seed saw",
        ),
    ];
    Ok(Section {
        title: "Seed 003 — 16 KiB atomic page writes (TPC-C)".to_string(),
        body,
        headlines,
    })
}
