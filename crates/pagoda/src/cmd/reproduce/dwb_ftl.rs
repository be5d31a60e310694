//! Seed 001 (an FTL that separates the double-write stream): LinkBench with the seed's
//! write-heavy mix on the engine with the double-write buffer on, data and double-write area
//! and log on one emulated SSD in steady state (preconditioned), page-mapping FTL with greedy
//! GC. The headline is the seed's treatment: the double-write area on write points of its own
//! and every other write (log, data pages, the preconditioned fill) on one shared set, against
//! one set for everything. Each kind on its own stream is a row beyond the seed. The same
//! number of requests and the same striping per stream for all.

use super::cell::CellResult;
use super::file::seed_row;
use super::outcome::{fig, Fig, Outcome};
use super::regime;
use super::repeats::{self, Group, Spread};
use super::report::{find, fmt_change, fmt_num, ratio, Ctx, Headline, Section};
use crate::error::CliResult;
use crate::plot::{bar_chart, BarChart};
use crate::report::Table;
use pagoda_device::StreamStats;
use std::fmt::Write as _;

/// The experiment's name: its file is `experiments/seeds/dwb-ftl.toml`.
const EXP: &str = "dwb-ftl";

/// One stream for everything (the seed's original FTL).
const ONE: &str = "one-stream";
/// The seed's custom FTL: the engine tags log 1, data 2 and the double-write area 3 on a
/// 4-stream device, and `separate=3` gives only stream 3 write points of its own; the others
/// write to stream 0's, where the preconditioned fill lies.
const DW: &str = "dw-separated";
/// Beyond the seed: log, data, double-write area and fill each on their own write points.
const FOUR: &str = "four-streams";
/// The stream the double-write area lands in with `DW` and `FOUR`.
const DW_STREAM: usize = 3;
/// The seed's columns: flash reads, writes, GC, copybacks, ops/s (original, custom FTL).
const SEED: [[f64; 5]; 2] = [
    [2_385_657.0, 9_998_645.0, 117_957.0, 5_208_561.0, 171.0],
    [2_385_315.0, 9_995_041.0, 111_828.0, 4_447_374.0, 182.0],
];
/// LinkBench transactions of each of the seed's runs.
const SEED_TX: f64 = 5_100_000.0;
/// The grid's cells, and the ablation's with the double-write share nearer the seed's.
const BASE: &str = "base";
const SEED_SHARE: &str = "seed-share";
const COLUMNS: [&str; 5] = ["flash reads", "flash writes", "GC", "copybacks", "ops/s"];

/// The seed's five columns from a result (flash pages for reads and writes, as the seed).
fn columns(r: &Group) -> [Option<f64>; 5] {
    [
        r.num(|o| Some(o.data()?.flash_reads as f64)),
        r.num(fig::data_flash_programs),
        r.num(fig::data_gc_runs),
        r.num(fig::data_copybacks),
        r.num(fig::throughput),
    ]
}

pub(super) fn section(ctx: &Ctx, results: &[&CellResult]) -> CliResult<Section> {
    let get = |mode: &str| find(results, &[("mode", mode), ("variant", BASE)]);
    let (one, dw, four) = (get(ONE), get(DW), get(FOUR));
    let requests = one
        .as_ref()
        .or(dw.as_ref())
        .and_then(|g| g.num(Outcome::op_limit));
    let mut body = format!(
        "LinkBench, seed 001's mix (addlink 29, deletelink 10, updatelink 25, addnode 9, \
         updatenode 23.5, deletenode 3.5 %), {} requests per run (the seed: {}), one client \
         (the counters are then the same run after run for a seed), 16 KiB pages, a buffer \
         below the data, double-write buffer on, data on an emulated SATA SSD preconditioned \
         to steady state (greedy GC, op 0.1, 4 write points per stream), the log on the same \
         SSD (its last 64 MiB, `--log data-partition,size=64MiB`). `{DW}` is the seed's custom \
         FTL: only the double-write area has write points of its own (`separate=3`), log, data \
         pages and the preconditioned fill share one set; `{FOUR}` (beyond the seed) gives \
         each of the four its own. Counts are the SSD's, log included (4 KiB mapping units; \
         the seed counts flash pages).\n\n\
         | FTL | flash reads | flash writes | GC | copybacks | ops/s | host writes | WAF |\n\
         |---|---|---|---|---|---|---|---|\n",
        fmt_num(requests),
        fmt_num(Some(SEED_TX)),
    );
    let ours = seed_table(&mut body, [&one, &dw, &four]);
    body.push_str(&counters_table(&one, &dw, &four));
    body.push_str(&plot(ctx, &ours)?);
    let (settings, off) = regime_note(dw.as_ref());
    body.push_str(&settings);
    let headlines = headlines(results, [&one, &dw, &four], &off);
    let all: Vec<&CellResult> = results.to_vec();
    body.push_str(&regime::cells(&all));
    Ok(Section {
        title: "Seed 001 — FTL with the double-write stream separated (LinkBench)".to_string(),
        body,
        headlines,
    })
}

