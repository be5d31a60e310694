//! Seed 003 (16 KiB atomic writes): TPC-C on an emulated SATA SSD that writes 16 KiB pages
//! atomically, in the seed's regime (data larger than the buffer, a log 1/8 of the buffer so
//! that checkpoints and page writes fall inside the run, data-device bound), in four
//! torn-write modes: InnoDB's double-write buffer (`doublewrite-full`, every flushed page
//! copied: the seed's baseline), pagoda's double-write (pages whose image is in the log skip
//! the copy), no protection, atomic page writes. Per mode a power-cut crash test shows what
//! `none` costs.

mod ablations;

use super::cell::CellResult;
use super::file::seed_row;
use super::outcome::{fig, Crash, Fig};
use super::regime;
use super::repeats::{self, Group, Spread};
use super::report::{find, fmt_num, Band, Ctx, Headline, Section};
use crate::error::CliResult;
use crate::plot::{bar_chart, BarChart};
use crate::report::Table;
use ablations::{beside, requests_per_page, RowAblation};
use std::fmt::Write as _;

/// The experiment's name: its file is `experiments/seeds/atomic-write.toml`.
const EXP: &str = "atomic-write";

/// (mode, label): the seed's baseline first.
const MODES: [(&str, &str); 4] = [
    ("doublewrite-full", "double-write (InnoDB)"),
    ("doublewrite", "double-write (pagoda, copy-skipping)"),
    ("none", "none"),
    ("atomic", "atomic"),
];
/// The key of the atomic-over-none ratios among the per-mode ones.
const ATOMIC_VS_NONE: &str = "atomic/none";
/// Modes whose crash test runs (the two double-writes share their recovery).
const CRASH: [&str; 3] = ["doublewrite-full", "none", "atomic"];

pub(super) fn section(ctx: &Ctx, results: &[&CellResult]) -> CliResult<Section> {
    let tpcc: Vec<&CellResult> = results
        .iter()
        .copied()
        .filter(|r| r.param_str("kind") == "tpcc")
        .collect();
    let mut combos: Vec<(u64, u64)> = tpcc
        .iter()
        .map(|r| {
            (
                r.param_f64("warehouses") as u64,
                r.param_f64("clients") as u64,
            )
        })
        .collect();
    combos.sort_unstable();
    combos.dedup();
    let mut body = intro(results, &tpcc, &combos);
    let TpmcTable {
        markdown,
        rel,
        cats,
        bars,
    } = tpmc_table(results, &combos);
    body.push('\n');
    body.push_str(&markdown);
    body.push_str(&regime::cells(&tpcc));
    body.push_str(&crash_table(results));
    if !cats.is_empty() {
        body.push_str(&plot(ctx, &cats, &bars)?);
    }
    let headlines = with_ablations(&mut body, results, &tpcc, &rel);
    Ok(Section {
        title: "Seed 003 — 16 KiB atomic page writes (TPC-C)".to_string(),
        body,
        headlines,
    })
}

/// What ran and the seed's setting beside ours.
fn intro(results: &[&CellResult], tpcc: &[&CellResult], combos: &[(u64, u64)]) -> String {
    let first = tpcc.first();
    let buffer_mib = first.map_or(0.0, |r| r.param_f64("buffer_mib"));
    let log_mib = first.map_or(0.0, |r| r.param_f64("log_mib"));
    let wh: Vec<String> = combos.iter().map(|c| c.0.to_string()).collect();
    format!(
        "TPC-C, 16 KiB pages, data on `{}` (16 KiB atomic writes, in steady state), log on \
         its own emulated SATA SSD, latency emulated. Seed: MariaDB 5.5 on an 840 Pro, \
         O_DIRECT.\n\n{}",
        first
            .and_then(|r| r.outcome().config.as_ref()?.data.as_deref())
            .unwrap_or("?"),
        regime::settings(&[
            ("data / buffer", "0.5-3x (0.5-3 GB, 1 GB buffer)",
             format!("about {:.1}x ({} warehouse(s) of about 120 MiB, {buffer_mib} MiB buffer)",
                 combos.first().map_or(0.0, |c| c.0 as f64) * 120.0 / buffer_mib.max(1.0), wh.join(", "))),
            ("log / buffer", "1/8 (128 MB)", format!("1/8 ({log_mib} MiB)")),
            ("clients", "20 / 50 / 100 connections",
             combos.iter().map(|c| c.1.to_string()).collect::<Vec<_>>().join(" / ") + " on 2 cores"),
            ("run length", "10 min", format!("{} s per cell, checkpoints every few seconds (see checkpoints below)",
                 first.and_then(|r| r.num(fig::duration)).unwrap_or(0.0))),
            ("direct I/O", "atomic: yes (O_DIRECT); no_double: no, through the page cache",
             match results.iter().find(|r| r.param_str("kind") == "pagecache") {
                 Some(r) => format!("yes (emulated devices have no page cache); the page-cache \
                     ablation runs `none` through a {} MiB host page cache",
                     r.param_f64("pagecache_mib")),
                 None => "yes (emulated devices have no page cache); the page-cache ablation \
                     did not run".to_string(),
             }),
            ("baseline", "InnoDB's double-write buffer: every flushed page copied, synced, then written in place",
             "`doublewrite-full` (the same); pagoda's own `doublewrite` skips the copy of pages whose image is in the log, as an extra row".to_string()),
        ])
    )
}

