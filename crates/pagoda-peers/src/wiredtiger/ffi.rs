//! The C entry points of `shim.c` (compiled by `build.rs` against the installed
//! `wiredtiger.h`). WiredTiger's handles stay opaque here: only the shim touches their
//! method tables.

use std::ffi::{c_char, c_int, c_void};

/// `WT_CONNECTION` (opaque).
#[repr(C)]
pub(crate) struct Connection {
    _private: [u8; 0],
}

/// `WT_SESSION` (opaque).
#[repr(C)]
pub(crate) struct Session {
    _private: [u8; 0],
}

/// `WT_CURSOR` (opaque).
#[repr(C)]
pub(crate) struct Cursor {
    _private: [u8; 0],
}

/// Where `pgwt_stats` puts each statistic (the shim's `STATS` order).
pub(crate) const STAT_NAMES: [&str; 8] = [
    "transactions_committed",
    "transactions_rolled_back",
    "log_syncs",
    "log_writes",
    "log_slot_closures",
    "log_bytes_written",
    "cache_bytes_in_use",
    "checkpoints",
];

extern "C" {
    pub(crate) static PGWT_NOTFOUND: c_int;
    pub(crate) static PGWT_ROLLBACK: c_int;
    pub(crate) static PGWT_EBUSY: c_int;
    pub(crate) fn pgwt_strerror(code: c_int) -> *const c_char;
    pub(crate) fn pgwt_version(major: *mut c_int, minor: *mut c_int, patch: *mut c_int);
    pub(crate) fn pgwt_open(
        home: *const c_char,
        config: *const c_char,
        conn: *mut *mut Connection,
    ) -> c_int;
    pub(crate) fn pgwt_close(conn: *mut Connection) -> c_int;
    pub(crate) fn pgwt_session(conn: *mut Connection, s: *mut *mut Session) -> c_int;
    pub(crate) fn pgwt_create(s: *mut Session, uri: *const c_char, config: *const c_char) -> c_int;
    pub(crate) fn pgwt_begin(s: *mut Session, config: *const c_char) -> c_int;
    pub(crate) fn pgwt_commit(s: *mut Session) -> c_int;
    pub(crate) fn pgwt_rollback(s: *mut Session) -> c_int;
    pub(crate) fn pgwt_checkpoint(s: *mut Session) -> c_int;
    pub(crate) fn pgwt_cursor(
        s: *mut Session,
        uri: *const c_char,
        config: *const c_char,
        c: *mut *mut Cursor,
    ) -> c_int;
    pub(crate) fn pgwt_cursor_close(c: *mut Cursor) -> c_int;
    pub(crate) fn pgwt_cursor_reset(c: *mut Cursor) -> c_int;
    pub(crate) fn pgwt_search(
        c: *mut Cursor,
        k: *const c_void,
        kl: usize,
        v: *mut *const c_void,
        vl: *mut usize,
    ) -> c_int;
    pub(crate) fn pgwt_insert(
        c: *mut Cursor,
        k: *const c_void,
        kl: usize,
        v: *const c_void,
        vl: usize,
    ) -> c_int;
    pub(crate) fn pgwt_remove(c: *mut Cursor, k: *const c_void, kl: usize) -> c_int;
    pub(crate) fn pgwt_search_near(
        c: *mut Cursor,
        k: *const c_void,
        kl: usize,
        exact: *mut c_int,
    ) -> c_int;
    pub(crate) fn pgwt_next(c: *mut Cursor) -> c_int;
    pub(crate) fn pgwt_prev(c: *mut Cursor) -> c_int;
    pub(crate) fn pgwt_current(
        c: *mut Cursor,
        k: *mut *const c_void,
        kl: *mut usize,
        v: *mut *const c_void,
        vl: *mut usize,
    ) -> c_int;
    pub(crate) fn pgwt_meta_key(c: *mut Cursor, key: *mut *const c_char) -> c_int;
    pub(crate) fn pgwt_stats_len() -> c_int;
    pub(crate) fn pgwt_stats(s: *mut Session, out: *mut i64) -> c_int;
}
