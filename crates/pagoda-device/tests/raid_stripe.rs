//! Tests of RAID-0 striping: data placement against a reference device, capabilities,
//! fan-out of flush / trim / power cut, the preset and its keys, parallel member I/O.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use pagoda_device::mem::{MemConfig, MemDevice};
use pagoda_device::raid::{raid0_preset, Raid0};
use pagoda_device::{BlockDevice, DeviceError, DeviceRef, WriteHints, SECTOR_SIZE};
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::Instant;

fn mems(n: usize, cap: u64, atomic: Option<usize>) -> Vec<DeviceRef> {
    (0..n)
        .map(|_| {
            Arc::new(
                MemDevice::new(MemConfig {
                    capacity_bytes: cap,
                    atomic_write_unit: atomic,
                    streams: 2,
                })
                .unwrap(),
            ) as DeviceRef
        })
        .collect()
}

fn keys(kv: &[(&str, &str)]) -> Vec<(String, String)> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn striped_contents_match_a_plain_device() {
    let raid = Raid0::new(mems(3, 1 << 20, None), 8192).unwrap();
    assert_eq!(raid.caps().capacity_sectors, 3 * 256);
    let reference = MemDevice::with_capacity(3 << 20).unwrap();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
    for i in 0..300u32 {
        let n = rng.gen_range(1..12u64);
        let s = rng.gen_range(0..768 - n);
        let data: Vec<u8> = (0..n as usize * SECTOR_SIZE)
            .map(|j| (i as usize * 7 + j / 4096) as u8)
            .collect();
        raid.write(s, &data, WriteHints::NORMAL).unwrap();
        reference.write(s, &data, WriteHints::NORMAL).unwrap();
        if i % 50 == 0 {
            let t = rng.gen_range(0..700);
            raid.trim(t, 9).unwrap();
            reference.trim(t, 9).unwrap();
        }
    }
    let mut a = vec![0; 768 * SECTOR_SIZE];
    let mut b = vec![0; 768 * SECTOR_SIZE];
    raid.read(0, &mut a).unwrap();
    reference.read(0, &mut b).unwrap();
    assert!(a == b, "RAID contents differ from the reference");
    // Chunk 0 on member 0, chunk 1 on member 1: sector 2 (chunk 1) is member 1's sector 0.
    raid.write(2, &vec![0xAB; SECTOR_SIZE], WriteHints::NORMAL)
        .unwrap();
    let mut m = vec![0; SECTOR_SIZE];
    raid.members()[1].read(0, &mut m).unwrap();
    assert!(m.iter().all(|&x| x == 0xAB));
    let s = raid.stats();
    assert_eq!(s.host_write_requests, 301);
    assert_eq!(s.streams.len(), 2);
}

#[test]
fn capabilities_follow_members() {
    let r = Raid0::new(mems(2, 1 << 20, Some(16384)), 64 << 10).unwrap();
    assert_eq!(r.caps().atomic_write_unit, Some(16384));
    assert!(r.caps().power_cut);
    // A 12 KiB chunk: only 4 KiB atomic writes can stay inside one chunk.
    let r = Raid0::new(mems(2, 1 << 20, Some(16384)), 12 << 10).unwrap();
    assert_eq!(r.caps().atomic_write_unit, Some(4096));
    let mut mixed = mems(1, 1 << 20, Some(16384));
    mixed.extend(mems(1, 1 << 20, None));
    let r = Raid0::new(mixed, 64 << 10).unwrap();
    assert_eq!(r.caps().atomic_write_unit, None);
    assert!(matches!(
        Raid0::new(vec![], 4096),
        Err(DeviceError::Config(_))
    ));
    assert!(Raid0::new(mems(2, 1 << 20, None), 1000).is_err());
    assert!(Raid0::new(mems(2, 1 << 20, None), 2 << 20).is_err());
}

