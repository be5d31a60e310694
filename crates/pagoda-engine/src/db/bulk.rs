//! Bulk load: rows in ascending key order build a table's B+tree bottom-up, each page written
//! once, straight to the data device (as LMDB's append or RocksDB's file ingestion do). A
//! second thread writes each 4 MiB run while the next is encoded, with the write-behind hint,
//! so the device makes the load durable as it goes rather than all at the final flush. Rows go
//! straight into leaf bytes in the run (`format::LeafBytes`), never into decoded entries.
//!
//! Crash safety without logging the rows: the new pages go to never-used page ids (above the
//! meta page's `next_page`), which nothing reads until a record links them, and they are
//! synced before the one small record that links them is logged. That record images the
//! table's root page (now the top node of the new tree) and the meta page (`next_page` moved
//! past the new pages). A power cut before the record is durable leaves the table empty and
//! the pages unallocated (they are reused later); after it, the pages are on disk and redo
//! installs the two images. So a load is all or nothing.
//!
//! The new pages carry an LSN just below the log's end at the start, after making the log
//! durable to there: above every earlier record (redo never applies one of those to them, so
//! an earlier put and delete of a key cannot remove a loaded row) and below every later one
//! (redo applies later changes to them, and a later record's image of a reused page id
//! replaces a page a failed load left there).

use super::txn::Txn;
use super::Db;
use crate::btree::{inline_max, payload_max, Apply};
use crate::buffer::Pool;
use crate::error::{Error, Result};
use crate::format::{decode_page, encode_page, internal_entry_len, Key, LeafBytes, Node, Page};
use crate::limits::MAX_VALUE_LEN;
use crate::probe::{self, Sabotage};
use std::sync::mpsc;

/// Pages per device write (4 MiB of 16 KiB pages).
const RUN_PAGES: usize = 256;

impl Db {
    /// Loads `rows` (strictly ascending keys, no duplicates) into the empty table `table` and
    /// returns the number of rows; the load is durable and visible when this returns.
    ///
    /// Full leaves are built bottom-up and written once, outside the log; one small commit
    /// record installs the new tree (see the module docs of `db/bulk.rs`). A power cut at any
    /// point leaves the table either empty or with every row. Other commits wait while the
    /// load runs (it holds the commit lock); readers go on. Transactions that began before the
    /// load and read the table see the rows (a load is not snapshot-isolated), and the rows
    /// become visible to readers a moment before the install record is durable.
    ///
    /// Errors, with nothing loaded: [`Error::TableNotEmpty`] (rows, or versions a running
    /// transaction may still read), [`Error::KeysNotAscending`], [`Error::KeyTooLarge`],
    /// [`Error::ValueTooLarge`], [`Error::Full`] (the never-used pages run out), and device
    /// errors while writing the pages.
    pub fn bulk_load(
        &self,
        table: &str,
        rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
    ) -> Result<u64> {
        let pool = &self.inner.pool;
        let meta = self.inner.meta_page;
        // The install record holds two page images.
        self.ensure_log_space(4 * pool.page_size() as u64)?;
        self.check_writable()?;
        let cs = self.lock_writable()?;
        let t = self.table(table)?;
        self.inner.mvcc.gc();
        let empty = matches!(&pool.read(t.root)?.node, Node::Leaf(es) if es.is_empty());
        if !empty || self.inner.mvcc.has_versions(t.id) {
            return Err(Error::TableNotEmpty(table.to_string()));
        }
        // Every earlier record durable, so that no later one can get an LSN below the pages'.
        let end = self.inner.wal.end();
        self.wait(end)?;
        let next_page = match &pool.read(meta)?.node {
            Node::Meta(m) => m.next_page,
            _ => return Err(Error::corrupt(meta, "expected the meta page")),
        };
        let max_val = MAX_VALUE_LEN.min((self.inner.wal.capacity() / 4) as usize);
        let built = with_writer(pool, |sink| {
            let mut b = Builder::new(pool, next_page, end.saturating_sub(1), sink);
            let mut prev: Option<Vec<u8>> = None;
            for (i, (k, v)) in rows.enumerate() {
                Txn::check_key(&k)?;
                if v.len() > max_val {
                    return Err(Error::ValueTooLarge {
                        len: v.len(),
                        max: max_val,
                    });
                }
                if prev.as_ref().is_some_and(|p| p.as_slice() >= k.as_slice()) {
                    return Err(Error::KeysNotAscending {
                        table: table.to_string(),
                        row: i as u64,
                    });
                }
                b.push(&k, &v)?;
                prev = Some(k);
            }
            let n = b.rows;
            Ok(b.finish()?.map(|t| (n, t)))
        })?;
        let Some((n, (top, next_after))) = built else {
            return Ok(0);
        };
        if !probe::is(self.inner.opts.sabotage, Sabotage::BulkSkipSync) {
            pool.sync_data()?;
        }
        pool.begin_undo();
        let res = (|| {
            let mut ap = Apply::new(pool, meta);
            install(&mut ap, t.root, top, next_after)?;
            self.log_and_stamp(&ap, Vec::new(), cs.next_cts.saturating_sub(1))
        })();
        let end = match res {
            Ok(end) => end,
            Err(e) => return Err(self.undo(e)),
        };
        drop(cs);
        self.wait(end)?;
        Ok(n)
    }
}

