//! The catalog: table names to B+tree roots, and creating and dropping tables.

use super::Db;
use crate::btree::{self, Apply};
use crate::error::{Error, Result};
use crate::format::{Node, RedoOp, Val};
use std::collections::BTreeMap;
use std::ops::Bound;

pub(super) const CATALOG: u32 = 0;

#[derive(Clone, Copy, Debug)]
pub(super) struct TableInfo {
    pub(super) id: u32,
    pub(super) root: u64,
}

pub(super) fn encode_table(t: TableInfo) -> Vec<u8> {
    let mut v = t.id.to_le_bytes().to_vec();
    v.extend_from_slice(&t.root.to_le_bytes());
    v
}

pub(super) fn decode_table(v: &[u8]) -> Option<TableInfo> {
    Some(TableInfo {
        id: u32::from_le_bytes(v.get(0..4)?.try_into().ok()?),
        root: u64::from_le_bytes(v.get(4..12)?.try_into().ok()?),
    })
}

impl Db {
    pub(super) fn load_catalog(&self) -> Result<()> {
        let root = self.inner.meta_page + 1;
        let mut cat = BTreeMap::new();
        let mut roots = BTreeMap::new();
        let mut cursor = Bound::Unbounded;
        loop {
            let b = btree::batch(&self.inner.pool, root, &cursor, false)?;
            for (k, v) in &b.entries {
                let v = btree::load_value(&self.inner.pool, v)?;
                let t =
                    decode_table(&v).ok_or_else(|| Error::corrupt(root, "bad catalog entry"))?;
                cat.insert(String::from_utf8_lossy(k).into_owned(), t);
                roots.insert(t.id, t.root);
            }
            match b.fence {
                Some(f) => cursor = Bound::Included(f),
                None => break,
            }
        }
        self.inner.catalog.update(|c| c.clone_from(&cat));
        self.inner.roots.update(|r| r.clone_from(&roots));
        Ok(())
    }

    /// The pages a lookup of `key` in `table` depends on, for diagnostics (which pages hold
    /// a key; a crash tester excuses what a damaged page explains only on the pages it
    /// hit): the catalog's path to the table's entry, then the table's tree from its root to
    /// the leaf, then the overflow pages of the value. Where a page on the way cannot be read,
    /// the pages up to it, that page last. For a table that does not exist, the catalog's
    /// pages alone (its absence depends on them).
    pub fn key_pages(&self, table: &str, key: &[u8]) -> Vec<u64> {
        let pool = &self.inner.pool;
        let (mut pages, _) = btree::lookup_pages(pool, self.inner.meta_page + 1, table.as_bytes());
        pages.push(self.inner.meta_page);
        if let Ok(t) = self.table(table) {
            pages.extend(btree::lookup_pages(pool, t.root, key).0);
        }
        pages
    }

    /// Names of the tables, sorted.
    pub fn list_tables(&self) -> Vec<String> {
        let mut v: Vec<String> = self.inner.catalog.read().keys().cloned().collect();
        v.sort();
        v
    }

    pub(super) fn table(&self, name: &str) -> Result<TableInfo> {
        self.inner
            .catalog
            .read()
            .get(name)
            .copied()
            .ok_or_else(|| Error::NoSuchTable(name.to_string()))
    }

