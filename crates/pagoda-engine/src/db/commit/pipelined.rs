//! `pipelined`: the commit is queued in commit order under the commit lock and the thread gets
//! a ticket at once; the flush thread (`pipeline.rs`) makes it durable, advances visibility
//! and resolves the ticket.

use super::Logged;
use crate::db::Db;
use crate::pipeline::{Admission, CommitTicket};
use crate::probe::{self, Sabotage};
use crate::profile::Phase;

impl Db {
    pub(super) fn commit_queued(&self, logged: Logged<'_>, adm: Admission) -> CommitTicket {
        let Logged { cs, info, t_apply } = logged;
        // Queued in commit order, under the commit lock.
        let mut ticket = adm.enqueue(info);
        if probe::is(self.inner.opts.sabotage, Sabotage::AckBeforeDurable) {
            ticket = CommitTicket::resolved(info);
        }
        drop(cs);
        self.inner.wal.profile.add(Phase::CommitApply, t_apply);
        if info.cts.is_multiple_of(64) {
            self.inner.mvcc.gc();
        }
        ticket
    }
}
