//! The engine part of a benchmark's result: open time, the DRAM buffer, and the flash cache
//! when one is configured, as a two-column table on stdout; the CPU line and the result JSON
//! that pagoda's and a peer's benchmark share.

use crate::error::{CliError, CliResult};
use crate::report::thousands;
use pagoda_device::units::format_size;
use pagoda_device::DeviceStats;
use pagoda_engine::stats::{CpuUsage, DbStats, FlashCacheStats};
use pagoda_workload::{LoadReport, RunReport};
use serde_json::Value;
use std::fmt::Write as _;

/// A load timed from process start (so the open, a log zero-filled at create included).
pub(super) struct LoadTiming {
    /// The first `Db::open`, whole (files created and recovery), in ms.
    pub(super) open_ms: f64,
    /// Process start to the load's last acknowledged commit.
    pub(super) acked_s: f64,
    /// Process start to the load's data durable on disk (`Store::make_durable` returned).
    pub(super) durable_s: f64,
    /// `Store::make_durable` alone.
    pub(super) make_durable_s: f64,
}

/// The line printed when a load ends.
pub(super) fn load_line(l: &LoadReport, t: &LoadTiming) -> String {
    format!(
        "load timed from process start: last commit acknowledged at {:.2} s, durable on disk at {:.2} s (make durable {:.2} s); {} rows, {} rows/s to durable",
        t.acked_s,
        t.durable_s,
        t.make_durable_s,
        thousands(l.rows),
        thousands((l.rows as f64 / t.durable_s.max(1e-9)) as u64)
    )
}

/// The load's JSON (`load` in the bench result).
pub(super) fn load_json(l: &LoadReport, t: &LoadTiming) -> Value {
    serde_json::json!({
        "rows": l.rows,
        "duration_s": l.duration_s,
        "rows_per_s": l.rows_per_s,
        "db_open_ms": t.open_ms,
        "acked_from_process_start_s": t.acked_s,
        "durable_from_process_start_s": t.durable_s,
        "make_durable_s": t.make_durable_s,
    })
}

/// The load's rows of the result table (from [`load_json`]).
pub(super) fn render_load(v: &Value) -> String {
    let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
    format!(
        "  first Db::open, whole           {:.1} ms\n  load, process start to acked    {:.2} s\n  load, process start to durable  {:.2} s\n",
        f("db_open_ms"),
        f("acked_from_process_start_s"),
        f("durable_from_process_start_s")
    )
}

/// The CPU line under a benchmark's result.
pub(super) fn cpu_line(c: &CpuUsage) -> String {
    format!(
        "cpu: utilisation {:.1}% (user {:.2} s + sys {:.2} s over {:.2} s wall x {} cores)",
        100.0 * c.utilisation,
        c.user_s,
        c.sys_s,
        c.wall_s,
        c.cores
    )
}

/// The result JSON: the run report, with the session's configuration merged into its `config`
/// (the workload's keys win) and the engine-specific `keys` set. `load` is always there, null
/// when this process did not load or the engine's load is not timed ([`load_json`]), so every
/// engine's result has the same keys.
pub(super) fn report_json(
    report: &RunReport,
    session_config: &Value,
    keys: Vec<(&str, Value)>,
) -> CliResult<Value> {
    let mut v = serde_json::to_value(report)
        .map_err(|e| CliError::Other(format!("cannot encode the report: {e}")))?;
    if let Some(obj) = v.as_object_mut() {
        let mut config = session_config.clone();
        if let (Some(c), Some(w)) = (config.as_object_mut(), report.config.as_object()) {
            c.extend(w.iter().map(|(k, val)| (k.clone(), val.clone())));
        }
        obj.insert("config".to_string(), config);
        obj.insert("load".to_string(), Value::Null);
        for (k, val) in keys {
            obj.insert(k.to_string(), val);
        }
    }
    Ok(v)
}

