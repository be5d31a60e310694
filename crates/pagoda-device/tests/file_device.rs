//! Tests of `FileDevice` on temporary files.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use pagoda_device::file::{FileDevice, FileOptions, DEFAULT_FILE_CAPACITY};
use pagoda_device::{BlockDevice, DeviceError, WriteHints, SECTOR_SIZE};
use std::sync::Arc;

fn pattern(seed: u64, sectors: usize) -> Vec<u8> {
    (0..sectors * SECTOR_SIZE)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 / 7) % 251) as u8)
        .collect()
}

fn small(dir: &tempfile::TempDir, name: &str) -> FileDevice {
    FileDevice::open(
        &dir.path().join(name),
        FileOptions {
            capacity_bytes: Some(1 << 20),
            streams: 2,
            ..FileOptions::default()
        },
    )
    .unwrap()
}

#[test]
fn roundtrip_and_stats() {
    let dir = tempfile::tempdir().unwrap();
    let d = small(&dir, "a");
    assert_eq!(d.caps().capacity_sectors, 256);
    assert_eq!(
        d.caps().atomic_write_unit,
        None,
        "buffered files never claim atomic writes"
    );
    let data = pattern(1, 3);
    d.write(10, &data, WriteHints::stream(1)).unwrap();
    d.flush().unwrap();
    let mut back = vec![0; 3 * SECTOR_SIZE];
    d.read(10, &mut back).unwrap();
    assert_eq!(back, data);
    let s = d.stats();
    assert_eq!(s.host_write_pages, 3);
    assert_eq!(s.host_read_pages, 3);
    assert_eq!(s.host_write_requests, 1);
    assert_eq!(s.flushes, 1);
    assert_eq!(s.streams[1].host_write_pages, 3);
    assert_eq!(s.streams[0].host_write_pages, 0);
    d.reset_stats();
    assert_eq!(d.stats().host_read_pages, 0);
    drop(d);
    // Reopening keeps the data.
    let d = small(&dir, "a");
    let mut back = vec![0; 3 * SECTOR_SIZE];
    d.read(10, &mut back).unwrap();
    assert_eq!(back, data);
}

#[test]
fn default_capacity_is_sparse_and_reads_zeros() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big");
    let d = FileDevice::open(&path, FileOptions::default()).unwrap();
    assert_eq!(d.caps().capacity_bytes(), DEFAULT_FILE_CAPACITY);
    let mut buf = vec![7u8; 2 * SECTOR_SIZE];
    d.read(d.caps().capacity_sectors - 2, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0));
    let meta = std::fs::metadata(&path).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert!(meta.blocks() * 512 < 1 << 20, "the file must stay sparse");
}

#[test]
fn punch_hole_zeroes() {
    let dir = tempfile::tempdir().unwrap();
    let d = small(&dir, "t");
    d.write(0, &pattern(3, 8), WriteHints::NORMAL).unwrap();
    d.trim(2, 4).unwrap();
    let mut buf = vec![0; 8 * SECTOR_SIZE];
    d.read(0, &mut buf).unwrap();
    let want = pattern(3, 8);
    for (i, c) in buf.chunks(SECTOR_SIZE).enumerate() {
        if (2..6).contains(&i) {
            assert!(c.iter().all(|&b| b == 0), "sector {i} should be zero");
        } else {
            assert_eq!(c, &want[i * SECTOR_SIZE..(i + 1) * SECTOR_SIZE]);
        }
    }
    assert_eq!(d.stats().trimmed_pages, 4);
}

#[test]
fn bad_requests_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = small(&dir, "e");
    let mut one = vec![0; SECTOR_SIZE];
    assert!(matches!(
        d.read(256, &mut one),
        Err(DeviceError::OutOfRange { .. })
    ));
    assert!(matches!(
        d.write(255, &vec![0; 2 * SECTOR_SIZE], WriteHints::NORMAL),
        Err(DeviceError::OutOfRange { .. })
    ));
    let mut odd = vec![0; 1000];
    assert!(matches!(
        d.read(0, &mut odd),
        Err(DeviceError::Misaligned { .. })
    ));
    assert!(matches!(
        d.write(0, &[], WriteHints::NORMAL),
        Err(DeviceError::Misaligned { .. })
    ));
    assert!(matches!(
        d.write(0, &one, WriteHints::atomic(0)),
        Err(DeviceError::AtomicRejected(_))
    ));
    assert!(matches!(
        d.write(0, &one, WriteHints::stream(2)),
        Err(DeviceError::BadStream { .. })
    ));
    assert!(matches!(
        d.trim(250, 7),
        Err(DeviceError::OutOfRange { .. })
    ));
    let bad = FileDevice::open(
        &dir.path().join("x"),
        FileOptions {
            capacity_bytes: Some(1000),
            ..FileOptions::default()
        },
    );
    assert!(matches!(bad, Err(DeviceError::Config(_))));
    assert!(
        FileDevice::open(dir.path(), FileOptions::default()).is_err(),
        "a directory"
    );
    let mut o = FileOptions::default();
    assert!(o.set("direct", "1").is_ok() && o.direct);
    assert!(o.set("bogus", "1").is_err());
    assert!(o.set("direct", "maybe").is_err());
}

