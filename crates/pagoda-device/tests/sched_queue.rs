//! Tests of the merging I/O queue: merge counts, the rule for 16 KiB atomic writes, streams, size
//! limits, and equivalence with issuing each write alone.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use pagoda_device::mem::{MemConfig, MemDevice};
use pagoda_device::sched::{IoQueue, QueueOptions, WriteRequest};
use pagoda_device::{BlockDevice, DeviceError, DeviceRef, WriteHints, SECTOR_SIZE};
use proptest::prelude::*;
use std::sync::Arc;

fn mem() -> Arc<MemDevice> {
    Arc::new(
        MemDevice::new(MemConfig {
            capacity_bytes: 1 << 20,
            atomic_write_unit: Some(16384),
            streams: 2,
        })
        .unwrap(),
    )
}

fn req(sector: u64, sectors: usize, fill: u8, hints: WriteHints) -> WriteRequest {
    WriteRequest {
        sector,
        data: vec![fill; sectors * SECTOR_SIZE],
        hints,
    }
}

fn queue(dev: &Arc<MemDevice>) -> IoQueue {
    IoQueue::new(dev.clone() as DeviceRef, QueueOptions::default())
}

#[test]
fn contiguous_normal_writes_merge_out_of_order() {
    let dev = mem();
    let q = queue(&dev);
    let batch = vec![
        req(12, 1, 3, WriteHints::NORMAL),
        req(10, 1, 1, WriteHints::NORMAL),
        req(11, 1, 2, WriteHints::NORMAL),
        req(40, 2, 4, WriteHints::NORMAL),
    ];
    q.submit_writes(batch).unwrap();
    let s = q.stats();
    let qs = s.queue.unwrap();
    assert_eq!(
        (qs.submitted_writes, qs.issued_writes, qs.merged_writes),
        (4, 2, 2)
    );
    assert_eq!(qs.refused_atomic_merges, 0);
    assert_eq!(s.host_write_requests, 2, "the device saw two requests");
    let mut buf = vec![0; 3 * SECTOR_SIZE];
    q.read(10, &mut buf).unwrap();
    for (i, c) in buf.chunks(SECTOR_SIZE).enumerate() {
        assert!(c.iter().all(|&b| b == i as u8 + 1));
    }
}

#[test]
fn atomic_never_merges_with_normal() {
    let dev = mem();
    let q = queue(&dev);
    q.submit_writes(vec![
        req(0, 2, 1, WriteHints::atomic(0)),
        req(2, 2, 2, WriteHints::NORMAL),
        req(4, 4, 3, WriteHints::atomic(0)),
    ])
    .unwrap();
    let qs = q.queue_stats();
    assert_eq!(qs.issued_writes, 3);
    assert_eq!(qs.merged_writes, 0);
    assert_eq!(qs.refused_atomic_merges, 2);
}

#[test]
fn contiguous_atomic_writes_stay_apart_beyond_one_unit() {
    let dev = mem();
    let q = queue(&dev);
    // Two whole 16 KiB units side by side: merged they would exceed the atomic unit.
    q.submit_writes(vec![
        req(4, 4, 2, WriteHints::atomic(0)),
        req(0, 4, 1, WriteHints::atomic(0)),
    ])
    .unwrap();
    let qs = q.queue_stats();
    assert_eq!(
        (qs.issued_writes, qs.merged_writes, qs.refused_atomic_merges),
        (2, 0, 0)
    );
    // Power cut: each unit is whole or absent.
    let r = dev.as_power_cut().unwrap().power_cut(3).unwrap();
    assert_eq!(r.atomic_kept + r.atomic_dropped, 2);
}

#[test]
fn streams_and_size_limit_keep_requests_apart() {
    let dev = mem();
    let q = IoQueue::new(
        dev.clone() as DeviceRef,
        QueueOptions {
            max_request_bytes: 3 * SECTOR_SIZE,
        },
    );
    q.submit_writes(vec![
        req(0, 1, 1, WriteHints::stream(0)),
        req(1, 1, 1, WriteHints::stream(1)),
        req(10, 2, 1, WriteHints::NORMAL),
        req(12, 2, 1, WriteHints::NORMAL),
    ])
    .unwrap();
    let qs = q.queue_stats();
    assert_eq!((qs.issued_writes, qs.merged_writes), (4, 0));
}