/// Renders the engine table.
pub(super) fn render(stats: &DbStats, flash_device: Option<&DeviceStats>) -> String {
    let mut rows: Vec<(&str, String)> = Vec::new();
    let r = &stats.recovery;
    let mut open = format!("{:.1} ms", r.duration_ms);
    if r.records_replayed > 0 {
        let _ = write!(
            open,
            " ({} commit records replayed)",
            thousands(r.records_replayed)
        );
    }
    rows.push(("open time (recovery)", open));
    let b = &stats.buffer;
    rows.push((
        "DRAM buffer hit ratio",
        format!(
            "{:.4} ({} hits, {} misses)",
            b.hit_ratio,
            thousands(b.hits),
            thousands(b.misses)
        ),
    ));
    if let Some(f) = &stats.flash_cache {
        flash_rows(&mut rows, f, flash_device);
    }
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::from("engine:\n");
    for (k, v) in rows {
        let _ = writeln!(out, "  {k:<width$}  {v}");
    }
    out
}

fn flash_rows(rows: &mut Vec<(&str, String)>, f: &FlashCacheStats, dev: Option<&DeviceStats>) {
    rows.push((
        "flash cache",
        format!(
            "{}, {} pages, {} slots",
            f.policy,
            f.pages,
            thousands(f.slots)
        ),
    ));
    rows.push((
        "flash hit ratio",
        format!(
            "{:.4} of DRAM misses ({} hits, {} misses)",
            f.hit_ratio,
            thousands(f.hits),
            thousands(f.misses)
        ),
    ));
    rows.push((
        "flash ring writes",
        format!(
            "{} pages, {}, {:.1}% sequential",
            thousands(f.ring_page_writes),
            format_size(f.ring_bytes),
            100.0 * f.sequential_fraction
        ),
    ));
    rows.push(("flash write-backs", thousands(f.write_backs)));
    rows.push(("GSC re-appends", thousands(f.gsc_reappends)));
    rows.push((
        "invalid slots",
        format!(
            "{:.1}% ({} valid, {} dirty)",
            100.0 * f.invalid_fraction,
            thousands(f.valid_slots),
            thousands(f.dirty_slots)
        ),
    ));
    rows.push((
        "dir checkpoints",
        format!(
            "{}, {}",
            thousands(f.dir_checkpoints),
            format_size(f.dir_checkpoint_bytes)
        ),
    ));
    if f.corrupt_slots > 0 {
        rows.push(("corrupt slots", thousands(f.corrupt_slots)));
    }
    let start = if f.warm_start {
        format!(
            "warm: rebuilt in {:.1} ms ({} segments, {} pages)",
            f.rebuild_ms,
            thousands(f.rebuild_segments),
            thousands(f.rebuild_pages)
        )
    } else {
        format!(
            "cold: {}; rebuild {:.1} ms",
            f.start_note.as_deref().unwrap_or("the cache was empty"),
            f.rebuild_ms
        )
    };
    rows.push(("flash start", start));
    if let Some(d) = dev {
        rows.push((
            "flash device",
            format!(
                "{} host writes, {} reads (4 KiB), WAF {:.2}",
                thousands(d.host_write_pages),
                thousands(d.host_read_pages),
                d.waf
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flash_lines_only_with_a_flash_cache() {
        let mut s = DbStats::default();
        s.recovery.duration_ms = 12.5;
        let t = render(&s, None);
        assert!(
            t.lines()
                .any(|l| l.contains("open time (recovery)") && l.ends_with(" 12.5 ms")),
            "{t}"
        );
        assert!(!t.contains("flash"), "{t}");
        s.flash_cache = Some(FlashCacheStats {
            policy: "face-gsc".to_string(),
            pages: "dirty".to_string(),
            hit_ratio: 0.25,
            warm_start: true,
            rebuild_ms: 3.0,
            ..FlashCacheStats::default()
        });
        let t = render(&s, Some(&DeviceStats::default()));
        for want in [
            "flash hit ratio",
            "0.2500",
            "face-gsc, dirty pages",
            "GSC re-appends",
            "warm: rebuilt in 3.0 ms",
            "flash device",
        ] {
            assert!(t.contains(want), "{want} in {t}");
        }
        // Values start in one column.
        let starts: Vec<usize> = t
            .lines()
            .skip(1)
            .map(|l| {
                let key_end = 2 + l[2..].find("  ").unwrap();
                key_end + l[key_end..].len() - l[key_end..].trim_start().len()
            })
            .collect();
        assert!(starts.windows(2).all(|w| w[0] == w[1]), "{t}");
    }
}
