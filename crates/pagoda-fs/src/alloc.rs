//! Free-space bitmap over the data sectors, rebuilt from the inode table at open.

/// One bit per data sector; set = in use.
#[derive(Debug)]
pub(crate) struct Alloc {
    start: u64,
    len: u64,
    bits: Vec<u64>,
    free: u64,
    /// Next-fit cursor, so new files spread forward instead of refilling the first hole.
    cursor: u64,
}

impl Alloc {
    pub(crate) fn new(start: u64, end: u64) -> Self {
        let len = end - start;
        Self {
            start,
            len,
            bits: vec![0; len.div_ceil(64) as usize],
            free: len,
            cursor: 0,
        }
    }

    pub(crate) fn free(&self) -> u64 {
        self.free
    }

    pub(crate) fn total(&self) -> u64 {
        self.len
    }

    pub(crate) fn contains(&self, sector: u64) -> bool {
        sector >= self.start && sector < self.start + self.len
    }

    fn used(&self, i: u64) -> bool {
        self.bits[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    /// Marks a sector used (at open); false if it already was (two owners: damage).
    pub(crate) fn mark(&mut self, sector: u64) -> bool {
        let i = sector - self.start;
        if self.used(i) {
            return false;
        }
        self.bits[(i / 64) as usize] |= 1 << (i % 64);
        self.free -= 1;
        true
    }

    pub(crate) fn release(&mut self, sector: u64) {
        let i = sector - self.start;
        if self.used(i) {
            self.bits[(i / 64) as usize] &= !(1 << (i % 64));
            self.free += 1;
        }
    }

    /// A free sector: `hint` if free (keeps a file contiguous), else the next free one after
    /// the cursor.
    pub(crate) fn alloc(&mut self, hint: Option<u64>) -> Option<u64> {
        if self.free == 0 {
            return None;
        }
        if let Some(h) = hint.filter(|&h| self.contains(h)) {
            if !self.used(h - self.start) {
                self.mark(h);
                return Some(h);
            }
        }
        let words = self.bits.len() as u64;
        let first = self.cursor / 64;
        for k in 0..=words {
            let w = (first + k) % words;
            let word = self.bits[w as usize];
            if word == u64::MAX {
                continue;
            }
            let i = w * 64 + u64::from((!word).trailing_zeros());
            if i < self.len {
                self.cursor = i + 1;
                let s = self.start + i;
                self.mark(s);
                return Some(s);
            }
        }
        None
    }

    /// A free sector for position `residue` of an aligned group of `unit` sectors: `want` if
    /// free, else that position in the next wholly free aligned group, else any free sector.
    pub(crate) fn alloc_in_group(
        &mut self,
        want: Option<u64>,
        unit: u64,
        residue: u64,
    ) -> Option<u64> {
        if let Some(w) = want.filter(|&w| self.contains(w) && !self.used(w - self.start)) {
            self.mark(w);
            return Some(w);
        }
        match self.free_group(unit) {
            Some(base) => {
                let s = base + residue;
                self.mark(s);
                self.cursor = base + unit - self.start;
                Some(s)
            }
            None => self.alloc(None),
        }
    }

    /// The first sector of the next aligned group of `unit` sectors that is wholly free,
    /// searching from the cursor.
    fn free_group(&self, unit: u64) -> Option<u64> {
        let lo = self.start.div_ceil(unit) * unit;
        let end = self.start + self.len;
        let groups = end.saturating_sub(lo) / unit;
        if groups == 0 {
            return None;
        }
        let from = (self.start + self.cursor).saturating_sub(lo).div_ceil(unit) % groups;
        (0..groups)
            .map(|k| lo + (from + k) % groups * unit)
            .find(|&base| (base..base + unit).all(|s| !self.used(s - self.start)))
    }
}
