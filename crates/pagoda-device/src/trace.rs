//! I/O traces: capture any device's requests to a file; parse and replay them.
//!
//! # The pagoda trace format, version 1
//!
//! Plain text, one request per line, fields separated by spaces or tabs:
//!
//! ```text
//! # pagoda-trace v1
//! # time_us op sector sectors flags stream
//! 0 W 128 4 - 0
//! 15 R 0 1 - 0
//! 22 W 64 4 A 1
//! 30 F 0 0 - 0
//! 41 T 256 16 - 0
//! ```
//!
//! * The first non-blank line must be the header `# pagoda-trace v1`.
//! * Other lines starting with `#` are comments; blank lines are ignored.
//! * `time_us`: microseconds since the start of the capture (non-decreasing is not required).
//! * `op`: `R` read, `W` write, `F` flush, `T` trim.
//! * `sector`, `sectors`: 4 KiB sectors (flush: `0 0`); reads, writes and trims need
//!   `sectors ≥ 1`.
//! * `flags`: `-`, or `A` for an atomic write (writes only).
//! * `stream`: write stream id (0 for other ops).
//!
//! # MSR Cambridge traces
//!
//! [`TraceReader`] also reads the CSV of the MSR Cambridge block traces:
//! `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime` with `Timestamp` in Windows
//! 100 ns ticks, `Type` `Read` or `Write`, and `Offset`/`Size` in bytes. Each request becomes
//! the 4 KiB sectors it touches, time relative to the first line. The format is detected from
//! the first non-blank line.

use crate::error::{DeviceError, Result};
use crate::{BlockDevice, DeviceRef, WriteHints, SECTOR_SIZE};
use parking_lot::Mutex;
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

/// The header line of the format.
pub const TRACE_HEADER: &str = "# pagoda-trace v1";

/// Kind of a traced request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceOp {
    /// `R`
    Read,
    /// `W`
    Write,
    /// `F`
    Flush,
    /// `T`
    Trim,
}

impl TraceOp {
    /// The one-letter code.
    pub fn code(self) -> char {
        match self {
            TraceOp::Read => 'R',
            TraceOp::Write => 'W',
            TraceOp::Flush => 'F',
            TraceOp::Trim => 'T',
        }
    }
}

/// One request of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TraceRecord {
    /// Microseconds since the start of the trace.
    pub time_us: u64,
    /// Request kind.
    pub op: TraceOp,
    /// First 4 KiB sector (0 for a flush).
    pub sector: u64,
    /// Sector count (0 for a flush).
    pub sectors: u64,
    /// Atomic write.
    pub atomic: bool,
    /// Write stream.
    pub stream: u16,
}

impl std::fmt::Display for TraceRecord {
    /// Formats the record as one line of the v1 format (without the newline).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {} {} {} {}",
            self.time_us,
            self.op.code(),
            self.sector,
            self.sectors,
            if self.atomic { 'A' } else { '-' },
            self.stream
        )
    }
}

/// Writes records as a complete v1 trace (header included).
pub fn write_trace(mut out: impl Write, records: &[TraceRecord]) -> std::io::Result<()> {
    writeln!(out, "{TRACE_HEADER}")?;
    writeln!(out, "# time_us op sector sectors flags stream")?;
    for r in records {
        writeln!(out, "{r}")?;
    }
    out.flush()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Unknown,
    Pagoda,
    Msr { first_ticks: Option<u64> },
}

/// Streaming parser: an iterator of records over any reader, for traces too large to hold.
/// Stops after the first error.
#[derive(Debug)]
pub struct TraceReader<R> {
    reader: R,
    path: String,
    line_no: usize,
    format: Format,
    line: String,
    failed: bool,
}

impl<R: BufRead> TraceReader<R> {
    /// Reads a trace from `reader`; `path` only names it in errors.
    pub fn new(reader: R, path: impl Into<String>) -> Self {
        Self {
            reader,
            path: path.into(),
            line_no: 0,
            format: Format::Unknown,
            line: String::new(),
            failed: false,
        }
    }

