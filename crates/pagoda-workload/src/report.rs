//! Run results: the serializable [`RunReport`] (`pagoda bench --json`) and its text renderings —
//! a plain table, YCSB's format, a tpcc-mysql-style summary and LinkBench-style lines.

use std::fmt::Write as _;

use serde::Serialize;

use crate::driver::{Latency, LoadReport, Measurement};
use crate::store::Store;

/// Overall latency in microseconds: the bench JSON's `latency_us` key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// One row of the per-operation table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpReport {
    /// Operation name (`READ`, `NewOrder`, `ADD_LINK`, ...).
    pub name: String,
    /// Completed operations (ok + not found + rolled back).
    pub count: u64,
    /// Ended normally.
    pub ok: u64,
    /// Key/row/node absent.
    pub not_found: u64,
    /// Rolled back on purpose (TPC-C New-Order), counted as completed.
    pub rolled_back: u64,
    /// Failed.
    pub errors: u64,
    /// Conflicts retried.
    pub conflicts: u64,
    /// Completed operations per second.
    pub throughput_ops_s: f64,
    /// Latency of completed operations (retries included), microseconds.
    pub latency_us: Latency,
}

/// The result of a measured run; serializes to the bench JSON's keys. `pagoda reproduce` reads
/// saved results by these keys, so renaming one breaks the reading of older results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    /// `bench ycsb`, `bench tpcc` or `bench linkbench`.
    pub command: String,
    /// Every option in force.
    pub config: serde_json::Value,
    /// Completed measured operations.
    pub ops: u64,
    /// Measured seconds (warm-up/ramp-up excluded).
    pub duration_s: f64,
    /// `ops / duration_s`.
    pub throughput_ops_s: f64,
    /// Overall latency.
    pub latency_us: LatencySummary,
    /// TPC-C only: New-Orders (rolled back included) per measured minute.
    #[serde(rename = "tpmC", skip_serializing_if = "Option::is_none")]
    pub tpmc: Option<f64>,
    /// Failed operations.
    pub errors: u64,
    /// Conflicts retried.
    pub conflicts: u64,
    /// Operations run during the warm-up and not counted.
    pub warmup_ops: u64,
    /// First error message, if any operation failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Per-operation table, in the workload's order.
    pub operations: Vec<OpReport>,
    /// `store.stats_json()` after the run.
    pub engine: serde_json::Value,
}

impl RunReport {
    /// Builds a report from a measurement.
    pub fn new(
        command: &str,
        config: serde_json::Value,
        m: &Measurement,
        store: &dyn Store,
    ) -> Self {
        let secs = m.duration.as_secs_f64();
        let per_s = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        let overall = m.overall_latency();
        RunReport {
            command: command.to_string(),
            config,
            ops: m.total_ops(),
            duration_s: secs,
            throughput_ops_s: m.throughput(),
            latency_us: LatencySummary {
                p50: overall.p50,
                p95: overall.p95,
                p99: overall.p99,
                max: overall.max,
            },
            tpmc: None,
            errors: m.total_errors(),
            conflicts: m.total_conflicts(),
            warmup_ops: m.warmup_ops,
            first_error: m.first_error.clone(),
            operations: m
                .ops
                .iter()
                .map(|o| OpReport {
                    name: o.name.to_string(),
                    count: o.count,
                    ok: o.ok,
                    not_found: o.not_found,
                    rolled_back: o.rolled_back,
                    errors: o.errors,
                    conflicts: o.conflicts,
                    throughput_ops_s: per_s(o.count),
                    latency_us: o.latency(),
                })
                .collect(),
            engine: store.stats_json(),
        }
    }

