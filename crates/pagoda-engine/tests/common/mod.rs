//! Test devices shared by the engine's integration tests.
#![allow(dead_code)]

use pagoda_device::fault::{Failure, Fault, FaultDevice, Op};
use pagoda_device::DeviceRef;
use pagoda_engine::format::Superblock;

/// Every later sync of `dev` fails (a device lost under waiting commits).
pub fn fail_syncs(dev: &FaultDevice) {
    dev.inject(Fault::Fail {
        op: Op::Flush,
        after: 0,
        times: u64::MAX,
        failure: Failure::Eio,
    })
    .unwrap();
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
