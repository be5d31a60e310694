//! `lazy` (no sync on commit): the commit is visible at once and returns with its record in
//! the log buffer; the lazy flush thread (`db/background.rs`) makes it durable.

use super::Logged;
use crate::db::Db;
use crate::error::Result;
use crate::pipeline::CommitTicket;
use crate::profile::Phase;

impl Db {
    /// Under the commit lock: committed at once, so visible in commit order; durable with the
    /// log buffer it is in, so a crash keeps a prefix of the commit order.
    pub(super) fn visible_at_once(&self, end: u64) {
        self.inner.mvcc.advance(end);
    }

    pub(super) fn commit_lazy(&self, logged: Logged<'_>) -> Result<CommitTicket> {
        let Logged { cs, info, t_apply } = logged;
        drop(cs);
        let prof = &self.inner.wal.profile;
        let t_wait = prof.add(Phase::CommitApply, t_apply);
        self.kick_lazy_flusher(info.lsn);
        prof.add(Phase::WaitDurable, t_wait);
        Ok(self.count_commit(info))
    }
}
