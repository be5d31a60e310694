//! The hot/cold LRU (the hot and cold zones of the buffer-sizing paper's DBMS buffers): two lists,
//! young (hot) and old (cold); a page enters at the head of the old list (midpoint insertion) and
//! moves to the young list when touched again, so one scan cannot flush the hot set. Eviction and
//! the cleaner take pages from the cold end.

pub(super) const NIL: u32 = u32::MAX;
pub(super) const YOUNG: usize = 0;
pub(super) const OLD: usize = 1;

#[derive(Debug)]
pub(super) struct Lru {
    prev: Vec<u32>,
    next: Vec<u32>,
    list: Vec<u8>,
    head: [u32; 2],
    tail: [u32; 2],
    len: [usize; 2],
    young_target: usize,
}

impl Lru {
    /// An LRU over `n` frames whose young zone aims at 5/8 of `budget` frames.
    pub(super) fn new(n: usize, budget: usize) -> Self {
        Self {
            prev: vec![NIL; n],
            next: vec![NIL; n],
            list: vec![u8::MAX; n],
            head: [NIL; 2],
            tail: [NIL; 2],
            len: [0; 2],
            young_target: (budget * 5 / 8).max(1),
        }
    }

    pub(super) fn unlink(&mut self, i: u32) {
        let l = self.list[i as usize];
        if l == u8::MAX {
            return;
        }
        let l = l as usize;
        let (p, n) = (self.prev[i as usize], self.next[i as usize]);
        if p == NIL {
            self.head[l] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            self.tail[l] = p;
        } else {
            self.prev[n as usize] = p;
        }
        self.list[i as usize] = u8::MAX;
        self.len[l] -= 1;
    }

    pub(super) fn push_head(&mut self, l: usize, i: u32) {
        self.unlink(i);
        let h = self.head[l];
        self.prev[i as usize] = NIL;
        self.next[i as usize] = h;
        if h == NIL {
            self.tail[l] = i;
        } else {
            self.prev[h as usize] = i;
        }
        self.head[l] = i;
        self.list[i as usize] = l as u8;
        self.len[l] += 1;
    }

    /// A new page enters at the midpoint: the head of the old zone.
    pub(super) fn insert_mid(&mut self, i: u32) {
        self.push_head(OLD, i);
    }

    /// A hit: pages in the old zone are promoted to the young head; a scan touches each page
    /// once and so never reaches the young zone. `demoted` hears of every frame pushed from
    /// the young tail back to the old zone.
    pub(super) fn touch(&mut self, i: u32, mut demoted: impl FnMut(u32)) {
        if self.head[YOUNG] == i {
            return;
        }
        self.push_head(YOUNG, i);
        while self.len[YOUNG] > self.young_target {
            let t = self.tail[YOUNG];
            self.push_head(OLD, t);
            demoted(t);
        }
    }

    /// Evictions after which a hit moves a young page again (a quarter of the young zone, as
    /// InnoDB does: hits on pages that cannot be near eviction need no list change, and so no
    /// global lock).
    pub(super) fn fresh_span(&self) -> u64 {
        (self.young_target / 4).max(1) as u64
    }

    /// Frames from the cold end: old zone tail first, then young tail.
    pub(super) fn cold_order(&self) -> impl Iterator<Item = u32> + '_ {
        let mut cur = self.tail[OLD];
        let mut list = OLD;
        std::iter::from_fn(move || loop {
            if cur != NIL {
                let c = cur;
                cur = self.prev[c as usize];
                return Some(c);
            }
            if list == OLD {
                list = YOUNG;
                cur = self.tail[YOUNG];
                continue;
            }
            return None;
        })
    }
}