/// Ours beside the seed's five columns, with the changes, appended to `body`; returns our
/// columns per arm (one stream, the seed's treatment, four streams).
fn seed_table(body: &mut String, arms: [&Option<Group>; 3]) -> Vec<[Option<f64>; 5]> {
    let [one, dw, four] = arms;
    let mut ours: Vec<[Option<f64>; 5]> = Vec::new();
    for (mode, g) in [(ONE, &one), (DW, &dw), (FOUR, &four)] {
        let Some(r) = g else {
            ours.push([None; 5]);
            let _ = writeln!(*body, "| ours: {mode} | – | – | – | – | – | – | – |");
            continue;
        };
        let c = columns(r);
        let _ = writeln!(
            body,
            "| ours: {mode} | {} | {} | {} | {} | {} | {} | {} |",
            fmt_num(c[0]),
            fmt_num(c[1]),
            fmt_num(c[2]),
            fmt_num(c[3]),
            fmt_num(c[4]),
            fmt_num(r.num(fig::data_writes)),
            fmt_num(r.num(|o| Some(o.data()?.waf))),
        );
        ours.push(c);
    }
    for (mode, v) in [(ONE, SEED[0]), ("separated (DWB region)", SEED[1])] {
        let _ = writeln!(
            body,
            "| seed: {mode} | {} | – | – |",
            v.map(|x| fmt_num(Some(x))).join(" | ")
        );
    }
    let change = |a: &[Option<f64>; 5], b: &[Option<f64>; 5]| -> String {
        (0..5)
            .map(|i| fmt_change(a[i], b[i]))
            .collect::<Vec<_>>()
            .join(" | ")
    };
    let _ = writeln!(
        *body,
        "| change, ours: {DW} vs {ONE} | {} | | |",
        change(&ours[1], &ours[0])
    );
    let seed_cols = |i: usize| SEED[i].map(Some);
    let _ = writeln!(
        *body,
        "| change, seed | {} | | |",
        change(&seed_cols(1), &seed_cols(0))
    );
    let _ = writeln!(
        *body,
        "| change, ours beyond the seed: {FOUR} vs {ONE} | {} | | |",
        change(&ours[2], &ours[0])
    );
    if let Some(g) = &dw {
        let _ = writeln!(
            body,
            "\nThe double-write stream on its own ({DW} run): {} host writes, {} GC runs whose \
             victims were its blocks, {} copybacks (seed: 1,146,595 writes, 8,982 GCs, 0 \
             copybacks; its region had its own GC, while here GC picks the emptiest closed \
             block of any stream).",
            fmt_num(g.num(|o| Some(dw_stream(o)?.host_write_pages as f64))),
            fmt_num(g.num(|o| Some(dw_stream(o)?.gc_runs as f64))),
            fmt_num(g.num(|o| Some(dw_stream(o)?.copybacks as f64))),
        );
    }
    ours
}

