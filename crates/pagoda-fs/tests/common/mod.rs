//! Shared by `kill.rs` and `exerciser.rs`: an image store that forgets what was never synced
//! when the process "dies", and the check for whether FUSE can be mounted here.

// Each test binary uses part of this module.
#![allow(dead_code)]

use pagoda_fs::backing::ImageFile;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// An image's store standing in for a disk under a page cache that dies with the process (the
/// machine crashing with it): reads see every write, [`ImageFile::sync_data`] makes the writes
/// so far durable, [`VolatileImage::kill`] throws away what was not synced. A real `kill -9`
/// cannot show a missing fdatasync: the kernel keeps the dead process's writes.
#[derive(Clone, Debug, Default)]
pub struct VolatileImage(Arc<Mutex<State>>);

#[derive(Debug, Default)]
struct State {
    /// What reads see.
    current: Vec<u8>,
    /// What a kill keeps.
    durable: Vec<u8>,
    /// Changes since the last sync, in order.
    unsynced: Vec<Change>,
}

#[derive(Debug)]
enum Change {
    Write(u64, Vec<u8>),
    Zero(u64, u64),
    Size(u64),
}

fn apply(img: &mut Vec<u8>, c: &Change) {
    match c {
        Change::Write(at, data) => {
            let at = *at as usize;
            img[at..at + data.len()].copy_from_slice(data);
        }
        Change::Zero(at, len) => img[*at as usize..(*at + *len) as usize].fill(0),
        Change::Size(len) => img.resize(*len as usize, 0),
    }
}

impl VolatileImage {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The process dies. `None`: every unsynced change is lost (the case that shows a missing
    /// sync); `Some(seed)`: each one, in order, reached the disk with probability ½ (the kernel
    /// wrote some back before the crash).
    pub fn kill(&self, keep: Option<u64>) {
        let mut s = self.state();
        let mut rng = keep.map(SmallRng::seed_from_u64);
        let mut img = std::mem::take(&mut s.durable);
        for c in std::mem::take(&mut s.unsynced) {
            if rng.as_mut().is_some_and(|r| r.gen_bool(0.5)) {
                apply(&mut img, &c);
            }
        }
        s.current = img.clone();
        s.durable = img;
    }

    /// Changes not yet synced.
    pub fn unsynced(&self) -> usize {
        self.state().unsynced.len()
    }

    fn change(&self, c: Change) {
        let mut s = self.state();
        apply(&mut s.current, &c);
        s.unsynced.push(c);
    }
}

fn past_end() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "past the end of the image")
}

impl ImageFile for VolatileImage {
    fn size(&self) -> io::Result<u64> {
        Ok(self.state().current.len() as u64)
    }

    fn set_size(&self, len: u64) -> io::Result<()> {
        self.change(Change::Size(len));
        Ok(())
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let s = self.state();
        let at = offset as usize;
        let src = s.current.get(at..at + buf.len()).ok_or_else(past_end)?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if offset as usize + buf.len() > self.state().current.len() {
            return Err(past_end());
        }
        self.change(Change::Write(offset, buf.to_vec()));
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut s = self.state();
        let mut img = std::mem::take(&mut s.durable);
        for c in std::mem::take(&mut s.unsynced) {
            apply(&mut img, &c);
        }
        s.durable = img;
        Ok(())
    }

    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        if offset + len > self.state().current.len() as u64 {
            return Err(past_end());
        }
        self.change(Change::Zero(offset, len));
        Ok(())
    }
}

/// Why FUSE cannot be mounted here, if it cannot (the pure-Rust mount needs root and
/// `/dev/fuse`).
pub fn fuse_unavailable() -> Option<String> {
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        return Some(format!("cannot open /dev/fuse: {e}"));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (the pure-Rust mount needs root)".into());
    }
    None
}
