//! Seed 001 (an FTL that separates the double-write stream): LinkBench with the seed's
//! write-heavy mix on the engine with the double-write buffer on, data and double-write area
//! and log on one emulated SSD in steady state (preconditioned), page-mapping FTL with greedy
//! GC. The quick buffer (10 MiB) makes the double-write copies 15 % of the host writes (the
//! seed's: 11.5 %); 4 MiB gave 44 %, 11 MiB 6 %, 16 MiB none (the data then fits).
//! One stream for everything against the double-write area on its own stream; the same
//! number of requests and the same striping per stream for both.

use super::cell::{Cell, CellResult, Scale};
use super::regime;
use super::repeats::{self, Group, Spread};
use super::report::{find, fmt_change, fmt_num, ratio, Band, Ctx, Headline, Section};
use crate::error::CliResult;
use crate::plot::{bar_chart, BarChart};
use serde_json::json;
use std::fmt::Write as _;

const EXP: &str = "dwb-ftl";
/// (mode, device streams): with 4 streams the engine puts data pages on stream 2 and the
/// double-write area on stream 3; with 1 everything shares stream 0.
const MODES: [(&str, &str); 2] = [("one-stream", "1"), ("separated", "4")];
/// The seed's columns: flash reads, writes, GC, copybacks, ops/s.
const SEED: [(&str, [f64; 5]); 2] = [
    (
        "one-stream",
        [2_385_657.0, 9_998_645.0, 117_957.0, 5_208_561.0, 171.0],
    ),
    (
        "separated",
        [2_385_315.0, 9_995_041.0, 111_828.0, 4_447_374.0, 182.0],
    ),
];
/// The grid's cells, and the ablation's with the double-write share at the seed's.
const BASE: &str = "base";
const SEED_SHARE: &str = "seed-share";
const COLUMNS: [&str; 5] = ["flash reads", "flash writes", "GC", "copybacks", "ops/s"];

/// The drive's 1 MiB block (the preset uses 64 KiB ones at every capacity): what separating
/// the double-write stream saves is how often short- and long-lived pages share a victim
/// block, so the block keeps its real size; four write points per stream leave the spare
/// blocks for it at 512 MiB.
fn device(streams: &str, capacity: &str) -> String {
    format!(
        "sata-ssd,capacity={capacity},op=0.1,streams={streams},stripe=4,pages_per_block=128,\
         precondition=1,latency=emulate"
    )
}

pub(super) fn cells(scale: Scale) -> Vec<Cell> {
    let (nodes, requests, capacity, buffer_kib, estimate) = scale.pick(
        ("2000", "2000", "512MiB", 1024u32, 8u64),
        // Measured on a quiet machine: 19 s one stream, 11 s separated (less GC).
        ("10000", "6000", "512MiB", 10 * 1024, 19),
        // The quick scale's buffer-to-data ratio on 5x the nodes (not yet measured).
        ("50000", "40000", "1GiB", 50 * 1024, 150),
        ("200000", "200000", "4GiB", 32 * 1024, 900),
    );
    // The ablation of the rows that save more than the seed: a buffer 1/32 larger, which at
    // quick scale brings the double-write copies from about 15 % of the host writes to the
    // seed's 11.5 % (measured: 256 of 9,020 pages, one seed).
    let variants = [
        (BASE, buffer_kib),
        (SEED_SHARE, buffer_kib + buffer_kib / 32),
    ];
    variants
        .iter()
        .flat_map(|v| MODES.iter().map(move |m| (*v, *m)))
        .map(|((variant, kib), (mode, streams))| {
            let dev = device(streams, capacity);
            let buffer = format!("{kib}KiB");
            let name = if variant == BASE {
                mode.to_string()
            } else {
                format!("{mode}.{variant}")
            };
            Cell::new(
                EXP,
                &name,
                &[
                    "bench",
                    "linkbench",
                    "--nodes",
                    nodes,
                    "--requests",
                    requests,
                    "--mix",
                    "seed-001",
                    // One client and no background thread: the I/O sequence, and so every
                    // FTL counter, is a function of the seed (the same run after run).
                    "--threads",
                    "1",
                    "--no-background",
                    // A buffer well below the data, so that pages are written back all the
                    // time; loaded with a larger one, then reopened with the counters zeroed.
                    "--buffer",
                    &buffer,
                    "--load-buffer",
                    "64MiB",
                    // The seed's baseline: InnoDB's double-write buffer, every page copied.
                    "--torn",
                    "doublewrite-full",
                    "--data",
                    &dev,
                    // The log on the same SSD (its last 64 MiB, its own stream with 4
                    // streams), as InnoDB's files shared one drive in the seed: log writes
                    // then make up most host writes, the double-write copies a share of them.
                    "--log",
                    "data-partition,size=64MiB",
                ],
                if streams == "1" {
                    estimate
                } else {
                    estimate * 3 / 5
                },
                json!({ "mode": mode, "variant": variant, "streams": streams, "nodes": nodes, "requests": requests }),
            )
            // One client waiting on the SSD at about 5 % of a core (3-5 % of the window, the
            // load under 0.6 s), so the four cells of a round run at once; its FTL counters
            // are a function of the seed whatever runs beside it.
            .light_among(4)
        })
        .collect()
}

