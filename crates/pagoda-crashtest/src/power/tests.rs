//! Tests of the power switch.

use super::*;
use pagoda_device::fault::{Failure, Fault, FaultDevice, Op};
use pagoda_device::mem::{MemConfig, MemDevice};

fn mem() -> DeviceRef {
    let cfg = MemConfig {
        capacity_bytes: 1 << 20,
        atomic_write_unit: None,
        streams: 1,
    };
    Arc::new(MemDevice::new(cfg).unwrap())
}

#[test]
fn the_cut_reads_and_tears_beneath_the_faults() {
    let raw = mem();
    let faulty = Arc::new(FaultDevice::new(raw.clone()).named("data"));
    let log = mem();
    let layers = vec![(faulty.clone() as DeviceRef, raw), (log.clone(), log)];
    let switch = Switch::new(layers, 7, true, i64::MAX);
    let (data, _, _) = switch.devices();
    let fail = |op| Fault::Fail {
        op,
        after: 0,
        times: u64::MAX,
        failure: Failure::Eio,
    };
    // The switch reads each sector's pre-image before a write: not through the faults.
    faulty.inject(fail(Op::Read)).unwrap();
    let sector = vec![0xab; SECTOR_SIZE];
    for s in 0..64 {
        data.write(s, &sector, WriteHints::NORMAL).unwrap();
    }
    // Nor are the sectors the cut tears written through them.
    faulty.inject(fail(Op::Write)).unwrap();
    switch.cut_now().unwrap();
    assert_eq!(faulty.failures(), 0, "the switch's own I/O met a fault");
    let cut = switch.cut_point().expect("the cut is recorded");
    assert!(cut.torn_512 > 0, "64 unflushed sectors and none torn");
    // The sectors torn, after the 64 at risk (the device itself may keep or drop each).
    assert_eq!(switch.torn().len() as u64, 64 + cut.torn_512);
}

#[test]
fn the_switch_passes_counters_and_timing_down_but_not_the_cut() {
    use pagoda_device::fault::Recording;
    let recs: Vec<Arc<Recording>> = (0..2)
        .map(|_| Arc::new(Recording::new(1 << 20).unwrap()))
        .collect();
    let layers = recs
        .iter()
        .map(|r| (r.clone() as DeviceRef, r.clone() as DeviceRef))
        .collect();
    let switch = Switch::new(layers, 7, false, i64::MAX);
    let (data, log, _) = switch.devices();
    for (dev, rec) in [data, log].iter().zip(&recs) {
        assert!(
            rec.unforwarded(&**dev).is_empty(),
            "{:?}",
            rec.unforwarded(&**dev)
        );
        assert!(
            dev.as_power_cut().is_none(),
            "the switch cuts, not its devices"
        );
    }
}