/// Puts the new tree's top node in the table's root page and moves `next_page` past the new
/// pages; both pages are imaged in the record.
fn install(ap: &mut Apply<'_>, root: u64, top: Node, next_page: u64) -> Result<()> {
    let mut r = ap.pool.write(root)?;
    r.node = top;
    ap.mark(&mut r, true);
    drop(r);
    let mut m = ap.pool.write(ap.meta)?;
    let Node::Meta(mp) = &mut m.node else {
        return Err(Error::corrupt(ap.meta, "expected the meta page"));
    };
    mp.next_page = next_page;
    ap.mark(&mut m, true);
    Ok(())
}

/// Runs `build` with a [`Sink`] whose runs a second thread writes, so that encoding the next
/// run overlaps writing this one (two runs in flight at most: the one being written and the one
/// queued). Each run goes out with the write-behind hint: the device starts making it durable
/// during the load instead of all of it at the final flush. The first error wins: a failed
/// write ends the writer, and the builder's next hand-off returns it.
fn with_writer<R>(pool: &Pool, build: impl FnOnce(&mut Sink) -> Result<R>) -> Result<R> {
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::sync_channel::<(u64, Vec<u8>)>(1);
        let (back_tx, back) = mpsc::channel();
        let writer = std::thread::Builder::new()
            .name("pagoda-bulk-write".into())
            .spawn_scoped(s, move || -> Result<()> {
                for (first, mut run) in rx {
                    write_run(pool, first, &run)?;
                    run.clear();
                    // The builder may be done already: then the buffer is just dropped.
                    let _ = back_tx.send(run);
                }
                Ok(())
            })
            .map_err(|e| Error::config(format!("cannot start the bulk-load writer: {e}")))?;
        let mut sink = Sink { tx: Some(tx), back };
        let built = build(&mut sink);
        sink.tx = None;
        let written = writer.join().unwrap_or_else(|p| {
            Err(Error::Failed(crate::error::Failure::from_panic(
                "pagoda-bulk-write",
                p.as_ref(),
            )))
        });
        // A write error explains a build that stopped because the writer was gone.
        written.and(built)
    })
}

/// Writes one run of encoded pages (ids from `first`) and refreshes any frame holding one of
/// those ids.
fn write_run(pool: &Pool, first: u64, run: &[u8]) -> Result<()> {
    pool.write_fresh(first, run)?;
    for (i, bytes) in run.chunks(pool.page_size()).enumerate() {
        pool.refresh_if_resident(first + i as u64, bytes)?;
    }
    Ok(())
}

/// The builder's end of the writer thread.
struct Sink {
    tx: Option<mpsc::SyncSender<(u64, Vec<u8>)>>,
    /// Buffers the writer is done with, for reuse.
    back: mpsc::Receiver<Vec<u8>>,
}

