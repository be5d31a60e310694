//! The fault device does what each fault says, and nothing when disarmed.
#![allow(clippy::unwrap_used)]

use pagoda_device::fault::{Failure, Fault, FaultDevice, Op};
use pagoda_device::mem::MemDevice;
use pagoda_device::{BlockDevice, DeviceError, DeviceRef, WriteHints, SECTOR_SIZE};
use std::sync::Arc;
use std::time::Duration;

fn dev() -> (DeviceRef, FaultDevice) {
    let inner: DeviceRef = Arc::new(MemDevice::with_capacity(1 << 20).unwrap());
    (inner.clone(), FaultDevice::new(inner))
}

fn sector(fill: u8) -> Vec<u8> {
    vec![fill; SECTOR_SIZE]
}

fn read(d: &dyn BlockDevice, s: u64) -> Vec<u8> {
    let mut b = sector(0);
    d.read(s, &mut b).unwrap();
    b
}

#[test]
fn the_nth_write_fails_and_changes_nothing_then_writes_go_on() {
    let (_, f) = dev();
    f.inject(Fault::Fail {
        op: Op::Write,
        after: 1,
        times: 1,
        failure: Failure::Eio,
    })
    .unwrap();
    f.write(1, &sector(1), WriteHints::default()).unwrap();
    let e = f.write(2, &sector(2), WriteHints::default()).unwrap_err();
    assert!(e.to_string().contains("injected I/O error"), "{e}");
    assert_eq!(read(&f, 2), sector(0));
    f.write(3, &sector(3), WriteHints::default()).unwrap();
    assert_eq!(read(&f, 3), sector(3));
}

#[test]
fn each_injected_error_carries_its_own_numbered_tag() {
    let inner: DeviceRef = Arc::new(MemDevice::with_capacity(1 << 20).unwrap());
    let f = FaultDevice::new(inner).named("log");
    f.inject(Fault::Fail {
        op: Op::Write,
        after: 0,
        times: 2,
        failure: Failure::Eio,
    })
    .unwrap();
    f.inject(Fault::Fail {
        op: Op::Read,
        after: 0,
        times: 1,
        failure: Failure::Full,
    })
    .unwrap();
    let w0 = f.write(1, &sector(1), WriteHints::default()).unwrap_err();
    let r0 = f.read(1, &mut sector(0)).unwrap_err();
    let w1 = f.write(1, &sector(1), WriteHints::default()).unwrap_err();
    assert!(w0.to_string().contains("[fault log#0]"), "{w0}");
    assert!(r0.to_string().contains("[fault log#1]"), "{r0}");
    assert!(w1.to_string().contains("[fault log#2]"), "{w1}");
    assert_eq!(FaultDevice::tag("log", 2), "[fault log#2]");
    assert_eq!(f.failures(), 3);
    f.write(1, &sector(1), WriteHints::default()).unwrap();
    assert_eq!(f.failures(), 3, "a request that passes takes no number");
}

#[test]
fn a_full_device_and_a_failing_flush_say_so() {
    let (_, f) = dev();
    f.inject(Fault::Fail {
        op: Op::Write,
        after: 0,
        times: u64::MAX,
        failure: Failure::Full,
    })
    .unwrap();
    f.inject(Fault::Fail {
        op: Op::Flush,
        after: 0,
        times: 1,
        failure: Failure::Eio,
    })
    .unwrap();
    assert!(matches!(
        f.write(0, &sector(1), WriteHints::default()),
        Err(DeviceError::Full(_))
    ));
    assert!(f.flush().is_err());
    f.flush().unwrap();
    f.clear();
    f.write(0, &sector(1), WriteHints::default()).unwrap();
}

#[test]
fn a_transient_flip_corrupts_reads_only_and_a_persistent_one_the_medium() {
    let (inner, f) = dev();
    f.write(4, &[sector(7), sector(8)].concat(), WriteHints::default())
        .unwrap();
    f.inject(Fault::FlipBit {
        sector: 5,
        byte: 10,
        bit: 3,
        persistent: false,
    })
    .unwrap();
    let mut two = vec![0u8; 2 * SECTOR_SIZE];
    f.read(4, &mut two).unwrap();
    assert_eq!(&two[..SECTOR_SIZE], &sector(7)[..]);
    assert_eq!(two[SECTOR_SIZE + 10], 8 ^ (1 << 3));
    assert_eq!(read(&*inner, 5), sector(8), "the medium is intact");
    f.clear();
    assert_eq!(read(&f, 5), sector(8));
    f.inject(Fault::FlipBit {
        sector: 4,
        byte: 0,
        bit: 0,
        persistent: true,
    })
    .unwrap();
    f.clear();
    assert_eq!(read(&*inner, 4)[0], 7 ^ 1, "rotted on the medium");
}

