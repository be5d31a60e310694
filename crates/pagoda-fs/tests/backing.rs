//! The backing image without FUSE: what a flush acknowledged is in the image with no save at
//! the end (everything is dropped, the image loaded into a fresh device); a trim reads as
//! zeros after the reload; after a power cut the image holds what survived the cut; and an
//! fsync through the file system reaches the image.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use pagoda_device::spec::DeviceSpec;
use pagoda_device::{BlockDevice, DeviceRef, WriteHints};
use pagoda_fs::backing::ImageDevice;
use pagoda_fs::{Fs, FsOptions, Kind, ROOT};
use std::path::Path;
use std::sync::Arc;

const B: usize = 4096;

fn mem() -> DeviceRef {
    DeviceSpec::parse("mem,capacity=16MiB")
        .unwrap()
        .open()
        .unwrap()
}

/// `n` sectors whose bytes say their sector and `tag`.
fn data(sector: u64, n: usize, tag: u8) -> Vec<u8> {
    (0..n * B)
        .map(|i| (sector as usize * 31 + i / B * 7 + i % 251) as u8 ^ tag)
        .collect()
}

fn read(d: &dyn BlockDevice, sector: u64, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n * B];
    d.read(sector, &mut b).unwrap();
    b
}

/// A fresh device with the image loaded, as the next mount sees it.
fn reload(img: &Path) -> ImageDevice {
    let (d, loaded) = ImageDevice::open(img, mem()).unwrap();
    assert!(loaded, "the image exists");
    d
}

#[test]
fn flushed_writes_and_trims_are_in_the_image_without_a_save() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("dev.img");
    let (d, loaded) = ImageDevice::open(&img, mem()).unwrap();
    assert!(!loaded, "a new image");
    assert_eq!(std::fs::metadata(&img).unwrap().len(), 16 << 20);
    d.write(100, &data(100, 4, 1), WriteHints::NORMAL).unwrap();
    d.write(2000, &data(2000, 1, 2), WriteHints::NORMAL)
        .unwrap();
    d.write(3000, &data(3000, 3, 3), WriteHints::NORMAL)
        .unwrap();
    d.flush().unwrap();
    d.trim(3000, 3).unwrap();
    d.flush().unwrap();
    // After the last flush: may be lost, need not be.
    d.write(100, &data(100, 1, 9), WriteHints::NORMAL).unwrap();
    d.write(4000, &data(4000, 2, 9), WriteHints::NORMAL)
        .unwrap();
    drop(d);

    let d = reload(&img);
    let first = read(&d, 100, 1);
    assert!(
        first == data(100, 1, 1) || first == data(100, 1, 9),
        "sector 100 holds its flushed or its later version"
    );
    assert_eq!(read(&d, 101, 3), data(100, 4, 1)[B..]);
    assert_eq!(read(&d, 2000, 1), data(2000, 1, 2));
    assert_eq!(read(&d, 3000, 3), vec![0u8; 3 * B], "trimmed after a flush");
}

#[test]
fn an_image_in_use_or_of_another_size_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("dev.img");
    let (d, _) = ImageDevice::open(&img, mem()).unwrap();
    let busy = ImageDevice::open(&img, mem()).unwrap_err().to_string();
    assert!(busy.contains("another process uses this image"), "{busy}");
    drop(d);
    let small = DeviceSpec::parse("mem,capacity=8MiB")
        .unwrap()
        .open()
        .unwrap();
    let e = ImageDevice::open(&img, small).unwrap_err().to_string();
    assert!(
        e.contains("holds 16777216 bytes") && e.contains("capacity="),
        "{e}"
    );
}

/// The cut keeps a random half of the unflushed sectors; the image must hold the same.
#[test]
fn after_a_power_cut_the_image_holds_what_survived() {
    for seed in 0..4 {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("dev.img");
        let (d, _) = ImageDevice::open(&img, mem()).unwrap();
        d.write(0, &data(0, 64, 1), WriteHints::NORMAL).unwrap();
        d.flush().unwrap();
        for s in 0..64 {
            d.write(s, &data(s, 1, 2), WriteHints::NORMAL).unwrap();
        }
        d.trim(70, 1).unwrap();
        d.write(200, &data(200, 32, 3), WriteHints::NORMAL).unwrap();
        let report = d.as_power_cut().unwrap().power_cut(seed).unwrap();
        assert!(
            report.kept_sectors > 0 && report.dropped_sectors > 0,
            "seed {seed}: {report:?}"
        );
        let after = read(&d, 0, 256);
        drop(d);
        let again = reload(&img);
        let loaded = read(&again, 0, 256);
        for s in 0..256 {
            let r = s * B..(s + 1) * B;
            assert!(
                after[r.clone()] == loaded[r],
                "seed {seed}: sector {s} differs from the device after the cut"
            );
        }
    }
}

/// fsync through the file system is a device flush, so it reaches the image.
#[test]
fn an_fsynced_file_reopens_from_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("dev.img");
    let content = data(7, 50, 4);
    {
        let (d, _) = ImageDevice::open(&img, mem()).unwrap();
        let dev: DeviceRef = Arc::new(d);
        let mut fs = Fs::format(dev, FsOptions::default()).unwrap();
        let f = fs
            .create(ROOT, "f", Kind::File, 0o644, (0, 0), b"")
            .unwrap();
        fs.write(f.ino, 0, &content).unwrap();
        fs.fsync(f.ino).unwrap();
        fs.write(f.ino, content.len() as u64, b"later").unwrap();
        // Dropped without sync: like a kill.
    }
    let dev: DeviceRef = Arc::new(reload(&img));
    let mut fs = Fs::open(dev, FsOptions::default()).unwrap();
    let ino = fs.lookup(ROOT, "f").unwrap().ino;
    assert_eq!(fs.read(ino, 0, content.len() + 10).unwrap(), content);
}
