#![allow(clippy::unwrap_used)]
//! A database in a directory: its new log file is sparse (creating the database writes no
//! log), the engine makes it ready ahead of the log's end, and a reopen reads how much is
//! ready from the file.

use pagoda_engine::{Db, DbOptions};
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

fn allocated(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

#[test]
fn a_new_log_file_is_sparse_and_made_ready_ahead_of_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.pagoda");
    // A 256 MiB log: the zeros run at most a quarter of it (64 MiB) ahead.
    let opts = || DbOptions::in_dir(dir.path()).buffer_bytes(256 << 20);
    let db = Db::open(opts()).unwrap();
    let len = std::fs::metadata(&log).unwrap().len();
    assert!(len >= 256 << 20, "log file of {len} bytes");
    db.create_table("t").unwrap();
    let value = vec![7u8; 1000];
    for i in 0..2000u32 {
        let tx = db.begin_write().unwrap();
        tx.open_table("t")
            .unwrap()
            .put(&i.to_be_bytes(), &value)
            .unwrap();
        tx.commit().unwrap();
    }
    // The zeros get ahead of the log (by up to 64 MiB), but never fill the whole file here.
    let written = db.stats().log_bytes;
    let until = Instant::now() + Duration::from_secs(20);
    while allocated(&log) < written + (32 << 20) {
        assert!(
            Instant::now() < until,
            "log file holds {} bytes, log wrote {written}",
            allocated(&log)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(allocated(&log) < len, "the whole log file was written");
    db.close().unwrap();
    let ready = allocated(&log);
    let db = Db::open(opts()).unwrap();
    let r = db.begin_read().unwrap();
    let t = r.open_table("t").unwrap();
    for i in (0..2000u32).step_by(97) {
        assert_eq!(
            t.get(&i.to_be_bytes()).unwrap().as_deref(),
            Some(&value[..])
        );
    }
    drop(t);
    drop(r);
    db.close().unwrap();
    // Reopened, the engine took the zeros already written as ready (it did not start over).
    assert!(allocated(&log) <= ready + (64 << 20) + (1 << 20));
}
