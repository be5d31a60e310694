//! The regime tables of the report: the seed's setting beside ours, as the ratios that decide
//! an effect, and per cell what bounded it (each device's busy fraction, the CPU, the buffer
//! hit ratio), from the regime every `pagoda bench` result reports.

use super::cell::CellResult;
use super::outcome::Regime;
use super::report::{fmt_frac, median};
use crate::report::Table;
use std::collections::BTreeMap;

/// `| factor | seed | ours |` rows, with a note per row.
pub(crate) fn settings(rows: &[(&str, &str, String)]) -> String {
    let mut t = Table::new(&["setting", "seed", "ours"]);
    for (what, seed, ours) in rows {
        t.row(&[*what, *seed, ours.as_str()]);
    }
    t.markdown()
}

/// Per cell (medians over its repeats): bottleneck of each repeat, busy fraction of each
/// device, CPU utilisation, buffer hit ratio.
pub(crate) fn cells(results: &[&CellResult]) -> String {
    let mut by_id: BTreeMap<&str, Vec<&CellResult>> = BTreeMap::new();
    for r in results.iter().filter(|r| r.usable()) {
        if r.outcome().regime.is_some() {
            by_id.entry(r.cell.id.as_str()).or_default().push(r);
        }
    }
    if by_id.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\nRegime of each cell over its measured window (medians of the repeats; busy = share of \
         the window with a request in service; CPU over all cores, the emulator's last-100-µs \
         yields included):\n\n",
    );
    let mut t = Table::new(&[
        "cell",
        "bottleneck per repeat",
        "data busy",
        "log busy",
        "flash-cache busy",
        "CPU",
        "buffer hit",
    ]);
    for (id, runs) in by_id {
        let med = |f: &dyn Fn(&Regime) -> Option<f64>| {
            let mut v: Vec<f64> = runs
                .iter()
                .filter_map(|r| f(r.outcome().regime.as_ref()?))
                .collect();
            median(&mut v)
        };
        let busy = |role: &'static str| move |g: &Regime| *g.busy.get(role)?;
        let pct = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{:.0} %", v * 100.0));
        let bottlenecks: Vec<&str> = runs.iter().map(|r| r.outcome().bottleneck()).collect();
        t.row(&[
            format!("`{id}`"),
            bottlenecks.join(", "),
            pct(med(&busy("data"))),
            pct(med(&busy("log"))),
            pct(med(&busy("flash_cache"))),
            pct(med(&|g| g.cpu_utilisation)),
            fmt_frac(med(&|g| g.buffer_hit_ratio)),
        ]);
    }
    out.push_str(&t.markdown());
    out
}
