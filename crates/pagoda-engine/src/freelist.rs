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

use crate::btree::Apply;
use crate::error::{Error, Result};
use crate::format::{Meta, Node, Page};

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

    /// `(free entries, head trunk, next_page)` of the meta page.
    fn free_state(&self) -> Result<(usize, u64, u64)> {
        let p = self.pool.read(self.meta)?;
        match &p.node {
            Node::Meta(m) => Ok((m.free.len(), m.free_trunk, m.next_page)),
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
        let (listed, mut trunk, next_page) = self.free_state()?;
        let cap = self.pool.capacity_pages();
        let mut room = listed as u64 + cap.saturating_sub(next_page);
        // Trunks only as far as needed: each holds at least itself.
        while room < n as u64 && trunk != 0 {
            let (next, free) = self.read_trunk(trunk)?;
            room += 1 + free.len() as u64;
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

    /// Takes one page id: from the meta list, else the head trunk, else above `next_page`.
    fn take(&mut self) -> Result<u64> {
        let (listed, trunk, _) = self.free_state()?;
        // Read before latching the meta page for writing: no other latch while it is held.
        let refill = if listed == 0 && trunk != 0 {
            Some(self.read_trunk(trunk)?)
        } else {
            None
        };
        let cap = self.pool.capacity_pages();
        let mut meta = self.pool.write(self.meta)?;
        let Node::Meta(m) = &mut meta.node else {
            return Err(self.meta_error());
        };
        let pid = if let Some((next, free)) = refill {
            m.free = free;
            m.free_trunk = next;
            trunk
        } else if let Some(p) = m.free.pop() {
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
        // Free-list consistency: never the meta page or the catalog root, never twice.
        debug_assert!(pid > self.meta + 1, "page {pid} cannot be freed");
        debug_assert!(!m.free.contains(&pid), "page {pid} freed twice");
        debug_assert!(
            pid != m.free_trunk,
            "page {pid} freed while it is the head trunk"
        );
        if m.free.len() < cap {
            m.free.push(pid);
            self.mark(&mut meta, true);
            self.freed.insert(pid);
            self.imaged.remove(&pid);
            return Ok(());
        }
        // The list is full: `pid` becomes the head trunk and takes the list (a list longer
        // than `cap`, from before trunks existed, keeps its excess in the meta page).
        let keep = m.free.len() - cap;
        let trunk = Node::Trunk {
            next: m.free_trunk,
            free: m.free[keep..].to_vec(),
        };
        drop(meta);
        self.place(pid, trunk)?;
        let mut meta = self.pool.write(self.meta)?;
        let Node::Meta(m) = &mut meta.node else {
            return Err(self.meta_error());
        };
        m.free.truncate(keep);
        m.free_trunk = pid;
        self.mark(&mut meta, true);
        Ok(())
    }
}
