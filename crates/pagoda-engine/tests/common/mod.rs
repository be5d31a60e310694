//! Test devices shared by the engine's integration tests.
#![allow(dead_code)]

use pagoda_device::{BlockDevice, Capabilities, DeviceRef, DeviceStats, WriteHints};
use pagoda_engine::format::Superblock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A log device whose syncs wait while `held` is set (a slow sync we can stretch), and fail
/// once `fail` is set (a device lost under a waiting commit).
#[derive(Debug)]
pub struct GatedSync {
    pub dev: DeviceRef,
    pub held: AtomicBool,
    pub fail: AtomicBool,
}

impl GatedSync {
    /// A gate on `dev`, open and working.
    pub fn new(dev: DeviceRef) -> Self {
        Self {
            dev,
            held: AtomicBool::new(false),
            fail: AtomicBool::new(false),
        }
    }
}

impl BlockDevice for GatedSync {
    fn caps(&self) -> Capabilities {
        self.dev.caps()
    }
    fn read(&self, s: u64, b: &mut [u8]) -> pagoda_device::Result<()> {
        self.dev.read(s, b)
    }
    fn write(&self, s: u64, b: &[u8], h: WriteHints) -> pagoda_device::Result<()> {
        self.dev.write(s, b, h)
    }
    fn flush(&self) -> pagoda_device::Result<()> {
        while self.held.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
        if self.fail.load(Ordering::Acquire) {
            return Err(pagoda_device::DeviceError::Unsupported(
                "the gated log device was told to fail its syncs".into(),
            ));
        }
        self.dev.flush()
    }
    fn trim(&self, s: u64, n: u64) -> pagoda_device::Result<()> {
        self.dev.trim(s, n)
    }
    fn stats(&self) -> DeviceStats {
        self.dev.stats()
    }
    fn describe(&self) -> String {
        "gated-sync".into()
    }
}

/// The newest valid superblock of a data device (of its two slots, the higher generation).
pub fn superblock(d: &DeviceRef) -> Superblock {
    let mut buf = vec![0u8; 2 * 4096];
    d.read(0, &mut buf).expect("read the superblocks");
    buf.chunks(4096)
        .filter_map(|c| Superblock::decode(c).ok())
        .max_by_key(|sb| sb.generation)
        .expect("no valid superblock")
}

/// Rows of `table` in a fresh snapshot of `db`.
pub fn count(db: &pagoda_engine::Db, table: &str) -> usize {
    let tx = db.begin_read().expect("begin_read");
    let t = tx.open_table(table).expect("open_table");
    t.range(..).count()
}

/// `key` of `table` in a fresh snapshot of `db`.
pub fn read(db: &pagoda_engine::Db, table: &str, key: &[u8]) -> Option<Vec<u8>> {
    let tx = db.begin_read().expect("begin_read");
    let t = tx.open_table(table).expect("open_table");
    t.get(key).expect("get")
}
