//! Tests of traces: the v1 format, parser errors, MSR CSV, capture with `TracingDevice`,
//! replay, and property tests of the parser.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use pagoda_device::mem::MemDevice;
use pagoda_device::trace::{
    parse_trace, replay, replay_iter, synthetic_data, write_trace, ReplayOptions, ReplayTiming,
    TraceOp, TraceReader, TraceRecord, TracingDevice,
};
use pagoda_device::{BlockDevice, DeviceError, DeviceRef, WriteHints, SECTOR_SIZE};
use proptest::prelude::*;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Instant;

fn parse(text: &str) -> pagoda_device::Result<Vec<TraceRecord>> {
    parse_trace(text.as_bytes(), "t.trace")
}

fn err_line(text: &str) -> (usize, String) {
    match parse(text) {
        Err(DeviceError::Trace { path, line, msg }) => {
            assert_eq!(path, "t.trace");
            (line, msg)
        }
        other => panic!("expected a trace error, got {other:?}"),
    }
}

#[test]
fn parses_the_documented_example() {
    let t = "# pagoda-trace v1\n# time_us op sector sectors flags stream\n0 W 128 4 - 0\n15 R 0 1 - 0\n\n22 W 64 4 A 1\n30 F 0 0 - 0\n41\tT 256 16 - 0\n";
    let r = parse(t).unwrap();
    assert_eq!(r.len(), 5);
    assert_eq!(
        r[2],
        TraceRecord {
            time_us: 22,
            op: TraceOp::Write,
            sector: 64,
            sectors: 4,
            atomic: true,
            stream: 1
        }
    );
    assert_eq!(r[3].op, TraceOp::Flush);
    assert_eq!(r[4].op, TraceOp::Trim);
}

#[test]
fn errors_name_the_line_and_the_problem() {
    let h = "# pagoda-trace v1\n";
    assert!(err_line("").1.contains("empty"));
    assert!(err_line("0 W 1 1 - 0\n").1.contains("first line"));
    assert!(err_line("# pagoda-trace v9\n").1.contains("v9"));
    let (line, msg) = err_line(&format!("{h}0 W 1 1 - 0\n5 X 1 1 - 0\n"));
    assert_eq!(line, 3);
    assert!(msg.contains("'X'") && msg.contains("R (read)"), "{msg}");
    assert!(err_line(&format!("{h}0 W 1 - 0\n")).1.contains("6 fields"));
    assert!(err_line(&format!("{h}-3 W 1 1 - 0\n"))
        .1
        .contains("time_us"));
    assert!(err_line(&format!("{h}0 W 1 0 - 0\n"))
        .1
        .contains("at least 1"));
    assert!(err_line(&format!("{h}0 R 1 1 A 0\n"))
        .1
        .contains("writes only"));
    assert!(err_line(&format!("{h}0 W 1 1 Z 0\n")).1.contains("flags"));
    assert!(err_line(&format!("{h}0 W 1 1 - 70000\n"))
        .1
        .contains("stream"));
    assert!(err_line(&format!("{h}0 F 3 0 - 0\n")).1.contains("flush"));
    assert!(err_line(&format!("{h}0 W 18446744073709551615 2 - 0\n"))
        .1
        .contains("overflows"));
    let bad_utf8: &[u8] = b"# pagoda-trace v1\n0 W \xff 1 - 0\n";
    assert!(matches!(
        parse_trace(bad_utf8, "b"),
        Err(DeviceError::Trace { line: 2, .. })
    ));
}

#[test]
fn reads_msr_cambridge_csv() {
    let t = "128166372003061629,hm,0,Read,8192,4096,1331\n128166372003071629,hm,0,Write,10000,5000,100\n";
    let r = parse(t).unwrap();
    assert_eq!(
        r[0],
        TraceRecord {
            time_us: 0,
            op: TraceOp::Read,
            sector: 2,
            sectors: 1,
            atomic: false,
            stream: 0
        }
    );
    // Bytes 10000..15000 touch sectors 2 and 3; 10,000 ticks of 100 ns = 1000 us.
    assert_eq!((r[1].time_us, r[1].sector, r[1].sectors), (1000, 2, 2));
    let (line, msg) = err_line("1,hm,0,Read,0,4096,1\n2,hm,0,Erase,0,4096,1\n");
    assert_eq!(line, 2);
    assert!(msg.contains("Read or Write"));
    assert!(parse(
        "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n1,h,0,Write,0,1,0\n"
    )
    .is_ok());
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);
impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn capture_then_replay_reproduces_the_requests() {
    let sink = Shared::default();
    let inner: DeviceRef = Arc::new(MemDevice::with_capacity(1 << 20).unwrap());
    let dev = TracingDevice::new(inner, sink.clone());
    let mut buf = vec![0; 2 * SECTOR_SIZE];
    dev.write(4, &vec![1; 4 * SECTOR_SIZE], WriteHints::atomic(1))
        .unwrap();
    dev.read(10, &mut buf).unwrap();
    dev.trim(20, 3).unwrap();
    dev.flush().unwrap();
    assert!(
        dev.read(1000, &mut buf).is_err(),
        "failed requests are not traced"
    );
    dev.flush_trace().unwrap();
    let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
    let recs = parse(&text).unwrap();
    let ops: Vec<_> = recs
        .iter()
        .map(|r| (r.op, r.sector, r.sectors, r.atomic, r.stream))
        .collect();
    assert_eq!(
        ops,
        vec![
            (TraceOp::Write, 4, 4, true, 1),
            (TraceOp::Read, 10, 2, false, 0),
            (TraceOp::Trim, 20, 3, false, 0),
            (TraceOp::Flush, 0, 0, false, 0)
        ]
    );
    let target = MemDevice::with_capacity(1 << 20).unwrap();
    let rep = replay(&recs, &target, &ReplayOptions::default()).unwrap();
    assert_eq!(
        (rep.records, rep.reads, rep.writes, rep.flushes, rep.trims),
        (4, 1, 1, 1, 1)
    );
    assert_eq!(rep.write_sectors, 4);
    let s = target.stats();
    assert_eq!(
        (
            s.host_write_pages,
            s.host_read_pages,
            s.flushes,
            s.trimmed_pages
        ),
        (4, 2, 1, 3)
    );
    assert_eq!(s.streams[1].host_write_pages, 4);
    let mut got = vec![0; 4 * SECTOR_SIZE];
    target.read(4, &mut got).unwrap();
    let mut want = vec![0; 4 * SECTOR_SIZE];
    synthetic_data(4, &mut want);
    assert_eq!(got, want);
}

