//! The repeats of `bench compare` reduced to medians with their spread, the verdict of each
//! row, and the files written from them (JSON, CSV, SVG, and the Markdown of `--publish`).

use super::{io, Cell, CompareArgs};
use crate::error::CliResult;
use crate::plot::{bar_chart, BarChart};
use crate::report::{write_json, Table};
use crate::spread::Spread;
use serde_json::json;
use std::fmt::Write as _;
use std::path::PathBuf;

/// One engine's ops/s in one phase, over the repeats.
fn engine_spread(cells: &[Cell], phase: &str, engine: &str) -> Option<Spread> {
    let v: Vec<f64> = cells
        .iter()
        .filter(|c| c.phase == phase && c.engine == engine)
        .map(|c| c.ops_per_s)
        .collect();
    Spread::of(v)
}

/// pagoda over the best peer of the same repeat, one ratio per repeat (a repeat pairs runs
/// made minutes apart, so slow drift of the machine cancels out).
pub(super) fn ratio(cells: &[Cell], phase: &str) -> Option<Spread> {
    Spread::of(super::targets::ratios(
        cells,
        phase,
        super::targets::Against::BestPeer,
        0.0,
    ))
}

pub(super) fn render(cells: &[Cell], labels: &[String], names: &[&str]) -> String {
    let mut header = vec!["ops/s (median, min–max)".to_string()];
    header.extend(names.iter().map(ToString::to_string));
    header.push("pagoda/best peer".to_string());
    header.push("verdict".to_string());
    let mut t = Table::new(&header);
    for l in labels {
        let mut row = vec![l.clone()];
        for n in names {
            row.push(engine_spread(cells, l, n).map_or_else(String::new, |s| s.with_range(0, "")));
        }
        let r = ratio(cells, l);
        row.push(r.map_or_else(|| "-".to_string(), |r| r.with_range(2, "x")));
        row.push(r.map_or("-", |r| r.verdict()).to_string());
        t.row(&row);
    }
    t.render()
}

/// The README block `--readme` replaces with the targets table.
pub(super) const README_BLOCK: &str = "compare targets";

/// What `write` needs besides the cells.
pub(super) struct Outputs<'a> {
    pub(super) labels: &'a [String],
    pub(super) names: &'a [&'a str],
    pub(super) buffer: u64,
    pub(super) engines: serde_json::Value,
    pub(super) ceiling: [f64; 2],
    pub(super) table: &'a str,
    /// `provenance::machine()` taken when the run started (its load average is the start's).
    pub(super) machine: serde_json::Value,
}

/// Writes compare.json, compare.csv, compare.svg in `--out`, and the Markdown of `--publish`.
/// Returns the paths written.
pub(super) fn write(a: &CompareArgs, cells: &[Cell], o: &Outputs<'_>) -> CliResult<Vec<PathBuf>> {
    let (labels, names) = (o.labels, o.names);
    let summary: serde_json::Map<String, serde_json::Value> = labels
        .iter()
        .map(|l| {
            let per_engine: serde_json::Map<String, serde_json::Value> = names
                .iter()
                .map(|n| (n.to_string(), json!(engine_spread(cells, l, n))))
                .collect();
            let r = ratio(cells, l);
            let v = json!({ "ops_per_s": per_engine, "pagoda_over_best_peer": r,
                "verdict": r.map(|r| r.verdict()) });
            (l.clone(), v)
        })
        .collect();
    let machine = &o.machine;
    let v = json!({
        "command": "bench compare",
        "argv": std::env::args().skip(1).collect::<Vec<_>>(),
        "date_utc": humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        "machine": machine,
        "config": { "engines": names, "threads": a.threads, "read_threads": a.read_threads,
            "records": a.records, "key_bytes": 16, "value_bytes": 1000,
            "duration": a.duration, "warmup": a.warmup, "buffer_bytes": o.buffer,
            "repeats": a.repeats, "order": "rotated by one engine each repeat",
            "tpcc_warehouses": a.tpcc_warehouses, "tpcc_threads": a.tpcc_threads,
            "lmdb_map_size": a.lmdb_map_size, "seed": a.seed, "commit": "sync" },
        "cells": cells,
        "summary": summary,
        "device_ceiling_ops_per_s": { "before": o.ceiling[0], "after": o.ceiling[1],
            "what": "one thread, 4 KiB write + fdatasync each, O_DIRECT where allowed" },
        "engines": o.engines,
    });
    let json_path = a.out.join("compare.json");
    write_json(&json_path, &v)?;
    let mut csv = String::from(
        "repeat,position,engine,phase,threads,ops_per_s,p50_us,p99_us,ops,conflicts,errors\n",
    );
    let opt = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.1}"));
    for c in cells {
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{:.1},{},{},{},{},{}",
            c.repeat,
            c.position,
            c.engine,
            c.phase,
            c.threads,
            c.ops_per_s,
            opt(c.p50_us),
            opt(c.p99_us),
            c.ops,
            c.conflicts,
            c.errors
        );
    }
    let csv_path = a.out.join("compare.csv");
    std::fs::write(&csv_path, csv).map_err(|e| io(&csv_path, e))?;
    let svg_path = a.out.join("compare.svg");
    plot(&svg_path, cells, labels, names)?;
    let mut written = vec![json_path, csv_path, svg_path.clone()];
    if let Some(to) = &a.publish {
        let md = markdown(a, cells, o, &svg_path)?;
        std::fs::write(to, md).map_err(|e| io(to, e))?;
        written.push(to.clone());
        if let Some(readme) = &a.readme {
            let link = crate::readme::link(readme, to);
            let block = format!(
                "Generated by `pagoda bench compare` ({} records, {} repeats; the full table \
                 in [{link}]({link})):\n\n{}",
                a.records,
                a.repeats,
                super::targets::table(cells, labels, o.ceiling)
            );
            crate::readme::replace_block(readme, README_BLOCK, &block)?;
            written.push(readme.clone());
        }
    }
    Ok(written)
}

