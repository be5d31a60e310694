//! Random bytes over the mount's image (superblock, metadata slots): `Fs::open` says what is
//! wrong, or opens from the intact slot. Never a panic.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use pagoda_device::spec::DeviceSpec;
use pagoda_device::{DeviceRef, WriteHints};
use pagoda_fs::{Fs, FsError, FsOptions, Kind, ROOT};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const SECTOR: usize = 4096;
/// Metadata slot size for a 16 MiB device (4,096 sectors / 128, at least 64).
const SLOT: u64 = 64;
const SEEDS: u64 = 8;

/// A file system with both metadata slots written: slot 1 by the format, slot 0 by the sync
/// that holds the file "f".
fn image() -> DeviceRef {
    let d = DeviceSpec::parse("mem,capacity=16MiB")
        .unwrap()
        .open()
        .unwrap();
    let mut fs = Fs::format(d.clone(), FsOptions::default()).unwrap();
    let f = fs
        .create(ROOT, "f", Kind::File, 0o644, (0, 0), b"")
        .unwrap();
    fs.write(f.ino, 0, b"kept").unwrap();
    fs.sync().unwrap();
    drop(fs);
    d
}

fn scribble(dev: &DeviceRef, first: u64, sectors: usize, rng: &mut SmallRng) {
    let mut b = vec![0u8; sectors * SECTOR];
    rng.fill(&mut b[..]);
    dev.write(first, &b, WriteHints::NORMAL).unwrap();
    dev.flush().unwrap();
}

fn open(d: &DeviceRef) -> Result<Fs, FsError> {
    Fs::open(d.clone(), FsOptions::default())
}

#[test]
fn garbage_superblock_is_no_file_system() {
    for seed in 0..SEEDS {
        let d = image();
        scribble(&d, 0, 1, &mut SmallRng::seed_from_u64(seed));
        let r = open(&d);
        assert!(
            matches!(r, Err(FsError::NotFormatted)),
            "seed {seed}: {:?}",
            r.map(|_| ())
        );
    }
}

#[test]
fn garbage_in_both_slots_is_damage_naming_them() {
    for seed in 0..SEEDS {
        let d = image();
        let mut rng = SmallRng::seed_from_u64(100 + seed);
        // The header sectors, or the whole slots.
        let sectors = if seed % 2 == 0 { 1 } else { SLOT as usize };
        scribble(&d, 1, sectors, &mut rng);
        scribble(&d, 1 + SLOT, sectors, &mut rng);
        match open(&d) {
            Err(FsError::Corrupt(m)) => assert!(m.contains("metadata slot"), "seed {seed}: {m}"),
            other => panic!("seed {seed}: {:?}", other.map(|_| ())),
        }
    }
}

/// Either slot in turn: the other one opens. The sync's slot (0) holds the file; the format's
/// slot (1) does not.
#[test]
fn garbage_in_one_slot_opens_from_the_other() {
    for seed in 0..SEEDS {
        let d = image();
        let slot = seed % 2;
        scribble(
            &d,
            1 + slot * SLOT,
            SLOT as usize,
            &mut SmallRng::seed_from_u64(200 + seed),
        );
        let mut fs = open(&d).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let found = fs.lookup(ROOT, "f");
        if slot == 0 {
            assert!(matches!(found, Err(FsError::NotFound)), "seed {seed}");
        } else {
            let ino = found.unwrap().ino;
            assert_eq!(fs.read(ino, 0, 4).unwrap(), b"kept", "seed {seed}");
        }
    }
}