    /// The row of operation `name`.
    pub fn op(&self, name: &str) -> Option<&OpReport> {
        self.operations.iter().find(|o| o.name == name)
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

/// A plain table: a header line, then one line per operation with counts and latencies.
pub fn render_text(r: &RunReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: {} ops in {:.2} s = {:.1} ops/s; p50 {:.1} us, p95 {:.1} us, p99 {:.1} us, max {:.1} us",
        r.command,
        r.ops,
        r.duration_s,
        r.throughput_ops_s,
        r.latency_us.p50,
        r.latency_us.p95,
        r.latency_us.p99,
        r.latency_us.max
    );
    if let Some(t) = r.tpmc {
        let _ = writeln!(s, "tpmC: {t:.1}");
    }
    if r.errors > 0 || r.conflicts > 0 {
        let _ = writeln!(
            s,
            "errors: {}, conflicts retried: {}",
            r.errors, r.conflicts
        );
    }
    if let Some(e) = &r.first_error {
        let _ = writeln!(s, "first error: {e}");
    }
    let _ = writeln!(
        s,
        "{:<18} {:>10} {:>10} {:>8} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "op",
        "count",
        "ops/s",
        "errors",
        "confl",
        "mean_us",
        "p50_us",
        "p95_us",
        "p99_us",
        "max_us"
    );
    for o in &r.operations {
        let l = &o.latency_us;
        let _ = writeln!(
            s,
            "{:<18} {:>10} {:>10.1} {:>8} {:>8} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
            o.name,
            o.count,
            o.throughput_ops_s,
            o.errors,
            o.conflicts,
            l.mean,
            l.p50,
            l.p95,
            l.p99,
            l.max
        );
    }
    s
}

/// YCSB's text output, so existing parsers read it. Latencies are whole microseconds as YCSB
/// prints them (the average keeps decimals).
pub fn render_ycsb(r: &RunReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "[OVERALL], RunTime(ms), {}",
        (r.duration_s * 1000.0).round()
    );
    let _ = writeln!(s, "[OVERALL], Throughput(ops/sec), {}", r.throughput_ops_s);
    for o in r.operations.iter().filter(|o| o.count + o.errors > 0) {
        let n = &o.name;
        let l = &o.latency_us;
        let _ = writeln!(s, "[{n}], Operations, {}", o.count);
        let _ = writeln!(s, "[{n}], AverageLatency(us), {}", l.mean);
        let _ = writeln!(s, "[{n}], MinLatency(us), {}", l.min.round());
        let _ = writeln!(s, "[{n}], MaxLatency(us), {}", l.max.round());
        let _ = writeln!(s, "[{n}], 95thPercentileLatency(us), {}", l.p95.round());
        let _ = writeln!(s, "[{n}], 99thPercentileLatency(us), {}", l.p99.round());
        let _ = writeln!(s, "[{n}], Return=OK, {}", o.ok);
        if o.not_found > 0 {
            let _ = writeln!(s, "[{n}], Return=NOT_FOUND, {}", o.not_found);
        }
        if o.errors > 0 {
            let _ = writeln!(s, "[{n}], Return=ERROR, {}", o.errors);
        }
    }
    s
}

/// A tpcc-mysql-style summary: per-transaction counts and latencies, then the TpmC line.
pub fn render_tpcc(r: &RunReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "<Raw Results>");
    for (i, o) in r.operations.iter().enumerate() {
        let _ = writeln!(
            s,
            "  [{i}] sc:{} lt:0  rt:{}  fl:{}  avg_rt: {:.1} (us)  95th: {:.1}  99th: {:.1}  max_rt: {:.1}  {}",
            o.count, o.conflicts, o.errors, o.latency_us.mean, o.latency_us.p95,
            o.latency_us.p99, o.latency_us.max, o.name
        );
    }
    let total: u64 = r.operations.iter().map(|o| o.count).sum();
    let _ = writeln!(s, " in {:.0} sec.", r.duration_s);
    let _ = writeln!(s, "<Constraint Check> (all must be [OK])");
    let _ = writeln!(s, " [transaction percentage]");
    for o in &r.operations {
        let pct = if total > 0 {
            100.0 * o.count as f64 / total as f64
        } else {
            0.0
        };
        let _ = writeln!(s, "   {:<13} {pct:6.2}%", format!("{}:", o.name));
    }
    if let Some(no) = r.op("NewOrder") {
        let rb = if no.count > 0 {
            100.0 * no.rolled_back as f64 / no.count as f64
        } else {
            0.0
        };
        let _ = writeln!(s, " [New-Order rolled back: {rb:.2}% (expect ~1%)]");
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "<TpmC>");
    let _ = writeln!(s, "                 {:.3} TpmC", r.tpmc.unwrap_or(0.0));
    s
}

/// LinkBench-style per-operation lines (count, p25/p50/p75/p95/p99/max/mean in microseconds)
/// and the requests/second of the phase.
pub fn render_linkbench(r: &RunReport) -> String {
    let mut s = String::new();
    for o in r.operations.iter().filter(|o| o.count > 0) {
        let l = &o.latency_us;
        let _ = writeln!(
            s,
            "{} count = {}  p25 = {:.0}us  p50 = {:.0}us  p75 = {:.0}us  p95 = {:.0}us  p99 = {:.0}us  max = {:.0}us  mean = {:.3}us",
            o.name, o.count, l.p25, l.p50, l.p75, l.p95, l.p99, l.max, l.mean
        );
    }
    let _ = writeln!(
        s,
        "REQUEST PHASE COMPLETED. {} requests done in {:.0} seconds. Requests/second = {:.0}",
        r.ops, r.duration_s, r.throughput_ops_s
    );
    s
}

/// One line for a finished load phase.
pub fn render_load(r: &LoadReport) -> String {
    format!(
        "load {}: {} rows in {:.2} s = {:.0} rows/s{}\n",
        r.workload,
        r.rows,
        r.duration_s,
        r.rows_per_s,
        if r.conflicts > 0 {
            format!(" ({} conflicts retried)", r.conflicts)
        } else {
            String::new()
        }
    )
}