impl Sink {
    /// Hands a run to the writer; `Err(())` when the writer has stopped (on an error it
    /// returns from its thread).
    fn send(&self, first: u64, run: Vec<u8>) -> std::result::Result<(), ()> {
        self.tx
            .as_ref()
            .ok_or(())?
            .send((first, run))
            .map_err(|_| ())
    }

    /// An empty buffer for the next run: one the writer is done with, or a new one.
    fn buffer(&self, cap: usize) -> Vec<u8> {
        self.back
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(cap))
    }
}

/// Builds the tree bottom-up: leaves (and overflow chains) as rows come, then each internal
/// level from the one below. Pages get consecutive ids from `next` and are written in runs.
struct Builder<'a> {
    pool: &'a Pool,
    sink: &'a mut Sink,
    page_size: usize,
    lsn: u64,
    /// Next page id to allocate.
    next: u64,
    /// Encoded pages not yet written: ids `run_first..next`.
    run: Vec<u8>,
    run_first: u64,
    /// The leaf being filled, encoded as its rows come, and its lowest key.
    leaf: LeafBytes,
    leaf_low: Option<Key>,
    /// A full leaf not written yet (with its lowest key): when it is the only one, it becomes
    /// the root itself.
    held: Option<(LeafBytes, Key)>,
    /// Written leaves: (lowest key, page id).
    leaves: Vec<(Key, u64)>,
    rows: u64,
    scratch: Vec<u8>,
}

impl<'a> Builder<'a> {
    fn new(pool: &'a Pool, next: u64, lsn: u64, sink: &'a mut Sink) -> Self {
        Self {
            pool,
            sink,
            page_size: pool.page_size(),
            lsn,
            next,
            run: Vec::new(),
            run_first: next,
            leaf: LeafBytes::new(),
            leaf_low: None,
            held: None,
            leaves: Vec::new(),
            rows: 0,
            scratch: Vec::new(),
        }
    }

    fn payload_max(&self) -> usize {
        payload_max(self.page_size)
    }

    /// Gives `node` the next page id and queues it for writing.
    fn alloc(&mut self, node: Node) -> Result<u64> {
        let mut scratch = std::mem::take(&mut self.scratch);
        let r = self.alloc_with(|id, lsn, page_size, run| {
            let page = Page { id, lsn, node };
            encode_page(&page, page_size, &mut scratch);
            run.extend_from_slice(&scratch);
        });
        self.scratch = scratch;
        r
    }

    /// Gives the next page id to the page `put` appends to the run (with the load's LSN and
    /// the page size), and writes the run when it is full.
    fn alloc_with(&mut self, put: impl FnOnce(u64, u64, usize, &mut Vec<u8>)) -> Result<u64> {
        let id = self.next;
        if id >= self.pool.capacity_pages() {
            return Err(Error::Full {
                page: id,
                capacity_pages: self.pool.capacity_pages(),
            });
        }
        self.next += 1;
        put(id, self.lsn, self.page_size, &mut self.run);
        if self.run.len() >= RUN_PAGES * self.page_size {
            self.write_run()?;
        }
        Ok(id)
    }

    /// Hands the run to the writer thread and starts the next in a free buffer.
    fn write_run(&mut self) -> Result<()> {
        if self.run.is_empty() {
            return Ok(());
        }
        let next = self.sink.buffer(RUN_PAGES * self.page_size);
        let run = std::mem::replace(&mut self.run, next);
        if self.sink.send(self.run_first, run).is_err() {
            // The writer's own error is what the load returns (see `with_writer`).
            return Err(Error::Stalled("the bulk-load writer stopped"));
        }
        self.run_first = self.next;
        Ok(())
    }