#[test]
fn atomic_writes_and_power_cut_fan_out() {
    let r = Raid0::new(mems(4, 1 << 20, Some(16384)), 16384).unwrap();
    // An atomic 16 KiB write at chunk 5 lands whole on member 1.
    let data = vec![9u8; 16384];
    r.write(20, &data, WriteHints::atomic(1)).unwrap();
    assert!(matches!(
        r.write(21, &data, WriteHints::atomic(0)),
        Err(DeviceError::AtomicRejected(_))
    ));
    let big = vec![3u8; 64 * SECTOR_SIZE];
    r.write(100, &big, WriteHints::NORMAL).unwrap();
    let rep = r.as_power_cut().unwrap().power_cut(11).unwrap();
    assert_eq!(rep.atomic_kept + rep.atomic_dropped, 1);
    assert_eq!(rep.kept_sectors + rep.dropped_sectors, 64 + 4);
    let mut back = vec![0; 16384];
    r.read(20, &mut back).unwrap();
    assert!(
        back.iter().all(|&x| x == 9) || back.iter().all(|&x| x == 0),
        "torn atomic write"
    );
    r.write(0, &big, WriteHints::NORMAL).unwrap();
    r.flush().unwrap();
    let rep = r.as_power_cut().unwrap().power_cut(12).unwrap();
    assert_eq!(rep.dropped_sectors, 0, "flushed data must survive");
    assert_eq!(r.stats().flushes, 1);
}

#[test]
fn preset_and_keys() {
    let r = raid0_preset("raid0-8x-hdd-15k", &keys(&[("capacity", "8GiB")])).unwrap();
    assert_eq!(r.members().len(), 8);
    assert_eq!(r.caps().capacity_bytes(), 8 << 30);
    assert_eq!(r.chunk_bytes(), 64 << 10);
    let r = raid0_preset(
        "raid0-8x-hdd-15k",
        &keys(&[
            ("members", "4"),
            ("chunk", "128KiB"),
            ("capacity", "1GiB"),
            ("rpm", "10000"),
        ]),
    )
    .unwrap();
    assert_eq!(r.members().len(), 4);
    assert_eq!(r.chunk_bytes(), 128 << 10);
    assert!(r.describe().contains("rpm=10000"), "{}", r.describe());
    let e = raid0_preset("raid0-8x-hdd-15k", &keys(&[("wat", "1")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("members") && e.contains("seek_avg_ms"), "{e}");
    assert!(raid0_preset("raid5-8x-hdd-15k", &[]).is_err());
    assert!(raid0_preset("raid0-8x-floppy", &[]).is_err());
    assert!(raid0_preset("raid0-8x-hdd-15k", &keys(&[("members", "0")])).is_err());
    assert!(raid0_preset("raid0-8x-hdd-15k", &keys(&[("chunk", "3000")])).is_err());
    assert!(raid0_preset("raid0-8x-hdd-15k", &keys(&[("capacity", "64KiB")])).is_err());
}

#[test]
fn multi_chunk_requests_use_members_in_parallel() {
    let r = raid0_preset(
        "raid0-8x-hdd-15k",
        &keys(&[
            ("capacity", "8GiB"),
            ("latency", "emulate"),
            ("time_scale", "0.5"),
        ]),
    )
    .unwrap();
    // 512 KiB = 8 chunks = one chunk on every member.
    let mut buf = vec![0; 512 << 10];
    let t0 = Instant::now();
    for i in 0..6u64 {
        r.read(i * 300_000, &mut buf).unwrap();
    }
    let wall = t0.elapsed().as_secs_f64();
    let s = r.stats();
    let per_member_busy = s.busy_time_us as f64 / 8.0 / 1e6 * 0.5;
    // Serial member I/O would take ~8 × per-member busy time.
    assert!(
        wall < per_member_busy * 4.0,
        "wall {wall}s vs per-member {per_member_busy}s"
    );
    assert_eq!(s.host_read_requests, 6);
}

#[test]
fn raid_is_durable_on_ack_only_when_every_member_is() {
    let ssd = |plp: &str| -> DeviceRef {
        let opts = [("plp", plp), ("capacity", "256MiB"), ("backing", "none")];
        Arc::new(pagoda_device::ssd::Ssd::from_preset("nvme-ssd", &opts).unwrap())
    };
    let durable = |members| {
        Raid0::new(members, 65536)
            .unwrap()
            .as_power_cut()
            .unwrap()
            .durable_on_ack()
    };
    assert!(durable(vec![ssd("1"), ssd("1")]));
    assert!(!durable(vec![ssd("1"), ssd("0")]));
    // A mem device keeps a volatile pending list: writes can be lost before a flush.
    assert!(!durable(mems(2, 1 << 20, None)));
}