/// The tpmC table and what the section takes from it.
struct TpmcTable {
    markdown: String,
    /// Each mode's ratio against InnoDB's double-write (and atomic over none), per seed.
    rel: Vec<(&'static str, Option<Spread>)>,
    /// The chart's categories and its bars per mode.
    cats: Vec<String>,
    bars: Vec<(String, Vec<f64>)>,
}

/// The relative tpmC of each mode against InnoDB's double-write, per warehouses and
/// clients.
fn tpmc_table(results: &[&CellResult], combos: &[(u64, u64)]) -> TpmcTable {
    let mut table = Table::new(&[
        "warehouses",
        "clients",
        "mode",
        "tpmC",
        "vs InnoDB double-write",
        "data writes (4 KiB)",
        "double-write pages",
        "checkpoints",
    ]);
    let mut rel: Vec<(&'static str, Option<Spread>)> = Vec::new();
    let mut cats = Vec::new();
    let mut bars: Vec<(String, Vec<f64>)> = MODES
        .iter()
        .map(|m| (m.1.to_string(), Vec::new()))
        .collect();
    for (w, c) in combos {
        let (w, c) = (w.to_string(), c.to_string());
        let get = |mode: &str| {
            find(
                results,
                &[
                    ("kind", "tpcc"),
                    ("warehouses", &w),
                    ("clients", &c),
                    ("mode", mode),
                ],
            )
        };
        let base = get(MODES[0].0);
        for (i, (mode, label)) in MODES.iter().enumerate() {
            let g = get(mode);
            let r = repeats::ratio(g.as_ref(), base.as_ref(), fig::tpmc);
            let n = |f: Fig| g.as_ref().and_then(|g| g.num(f));
            table.row(&[
                w.clone(),
                c.clone(),
                (*label).to_string(),
                fmt_num(n(fig::tpmc)),
                r.map_or("–".to_string(), |s| s.times()),
                fmt_num(n(fig::data_writes)),
                fmt_num(n(|o| o.detail()?.buffer.as_ref()?.doublewrite_pages)),
                fmt_num(n(fig::checkpoints)),
            ]);
            bars[i].1.push(n(fig::tpmc).unwrap_or(0.0));
        }
        cats.push(format!("{w} wh, {c} clients"));
        for (mode, _) in MODES.iter().skip(1) {
            rel.push((
                mode,
                repeats::ratio(get(mode).as_ref(), base.as_ref(), fig::tpmc),
            ));
        }
        rel.push((
            ATOMIC_VS_NONE,
            repeats::ratio(get("atomic").as_ref(), get("none").as_ref(), fig::tpmc),
        ));
    }
    TpmcTable {
        markdown: table.markdown(),
        rel,
        cats,
        bars,
    }
}

/// The chart of tpmC per mode; returns its Markdown.
fn plot(ctx: &Ctx, cats: &[String], bars: &[(String, Vec<f64>)]) -> CliResult<String> {
    let (path, link) = ctx.plot("atomic-write-tpmc.svg");
    bar_chart(
        &path,
        &BarChart {
            title: "Seed 003: TPC-C by torn-write protection (median of repeats)",
            y_label: "tpmC",
            categories: cats,
            series: bars,
        },
    )?;
    Ok(format!("\n![tpmC per mode]({link})\n"))
}

/// The rows with what their ablations measured, each ablation's text appended to `body`.
fn with_ablations(
    body: &mut String,
    results: &[&CellResult],
    tpcc: &[&CellResult],
    rel: &[(&str, Option<Spread>)],
) -> Vec<Headline> {
    // The atomic-over-none row's ablations (the unprotected mode through the page cache,
    // its page writes split) and the cause they measure.
    let row: Vec<(&str, RowAblation)> = [
        ("page cache", ablations::pagecache_ablation(results)),
        ("split", ablations::split_ablation(results)),
    ]
    .into_iter()
    .filter_map(|(name, a)| Some((name, a?)))
    .collect();
    let cause = ablations::cause(
        &atomic_vs_none_band(),
        pooled(rel, ATOMIC_VS_NONE).as_ref(),
        &row.iter().map(|(_, a)| a).collect::<Vec<_>>(),
    );
    let mut headlines = headlines(tpcc, rel, &cause);
    for (name, a) in &row {
        let _ = writeln!(body, "\nAblation (atomic vs none, {name}): {}", a.text);
    }
    if !row.is_empty() && headlines[2].verdict.key() != "within" {
        let texts: Vec<String> = row
            .iter()
            .map(|(name, a)| format!("{name}: {}", a.text))
            .collect();
        headlines[2] = headlines[2]
            .clone()
            .ablation(format!("{}; {cause}", texts.join("; ")));
        // `cause` (in the row's reason too) already says what the ablations found.
        headlines[2].caused = true;
    }
    // Each row's ablation: its two modes again with the log on a power-loss-protected SSD.
    // (The atomic-over-none row's is above: the log's sync does not favour either.)
    for (h, mode) in headlines
        .iter_mut()
        .zip(["none", "atomic", "", "doublewrite"])
    {
        if mode.is_empty() {
            continue;
        }
        if let Some((r, text)) = ablations::ablation(results, mode) {
            let _ = writeln!(body, "\nAblation ({mode}): {text}");
            let within = seed_band().judge(Some(&r), "", "").key() == "within";
            *h = h.clone().ablated(
                "the log's sync (a power-loss-protected log)",
                Some(within),
                text,
            );
        }
    }
    // The copy-skipping row's ablation: its two modes with the data device's flushes cheap.
    if let Some((r, text)) = ablations::flush_ablation(results) {
        let _ = writeln!(body, "\nAblation (copy-skipping, cheap flushes): {text}");
        let within = copy_skip_band().judge(Some(&r), "", "").key() == "within";
        headlines[3] = headlines[3].clone().ablated(
            "the data device's flushes (power-loss protected: cheap)",
            Some(within),
            text,
        );
    }
    headlines
}

/// The median over the grid's combinations of each one's median (one combination at quick
/// scale: its spread is kept).
fn pooled(rel: &[(&str, Option<Spread>)], mode: &str) -> Option<Spread> {
    let v: Vec<Spread> = rel
        .iter()
        .filter(|(m, _)| *m == mode)
        .filter_map(|(_, s)| *s)
        .collect();
    match v.as_slice() {
        [one] => Some(*one),
        many => Spread::of(many.iter().map(|s| s.median).collect()),
    }
}

/// The band of row `id` in this seed's file.
fn band(id: &str) -> Band {
    seed_row(EXP, id)
        .band
        .unwrap_or_else(|| panic!("row '{id}' of atomic-write.toml has no band"))
}

/// The seed's band of the rows against InnoDB's double-write.
fn seed_band() -> Band {
    band("none-vs-dwb")
}

/// The copy-skipping row's band: pagoda's claim that skipping copies is not slower.
fn copy_skip_band() -> Band {
    band("copy-skip")
}

/// The seed's band of the atomic-over-none row.
fn atomic_vs_none_band() -> Band {
    band("atomic-vs-none")
}

/// The section's rows; `cause` is the atomic-over-none row's, as its ablations measured it.
fn headlines(tpcc: &[&CellResult], rel: &[(&str, Option<Spread>)], cause: &str) -> Vec<Headline> {
    let all = Group {
        runs: tpcc.to_vec(),
    };
    let off = all.off_regime(
        "a TPC-C cell",
        "page writes (the data device, or commits waiting for log space while a checkpoint writes pages)",
        page_write_bound,
    );
    let why = |g: &Group| {
        format!(
            "buffer hit ratio {:.3}, data device {:.0} % busy (medians)",
            g.num(|o| o.regime.as_ref()?.buffer_hit_ratio)
                .unwrap_or(0.0),
            g.num(fig::data_busy).unwrap_or(0.0) * 100.0
        )
    };
    let grid_figures = format!(
        "{cause} (grid: {} and {} data-device requests per 16 KiB written for none and \
         atomic, {})",
        requests_per_page(find(tpcc, &[("mode", "none")]).as_ref()),
        requests_per_page(find(tpcc, &[("mode", "atomic")]).as_ref()),
        why(&all)
    );
    vec![
        Headline::of_row(
            &seed_row(EXP, "none-vs-dwb"),
            pooled(rel, "none"),
            &format!(
                "the double-write copies cost less here than in the seed ({})",
                why(&all)
            ),
            "the double-write buffer costs more here than in the seed",
            Spread::times,
        )
        .regime(off.clone()),
        Headline::of_row(
            &seed_row(EXP, "atomic-vs-dwb"),
            pooled(rel, "atomic"),
            &format!(
                "the double-write copies cost less here than in the seed ({})",
                why(&all)
            ),
            "the double-write buffer costs more here than in the seed",
            Spread::times,
        )
        .regime(off.clone()),
        Headline::of_row(
            &seed_row(EXP, "atomic-vs-none"),
            pooled(rel, ATOMIC_VS_NONE),
            &grid_figures,
            &grid_figures,
            Spread::times,
        )
        .regime(off.clone()),
        Headline::of_row(
            &seed_row(EXP, "copy-skip"),
            pooled(rel, "doublewrite"),
            &format!(
                "skipping copies shrinks the data written ({} against {} 4 KiB pages per run) \
                 but not the flushes of the data device that order each write-back batch ({} \
                 against {} per run): both wait on about as many flushes",
                mode_num(tpcc, "doublewrite", fig::data_writes),
                mode_num(tpcc, "doublewrite-full", fig::data_writes),
                mode_num(tpcc, "doublewrite", fig::data_flushes),
                mode_num(tpcc, "doublewrite-full", fig::data_flushes),
            ),
            "",
            Spread::times,
        )
        .regime(off),
    ]
}

fn crash_table(results: &[&CellResult]) -> String {
    let mut body = String::from(
        "\nPower-cut crash test per mode (same emulated SSD with 16 KiB atomic writes; random \
         cut points in commits, checkpoints, page write-back and recovery; every transaction \
         checked all or nothing against an exact oracle; `doublewrite` recovers as \
         `doublewrite-full` does):\n\n",
    );
    let mut table = Table::new(&[
        "mode",
        "seed",
        "cycles",
        "cycles that lost the database to a torn page",
        "torn pages repaired",
        "lost commits",
        "partial transactions",
        "verdict",
    ]);
    for mode in CRASH {
        let Some(g) = find(results, &[("kind", "crash"), ("mode", mode)]) else {
            table.row(&[mode, "–", "–", "–", "–", "–", "–", "not run"]);
            continue;
        };
        let count = |v: u64| fmt_num(Some(v as f64));
        for r in &g.runs {
            let c = match Crash::of(&r.result) {
                Ok(c) => c,
                Err(e) => {
                    let mut row = vec![(*mode).to_string(), r.seed.to_string()];
                    row.extend(["–"; 5].map(str::to_string));
                    row.push(format!("result unreadable: {e}"));
                    table.row(&row);
                    continue;
                }
            };
            let lost = c.corruption_detected + c.undetected_torn;
            let bad = c.lost_commits + c.partial_transactions + c.uncommitted_visible;
            let verdict = if lost > 0 || bad > 0 {
                "loses pages: not an option"
            } else {
                "safe"
            };
            table.row(&[
                (*mode).to_string(),
                r.seed.to_string(),
                count(c.cycles),
                count(lost),
                count(c.torn_pages_repaired),
                count(c.lost_commits),
                count(c.partial_transactions),
                verdict.to_string(),
            ]);
        }
    }
    body.push_str(&table.markdown());
    body
}

/// The seed's regime: page writes on the critical path. Either the data device is saturated,
/// or commits spend most of the transaction time waiting at the commit lock while checkpoints
/// run at least once a second (with a log 1/8 of the buffer, a committer short of log space
/// waits there for the checkpoint that writes the pages; the phase also holds waits for the
/// committer ahead, which the profile does not split).
fn page_write_bound(r: &CellResult) -> bool {
    let o = r.outcome();
    let Some(reg) = &o.regime else {
        return false;
    };
    // The engine's counters span warm-up and run; the regime's window is the run alone.
    let window = reg.window_s.unwrap_or(0.0) + o.warmup_s().unwrap_or(0.0);
    let checkpoints = fig::checkpoints(o).unwrap_or(0.0);
    o.bottleneck() == "data"
        || (fig::commit_share(o).unwrap_or(0.0) >= 0.5
            && reg.commit_top_phase.as_deref() == Some("commit.lock")
            && window > 0.0
            && checkpoints / window >= 1.0)
}

/// A mode's median of `f` over the grid's first combination, as text.
fn mode_num(tpcc: &[&CellResult], mode: &str, f: Fig) -> String {
    let first = Group {
        runs: tpcc.iter().take(1).copied().collect(),
    };
    fmt_num(beside(tpcc, &first, "tpcc", mode).and_then(|g| g.num(f)))
}