    /// Creates a table (durable when this returns).
    pub fn create_table(&self, name: &str) -> Result<()> {
        if name.is_empty() || name.len() > 255 {
            return Err(Error::config("table names are 1 to 255 bytes"));
        }
        self.ensure_log_space(4 * self.inner.pool.page_size() as u64)?;
        self.check_writable()?;
        let cs = self.lock_writable()?;
        if self.inner.catalog.read().contains_key(name)
            || !self.inner.creating.lock().insert(name.to_string())
        {
            return Err(Error::TableExists(name.to_string()));
        }
        self.inner.pool.begin_undo();
        let res = (|| {
            let mut ap = Apply::new(&self.inner.pool, self.inner.meta_page);
            let id = ap.next_table_id()?;
            let root = ap.alloc(Node::Leaf(Vec::new()))?;
            let t = TableInfo { id, root };
            let val = Val::Inline(encode_table(t));
            ap.put(self.inner.meta_page + 1, name.as_bytes(), val.clone())?;
            let ops = vec![RedoOp::Put {
                table: CATALOG,
                key: name.as_bytes().to_vec(),
                val,
            }];
            let end = self.log_and_stamp(&ap, ops, cs.next_cts.saturating_sub(1))?;
            Ok::<_, Error>((t, end))
        })();
        let (t, end) = match res {
            Ok(x) => x,
            Err(e) => {
                self.inner.creating.lock().remove(name);
                return Err(self.undo(e));
            }
        };
        drop(cs);
        let durable = self.wait(end);
        if durable.is_ok() {
            // Visible once durable; the name stays reserved until then.
            self.inner.catalog.update(|c| {
                c.insert(name.to_string(), t);
            });
            self.inner.roots.update(|r| {
                r.insert(t.id, t.root);
            });
        }
        self.inner.creating.lock().remove(name);
        durable
    }

    /// Drops a table and frees its pages (durable when this returns).
    ///
    /// The drop becomes visible only once durable, and it holds the commit lock until then
    /// (DDL is rare): no later commit can reuse the freed pages while the table is still
    /// visible, and a crash before durability leaves the table as it was.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        self.ensure_log_space(4 * self.inner.pool.page_size() as u64)?;
        self.check_writable()?;
        let cs = self.lock_writable()?;
        let t = self.table(name)?;
        self.inner.pool.begin_undo();
        let res = (|| {
            let mut ap = Apply::new(&self.inner.pool, self.inner.meta_page);
            ap.drop_tree(t.root)?;
            ap.delete(self.inner.meta_page + 1, name.as_bytes())?;
            let ops = vec![
                RedoOp::DropTable { table: t.id },
                RedoOp::Delete {
                    table: CATALOG,
                    key: name.as_bytes().to_vec(),
                },
            ];
            self.log_and_stamp(&ap, ops, cs.next_cts.saturating_sub(1))
        })();
        let end = match res {
            Ok(x) => x,
            Err(e) => return Err(self.undo(e)),
        };
        self.wait(end)?;
        self.inner.catalog.update(|c| {
            c.remove(name);
        });
        self.inner.roots.update(|r| {
            r.remove(&t.id);
        });
        drop(cs);
        Ok(())
    }

    /// Walks every tree (the catalog's included) and the free list, verifying key order and
    /// ranges, equal leaf depth, overflow chains, and that no page is used twice or both used
    /// and free. Commits wait meanwhile. Errors: [`Error::Corruption`] naming the page.
    pub fn check(&self) -> Result<crate::stats::CheckReport> {
        crate::buffer::latch_order::assert_no_latch("the commit lock");
        let _writers = self.inner.commit.lock();
        let mut roots = vec![self.inner.meta_page + 1];
        // In a fixed order, so that a check changes the pool the same way in a replayed run.
        let mut tables: Vec<u64> = self.inner.roots.read().values().copied().collect();
        tables.sort_unstable();
        roots.extend(tables);
        let mut report = crate::check::check(&self.inner.pool, self.inner.meta_page, &roots)?;
        if let Some(fc) = self.inner.pool.flash() {
            (report.flash_slots_checked, report.flash_stale_slots) = fc.audit()?;
        }
        Ok(report)
    }

    /// After a read of `t`'s tree: fails if the table was dropped meanwhile, since its pages
    /// may then have been freed and reused (a drop removes the root before any reuse can
    /// happen, so a read that finds the root still in place read the live table).
    pub(super) fn still_live(&self, name: &str, t: TableInfo) -> Result<()> {
        if self.inner.roots.read().get(&t.id) == Some(&t.root) {
            return Ok(());
        }
        Err(Error::NoSuchTable(format!(
            "{name} (dropped while this transaction read it)"
        )))
    }
}