#[test]
fn replay_errors_wrap_and_timestamps() {
    let small = MemDevice::with_capacity(64 * SECTOR_SIZE as u64).unwrap();
    let recs = parse("# pagoda-trace v1\n0 W 1000 2 - 0\n").unwrap();
    match replay(&recs, &small, &ReplayOptions::default()) {
        Err(DeviceError::Trace { line: 1, msg, .. }) => {
            assert!(msg.contains("out of range"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    let rep = replay(
        &recs,
        &small,
        &ReplayOptions {
            wrap: true,
            ..ReplayOptions::default()
        },
    )
    .unwrap();
    assert_eq!(rep.wrapped, 1);
    let recs = parse("# pagoda-trace v1\n0 W 0 1 - 0\n20000 W 1 1 - 0\n").unwrap();
    let t0 = Instant::now();
    let opts = ReplayOptions {
        timing: ReplayTiming::Timestamps { scale: 1.0 },
        ..ReplayOptions::default()
    };
    replay(&recs, &small, &opts).unwrap();
    assert!(
        t0.elapsed().as_micros() >= 20_000,
        "timestamps must be honoured"
    );
    let bad = ReplayOptions {
        timing: ReplayTiming::Timestamps { scale: 0.0 },
        ..ReplayOptions::default()
    };
    assert!(replay(&recs, &small, &bad).is_err());
    // Streaming form stops at the first bad line.
    let text = "# pagoda-trace v1\n0 W 0 1 - 0\nnonsense\n";
    let r = replay_iter(
        TraceReader::new(text.as_bytes(), "s"),
        &small,
        &ReplayOptions::default(),
    );
    assert!(matches!(r, Err(DeviceError::Trace { line: 3, .. })));
    // Relaxed hints: an atomic write on a device without atomic writes.
    let hdd = pagoda_device::hdd::Hdd::new({
        let mut c = pagoda_device::hdd::HddConfig::preset("hdd-15k").unwrap();
        c.set("capacity", "1GiB").unwrap();
        c
    })
    .unwrap();
    let recs = parse("# pagoda-trace v1\n0 W 0 4 A 3\n").unwrap();
    assert!(replay(&recs, &hdd, &ReplayOptions::default()).is_err());
    assert!(replay(
        &recs,
        &hdd,
        &ReplayOptions {
            relax_hints: true,
            ..ReplayOptions::default()
        }
    )
    .is_ok());
}

fn arb_record() -> impl Strategy<Value = TraceRecord> {
    (
        any::<u64>(),
        0u8..4,
        0u64..1 << 40,
        1u64..1 << 20,
        any::<bool>(),
        any::<u16>(),
    )
        .prop_map(|(time_us, op, sector, sectors, atomic, stream)| {
            let op = [TraceOp::Read, TraceOp::Write, TraceOp::Flush, TraceOp::Trim][op as usize];
            match op {
                TraceOp::Flush => TraceRecord {
                    time_us,
                    op,
                    sector: 0,
                    sectors: 0,
                    atomic: false,
                    stream,
                },
                TraceOp::Write => TraceRecord {
                    time_us,
                    op,
                    sector,
                    sectors,
                    atomic,
                    stream,
                },
                _ => TraceRecord {
                    time_us,
                    op,
                    sector,
                    sectors,
                    atomic: false,
                    stream,
                },
            }
        })
}

proptest! {
    #[test]
    fn parser_never_panics_on_arbitrary_text(s in "\\PC{0,200}") {
        let _ = parse(&s);
        let _ = parse(&format!("# pagoda-trace v1\n{s}"));
        let _ = parse(&format!("1,h,0,Read,{s}"));
    }

    #[test]
    fn parser_never_panics_on_near_valid_lines(
        fields in proptest::collection::vec("[0-9RWFTA#,\\- ]{0,6}|[0-9]{1,25}", 0..8)
    ) {
        let line = fields.join(" ");
        let _ = parse(&format!("# pagoda-trace v1\n{line}\n"));
        let _ = parse(&fields.join(","));
    }

    #[test]
    fn format_then_parse_roundtrips(recs in proptest::collection::vec(arb_record(), 0..50)) {
        let mut out = Vec::new();
        write_trace(&mut out, &recs).unwrap();
        let back = parse_trace(&out[..], "rt").unwrap();
        prop_assert_eq!(back, recs);
    }
}