#[test]
fn bad_request_fails_the_batch_before_any_io() {
    let dev = mem();
    let q = queue(&dev);
    let r = q.submit_writes(vec![
        req(0, 1, 1, WriteHints::NORMAL),
        req(255, 2, 1, WriteHints::NORMAL),
    ]);
    assert!(matches!(r, Err(DeviceError::OutOfRange { .. })));
    assert_eq!(dev.stats().host_write_requests, 0);
    let r = q.submit_writes(vec![req(1, 4, 1, WriteHints::atomic(0))]);
    assert!(matches!(r, Err(DeviceError::AtomicRejected(_))));
}

fn arb_batch() -> impl Strategy<Value = Vec<(u64, usize, bool, u16)>> {
    proptest::collection::vec((0u64..60, 1usize..5, proptest::bool::ANY, 0u16..2), 0..40)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]
    #[test]
    fn merged_batch_equals_writes_issued_alone(batch in arb_batch()) {
        let merged = mem();
        let alone = mem();
        let q = queue(&merged);
        let mut reqs = Vec::new();
        for (i, (sector, sectors, atomic, stream)) in batch.into_iter().enumerate() {
            // Atomic requests must be valid: inside one 16 KiB unit.
            let (sector, sectors) = if atomic { (sector / 4 * 4, sectors) } else { (sector, sectors) };
            let hints = WriteHints { atomic, stream, ..WriteHints::NORMAL };
            let data: Vec<u8> = (0..sectors * SECTOR_SIZE).map(|j| (i * 13 + j / SECTOR_SIZE) as u8).collect();
            alone.write(sector, &data, hints).unwrap();
            reqs.push(WriteRequest { sector, data, hints });
        }
        let n = reqs.len() as u64;
        q.submit_writes(reqs).unwrap();
        let mut a = vec![0; 64 * SECTOR_SIZE];
        let mut b = vec![0; 64 * SECTOR_SIZE];
        merged.read(0, &mut a).unwrap();
        alone.read(0, &mut b).unwrap();
        prop_assert!(a == b, "contents differ");
        let qs = q.queue_stats();
        prop_assert_eq!(qs.submitted_writes, n);
        prop_assert_eq!(qs.issued_writes + qs.merged_writes, n);
        prop_assert_eq!(merged.stats().host_write_requests, qs.issued_writes);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]
    /// If the queue ever merged an atomic write into a normal request, a power cut could tear
    /// it; atomic writes must come out whole or absent after any merged batch.
    #[test]
    fn atomic_writes_stay_whole_through_merging_and_power_cut(
        units in proptest::collection::vec(0u8..3, 16),
        seed in any::<u64>(),
    ) {
        let dev = mem();
        let q = queue(&dev);
        let mut batch = Vec::new();
        let mut atomic_units = Vec::new();
        for (u, kind) in units.iter().enumerate() {
            let sector = u as u64 * 4;
            match kind {
                1 => {
                    batch.push(req(sector, 4, 0xA0 + u as u8, WriteHints::atomic(0)));
                    atomic_units.push(u);
                }
                2 => batch.push(req(sector, 4, 0x10 + u as u8, WriteHints::NORMAL)),
                _ => {}
            }
        }
        batch.reverse();
        q.submit_writes(batch).unwrap();
        dev.as_power_cut().unwrap().power_cut(seed).unwrap();
        for u in atomic_units {
            let mut buf = vec![0; 4 * SECTOR_SIZE];
            dev.read(u as u64 * 4, &mut buf).unwrap();
            let new = buf.chunks(SECTOR_SIZE).filter(|c| c[0] == 0xA0 + u as u8).count();
            prop_assert!(new == 0 || new == 4, "atomic unit {} torn: {}/4 sectors new", u, new);
        }
    }
}
