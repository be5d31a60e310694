//! Direct-I/O writes on a device with 16 KiB atomic writes: each whole, aligned 16 KiB unit of
//! a file is one atomic device write, so after a power cut every such page is all old or all
//! new. Buffered writes of the same pages tear, which shows the check can fail. A unit that is
//! not aligned on the device is written plainly and counted.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use pagoda_device::spec::DeviceSpec;
use pagoda_device::DeviceRef;
use pagoda_fs::backing::ImageDevice;
use pagoda_fs::{Fs, FsOptions, FsStats, Kind, ROOT};
use std::sync::Arc;

const PAGE: usize = 16 * 1024;
const PAGES: usize = 32;

fn dev(atomic: &str) -> DeviceRef {
    DeviceSpec::parse(&format!("mem,capacity=16MiB,atomic={atomic}"))
        .unwrap()
        .open()
        .unwrap()
}

/// Pages written with 1s and fsynced, then rewritten with 2s (direct or buffered) and the
/// power cut: how many pages hold both after recovery, and the counters before the cut.
fn torn_pages(direct: bool, seed: u64) -> (usize, FsStats) {
    let d = dev("16KiB");
    let mut fs = Fs::format(d.clone(), FsOptions::default()).unwrap();
    let f = fs
        .create(ROOT, "ibdata1", Kind::File, 0o644, (0, 0), b"")
        .unwrap();
    fs.write_direct(f.ino, 0, &vec![1u8; PAGES * PAGE]).unwrap();
    fs.fsync(f.ino).unwrap();
    let new = vec![2u8; PAGES * PAGE];
    if direct {
        fs.write_direct(f.ino, 0, &new).unwrap();
    } else {
        fs.write(f.ino, 0, &new).unwrap();
    }
    let stats = fs.stats();
    fs.power_cut(seed, "test").unwrap();
    drop(fs);
    let mut fs = Fs::open(d, FsOptions::default()).unwrap();
    let got = fs.read(f.ino, 0, PAGES * PAGE).unwrap();
    assert_eq!(got.len(), PAGES * PAGE);
    let whole = |p: &[u8]| p.iter().all(|&x| x == 1) || p.iter().all(|&x| x == 2);
    (got.chunks(PAGE).filter(|p| !whole(p)).count(), stats)
}

#[test]
fn direct_pages_survive_a_power_cut_whole_and_buffered_ones_tear() {
    let mut buffered_torn = 0;
    for seed in 0..4 {
        let (torn, stats) = torn_pages(true, seed);
        assert_eq!(torn, 0, "seed {seed}: torn direct pages");
        assert_eq!(stats.atomic_writes, 2 * PAGES as u64, "seed {seed}");
        assert_eq!(stats.atomic_fallbacks, 0, "seed {seed}");
        let (torn, stats) = torn_pages(false, seed);
        assert_eq!(
            stats.atomic_writes, PAGES as u64,
            "only the first, direct pass"
        );
        buffered_torn += torn;
    }
    eprintln!(
        "torn pages after 4 cuts: direct 0, buffered {buffered_torn} of {}",
        4 * PAGES
    );
    assert!(buffered_torn > 0, "buffered pages tear on this device");
}

#[test]
fn only_whole_aligned_units_are_atomic() {
    let mut fs = Fs::format(dev("16KiB"), FsOptions::default()).unwrap();
    let f = fs
        .create(ROOT, "f", Kind::File, 0o644, (0, 0), b"")
        .unwrap();
    // 8 KiB into a unit, 32 KiB long: one whole unit (16-32 KiB) and two partial ones.
    fs.write_direct(f.ino, 8192, &[3u8; 32768]).unwrap();
    assert_eq!(fs.stats().atomic_writes, 1);
    assert_eq!(fs.stats().atomic_fallbacks, 0);
    assert_eq!(fs.read(f.ino, 8192, 32768).unwrap(), vec![3u8; 32768]);
    assert_eq!(fs.read(f.ino, 0, 8192).unwrap(), vec![0u8; 8192]);
    // No atomic unit on the device: plain writes.
    let mut fs = Fs::format(dev("0"), FsOptions::default()).unwrap();
    let f = fs
        .create(ROOT, "f", Kind::File, 0o644, (0, 0), b"")
        .unwrap();
    fs.write_direct(f.ino, 0, &[3u8; 65536]).unwrap();
    assert_eq!(fs.stats().atomic_writes + fs.stats().atomic_fallbacks, 0);
}

/// A file placed without atomic units (made on an `atomic=0` device, moved through a backing
/// image) has units that are not aligned on the device: direct writes to them are plain and
/// counted, and read back intact; a new file is placed aligned.
#[test]
fn units_not_aligned_on_the_device_are_written_plainly_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("dev.img");
    let ino = {
        let (d, _) = ImageDevice::open(&img, dev("0")).unwrap();
        let mut fs = Fs::format(Arc::new(d), FsOptions::default()).unwrap();
        let f = fs
            .create(ROOT, "old", Kind::File, 0o644, (0, 0), b"")
            .unwrap();
        fs.write(f.ino, 0, &[1u8; 65536]).unwrap();
        fs.sync().unwrap();
        f.ino
    };
    let (d, _) = ImageDevice::open(&img, dev("16KiB")).unwrap();
    let mut fs = Fs::open(Arc::new(d), FsOptions::default()).unwrap();
    fs.write_direct(ino, 0, &[2u8; 65536]).unwrap();
    assert_eq!(
        (fs.stats().atomic_writes, fs.stats().atomic_fallbacks),
        (0, 4),
        "the data area starts off a 16 KiB boundary, so the old file's units do too"
    );
    assert_eq!(fs.read(ino, 0, 65536).unwrap(), vec![2u8; 65536]);
    let f = fs
        .create(ROOT, "new", Kind::File, 0o644, (0, 0), b"")
        .unwrap();
    fs.write_direct(f.ino, 0, &[3u8; 65536]).unwrap();
    assert_eq!(fs.stats().atomic_writes, 4);
}