    fn err(&self, msg: impl Into<String>) -> DeviceError {
        DeviceError::Trace {
            path: self.path.clone(),
            line: self.line_no,
            msg: msg.into(),
        }
    }

    fn next_record(&mut self) -> Result<Option<TraceRecord>> {
        loop {
            self.line.clear();
            let n = self.reader.read_line(&mut self.line).map_err(|e| {
                let msg = if e.kind() == std::io::ErrorKind::InvalidData {
                    "the file is not UTF-8 text; give a pagoda trace or an MSR CSV".to_string()
                } else {
                    format!("cannot read: {e}")
                };
                DeviceError::Trace {
                    path: self.path.clone(),
                    line: self.line_no + 1,
                    msg,
                }
            })?;
            if n == 0 {
                if self.format == Format::Unknown {
                    return Err(self.err(format!(
                        "empty trace: expected the header '{TRACE_HEADER}' or an MSR CSV line"
                    )));
                }
                return Ok(None);
            }
            self.line_no += 1;
            let text = self.line.trim().to_string();
            if text.is_empty() {
                continue;
            }
            match self.format {
                Format::Unknown => {
                    if let Some(v) = text.strip_prefix("# pagoda-trace ") {
                        if v.trim() != "v1" {
                            return Err(self.err(format!(
                                "unsupported trace version '{}': this pagoda reads v1",
                                v.trim()
                            )));
                        }
                        self.format = Format::Pagoda;
                        continue;
                    }
                    if text.contains(',') {
                        self.format = Format::Msr { first_ticks: None };
                        // A header row of column names is allowed.
                        if text.to_ascii_lowercase().starts_with("timestamp") {
                            continue;
                        }
                        return self.parse_msr(&text).map(Some);
                    }
                    return Err(self.err(format!(
                        "not a trace: the first line must be '{TRACE_HEADER}' (or an MSR \
                         Cambridge CSV line), found '{}'",
                        truncate(&text)
                    )));
                }
                Format::Pagoda => {
                    if text.starts_with('#') {
                        continue;
                    }
                    return self.parse_pagoda(&text).map(Some);
                }
                Format::Msr { .. } => return self.parse_msr(&text).map(Some),
            }
        }
    }

    fn parse_pagoda(&self, text: &str) -> Result<TraceRecord> {
        let f: Vec<&str> = text.split_whitespace().collect();
        if f.len() != 6 {
            return Err(self.err(format!(
                "expected 6 fields 'time_us op sector sectors flags stream', found {} in '{}'",
                f.len(),
                truncate(text)
            )));
        }
        let num = |i: usize, name: &str| -> Result<u64> {
            f[i].parse::<u64>().map_err(|_| {
                self.err(format!(
                    "{name} '{}' is not a non-negative integer",
                    truncate(f[i])
                ))
            })
        };
        let time_us = num(0, "time_us")?;
        let op = match f[1] {
            "R" => TraceOp::Read,
            "W" => TraceOp::Write,
            "F" => TraceOp::Flush,
            "T" => TraceOp::Trim,
            other => {
                return Err(self.err(format!(
                    "op '{}' is unknown: use R (read), W (write), F (flush) or T (trim)",
                    truncate(other)
                )))
            }
        };
        let sector = num(2, "sector")?;
        let sectors = num(3, "sectors")?;
        let atomic = match f[4] {
            "-" => false,
            "A" => true,
            other => {
                return Err(self.err(format!(
                    "flags '{}' are unknown: use - or A (atomic)",
                    truncate(other)
                )))
            }
        };
        let stream = f[5].parse::<u16>().map_err(|_| {
            self.err(format!(
                "stream '{}' is not a number 0..=65535",
                truncate(f[5])
            ))
        })?;
        let rec = TraceRecord {
            time_us,
            op,
            sector,
            sectors,
            atomic,
            stream,
        };
        self.validate(&rec)?;
        Ok(rec)
    }