    /// Encodes the row straight into the leaf being filled (its value into overflow pages
    /// first when it is too large to sit in a leaf).
    fn push(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let overflow = if value.len() > inline_max(self.page_size) {
            Some(self.overflow(value)?)
        } else {
            None
        };
        let len = match overflow {
            Some(_) => 2 + key.len() + 1 + 16,
            None => LeafBytes::inline_len(key, value),
        };
        if !self.leaf.is_empty() && self.leaf.len() + len > self.payload_max() {
            self.close_leaf()?;
        }
        if self.leaf.is_empty() {
            self.leaf_low = Some(Key::from_slice(key));
        }
        match overflow {
            Some((first, total)) => self.leaf.push_overflow(key, first, total),
            None => self.leaf.push_inline(key, value),
        }
        self.rows += 1;
        Ok(())
    }

    /// A chain of overflow pages with consecutive ids: (its first page, the value's length).
    fn overflow(&mut self, value: &[u8]) -> Result<(u64, u64)> {
        let cap = self.payload_max() - 12;
        let first = self.next;
        let chunks = value.len().div_ceil(cap);
        for (i, c) in value.chunks(cap).enumerate() {
            let next = if i + 1 == chunks { 0 } else { self.next + 1 };
            self.alloc(Node::Overflow {
                next,
                data: c.to_vec(),
            })?;
        }
        Ok((first, value.len() as u64))
    }

    fn close_leaf(&mut self) -> Result<()> {
        let full = std::mem::replace(&mut self.leaf, LeafBytes::new());
        let Some(low) = self.leaf_low.take() else {
            return Ok(());
        };
        if let Some((prev, prev_low)) = self.held.replace((full, low)) {
            self.write_leaf(prev, prev_low)?;
        }
        Ok(())
    }

    fn write_leaf(&mut self, mut leaf: LeafBytes, low: Key) -> Result<()> {
        let pid = self.alloc_with(|id, lsn, page_size, run| {
            leaf.encode_into(id, lsn, page_size, run);
        })?;
        self.leaves.push((low, pid));
        Ok(())
    }

    /// Writes what is left and returns the root's new node and the first page id after the
    /// new pages; `None` when there were no rows.
    fn finish(mut self) -> Result<Option<(Node, u64)>> {
        if !self.leaf.is_empty() {
            self.close_leaf()?;
        }
        let Some((mut last, last_low)) = self.held.take() else {
            return Ok(None);
        };
        if self.leaves.is_empty() {
            // One leaf: it is the root, installed as a node (decoded from its bytes).
            self.write_run()?;
            let mut page = Vec::with_capacity(self.page_size);
            last.encode_into(0, self.lsn, self.page_size, &mut page);
            return Ok(Some((decode_page(&page, 0)?.node, self.next)));
        }
        self.write_leaf(last, last_low)?;
        let mut level = std::mem::take(&mut self.leaves);
        loop {
            let groups = self.groups(&level);
            if groups.len() == 1 {
                self.write_run()?;
                return Ok(Some((internal(&level), self.next)));
            }
            let mut up = Vec::with_capacity(groups.len());
            for g in groups {
                let low = g[0].0.clone();
                up.push((low, self.alloc(internal(g))?));
            }
            level = up;
        }
    }

    /// Splits a level's children into full internal nodes; the last one gets at least two.
    fn groups<'l>(&self, level: &'l [(Key, u64)]) -> Vec<&'l [(Key, u64)]> {
        let max = self.payload_max();
        let mut bounds = vec![0];
        let mut len = 4 + 8;
        for (i, (k, _)) in level.iter().enumerate().skip(1) {
            let e = internal_entry_len(k);
            if len + e > max {
                bounds.push(i);
                len = 4 + 8;
            } else {
                len += e;
            }
        }
        // A last node of one child borrows one from the node before (which is full, so has
        // more than two).
        let n = bounds.len();
        if n > 1 && level.len() - bounds[n - 1] == 1 {
            bounds[n - 1] -= 1;
        }
        bounds.push(level.len());
        bounds.windows(2).map(|w| &level[w[0]..w[1]]).collect()
    }
}

/// The internal node over `children` (lowest key, page id): separators are the lowest keys of
/// all children but the first.
fn internal(children: &[(Key, u64)]) -> Node {
    Node::Internal {
        keys: children[1..].iter().map(|(k, _)| k.clone()).collect(),
        children: children.iter().map(|&(_, p)| p).collect(),
    }
}
