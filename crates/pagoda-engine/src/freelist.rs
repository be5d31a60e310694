//! Page allocation: the free list and the never-used pages above `next_page`.
//!
//! The free list starts in the meta page. When that list is full, the next freed page becomes
//! a *trunk*: it takes the whole list, and the meta page points to it (trunks chain through
//! `next`). When the meta list runs empty, it takes the head trunk's entries back and the
//! trunk page itself is the page allocated. So free space is reused without limit, and every
//! change is a page image in the commit record like any other structural change.
//!
//! Allocation has two steps so that a structural change can get every page it needs before
//! it changes any node: [`Apply::reserve`] takes page ids (all or none), and [`Apply::place`]
//! installs a node in a reserved page.
//!
//! Overflow pages a commit frees are *held* ([`crate::buffer::Held`]): a reader with an older
//! snapshot may have copied the leaf's pointer to the chain before the commit and still be
//! following it (the version chain gives it the old value, but only after its tree read,
//! which must not fail). They go on the free list in the commit's record as any freed page
//! does, so a crash (which ends every snapshot) frees them, but are neither handed out nor
//! made a trunk until no snapshot older than the commit remains.

use crate::btree::Apply;
use crate::error::{Error, Result};
use crate::format::{Meta, Node, Page, Val};

#[cfg(test)]
mod tests;