    fn validate(&self, r: &TraceRecord) -> Result<()> {
        match r.op {
            TraceOp::Flush => {
                if r.sector != 0 || r.sectors != 0 || r.atomic {
                    return Err(self.err("a flush takes sector 0, sectors 0 and flags -"));
                }
            }
            _ => {
                if r.sectors == 0 {
                    return Err(self.err("sectors must be at least 1 for R, W and T"));
                }
                if r.sector.checked_add(r.sectors).is_none() {
                    return Err(self.err("sector + sectors overflows"));
                }
                if r.atomic && r.op != TraceOp::Write {
                    return Err(self.err("flag A (atomic) applies to writes only"));
                }
            }
        }
        Ok(())
    }

    fn parse_msr(&mut self, text: &str) -> Result<TraceRecord> {
        let f: Vec<&str> = text.split(',').map(str::trim).collect();
        if f.len() < 6 {
            return Err(self.err(format!(
                "MSR line needs Timestamp,Hostname,DiskNumber,Type,Offset,Size[,ResponseTime]; \
                 found {} fields in '{}'",
                f.len(),
                truncate(text)
            )));
        }
        let num = |i: usize, name: &str| -> Result<u64> {
            f[i].parse::<u64>().map_err(|_| {
                self.err(format!(
                    "MSR {name} '{}' is not a non-negative integer",
                    truncate(f[i])
                ))
            })
        };
        let ticks = num(0, "Timestamp")?;
        let op = match f[3].to_ascii_lowercase().as_str() {
            "read" => TraceOp::Read,
            "write" => TraceOp::Write,
            _ => {
                return Err(self.err(format!(
                    "MSR Type '{}' must be Read or Write",
                    truncate(f[3])
                )))
            }
        };
        let offset = num(4, "Offset")?;
        let size = num(5, "Size")?.max(1);
        let Format::Msr { first_ticks } = &mut self.format else {
            return Err(self.err("internal: MSR line outside an MSR trace"));
        };
        let first = *first_ticks.get_or_insert(ticks);
        let sector = offset / SECTOR_SIZE as u64;
        let end = offset
            .checked_add(size)
            .ok_or_else(|| self.err("MSR Offset + Size overflows"))?
            .div_ceil(SECTOR_SIZE as u64);
        Ok(TraceRecord {
            time_us: ticks.saturating_sub(first) / 10,
            op,
            sector,
            sectors: end - sector,
            atomic: false,
            stream: 0,
        })
    }
}

