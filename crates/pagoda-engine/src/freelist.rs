//! Page allocation: the meta page's free list and the never-used pages above `next_page`.
//!
//! Allocation is split in two steps so that a structural change can get every page it needs
//! before it changes any node: [`Apply::reserve`] takes page ids (all or none), and
//! [`Apply::place`] installs a node in a reserved page.

use crate::btree::Apply;
use crate::error::{Error, Result};
use crate::format::{Meta, Node, Page};

impl Apply<'_> {
    fn meta_error(&self) -> Error {
        Error::corrupt(self.meta, "expected the meta page")
    }

    /// Allocates a page holding `node`.
    pub fn alloc(&mut self, node: Node) -> Result<u64> {
        let pid = self.reserve(1)?[0];
        self.place(pid, node)?;
        Ok(pid)
    }

    /// Takes `n` page ids for new pages, or none: `Error::Full` when the free list and the
    /// rest of the device together hold fewer than `n` pages. Only the meta page changes.
    pub fn reserve(&mut self, n: usize) -> Result<Vec<u64>> {
        let mut meta = self.pool.write(self.meta)?;
        let Node::Meta(m) = &mut meta.node else {
            return Err(self.meta_error());
        };
        let cap = self.pool.capacity_pages();
        let room = m.free.len() as u64 + cap.saturating_sub(m.next_page);
        if room < n as u64 {
            return Err(Error::Full {
                page: m.next_page + (n as u64 - m.free.len() as u64).saturating_sub(1),
                capacity_pages: cap,
            });
        }
        let mut pids = Vec::with_capacity(n);
        for _ in 0..n {
            let pid = match m.free.pop() {
                Some(p) => p,
                None => {
                    m.next_page += 1;
                    m.next_page - 1
                }
            };
            pids.push(pid);
        }
        if n > 0 {
            self.mark(&mut meta, true);
        }
        Ok(pids)
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

    /// Returns a page to the free list (leaked when the list is full).
    pub fn free(&mut self, pid: u64) -> Result<()> {
        let cap = (self.payload_max() - 16) / 8;
        let mut meta = self.pool.write(self.meta)?;
        let Node::Meta(m) = &mut meta.node else {
            return Err(self.meta_error());
        };
        if m.free.len() < cap {
            m.free.push(pid);
        }
        self.mark(&mut meta, true);
        self.freed.insert(pid);
        self.imaged.remove(&pid);
        Ok(())
    }

    /// Reads the meta page.
    pub fn meta(&self) -> Result<Meta> {
        let p = self.pool.read(self.meta)?;
        match &p.node {
            Node::Meta(m) => Ok(m.clone()),
            _ => Err(self.meta_error()),
        }
    }
}
