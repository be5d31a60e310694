//! In-memory undo of a commit that fails half-way (a full device, a full pool): before a
//! running commit first changes a page, the pool keeps the page as it was, so that the whole
//! change can be taken back. Nothing of such a commit is on disk or in the log yet (its pages
//! are "in progress", never written), so restoring memory leaves the database as if the
//! commit had not started, and the error goes back to that transaction alone.

use super::{Pool, UNSET};
use crate::error::Result;
use crate::format::Page;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// A page as it was before the running commit changed it.
#[derive(Debug)]
pub(super) enum Before {
    /// Resident, with its frame state.
    Page {
        page: Page,
        dirty: bool,
        rec_lsn: u64,
    },
    /// Not in the pool (a page the commit allocated).
    Absent,
}

/// The journal of the running commit (one writer at a time: the commit lock holder).
#[derive(Debug, Default)]
pub(super) struct Journal {
    pub(super) active: bool,
    pub(super) before: HashMap<u64, Before>,
}

impl Pool {
    /// Starts keeping before-images of the pages changed from now on.
    pub fn begin_undo(&self) {
        let mut j = self.journal.lock();
        j.before.clear();
        j.active = true;
        self.journaling.store(true, Ordering::Release);
    }

    /// Forgets the before-images: the change stands (its record is about to be logged).
    pub fn end_undo(&self) {
        self.journaling.store(false, Ordering::Release);
        let mut j = self.journal.lock();
        j.active = false;
        j.before.clear();
    }

    /// Records `pid`'s state before its first change in this commit.
    pub(super) fn note_before(&self, pid: u64, idx: u32, before: Option<&Page>) {
        let mut j = self.journal.lock();
        if !j.active || j.before.contains_key(&pid) {
            return;
        }
        let b = match before {
            Some(p) => {
                let st = self.frames[idx as usize].state.lock();
                Before::Page {
                    page: p.clone(),
                    dirty: st.dirty,
                    rec_lsn: st.rec_lsn,
                }
            }
            None => Before::Absent,
        };
        j.before.insert(pid, b);
    }

    /// Puts every page the commit changed back as it was. A page the commit allocated stays
    /// resident but clean (it is free again, and never written).
    pub fn rollback_undo(&self) -> Result<()> {
        self.journaling.store(false, Ordering::Release);
        let before = {
            let mut j = self.journal.lock();
            j.active = false;
            std::mem::take(&mut j.before)
        };
        for (pid, b) in before {
            let mut w = self.write(pid)?;
            let idx = w.pin.idx as usize;
            let (dirty, rec_lsn) = match b {
                Before::Page {
                    page,
                    dirty,
                    rec_lsn,
                } => {
                    *w = page;
                    (dirty, rec_lsn)
                }
                Before::Absent => (false, UNSET),
            };
            let mut st = self.frames[idx].state.lock();
            st.dirty = dirty;
            st.rec_lsn = rec_lsn;
            st.in_progress = false;
            // A cleaner that copied the changed page must not mark this state clean.
            st.version += 1;
        }
        Ok(())
    }
}
