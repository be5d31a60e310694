//! `sync`: the committing thread waits until its record is durable (group commit: one sync
//! serves every commit in the groups it covers), which also makes the commit visible.

use super::Logged;
use crate::db::Db;
use crate::error::Result;
use crate::pipeline::CommitTicket;
use crate::probe::{self, Sabotage};
use crate::profile::Phase;

impl Db {
    pub(super) fn commit_sync(&self, logged: Logged<'_>) -> Result<CommitTicket> {
        let Logged { cs, info, t_apply } = logged;
        drop(cs);
        let prof = &self.inner.wal.profile;
        let t_wait = prof.add(Phase::CommitApply, t_apply);
        if !probe::is(self.inner.opts.sabotage, Sabotage::AckBeforeDurable) {
            self.wait_commit(info.lsn)?;
        }
        prof.add(Phase::WaitDurable, t_wait);
        Ok(self.count_commit(info))
    }
}