/// The seed's five columns from a result (flash pages for reads and writes, as the seed).
fn columns(r: &super::repeats::Group) -> [Option<f64>; 5] {
    [
        r.num("devices/data/flash_reads"),
        r.num("devices/data/flash_programs"),
        r.num("devices/data/gc_runs"),
        r.num("devices/data/copybacks"),
        r.num("throughput_ops_s"),
    ]
}

pub(super) fn section(ctx: &Ctx, results: &[&CellResult]) -> CliResult<Section> {
    let mut body = String::from(
        "LinkBench, seed 001's mix (addlink 29, deletelink 10, updatelink 25, addnode 9, \
         updatenode 23.5, deletenode 3.5 %), one client (the counters are then the same run \
         after run for a seed), 16 KiB pages, a buffer below the data, double-write buffer on, \
         data on an emulated SATA SSD preconditioned to steady state (greedy GC, op 0.1, 4 \
         write points per stream), the log on the same SSD (its last 64 MiB, `--log \
         data-partition,size=64MiB`, on its own stream when streams are separated). Counts are \
         the SSD's, log included (4 KiB mapping units; the seed counts flash pages).\n\n\
         | FTL | flash reads | flash writes | GC | copybacks | ops/s | host writes | WAF |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let get = |mode: &str| find(results, &[("mode", mode), ("variant", BASE)]);
    let mut ours: Vec<[Option<f64>; 5]> = Vec::new();
    for (mode, _) in MODES {
        let Some(r) = get(mode) else {
            ours.push([None; 5]);
            let _ = writeln!(body, "| ours: {mode} | – | – | – | – | – | – | – |");
            continue;
        };
        let c = columns(&r);
        let _ = writeln!(
            body,
            "| ours: {mode} | {} | {} | {} | {} | {} | {} | {} |",
            fmt_num(c[0]),
            fmt_num(c[1]),
            fmt_num(c[2]),
            fmt_num(c[3]),
            fmt_num(c[4]),
            fmt_num(r.num("devices/data/host_write_pages")),
            fmt_num(r.num("devices/data/waf")),
        );
        ours.push(c);
    }
    for (mode, v) in SEED {
        let _ = writeln!(
            body,
            "| seed: {mode} | {} | {} | {} | {} | {} | – | – |",
            fmt_num(Some(v[0])),
            fmt_num(Some(v[1])),
            fmt_num(Some(v[2])),
            fmt_num(Some(v[3])),
            fmt_num(Some(v[4])),
        );
    }
    let _ = writeln!(
        body,
        "| change, ours | {} | {} | {} | {} | {} | | |",
        fmt_change(ours[1][0], ours[0][0]),
        fmt_change(ours[1][1], ours[0][1]),
        fmt_change(ours[1][2], ours[0][2]),
        fmt_change(ours[1][3], ours[0][3]),
        fmt_change(ours[1][4], ours[0][4]),
    );
    let _ = writeln!(
        body,
        "| change, seed | {} | {} | {} | {} | {} | | |",
        fmt_change(Some(SEED[1].1[0]), Some(SEED[0].1[0])),
        fmt_change(Some(SEED[1].1[1]), Some(SEED[0].1[1])),
        fmt_change(Some(SEED[1].1[2]), Some(SEED[0].1[2])),
        fmt_change(Some(SEED[1].1[3]), Some(SEED[0].1[3])),
        fmt_change(Some(SEED[1].1[4]), Some(SEED[0].1[4])),
    );
    // The double-write stream's own counters in the separated run (stream 3).
    let dw = get("separated").map(|r| {
        (
            r.num("devices/data/streams/3/host_write_pages"),
            r.num("devices/data/streams/3/gc_runs"),
            r.num("devices/data/streams/3/copybacks"),
        )
    });
    if let Some((w, g, c)) = dw {
        let _ = writeln!(
            body,
            "\nThe double-write stream on its own (separated run): {} host writes, {} GC runs \
             whose victims were its blocks, {} copybacks (seed: 1,146,595 writes, 8,982 GCs, 0 \
             copybacks; its region had its own GC, while here GC picks the emptiest closed block \
             of any stream).",
            fmt_num(w),
            fmt_num(g),
            fmt_num(c)
        );
    }
    let cats: Vec<String> = COLUMNS.iter().map(ToString::to_string).collect();
    let rel = |i: usize| ratio(ours[1][i], ours[0][i]).unwrap_or(0.0);
    let series = vec![
        (
            "ours: separated / one stream".to_string(),
            (0..5).map(rel).collect(),
        ),
        (
            "seed: separated / one stream".to_string(),
            (0..5).map(|i| SEED[1].1[i] / SEED[0].1[i]).collect(),
        ),
    ];
    let (path, link) = ctx.plot("dwb-ftl.svg");
    bar_chart(
        &path,
        &BarChart {
            title: "Seed 001: double-write stream separated, relative to one stream",
            y_label: "separated / one stream",
            categories: &cats,
            series: &series,
        },
    )?;
    let _ = writeln!(body, "\n![separated relative to one stream]({link})");
    // What share of the host writes the double-write copies are (the seed's: 11.5 %), per
    // repeat of the separated run (stream 3 is the double-write area there).
    let sep = get("separated");
    let shares = dw_shares(sep.as_ref());
    let share = Spread::of(shares.clone());
    let share_text = share.map_or("?".to_string(), |s| s.percent());
    let _ = writeln!(
        body,
        "\n{}",
        regime::settings(&[
            (
                "double-write copies / host writes",
                "11.5 %",
                format!("{share_text} (in regime from 5.75 % to 23 %: within 2x of the seed's)")
            ),
            (
                "baseline",
                "InnoDB's double-write buffer (every flushed page copied)",
                "`--torn doublewrite-full` (the same)".to_string()
            ),
            (
                "device",
                "a SATA SSD in steady state, page-mapping FTL, greedy GC",
                "emulated SATA SSD preconditioned to steady state, greedy GC, op 0.1".to_string()
            ),
        ])
    );
    let off =
        (!shares.is_empty() && shares.iter().any(|v| !(0.0575..=0.23).contains(v))).then(|| {
            format!(
                "the double-write copies are {share_text} of the host writes here against the \
             seed's 11.5 %, so separating them saves more (or less) for that reason alone"
            )
        });
    let one = get("one-stream");
    let change = |path: &str| changes(sep.as_ref(), one.as_ref(), path);
    let pct = |s: &Spread| s.fmt(|v| format!("{v:+.1} %"));
    let ablation = seed_share_ablation(results);
    let mut headlines = Vec::new();
    for (path, what, seed, x, why_low, why_high) in [
        (
            "devices/data/copybacks",
            "copybacks, separated vs one stream",
            "-14.6 %",
            -14.6,
            "separation saves more copybacks than in the seed",
            "separation saves fewer copybacks than in the seed",
        ),
        (
            "devices/data/gc_runs",
            "GC runs, separated vs one stream",
            "-5.2 %",
            -5.2,
            "separation saves more GC runs than in the seed",
            "separation saves fewer GC runs than in the seed",
        ),
        (
            "throughput_ops_s",
            "ops/s, separated vs one stream",
            "+6.4 %",
            6.4,
            "no throughput gain from the saved GC work (one client)",
            "a larger gain than the seed's",
        ),
    ] {
        headlines.push(
            Headline::judged(
                what,
                seed,
                change(path),
                &Band::around(x, &format!("the seed's {seed}")),
                why_low,
                why_high,
                pct,
            )
            .regime(off.clone())
            .ablation_unless_within(ablation.clone()),
        );
    }
    let all: Vec<&CellResult> = results.to_vec();
    body.push_str(&regime::cells(&all));
    Ok(Section {
        title: "Seed 001 — FTL with the double-write stream separated (LinkBench)".to_string(),
        body,
        headlines,
    })
}

/// The share of the host writes that are double-write copies, per repeat of a separated run
/// (stream 3 is the double-write area there).
fn dw_shares(sep: Option<&Group>) -> Vec<f64> {
    sep.map_or_else(Vec::new, |g| {
        g.runs
            .iter()
            .filter_map(|r| {
                Some(
                    r.num("devices/data/streams/3/host_write_pages")?
                        / r.num("devices/data/host_write_pages")?,
                )
            })
            .collect()
    })
}

/// Separated relative to one stream in percent, per repeat.
fn changes(sep: Option<&Group>, one: Option<&Group>, path: &str) -> Option<Spread> {
    repeats::paired(sep, one, path, |a, b| {
        (b > 0.0).then(|| (a / b - 1.0) * 100.0)
    })
}

/// What the rows show with the double-write share at the seed's (the buffer 1/32 larger).
fn seed_share_ablation(results: &[&CellResult]) -> Option<String> {
    let get = |mode: &str| find(results, &[("mode", mode), ("variant", SEED_SHARE)]);
    let (sep, one) = (get("separated")?, get("one-stream")?);
    let share = Spread::of(dw_shares(Some(&sep)))?;
    let pct = |path: &str| {
        changes(Some(&sep), Some(&one), path)
            .map_or("?".to_string(), |s| s.fmt(|v| format!("{v:+.1} %")))
    };
    Some(format!(
        "with a buffer 1/32 larger the double-write copies are {} of the host writes (the \
         seed's 11.5 %); separated vs one stream then changes copybacks by {}, GC runs by {} \
         and ops/s by {}",
        share.percent(),
        pct("devices/data/copybacks"),
        pct("devices/data/gc_runs"),
        pct("throughput_ops_s"),
    ))
}
