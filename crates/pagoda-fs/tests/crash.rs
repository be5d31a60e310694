//! Power cuts at random points: after recovery the file system is the one of the last commit
//! (names, sizes exactly), and each 4 KiB block of each file holds its content at that commit
//! or a version written after it (never anything else).
//!
//! The cut lands either between operations or right after a random device write (inside a
//! write, a truncate, or a commit: a torn metadata slot must fall back to the older one).

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use pagoda_device::spec::DeviceSpec;
use pagoda_device::DeviceRef;
use pagoda_fs::{Fs, FsError, FsOptions, Kind, SetAttr, ROOT};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, HashMap};

const B: usize = 4096;
const DIRS: [&str; 2] = ["d0", "d1"];

/// What the test believes; a file is identified by a model id that survives renames.
#[derive(Clone, Debug, Default)]
struct Model {
    dirs: BTreeSet<String>,
    files: BTreeMap<String, u64>,
    data: HashMap<u64, Vec<u8>>,
}

/// The state of one commit and every block version written since.
#[derive(Clone, Debug)]
struct Durable {
    model: Model,
    versions: HashMap<(u64, usize), Vec<Vec<u8>>>,
}

impl Durable {
    fn of(model: &Model) -> Self {
        let mut d = Self {
            model: model.clone(),
            versions: HashMap::new(),
        };
        d.note(model);
        d
    }

    /// Adds the current content of every committed block of every committed file.
    fn note(&mut self, now: &Model) {
        for (&id, data) in &self.model.data {
            let Some(cur) = now.data.get(&id) else {
                continue;
            };
            for b in 0..data.len().div_ceil(B) {
                let v = block(cur, b);
                let e = self.versions.entry((id, b)).or_default();
                if !e.contains(&v) {
                    e.push(v);
                }
            }
        }
    }

    /// Whether `fs` shows this commit.
    fn check(&self, fs: &mut Fs) -> Result<(), String> {
        let (dirs, files) = listing(fs);
        if dirs != self.model.dirs {
            return Err(format!("dirs {dirs:?}, expected {:?}", self.model.dirs));
        }
        let names: BTreeSet<&String> = files.keys().collect();
        let want: BTreeSet<&String> = self.model.files.keys().collect();
        if names != want {
            return Err(format!("files {names:?}, expected {want:?}"));
        }
        for (path, &ino) in &files {
            let id = self.model.files[path];
            let want = &self.model.data[&id];
            let got = fs
                .read(ino, 0, want.len() + 10)
                .map_err(|e| e.to_string())?;
            if got.len() != want.len() {
                return Err(format!(
                    "{path}: size {}, expected {}",
                    got.len(),
                    want.len()
                ));
            }
            for b in 0..want.len().div_ceil(B) {
                let end = B.min(want.len() - b * B);
                let g = &got[b * B..b * B + end];
                if !self.versions[&(id, b)].iter().any(|v| &v[..end] == g) {
                    return Err(format!("{path} block {b}: content never written there"));
                }
            }
        }
        Ok(())
    }
}

fn block(data: &[u8], b: usize) -> Vec<u8> {
    let mut v = vec![0u8; B];
    if b * B < data.len() {
        let end = data.len().min((b + 1) * B);
        v[..end - b * B].copy_from_slice(&data[b * B..end]);
    }
    v
}

/// `(dirs, path -> ino)` of the file system (one level of directories).
fn listing(fs: &Fs) -> (BTreeSet<String>, BTreeMap<String, u64>) {
    let mut dirs = BTreeSet::new();
    let mut files = BTreeMap::new();
    for (ino, kind, name) in fs.readdir(ROOT).unwrap() {
        if kind == Kind::Dir {
            for (i, _, n) in fs.readdir(ino).unwrap() {
                files.insert(format!("{name}/{n}"), i);
            }
            dirs.insert(name);
        } else {
            files.insert(name, ino);
        }
    }
    (dirs, files)
}

fn resolve(fs: &Fs, path: &str) -> Option<(u64, String)> {
    match path.split_once('/') {
        Some((d, n)) => Some((fs.lookup(ROOT, d).ok()?.ino, n.to_string())),
        None => Some((ROOT, path.to_string())),
    }
}

fn random_path(rng: &mut SmallRng, m: &Model) -> String {
    let name = format!("f{}", rng.gen_range(0..6));
    let dirs: Vec<&String> = m.dirs.iter().collect();
    if !dirs.is_empty() && rng.gen_bool(0.4) {
        format!("{}/{name}", dirs[rng.gen_range(0..dirs.len())])
    } else {
        name
    }
}