#[test]
fn a_misdirected_write_lands_elsewhere_and_a_lost_one_nowhere() {
    let (_, f) = dev();
    f.write(20, &[sector(1), sector(2)].concat(), WriteHints::default())
        .unwrap();
    f.inject(Fault::Misdirect { from: 21, to: 30 }).unwrap();
    f.inject(Fault::LoseWrite { sector: 20 }).unwrap();
    f.write(20, &[sector(5), sector(6)].concat(), WriteHints::default())
        .unwrap();
    assert_eq!(read(&f, 20), sector(1), "lost: the old contents");
    // The lost write is kept for the test to inspect: what stayed and what was lost.
    let lost = f.take_lost();
    assert_eq!(
        lost,
        vec![pagoda_device::fault::LostSector {
            sector: 20,
            kept: sector(1),
            lost: sector(5),
        }]
    );
    assert!(f.take_lost().is_empty(), "taken once");
    assert_eq!(
        f.take_overwritten(),
        vec![(30, sector(0))],
        "the misdirected copy destroyed sector 30's old contents"
    );
    assert_eq!(
        read(&f, 21),
        sector(2),
        "misdirected: the old contents stay"
    );
    assert_eq!(
        read(&f, 30),
        sector(6),
        "misdirected: the new contents land here"
    );
    f.clear();
    f.inject(Fault::Stray { from: 22, to: 31 }).unwrap();
    f.write(22, &sector(7), WriteHints::default()).unwrap();
    assert_eq!(read(&f, 22), sector(7), "stray: the sector is written");
    assert_eq!(read(&f, 31), sector(7), "stray: and a copy lands here");
    assert_eq!(f.injected(Op::Write), 2, "two writes were redirected");
}

#[test]
fn power_is_cut_after_n_writes_and_requests_fail_until_power_on() {
    let (_, f) = dev();
    f.write(0, &sector(1), WriteHints::default()).unwrap();
    f.flush().unwrap();
    f.inject(Fault::CutAfter { writes: 2, seed: 9 }).unwrap();
    f.write(1, &sector(2), WriteHints::default()).unwrap();
    assert!(!f.powered_off());
    f.write(2, &sector(3), WriteHints::default()).unwrap();
    assert!(f.powered_off());
    let e = f.write(3, &sector(4), WriteHints::default()).unwrap_err();
    // The cut is no injected failure of the request: its error carries no tag.
    assert!(!e.to_string().contains("[fault "), "{e}");
    assert!(f.flush().is_err());
    assert_eq!(f.failures(), 0);
    f.power_on();
    assert_eq!(read(&f, 0), sector(1), "flushed before the cut");
}

#[test]
fn requests_are_recorded_and_a_held_flush_waits_for_its_release() {
    let (_, f) = dev();
    f.record(true);
    f.write(7, &sector(1), WriteHints::default()).unwrap();
    let mut b = sector(0);
    f.read(7, &mut b).unwrap();
    f.hold(Op::Flush);
    std::thread::scope(|s| {
        let t = s.spawn(|| f.flush());
        assert!(
            f.wait_until_held(Op::Flush, 1, Duration::from_secs(10)),
            "the flush never reached the hold"
        );
        assert!(!t.is_finished(), "a held flush returned");
        assert_eq!(f.seen(Op::Flush), 0, "counted before it went through");
        f.release(Op::Flush);
        t.join().unwrap().unwrap();
    });
    assert_eq!(f.waiting(Op::Flush), 0);
    let ops: Vec<(Op, u64)> = f.records().iter().map(|r| (r.op, r.sector)).collect();
    assert_eq!(ops, vec![(Op::Write, 7), (Op::Read, 7), (Op::Flush, 0)]);
    assert_eq!(f.seen(Op::Flush), 1);
}

#[test]
fn a_flush_that_fails_losing_writes_drops_them_and_a_retry_cannot_bring_them_back() {
    let (inner, f) = dev();
    for s in 0..64 {
        f.write(s, &sector(1), WriteHints::default()).unwrap();
    }
    f.flush().unwrap();
    for s in 0..64 {
        f.write(s, &sector(2), WriteHints::default()).unwrap();
    }
    f.inject(Fault::Fail {
        op: Op::Flush,
        after: 0,
        times: 1,
        failure: Failure::EioLosingWrites,
    })
    .unwrap();
    assert!(f.flush().is_err());
    assert_eq!(f.injected(Op::Flush), 1);
    // The retry succeeds, as after a failed fsync on Linux, but what it should have made
    // durable is partly gone: some sectors read their old contents.
    f.flush().unwrap();
    let after: Vec<Vec<u8>> = (0..64).map(|s| read(&f, s)).collect();
    let lost = after.iter().filter(|b| **b == sector(1)).count();
    assert!(lost > 0, "no write was lost by the failed flush");
    assert!(after.iter().all(|b| *b == sector(1) || *b == sector(2)));
    // Now durable: another cut changes nothing.
    inner.as_power_cut().unwrap().power_cut(7).unwrap();
    assert_eq!((0..64).map(|s| read(&f, s)).collect::<Vec<_>>(), after);
}

#[test]
fn devices_on_one_rail_lose_power_together_at_the_armed_request() {
    use pagoda_device::fault::Rail;
    let rail = Rail::new(3);
    let a = FaultDevice::on_rail(dev().0, &rail).unwrap();
    let b = FaultDevice::on_rail(dev().0, &rail).unwrap();
    a.write(0, &sector(1), WriteHints::default()).unwrap();
    a.flush().unwrap();
    rail.arm(3);
    b.write(0, &sector(2), WriteHints::default()).unwrap();
    // Reads do not count.
    assert_eq!(read(&a, 0), sector(1));
    a.write(1, &sector(3), WriteHints::default()).unwrap();
    let e = b.flush().unwrap_err();
    assert!(e.to_string().contains("no power"), "{e}");
    assert!(rail.is_off());
    assert!(a.write(2, &sector(4), WriteHints::default()).is_err());
    let mut buf = sector(0);
    assert!(b.read(0, &mut buf).is_err());
    rail.power_on();
    // What was flushed before the cut survives on both; the rest is as the cut left it.
    assert_eq!(read(&a, 0), sector(1));
    assert!([sector(0), sector(2)].contains(&read(&b, 0)));
    a.write(2, &sector(4), WriteHints::default()).unwrap();
}