impl Apply<'_> {
    fn meta_error(&self) -> Error {
        Error::corrupt(self.meta, "expected the meta page")
    }

    /// Free-list entries the meta page holds (with its trunk pointer). A trunk gets at most
    /// this many, so the meta page can always take a trunk's entries back.
    fn list_cap(&self) -> usize {
        let fixed = Node::Meta(Meta {
            free_trunk: 1,
            ..Meta::default()
        })
        .payload_len();
        (self.payload_max() - fixed) / 8
    }

    /// Of the meta page: `(free entries, the index of the one to take, head trunk,
    /// next_page)`.
    fn free_state(&self) -> Result<(usize, Option<usize>, u64, u64)> {
        let p = self.pool.read(self.meta)?;
        match &p.node {
            Node::Meta(m) => Ok((
                m.free.len(),
                self.pool.held().pick(&m.free),
                m.free_trunk,
                m.next_page,
            )),
            _ => Err(self.meta_error()),
        }
    }

    /// Reads and checks a trunk page: `(next trunk, entries)`.
    fn read_trunk(&self, pid: u64) -> Result<(u64, Vec<u64>)> {
        let p = self.pool.read(pid)?;
        let Node::Trunk { next, free } = &p.node else {
            return Err(Error::corrupt(pid, "expected a free-list trunk page"));
        };
        if free.len() > self.list_cap() {
            return Err(Error::corrupt(
                pid,
                format!(
                    "free-list trunk holds {} entries, more than the {} the meta page takes",
                    free.len(),
                    self.list_cap()
                ),
            ));
        }
        // The meta page and the catalog root are never free.
        let data = self.meta + 2..self.pool.capacity_pages();
        let next_ok = *next == 0 || (data.contains(next) && *next != pid);
        if let Some(bad) = free.iter().find(|&&f| !data.contains(&f) || f == pid) {
            return Err(Error::corrupt(
                pid,
                format!("free-list trunk lists page {bad}, which cannot be free"),
            ));
        }
        if !next_ok {
            return Err(Error::corrupt(
                pid,
                format!("free-list trunk links to page {next}, which cannot be a trunk"),
            ));
        }
        Ok((*next, free.clone()))
    }

    /// Allocates a page holding `node`.
    pub fn alloc(&mut self, node: Node) -> Result<u64> {
        let pid = self.reserve(1)?[0];
        self.place(pid, node)?;
        Ok(pid)
    }

    /// Takes `n` page ids for new pages, or none: `Error::Full` when the free list and the
    /// rest of the device together hold fewer than `n` pages.
    pub fn reserve(&mut self, n: usize) -> Result<Vec<u64>> {
        let need = n as u64;
        let held = self.pool.held();
        let cap = self.pool.capacity_pages();
        // Counted only as far as needed: the never-used pages, the meta list, the trunks.
        let (mut room, mut trunk, next_page) = {
            let p = self.pool.read(self.meta)?;
            let Node::Meta(m) = &p.node else {
                return Err(self.meta_error());
            };
            let mut room = cap.saturating_sub(m.next_page);
            if room < need {
                room += held.free_in(&m.free, need - room) as u64;
            }
            (room, m.free_trunk, m.next_page)
        };
        // A trunk page itself is taken only once the meta list is empty, which held pages
        // there may prevent: with pages held, only the trunks' entries count (see `take`).
        let trunk_pages = u64::from(held.is_empty());
        while room < need && trunk != 0 {
            let (next, free) = self.read_trunk(trunk)?;
            room += trunk_pages;
            room += held.free_in(&free, need.saturating_sub(room)) as u64;
            trunk = next;
        }
        if room < n as u64 {
            return Err(Error::Full {
                page: next_page.max(cap),
                capacity_pages: cap,
            });
        }
        (0..n).map(|_| self.take()).collect()
    }

    /// Takes one page id that is not held: from the meta list, else the head trunk (its
    /// entries and the trunk page itself), else an entry of any trunk, else above
    /// `next_page`.
    fn take(&mut self) -> Result<u64> {
        let (listed, pick, trunk, _) = self.free_state()?;
        // Read before latching the meta page for writing: no other latch while it is held.
        let refill = if listed == 0 && trunk != 0 {
            Some(self.read_trunk(trunk)?)
        } else {
            None
        };
        if pick.is_none() && refill.is_none() {
            // No page of the meta list can be taken (none is listed, or all are held).
            if let Some(pid) = self.take_from_trunks(trunk)? {
                return Ok(pid);
            }
        }
        let cap = self.pool.capacity_pages();
        let mut meta = self.pool.write(self.meta)?;
        let Node::Meta(m) = &mut meta.node else {
            return Err(self.meta_error());
        };
        let pid = if let Some((next, free)) = refill {
            m.free = free;
            m.free_trunk = next;
            trunk
        } else if let Some(i) = pick.filter(|&i| i < m.free.len()) {
            let p = m.free.remove(i);
            debug_assert!(!m.free.contains(&p), "page {p} listed free twice");
            p
        } else if m.next_page < cap {
            m.next_page += 1;
            m.next_page - 1
        } else {
            return Err(Error::Full {
                page: m.next_page,
                capacity_pages: cap,
            });
        };
        self.mark(&mut meta, true);
        Ok(pid)
    }

    /// Takes an entry that is not held out of the first trunk, from `trunk` on, that has one
    /// (the trunk page is changed and imaged). Held pages fill the meta list only while
    /// readers lag, so this walk is rare.
    fn take_from_trunks(&mut self, mut trunk: u64) -> Result<Option<u64>> {
        while trunk != 0 {
            let (next, free) = self.read_trunk(trunk)?;
            if let Some(i) = self.pool.held().pick(&free) {
                let mut p = self.pool.write(trunk)?;
                let Node::Trunk { free, .. } = &mut p.node else {
                    return Err(Error::corrupt(trunk, "expected a free-list trunk page"));
                };
                let pid = free.remove(i);
                self.mark(&mut p, true);
                return Ok(Some(pid));
            }
            trunk = next;
        }
        Ok(None)
    }

    /// Installs `node` in page `pid`, taken by [`Apply::reserve`].
    pub fn place(&mut self, pid: u64, node: Node) -> Result<()> {
        self.freed.remove(&pid);
        let mut page = self.pool.install(Page {
            id: pid,
            lsn: 0,
            node,
        })?;
        self.mark(&mut page, true);
        Ok(())
    }

    /// Returns a page to the free list. The caller holds no latch on `pid` (it may become a
    /// trunk page).
    pub fn free(&mut self, pid: u64) -> Result<()> {
        let cap = self.list_cap();
        let mut meta = self.pool.write(self.meta)?;
        let Node::Meta(m) = &mut meta.node else {
            return Err(self.meta_error());
        };
        // Free-list consistency: never the meta page or the catalog root, never twice (a
        // page with two owners is overwritten by one of them). The O(1) checks stay in
        // release builds; the scan of the list is a debug check.
        assert!(pid > self.meta + 1, "page {pid} cannot be freed");
        assert!(
            pid != m.free_trunk,
            "page {pid} freed while it is the head trunk"
        );
        debug_assert!(!m.free.contains(&pid), "page {pid} freed twice");
        if m.free.len() < cap {
            m.free.push(pid);
            self.mark(&mut meta, true);
            self.freed.insert(pid);
            self.imaged.remove(&pid);
            return Ok(());
        }
        // The list is full: a page becomes the head trunk and takes the list (a list longer
        // than `cap`, from before trunks existed, keeps its excess in the meta page). That
        // is `pid`, unless it is held: a reader may still follow it, so another free page
        // holds the list and `pid` joins it.
        let tp = if self.pool.held().contains(pid) {
            drop(meta);
            let tp = self.take()?;
            meta = self.pool.write(self.meta)?;
            let Node::Meta(m) = &mut meta.node else {
                return Err(self.meta_error());
            };
            m.free.push(pid);
            self.freed.insert(pid);
            self.imaged.remove(&pid);
            tp
        } else {
            pid
        };
        let Node::Meta(m) = &mut meta.node else {
            return Err(self.meta_error());
        };
        let keep = m.free.len().saturating_sub(cap);
        let trunk = Node::Trunk {
            next: m.free_trunk,
            free: m.free[keep..].to_vec(),
        };
        drop(meta);
        self.place(tp, trunk)?;
        let mut meta = self.pool.write(self.meta)?;
        let Node::Meta(m) = &mut meta.node else {
            return Err(self.meta_error());
        };
        m.free.truncate(keep);
        m.free_trunk = tp;
        self.mark(&mut meta, true);
        Ok(())
    }

    /// Frees the overflow pages of a value. With `hold` set (a commit's overwrite or delete),
    /// the pages are held for the snapshots older than that commit.
    pub fn free_value(&mut self, val: &Val) -> Result<()> {
        if let Val::Overflow { first, .. } = val {
            let mut pid = *first;
            let mut guard = 0u64;
            while pid != 0 && guard < self.pool.capacity_pages() {
                let next = match &self.pool.read(pid)?.node {
                    Node::Overflow { next, .. } => *next,
                    _ => return Err(crate::btree::corrupt_kind(pid, "overflow")),
                };
                if let Some(cts) = self.hold {
                    self.pool.held().hold(pid, cts);
                }
                self.free(pid)?;
                pid = next;
                guard += 1;
            }
        }
        Ok(())
    }
}