fn truncate(s: &str) -> String {
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s.to_string()
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<TraceRecord>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.next_record() {
            Ok(r) => r.map(Ok),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Parses a whole trace (pagoda v1 or MSR CSV). `path` only names the file in errors.
pub fn parse_trace(reader: impl BufRead, path: &str) -> Result<Vec<TraceRecord>> {
    TraceReader::new(reader, path).collect()
}

/// Opens and parses a trace file.
pub fn read_trace_file(path: &std::path::Path) -> Result<Vec<TraceRecord>> {
    let f = std::fs::File::open(path).map_err(|e| DeviceError::io(path, e))?;
    parse_trace(std::io::BufReader::new(f), &path.display().to_string())
}

/// A device wrapper that writes every successful request of the device it wraps as a v1 trace
/// line (time relative to the wrapper's creation), then forwards the result.
pub struct TracingDevice {
    inner: DeviceRef,
    out: Mutex<Box<dyn Write + Send>>,
    start: Instant,
}

impl std::fmt::Debug for TracingDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TracingDevice")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl TracingDevice {
    /// Wraps `inner`, writing the trace to `out` (buffer it: each request is one small write).
    /// The header is written at once; its failure is reported at the first request.
    pub fn new(inner: DeviceRef, out: impl Write + Send + 'static) -> TracingDevice {
        let mut out: Box<dyn Write + Send> = Box::new(out);
        let _ = writeln!(
            out,
            "{TRACE_HEADER}\n# time_us op sector sectors flags stream"
        );
        TracingDevice {
            inner,
            out: Mutex::new(out),
            start: Instant::now(),
        }
    }

    /// Flushes the trace writer.
    pub fn flush_trace(&self) -> Result<()> {
        self.out
            .lock()
            .flush()
            .map_err(|e| DeviceError::io("<trace output>", e))
    }

    fn record(
        &self,
        t0: Instant,
        op: TraceOp,
        sector: u64,
        sectors: u64,
        hints: WriteHints,
    ) -> Result<()> {
        let rec = TraceRecord {
            time_us: t0.duration_since(self.start).as_micros() as u64,
            op,
            sector,
            sectors,
            atomic: hints.atomic,
            stream: hints.stream,
        };
        writeln!(self.out.lock(), "{rec}").map_err(|e| DeviceError::io("<trace output>", e))
    }
}

impl Drop for TracingDevice {
    fn drop(&mut self) {
        let _ = self.out.get_mut().flush();
    }
}

// Records each request after the device completes it; the rest is the device's.
impl crate::DelegateDevice for TracingDevice {
    fn inner(&self) -> &dyn BlockDevice {
        &*self.inner
    }

    fn read(&self, sector: u64, buf: &mut [u8]) -> Result<()> {
        let t0 = Instant::now();
        self.inner.read(sector, buf)?;
        let n = (buf.len() / SECTOR_SIZE) as u64;
        self.record(t0, TraceOp::Read, sector, n, WriteHints::NORMAL)
    }

    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> Result<()> {
        let t0 = Instant::now();
        self.inner.write(sector, buf, hints)?;
        let n = (buf.len() / SECTOR_SIZE) as u64;
        self.record(t0, TraceOp::Write, sector, n, hints)
    }

    fn flush(&self) -> Result<()> {
        let t0 = Instant::now();
        self.inner.flush()?;
        self.record(t0, TraceOp::Flush, 0, 0, WriteHints::NORMAL)
    }

    fn trim(&self, sector: u64, sectors: u64) -> Result<()> {
        let t0 = Instant::now();
        self.inner.trim(sector, sectors)?;
        if sectors == 0 {
            return Ok(());
        }
        self.record(t0, TraceOp::Trim, sector, sectors, WriteHints::NORMAL)
    }

    fn describe(&self) -> String {
        format!("trace -> {}", self.inner.describe())
    }
}

/// How [`replay`] paces requests.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum ReplayTiming {
    /// Back to back (default).
    #[default]
    AsFastAsPossible,
    /// Each request waits until its timestamp × `scale` of wall time since the start
    /// (`scale` 1.0 = real time, 0.1 = ten times faster).
    Timestamps {
        /// Wall time per trace time.
        scale: f64,
    },
}

/// Options of [`replay`].
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ReplayOptions {
    /// Pacing.
    pub timing: ReplayTiming,
    /// Map addresses beyond the device modulo its capacity (for traces of a larger disk)
    /// instead of failing.
    pub wrap: bool,
    /// Issue atomic writes as normal writes when the device has no atomic unit (instead of
    /// failing), and map stream ids beyond the device's streams to stream 0.
    pub relax_hints: bool,
}

/// What a replay did.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReplayReport {
    /// Records issued.
    pub records: u64,
    /// Read requests.
    pub reads: u64,
    /// Write requests.
    pub writes: u64,
    /// Flushes.
    pub flushes: u64,
    /// Trims.
    pub trims: u64,
    /// 4 KiB sectors read.
    pub read_sectors: u64,
    /// 4 KiB sectors written.
    pub write_sectors: u64,
    /// 4 KiB sectors trimmed.
    pub trimmed_sectors: u64,
    /// Requests whose address was wrapped into the device.
    pub wrapped: u64,
    /// Wall time of the replay, seconds.
    pub elapsed_s: f64,
}

