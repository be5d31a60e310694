//! Every wrapper of this crate forwards what it does not change to the device beneath
//! (`DelegateDevice`): a test apart from the wrappers, so that no wrapper module imports
//! another.
use crate::fault::{FaultDevice, Recording};
use crate::pagecache::{PageCache, PageCacheOptions};
use crate::partition::split;
use crate::sched::{IoQueue, QueueOptions};
use crate::trace::TracingDevice;
use crate::{BlockDevice, DeviceRef, WriteHints, SECTOR_SIZE};
use std::sync::Arc;

/// Each wrapper of this crate over a fresh recording device, by name.
fn wrappers() -> Vec<(&'static str, Arc<Recording>, Box<dyn BlockDevice>)> {
    let rec = || Arc::new(Recording::new(4 << 20).expect("recording"));
    let mut all: Vec<(&'static str, Arc<Recording>, Box<dyn BlockDevice>)> = Vec::new();
    let r = rec();
    all.push((
        "trace",
        r.clone(),
        Box::new(TracingDevice::new(r, std::io::sink())),
    ));
    let r = rec();
    all.push(("faults", r.clone(), Box::new(FaultDevice::new(r))));
    let r = rec();
    let q = IoQueue::new(r.clone(), QueueOptions::default());
    all.push(("queue", r, Box::new(q)));
    let r = rec();
    let (head, tail) = split(r.clone() as DeviceRef, 1 << 20).expect("split");
    all.push(("partition head", r.clone(), Box::new(head)));
    all.push(("partition tail", r, Box::new(tail)));
    let r = rec();
    let opts = PageCacheOptions {
        capacity_bytes: 1 << 20,
        ..PageCacheOptions::default()
    };
    let cache = PageCache::new(r.clone(), opts).expect("page cache");
    all.push(("pagecache", r, Box::new(cache)));
    all
}

#[test]
fn every_wrapper_passes_counters_and_timing_down() {
    for (name, rec, dev) in wrappers() {
        let missed = rec.unforwarded(&*dev);
        assert!(missed.is_empty(), "{name} does not forward {missed:?}");
        assert!(
            dev.describe().contains("recording("),
            "{name}: {}",
            dev.describe()
        );
    }
}

#[test]
fn every_wrapper_passes_the_power_cut_down() {
    for (name, rec, dev) in wrappers() {
        let cuts = rec.cuts();
        dev.write(0, &[1u8; SECTOR_SIZE], WriteHints::NORMAL)
            .expect("write");
        let pc = dev
            .as_power_cut()
            .unwrap_or_else(|| panic!("{name}: no cut"));
        pc.power_cut(1).expect("cut");
        assert_eq!(rec.cuts(), cuts + 1, "{name}");
    }
}