#[test]
fn short_file_gives_short_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let d = FileDevice::open(
        &path,
        FileOptions {
            capacity_bytes: Some(1 << 20),
            ..FileOptions::default()
        },
    )
    .unwrap();
    // Someone truncates the file behind the device's back.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(8192)
        .unwrap();
    let mut buf = vec![0; SECTOR_SIZE];
    assert!(matches!(
        d.read(10, &mut buf),
        Err(DeviceError::Short { .. })
    ));
}

#[test]
fn direct_mode_roundtrip_with_bounce_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("direct");
    let opts = FileOptions {
        direct: true,
        capacity_bytes: Some(1 << 20),
        ..FileOptions::default()
    };
    let d = match FileDevice::open(&path, opts) {
        Ok(d) => d,
        Err(DeviceError::Config(msg)) if msg.contains("O_DIRECT") => {
            println!("skipping direct-mode test: {msg}");
            return;
        }
        Err(e) => panic!("unexpected error: {e}"),
    };
    assert!(d.is_direct());
    // A Vec<u8> of 3 sectors offset by one byte is surely misaligned.
    let mut storage = vec![0u8; 3 * SECTOR_SIZE + 1];
    let data = pattern(9, 3);
    storage[1..].copy_from_slice(&data);
    d.write(5, &storage[1..], WriteHints::NORMAL).unwrap();
    d.flush().unwrap();
    let mut back = vec![0u8; 3 * SECTOR_SIZE + 1];
    d.read(5, &mut back[1..]).unwrap();
    assert_eq!(&back[1..], &data[..]);
    assert!(d.bounce_copies() >= 2);
    if let Some(unit) = d.caps().atomic_write_unit {
        println!("filesystem reports an atomic-write unit of {unit} bytes");
        let a = pattern(4, 1);
        d.write(0, &a, WriteHints::atomic(0)).unwrap();
    }
}

#[test]
fn many_threads_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = Arc::new(small(&dir, "c"));
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let d = d.clone();
            s.spawn(move || {
                for i in 0..32u64 {
                    let sector = t * 64 + i * 2;
                    let data = pattern(t * 1000 + i, 2);
                    d.write(sector, &data, WriteHints::NORMAL).unwrap();
                    let mut back = vec![0; 2 * SECTOR_SIZE];
                    d.read(sector, &mut back).unwrap();
                    assert_eq!(back, data);
                }
            });
        }
    });
    let s = d.stats();
    assert_eq!(s.host_write_requests, 128);
    assert_eq!(s.host_write_pages, 256);
}

/// `atomic=SIZE` on a file system without atomic writes (the temp dir is ext4, overlayfs or
/// tmpfs on most machines) is refused with what statx reported and where to get them.
#[test]
fn atomic_unit_is_refused_with_what_statx_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("atomic");
    let opts = FileOptions {
        capacity_bytes: Some(1 << 20),
        atomic: Some(16 * 1024),
        ..FileOptions::default()
    };
    match FileDevice::open(&path, opts) {
        Ok(d) => {
            // A temp dir on XFS with reflink: the unit is the one asked, and it works.
            assert_eq!(d.caps().atomic_write_unit, Some(16 * 1024));
            assert!(d.is_direct(), "atomic= turns O_DIRECT on");
            let page = pattern(5, 4);
            d.write(4, &page, WriteHints::atomic(0)).unwrap();
            println!("the temp dir offers 16 KiB atomic writes: {}", d.describe());
        }
        Err(e @ DeviceError::NoAtomicWrites { .. }) => {
            let msg = e.to_string();
            println!("{msg}");
            assert!(
                msg.contains("statx") || msg.contains("O_DIRECT"),
                "says what the kernel reported: {msg}"
            );
            assert!(msg.contains(&path.display().to_string()), "{msg}");
            assert!(
                msg.contains("scripts/xfs-atomic.sh"),
                "names the fix: {msg}"
            );
            assert!(msg.contains("reflink"), "names the fix: {msg}");
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
    for bad in ["12KiB", "2048"] {
        let mut o = FileOptions::default();
        o.set("atomic", bad).unwrap();
        let e = FileDevice::open(&dir.path().join("bad"), o).unwrap_err();
        assert!(matches!(e, DeviceError::Config(_)), "{bad}: {e}");
    }
}

#[test]
fn a_write_behind_write_reads_back_and_counts_as_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let d = small(&dir, "wb");
    let data = pattern(9, 8);
    d.write(16, &data, WriteHints::stream(1).behind()).unwrap();
    let mut back = vec![0; 8 * SECTOR_SIZE];
    d.read(16, &mut back).unwrap();
    assert_eq!(back, data);
    let s = d.stats();
    assert_eq!(s.host_write_pages, 8);
    assert_eq!(s.streams[1].host_write_pages, 8);
    assert_eq!(s.flushes, 0, "the hint starts write-back; it is no flush");
    d.flush().unwrap();
    drop(d);
    let d = small(&dir, "wb");
    d.read(16, &mut back).unwrap();
    assert_eq!(back, data);
}