/// Fills `buf` (whole sectors starting at `sector`) with the deterministic synthetic data a
/// replay writes: every 8 bytes hold a mix of the sector number and the word index.
pub fn synthetic_data(sector: u64, buf: &mut [u8]) {
    for (i, s) in buf.chunks_exact_mut(SECTOR_SIZE).enumerate() {
        let sec = sector + i as u64;
        for (w, word) in s.chunks_exact_mut(8).enumerate() {
            let v = (sec.wrapping_mul(0x9E37_79B9_7F4A_7C15)) ^ (w as u64);
            word.copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// Replays `records` onto `dev`. Writes carry [`synthetic_data`]. A device error stops the
/// replay with a [`DeviceError::Trace`] naming the record (1-based) and the device's message.
pub fn replay(
    records: &[TraceRecord],
    dev: &dyn BlockDevice,
    opts: &ReplayOptions,
) -> Result<ReplayReport> {
    replay_iter(records.iter().copied().map(Ok), dev, opts)
}

/// [`replay`] over a stream of records (e.g. a [`TraceReader`]), for traces too large to hold.
pub fn replay_iter(
    records: impl IntoIterator<Item = Result<TraceRecord>>,
    dev: &dyn BlockDevice,
    opts: &ReplayOptions,
) -> Result<ReplayReport> {
    if let ReplayTiming::Timestamps { scale } = opts.timing {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(DeviceError::config(format!(
                "replay time scale {scale} must be a positive number"
            )));
        }
    }
    let caps = dev.caps();
    let cap = caps.capacity_sectors;
    let mut report = ReplayReport::default();
    let mut buf: Vec<u8> = Vec::new();
    let start = Instant::now();
    for (i, rec) in records.into_iter().enumerate() {
        let rec = rec?;
        let fail = |e: DeviceError| DeviceError::Trace {
            path: "replay".into(),
            line: i + 1,
            msg: format!("record {i_1} ({rec}) failed: {e}", i_1 = i + 1),
        };
        if let ReplayTiming::Timestamps { scale } = opts.timing {
            let due = Duration::from_secs_f64(rec.time_us as f64 * scale / 1e6);
            let now = start.elapsed();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
        let mut sector = rec.sector;
        let sectors = rec.sectors;
        if rec.op != TraceOp::Flush && opts.wrap && sector.saturating_add(sectors) > cap {
            if sectors > cap {
                return Err(fail(DeviceError::config(format!(
                    "a request of {sectors} sectors is larger than the device ({cap} sectors)"
                ))));
            }
            sector %= cap;
            if sector + sectors > cap {
                sector = cap - sectors;
            }
            report.wrapped += 1;
        }
        let mut hints = WriteHints {
            atomic: rec.atomic,
            stream: rec.stream,
            write_behind: false,
        };
        if opts.relax_hints {
            if caps.atomic_write_unit.is_none() {
                hints.atomic = false;
            }
            if hints.stream >= caps.streams {
                hints.stream = 0;
            }
        }
        match rec.op {
            TraceOp::Read | TraceOp::Write => {
                let len = usize::try_from(sectors)
                    .ok()
                    .and_then(|s| s.checked_mul(SECTOR_SIZE))
                    .filter(|&l| l <= 1 << 30)
                    .ok_or_else(|| {
                        fail(DeviceError::config(format!(
                            "{sectors} sectors in one request is more than 1 GiB"
                        )))
                    })?;
                buf.resize(len, 0);
                if rec.op == TraceOp::Read {
                    dev.read(sector, &mut buf).map_err(fail)?;
                    report.reads += 1;
                    report.read_sectors += sectors;
                } else {
                    synthetic_data(sector, &mut buf);
                    dev.write(sector, &buf, hints).map_err(fail)?;
                    report.writes += 1;
                    report.write_sectors += sectors;
                }
            }
            TraceOp::Flush => {
                dev.flush().map_err(fail)?;
                report.flushes += 1;
            }
            TraceOp::Trim => {
                dev.trim(sector, sectors).map_err(fail)?;
                report.trims += 1;
                report.trimmed_sectors += sectors;
            }
        }
        report.records += 1;
    }
    report.elapsed_s = start.elapsed().as_secs_f64();
    Ok(report)
}