/// One random operation; `Err` only from the power cut.
fn step(
    fs: &mut Fs,
    m: &mut Model,
    next_id: &mut u64,
    rng: &mut SmallRng,
) -> Result<bool, FsError> {
    let path = random_path(rng, m);
    let (parent, name) = resolve(fs, &path).expect("model and fs agree on dirs");
    match rng.gen_range(0..100) {
        0..=39 => {
            let id = match m.files.get(&path) {
                Some(&id) => id,
                None => {
                    fs.create(parent, &name, Kind::File, 0o644, (0, 0), b"")?;
                    *next_id += 1;
                    m.files.insert(path.clone(), *next_id);
                    m.data.insert(*next_id, Vec::new());
                    *next_id
                }
            };
            let ino = fs.lookup(parent, &name)?.ino;
            let off = rng.gen_range(0..48 * 1024usize);
            let len = rng.gen_range(1..20_000usize);
            let byte: u8 = rng.gen();
            let buf: Vec<u8> = (0..len)
                .map(|i| byte.wrapping_add((i / 512) as u8))
                .collect();
            let d = m.data.get_mut(&id).unwrap();
            if d.len() < off + len {
                d.resize(off + len, 0);
            }
            d[off..off + len].copy_from_slice(&buf);
            fs.write(ino, off as u64, &buf)?;
        }
        40..=49 => {
            if let Some(&id) = m.files.get(&path) {
                let size = rng.gen_range(0..40_000usize);
                m.data.get_mut(&id).unwrap().resize(size, 0);
                let ino = fs.lookup(parent, &name)?.ino;
                let set = SetAttr {
                    size: Some(size as u64),
                    ..SetAttr::default()
                };
                fs.setattr(ino, &set)?;
            }
        }
        50..=59 => {
            if let Some(id) = m.files.remove(&path) {
                let to = random_path(rng, m);
                let (np, nn) = resolve(fs, &to).unwrap();
                if let Some(old) = m.files.insert(to, id) {
                    if old != id {
                        m.data.remove(&old);
                    }
                }
                fs.rename(parent, &name, np, &nn, false)?;
            }
        }
        60..=66 => {
            if let Some(id) = m.files.remove(&path) {
                m.data.remove(&id);
                fs.unlink(parent, &name)?;
            }
        }
        67..=72 => {
            let d = DIRS[rng.gen_range(0..2)];
            if m.dirs.contains(d) {
                if !m.files.keys().any(|p| p.starts_with(&format!("{d}/"))) {
                    m.dirs.remove(d);
                    fs.rmdir(ROOT, d)?;
                }
            } else {
                m.dirs.insert(d.to_string());
                fs.create(ROOT, d, Kind::Dir, 0o755, (0, 0), b"")?;
            }
        }
        _ => {
            let ino = fs.lookup(parent, &name).map_or(ROOT, |a| a.ino);
            fs.fsync(ino)?;
            return Ok(true);
        }
    }
    Ok(false)
}

/// `cycles` rounds of random operations, each ended by a power cut and a recovery.
fn run(spec: &str, cycles: u64, seed: u64) {
    let dev: DeviceRef = DeviceSpec::parse(spec).unwrap().open().unwrap();
    let mut fs = Fs::format(dev.clone(), FsOptions::default()).unwrap();
    let mut model = Model::default();
    let mut durable = Durable::of(&model);
    let mut next_id = 0;
    let mut torn_commits = 0;
    for cycle in 0..cycles {
        let mut rng = SmallRng::seed_from_u64(seed.wrapping_mul(1000).wrapping_add(cycle));
        let cut_inside = rng.gen_bool(0.6);
        if cut_inside {
            fs.power_cut_after(rng.gen_range(1..120), rng.gen());
        }
        // Set when a commit was under way at the cut: it may or may not have landed.
        let mut maybe: Option<Durable> = None;
        for _ in 0..rng.gen_range(10..150) {
            match step(&mut fs, &mut model, &mut next_id, &mut rng) {
                Ok(true) => durable = Durable::of(&model),
                Ok(false) => durable.note(&model),
                Err(FsError::PoweredOff(_)) => {
                    // The interrupted operation may have written some blocks, and if it was
                    // an fsync its commit may be complete.
                    durable.note(&model);
                    if fs.stats().commits > 0 && model.files.len() + model.dirs.len() > 0 {
                        maybe = Some(Durable::of(&model));
                    }
                    break;
                }
                Err(e) => panic!("cycle {cycle}: unexpected error {e}"),
            }
        }
        if fs.down_reason().is_none() {
            fs.power_cut(rng.gen(), "test").unwrap();
        }
        drop(fs);
        fs = Fs::open(dev.clone(), FsOptions::default())
            .unwrap_or_else(|e| panic!("cycle {cycle}: recovery failed: {e}"));
        let ok = durable.check(&mut fs);
        if let Err(first) = ok {
            let alt = maybe.as_ref().map(|m| m.check(&mut fs));
            match alt {
                Some(Ok(())) => {
                    durable = maybe.take().unwrap();
                    torn_commits += 1;
                }
                _ => panic!("cycle {cycle} (seed {seed}): {first}; alternative: {alt:?}"),
            }
        }
        // Carry on from what is there.
        model = durable.model.clone();
        let (_, files) = listing(&fs);
        for (path, ino) in files {
            let id = model.files[&path];
            let size = model.data[&id].len();
            model.data.insert(id, fs.read(ino, 0, size).unwrap());
        }
        durable = Durable::of(&model);
    }
    eprintln!("{spec}: {cycles} cycles, {torn_commits} commits landed at the cut");
}

#[test]
fn power_cuts_on_a_ram_device_keep_fsynced_data() {
    for seed in 0..4 {
        run("mem,capacity=8MiB", 40, seed);
    }
}

#[test]
fn power_cuts_on_an_emulated_ssd_keep_fsynced_data() {
    run(
        "sata-ssd,capacity=64MiB,op=0.25,streams=2,cache=256KiB",
        40,
        7,
    );
}
