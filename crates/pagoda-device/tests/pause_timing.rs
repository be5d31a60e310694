//! `pause_timing`: a benchmark's load runs at CPU speed on an emulated device, which must end
//! up exactly as if the load had waited for every modeled delay, and be idle when resumed.
#![allow(clippy::unwrap_used)]

use pagoda_device::hdd::{Hdd, HddConfig};
use pagoda_device::spec::DeviceSpec;
use pagoda_device::{BlockDevice, DeviceStats, WriteHints};

/// Overwrites scattered 4 KiB units, enough for a preconditioned device to collect garbage.
fn overwrite(dev: &dyn BlockDevice, units: u64) {
    let buf = vec![7u8; 4096];
    let cap = dev.caps().capacity_sectors;
    for i in 0..units {
        dev.write((i * 7919) % cap, &buf, WriteHints::NORMAL)
            .unwrap();
        if i % 1000 == 999 {
            dev.flush().unwrap();
        }
    }
    dev.flush().unwrap();
}

/// The FTL's state as its counters show it (everything but time).
fn state(s: &DeviceStats) -> [u64; 7] {
    [
        s.host_write_pages,
        s.flash_programs,
        s.flash_reads,
        s.erases,
        s.gc_runs,
        s.copybacks,
        s.flushes,
    ]
}

#[test]
fn a_paused_ssd_evolves_as_an_emulated_one_and_accrues_no_busy_time() {
    let spec = "sata-ssd,capacity=64MiB,op=0.2,streams=1,stripe=1,precondition=1,\
                latency=emulate,time_scale=0.01";
    let timed = DeviceSpec::parse(spec).unwrap().open().unwrap();
    let paused = DeviceSpec::parse(spec).unwrap().open().unwrap();
    paused.pause_timing(true);
    overwrite(&*timed, 6000);
    overwrite(&*paused, 6000);
    let (t, p) = (timed.stats(), paused.stats());
    assert!(t.gc_runs > 0, "the overwrites must collect garbage: {t:?}");
    assert_eq!(state(&t), state(&p), "paused: {p:?}\ntimed: {t:?}");
    assert!(t.busy_time_us > 0);
    // Paused, the device accrues no busy time of its own (count mode would estimate some).
    paused.reset_stats();
    overwrite(&*paused, 10);
    let before = paused.stats().busy_time_us;
    assert_eq!(before, 0, "busy time while paused");
    paused.pause_timing(false);
    overwrite(&*paused, 10);
    assert!(
        paused.stats().busy_time_us > before,
        "resumed, the timeline counts again"
    );
    // Pausing twice (a data and a log partition of one device) then resuming once resumes.
    paused.pause_timing(true);
    paused.pause_timing(true);
    paused.pause_timing(false);
    let b = paused.stats().busy_time_us;
    overwrite(&*paused, 10);
    assert!(paused.stats().busy_time_us > b);
}

#[test]
fn a_resumed_disk_does_not_wait_for_the_paused_work() {
    let mut c = HddConfig::preset("hdd-15k").unwrap();
    c.set("latency", "emulate").unwrap();
    c.set("capacity", "1GiB").unwrap();
    let d = Hdd::new(c).unwrap();
    d.pause_timing(true);
    // 200 scattered writes: about a second of seeks and rotations, not waited for.
    overwrite(&d, 200);
    let backlog = d.modeled_now_ns();
    assert!(backlog > 500_000_000, "modeled work {backlog} ns");
    assert_eq!(d.stats().busy_time_us, 0, "no busy time while paused");
    d.pause_timing(false);
    let mut buf = vec![0u8; 4096];
    d.read(12_345, &mut buf).unwrap();
    // The read starts at the clock, not after the paused requests' modeled time.
    assert!(
        d.modeled_now_ns() < backlog,
        "the read finished at {} ns, after the paused backlog {backlog} ns",
        d.modeled_now_ns()
    );
    assert!(d.stats().busy_time_us > 0);
}