/// The bar chart of the separated arms relative to one stream, ours and the seed's; returns
/// its Markdown.
fn plot(ctx: &Ctx, ours: &[[Option<f64>; 5]]) -> CliResult<String> {
    let cats: Vec<String> = COLUMNS.iter().map(ToString::to_string).collect();
    let rel = |a: usize| -> Vec<f64> {
        (0..5)
            .map(|i| ratio(ours[a][i], ours[0][i]).unwrap_or(0.0))
            .collect()
    };
    let series = vec![
        (format!("ours: {DW} / {ONE}"), rel(1)),
        (
            "seed: separated / one stream".to_string(),
            (0..5).map(|i| SEED[1][i] / SEED[0][i]).collect(),
        ),
        (format!("ours, beyond the seed: {FOUR} / {ONE}"), rel(2)),
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
    Ok(format!("\n![separated relative to one stream]({link})\n"))
}

/// The seed's setting beside ours (Markdown), and why the rows get no verdict when the
/// double-write copies' share of the host writes is far from the seed's.
fn regime_note(dw: Option<&Group>) -> (String, Option<String>) {
    // What share of the host writes the double-write copies are (the seed's: 11.5 %), per
    // repeat of the seed's treatment.
    let shares = dw_shares(dw);
    let share = Spread::of(shares.clone());
    let share_text = share.map_or("?".to_string(), |s| s.percent());
    let settings = format!(
        "\n{}\n",
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
    (settings, off)
}

/// The rows: the seed's three changes with the treatment, and four streams beyond the seed.
fn headlines(
    results: &[&CellResult],
    arms: [&Option<Group>; 3],
    off: &Option<String>,
) -> Vec<Headline> {
    let [one, dw, four] = arms;
    let pct = |s: &Spread| s.fmt(|v| format!("{v:+.1} %"));
    let ablation = seed_share_ablation(results);
    let mut headlines = Vec::new();
    for (figure, id, why_low, why_high) in [
        (
            fig::data_copybacks as Fig,
            "copybacks",
            "separation saves more copybacks than in the seed",
            "separation saves fewer copybacks than in the seed",
        ),
        (
            fig::data_gc_runs as Fig,
            "gc-runs",
            "separation saves more GC runs than in the seed",
            "separation saves fewer GC runs than in the seed",
        ),
        (
            fig::throughput as Fig,
            "ops",
            "no throughput gain from the saved GC work (one client)",
            "a larger gain than the seed's",
        ),
    ] {
        let row = seed_row(EXP, id);
        let band = row.band.clone().expect("a band in dwb-ftl.toml");
        let nearer = seed_share_change(results, figure);
        headlines.push(
            Headline::of_row(
                &row,
                changes(dw.as_ref(), one.as_ref(), figure),
                why_low,
                why_high,
                pct,
            )
            .regime(off.clone())
            .ablated(
                "the double-write copies' share of the host writes (a larger buffer)",
                nearer.map(|c| band.judge(Some(&c), "", "").key() == "within"),
                ablation.clone().unwrap_or_default(),
            ),
        );
    }
    // Beyond the seed: does giving every kind of write its own stream save at least what the
    // seed's separation of the double-write area alone saved? No saving would fail it.
    headlines.push(Headline::of_row(
        &seed_row(EXP, "four-streams"),
        changes(four.as_ref(), one.as_ref(), fig::data_copybacks),
        "",
        "four streams save fewer copybacks than the seed's separation of the double-write area",
        pct,
    ));
    headlines
}

/// The regime of the FTL beside the seed's, per arm: the share of flash writes that are GC
/// copies (the valid share of the victims greedy GC picks) and how often GC runs, per 1,000
/// requests and per second.
fn counters_table(one: &Option<Group>, dw: &Option<Group>, four: &Option<Group>) -> String {
    let mut out = format!(
        "\nThe FTL's regime (medians of the repeats, min–max; the seed's from its table, \
         {} transactions per run):\n\n",
        fmt_num(Some(SEED_TX))
    );
    let mut table = Table::new(&[
        "FTL",
        "copybacks / flash writes",
        "GC runs per 1,000 requests",
        "GC runs per second",
    ]);
    let pct = |s: Option<Spread>| s.map_or("–".to_string(), |s| s.percent());
    let num = |s: Option<Spread>| s.map_or("–".to_string(), |s| s.fmt(|v| format!("{v:.1}")));
    for (mode, g) in [(ONE, one), (DW, dw), (FOUR, four)] {
        let g = g.as_ref();
        table.row(&[
            format!("ours: {mode}"),
            pct(per_run(g, |o| {
                Some(fig::data_copybacks(o)? / fig::data_flash_programs(o)?)
            })),
            num(per_run(g, |o| {
                Some(fig::data_gc_runs(o)? * 1000.0 / o.op_limit()?)
            })),
            num(per_run(g, |o| Some(fig::data_gc_runs(o)? / o.duration_s?))),
        ]);
    }
    for (mode, v) in [(ONE, SEED[0]), ("separated (DWB region)", SEED[1])] {
        table.row(&[
            format!("seed: {mode}"),
            format!("{:.1} %", v[3] / v[1] * 100.0),
            format!("{:.1}", v[2] * 1000.0 / SEED_TX),
            format!("{:.1}", v[2] / (SEED_TX / v[4])),
        ]);
    }
    out.push_str(&table.markdown());
    out
}

/// `f` of each repeat, as a spread.
fn per_run(g: Option<&Group>, f: impl Fn(&Outcome) -> Option<f64>) -> Option<Spread> {
    Spread::of(g?.per_seed(f).into_values().collect())
}

/// The counters of the double-write area's stream.
fn dw_stream(o: &Outcome) -> Option<&StreamStats> {
    o.data()?.streams.get(DW_STREAM)
}

/// The share of the host writes that are double-write copies, per repeat of a run with the
/// double-write area on its own stream.
fn dw_shares(sep: Option<&Group>) -> Vec<f64> {
    sep.map_or_else(Vec::new, |g| {
        g.runs
            .iter()
            .filter_map(|r| {
                let o = r.outcome();
                Some(dw_stream(o)?.host_write_pages as f64 / fig::data_writes(o)?)
            })
            .collect()
    })
}

/// `sep` relative to `one` in percent, per repeat.
fn changes(sep: Option<&Group>, one: Option<&Group>, figure: Fig) -> Option<Spread> {
    repeats::paired(sep, one, figure, |a, b| {
        (b > 0.0).then(|| (a / b - 1.0) * 100.0)
    })
}

/// The change at `figure` with the double-write share nearer the seed's (a larger buffer).
fn seed_share_change(results: &[&CellResult], figure: Fig) -> Option<Spread> {
    let get = |mode: &str| find(results, &[("mode", mode), ("variant", SEED_SHARE)]);
    changes(Some(&get(DW)?), Some(&get(ONE)?), figure)
}

/// What the seed's rows show with the double-write share nearer the seed's (a larger buffer).
fn seed_share_ablation(results: &[&CellResult]) -> Option<String> {
    let get = |mode: &str| find(results, &[("mode", mode), ("variant", SEED_SHARE)]);
    let (sep, one) = (get(DW)?, get(ONE)?);
    let share = Spread::of(dw_shares(Some(&sep)))?;
    let kib = sep.runs.first()?.outcome().config.as_ref()?.buffer_bytes? / 1024.0;
    // Whole MiB where it is one (quick's 13 MiB), else KiB (tiny's 1,056).
    let buffer = if kib % 1024.0 == 0.0 {
        format!("{} MiB", kib / 1024.0)
    } else {
        format!("{} KiB", fmt_num(Some(kib)))
    };
    let pct = |figure: Fig| {
        changes(Some(&sep), Some(&one), figure)
            .map_or("?".to_string(), |s| s.fmt(|v| format!("{v:+.1} %")))
    };
    Some(format!(
        "with a {buffer} buffer the double-write copies are {} of the host writes (the \
         seed's 11.5 %); {DW} vs {ONE} then changes copybacks by {}, GC runs by {} and ops/s \
         by {}",
        share.percent(),
        pct(fig::data_copybacks),
        pct(fig::data_gc_runs),
        pct(fig::throughput),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::reproduce::cell::Scale;
    use crate::cmd::reproduce::file::seed_grid;

    fn cells(scale: Scale) -> Vec<crate::cmd::reproduce::cell::Cell> {
        seed_grid(EXP, scale).0
    }

    /// The headline compares the seed's treatment (only the double-write area apart) with one
    /// stream; the four-way split is its own cell, and the ablation covers the seed's arms.
    #[test]
    fn the_seeds_treatment_is_the_headline_pair() {
        for scale in [Scale::Tiny, Scale::Quick, Scale::Standard] {
            let ids: Vec<String> = cells(scale).iter().map(|c| c.id.clone()).collect();
            assert_eq!(
                ids,
                [
                    "dwb-ftl.one-stream",
                    "dwb-ftl.dw-separated",
                    "dwb-ftl.four-streams",
                    "dwb-ftl.one-stream.seed-share",
                    "dwb-ftl.dw-separated.seed-share",
                ]
            );
            let dw = &cells(scale)[1];
            assert!(dw.args.iter().any(|a| a.contains(",streams=4,separate=3,")));
        }
    }

    /// The seed's regime comes from its own table: 52 % of its flash writes were copybacks.
    #[test]
    fn the_seeds_regime_is_computed_from_its_table() {
        let t = counters_table(&None, &None, &None);
        assert!(
            t.contains("| seed: one-stream | 52.1 % | 23.1 | 4.0 |"),
            "{t}"
        );
        assert!(t.contains("| ours: dw-separated | – | – | – |"), "{t}");
    }

    /// The bands in dwb-ftl.toml sit on the seed's own table (its columns 2-4).
    #[test]
    fn the_files_bands_are_the_seeds_figures() {
        for (id, col) in [("copybacks", 3), ("gc-runs", 2), ("ops", 4)] {
            let band = seed_row(EXP, id).band.unwrap();
            let centre = (band.lo + band.hi) / 2.0;
            let seed = (SEED[1][col] / SEED[0][col] - 1.0) * 100.0;
            assert!(
                (centre - seed).abs() < 1e-9,
                "{id}: {centre} against {seed}"
            );
        }
        let four = seed_row(EXP, "four-streams").band.unwrap();
        assert!((four.hi - (SEED[1][3] / SEED[0][3] - 1.0) * 100.0).abs() < 1e-9);
    }
}
