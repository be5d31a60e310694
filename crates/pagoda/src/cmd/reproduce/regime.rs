//! The regime tables of the report: the seed's setting beside ours, as the ratios that decide
//! an effect, and per cell what bounded it (each device's busy fraction, the CPU, the buffer
//! hit ratio), from the `regime` object every `pagoda bench` result carries.

use super::cell::CellResult;
use super::report::{fmt_frac, median};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// `| factor | seed | ours |` rows, with a note per row.
pub(crate) fn settings(rows: &[(&str, &str, String)]) -> String {
    let mut out = String::from("| setting | seed | ours |\n|---|---|---|\n");
    for (what, seed, ours) in rows {
        let _ = writeln!(out, "| {what} | {seed} | {ours} |");
    }
    out
}

/// Per cell (medians over its repeats): bottleneck of each repeat, busy fraction of each
/// device, CPU utilisation, buffer hit ratio.
pub(crate) fn cells(results: &[&CellResult]) -> String {
    let mut by_id: BTreeMap<&str, Vec<&CellResult>> = BTreeMap::new();
    for r in results.iter().filter(|r| r.usable()) {
        if r.result.get("regime").is_some() {
            by_id.entry(r.cell.id.as_str()).or_default().push(r);
        }
    }
    if by_id.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\nRegime of each cell over its measured window (medians of the repeats; busy = share of \
         the window with a request in service; CPU over all cores, the emulator's last-100-µs \
         yields included):\n\n\
         | cell | bottleneck per repeat | data busy | log busy | flash-cache busy | CPU | buffer hit |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for (id, runs) in by_id {
        let med = |path: &[&str]| {
            let mut v: Vec<f64> = runs
                .iter()
                .filter_map(|r| {
                    path.iter()
                        .try_fold(&r.result["regime"], |v, k| v.get(*k))
                        .and_then(serde_json::Value::as_f64)
                })
                .collect();
            median(&mut v)
        };
        let pct = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{:.0} %", v * 100.0));
        let bottlenecks: Vec<&str> = runs
            .iter()
            .map(|r| r.result["regime"]["bottleneck"].as_str().unwrap_or("?"))
            .collect();
        let _ = writeln!(
            out,
            "| `{id}` | {} | {} | {} | {} | {} | {} |",
            bottlenecks.join(", "),
            pct(med(&["busy", "data"])),
            pct(med(&["busy", "log"])),
            pct(med(&["busy", "flash_cache"])),
            pct(med(&["cpu_utilisation"])),
            fmt_frac(med(&["buffer_hit_ratio"])),
        );
    }
    out
}
