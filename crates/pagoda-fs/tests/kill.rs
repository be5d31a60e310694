//! The mount's promise for `--backing`: what an fsync acknowledged survives a `kill -9`, with
//! no save at exit. Shown without FUSE or root: the file system runs as `pagoda mount` runs it
//! (`ImageDevice` under `Fs::open_or_format`, fsync through `Fs`, which flushes the image
//! device), but the image sits in a store that keeps only what the image fdatasynced when
//! the "process dies" (`common::VolatileImage`). A real kill of a real process cannot show a
//! missing sync: the kernel keeps the dead process's writes in its page cache. (The FUSE
//! adapter's fsync reaches the same device flush; `exerciser.rs` kills under a real mount.)
//!
//! Shown to fail, each by a temporary edit: with no `sync_data` in `ImageDevice::flush`
//! (`src/backing.rs`), the first restart finds no file system; with it only in the first two
//! flushes (the format's commit), the first restart finds no `f0`; with `Fs::fsync` not
//! flushing when there is no metadata to commit, `f0` differs where it was overwritten in
//! place.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

mod common;

use common::VolatileImage;
use pagoda_device::spec::DeviceSpec;
use pagoda_device::DeviceRef;
use pagoda_fs::backing::{ImageDevice, ImageFile};
use pagoda_fs::{Fs, FsOptions, Kind, ROOT};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

const SEED: u64 = 0x6b69_6c6c;

/// The mount's start: a fresh device (the old one died with the process), the image loaded
/// into it, the file system recovered from it or, the first time, made; `true`: made.
fn start(store: &VolatileImage) -> (Fs, bool) {
    let raw: DeviceRef = DeviceSpec::parse("mem,capacity=16MiB")
        .unwrap()
        .open()
        .unwrap();
    let (img, _loaded) =
        ImageDevice::open_in(Box::new(store.clone()), Path::new("volatile.img"), raw).unwrap();
    Fs::open_or_format(Arc::new(img), FsOptions::default()).unwrap()
}

/// Random bytes, a random count of them in `len`.
fn bytes(rng: &mut SmallRng, len: std::ops::Range<usize>) -> Vec<u8> {
    let n = rng.gen_range(len);
    (0..n).map(|_| rng.gen()).collect()
}

fn ino(fs: &mut Fs, name: &str) -> u64 {
    match fs.lookup(ROOT, name) {
        Ok(a) => a.ino,
        Err(_) => {
            fs.create(ROOT, name, Kind::File, 0o644, (0, 0), b"")
                .unwrap()
                .ino
        }
    }
}

/// Each round: start from the image, check every file against what was fsynced, change
/// files and fsync (a commit: new blocks and sizes), overwrite in place and fsync (no
/// metadata: a device flush alone), write more without fsync, then die without a word.
#[test]
fn fsynced_data_survives_kills_that_drop_unsynced_writes() {
    let store = VolatileImage::default();
    let mut rng = SmallRng::seed_from_u64(SEED);
    // Each file as of the last fsync.
    let mut synced: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    // What the last kill kept of the unsynced changes: `None` nothing, else a random half.
    let mut keep: Option<u64> = None;
    for round in 0..8u64 {
        let why = format!(
            "round {round} (seed {SEED:#x}), after a kill that kept {}",
            keep.map_or("no unsynced change".into(), |s| format!(
                "a random half (seed {s})"
            ))
        );
        let (mut fs, formatted) = start(&store);
        assert_eq!(
            formatted,
            round == 0,
            "{why}: the image must hold the file system made and fsynced before"
        );
        for (name, want) in &synced {
            let ino = fs
                .lookup(ROOT, name)
                .unwrap_or_else(|e| panic!("{why}: fsynced file {name} is gone: {e}"))
                .ino;
            let got = fs.read(ino, 0, want.len() + 4096).unwrap();
            assert!(
                got == *want,
                "{why}: {name} holds {} bytes, not the {} fsynced ones (first difference at \
                 {:?})",
                got.len(),
                want.len(),
                got.iter().zip(want).position(|(a, b)| a != b)
            );
        }

        // Metadata changes: a new file, an append (new blocks, a new size), a truncate.
        let name = format!("f{round}");
        let f = ino(&mut fs, &name);
        let data = bytes(&mut rng, 1..200_000);
        fs.write(f, 0, &data).unwrap();
        synced.insert(name.clone(), data);
        if round > 0 {
            let prev = format!("f{}", round - 1);
            let p = ino(&mut fs, &prev);
            let model = synced.get_mut(&prev).unwrap();
            let more = bytes(&mut rng, 1..50_000);
            fs.write(p, model.len() as u64, &more).unwrap();
            model.extend_from_slice(&more);
            let cut = rng.gen_range(0..model.len());
            fs.setattr(
                p,
                &pagoda_fs::SetAttr {
                    size: Some(cut as u64),
                    ..Default::default()
                },
            )
            .unwrap();
            model.truncate(cut);
        }
        fs.fsync(f).unwrap();

        // Data only: the same blocks again, so the fsync commits nothing and only flushes.
        let model = synced.get_mut(&name).unwrap();
        let at = rng.gen_range(0..model.len());
        let len = rng.gen_range(1..=model.len() - at);
        let new = bytes(&mut rng, len..len + 1);
        fs.write(f, at as u64, &new).unwrap();
        model[at..at + len].copy_from_slice(&new);
        let commits = fs.stats().commits;
        fs.fsync(f).unwrap();
        assert_eq!(fs.stats().commits, commits, "{why}: a flush, no commit");

        // After the last fsync: new files and appends, lost or not, never visible in the
        // files above (their sizes were not committed).
        let late = ino(&mut fs, &format!("late{round}"));
        fs.write(late, 0, &bytes(&mut rng, 1..30_000)).unwrap();
        fs.write(f, synced[&name].len() as u64, &bytes(&mut rng, 1..10_000))
            .unwrap();
        assert!(store.unsynced() > 0, "{why}: some writes are unsynced");
        // A killed process runs no destructors.
        std::mem::forget(fs);
        keep = (round % 2 == 1).then_some(SEED + round);
        store.kill(keep);
    }
}

/// The store forgets what was not synced, or part of it: else the test above could not fail.
#[test]
fn the_volatile_store_keeps_only_what_was_synced() {
    let store = VolatileImage::default();
    store.set_size(4 * 4096).unwrap();
    store.write_all_at(&[1; 4096], 0).unwrap();
    store.sync_data().unwrap();
    store.write_all_at(&[2; 4096], 4096).unwrap();
    store.punch_hole(0, 4096).unwrap();
    let mut b = vec![0u8; 2 * 4096];
    store.read_exact_at(&mut b, 0).unwrap();
    assert_eq!(
        b,
        [[0u8; 4096], [2; 4096]].concat(),
        "reads see every write"
    );
    store.kill(None);
    store.read_exact_at(&mut b, 0).unwrap();
    assert_eq!(
        b,
        [[1u8; 4096], [0; 4096]].concat(),
        "only the synced write"
    );
    // Some seed keeps the unsynced write and some drops it.
    let mut seen = [false; 2];
    for seed in 0..16 {
        store.write_all_at(&[3; 4096], 4096).unwrap();
        store.kill(Some(seed));
        store.read_exact_at(&mut b[..4096], 4096).unwrap();
        seen[usize::from(b[0] == 3)] = true;
        store.write_all_at(&[0; 4096], 4096).unwrap();
        store.sync_data().unwrap();
    }
    assert_eq!(seen, [true, true]);
}