/// Reads run orders of magnitude faster than durable updates: each phase is drawn relative to
/// its fastest engine (medians), so every group is readable (the table has ops/s).
fn plot(
    path: &std::path::Path,
    cells: &[Cell],
    labels: &[String],
    names: &[&str],
) -> CliResult<()> {
    let med = |l: &str, n: &str| engine_spread(cells, l, n).map_or(0.0, |s| s.median);
    let series: Vec<(String, Vec<f64>)> = names
        .iter()
        .map(|n| {
            let vals = labels
                .iter()
                .map(|l| {
                    let best = names.iter().map(|m| med(l, m)).fold(0.0, f64::max);
                    if best > 0.0 {
                        med(l, n) / best
                    } else {
                        0.0
                    }
                })
                .collect();
            (n.to_string(), vals)
        })
        .collect();
    bar_chart(
        path,
        &BarChart {
            title: "pagoda and peers: median ops/s relative to the fastest engine per phase",
            y_label: "ops/s / fastest",
            categories: labels,
            series: &series,
        },
    )
}

/// The published result: provenance first, then the table, then the plot (copied beside it).
fn markdown(
    a: &CompareArgs,
    cells: &[Cell],
    o: &Outputs<'_>,
    svg: &std::path::Path,
) -> CliResult<String> {
    let machine = &o.machine;
    let to = a.publish.as_deref().unwrap_or(std::path::Path::new("."));
    if let Some(parent) = to.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
    }
    let mut md = String::from("# pagoda and its peers\n\n");
    md.push_str(&crate::provenance::provenance(machine));
    let _ = writeln!(
        md,
        "{} records of 16-byte keys and 1000-byte values; cells of {} after {} of warm-up; \
         cache {} MiB for every engine; {} repeats, the engine order rotated by one each \
         repeat; seed {}. Durable cells commit with each engine's sync (see `docs/peers.md` for \
         every engine's settings). The load is each engine's own bulk path, timed from opening \
         the empty database to the last commit (`load`) and to data durable in its files \
         (`load durable`: each engine's checkpoint, flush or sync). TPC-C: {} warehouse(s), \
         the same driver and mix for every engine, tpmC.\n",
        a.records,
        a.duration,
        a.warmup,
        o.buffer >> 20,
        a.repeats,
        a.seed,
        a.tpcc_warehouses,
    );
    md.push_str(
        "Each figure is the median over the repeats with its min–max. The ratio is pagoda over \
         the best peer of the same repeat; a row is **ahead** only when the lowest of those \
         ratios is above 1.0, **behind** only when the highest is below 1.0, **even** \
         otherwise.\n\n",
    );
    md.push_str(o.table);
    let _ = writeln!(
        md,
        "\nThis disk's ceiling for a 1-thread durable commit (4 KiB write + fdatasync): \
         {:.0}/s before the engines ran, {:.0}/s after.\n",
        o.ceiling[0], o.ceiling[1]
    );
    md.push_str(
        "## Targets\n\npagoda's targets against its peers in this run; a target is met only \
         when every repeat meets it. For a missed one, pagoda's own profile in that cell (the \
         repeat with the median ops/s, warm-up included): CPU of the whole process, the share \
         of transaction time per phase, the commit step with the most time, commits per log \
         sync.\n\n",
    );
    md.push_str(&super::targets::table(cells, o.labels, o.ceiling));
    md.push('\n');
    let stem = to.file_stem().and_then(|s| s.to_str()).unwrap_or("compare");
    let plot = format!("{stem}.svg");
    let dest = to.with_file_name(&plot);
    std::fs::copy(svg, &dest).map_err(|e| io(&dest, e))?;
    let _ = writeln!(md, "![median ops/s relative to the fastest engine]({plot})");
    Ok(md)
}
