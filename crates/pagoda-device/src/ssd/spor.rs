//! Power cut and sudden-power-off recovery (SPOR).
//!
//! The cut decides, from its seed, which unflushed units reached flash with their OOB (see the
//! cache model in [`super::ftl`]); units that did not have their OOB wiped (a program that did
//! not complete reads back as garbage, which recovery ignores). An atomic group either landed
//! whole (probability ½) or tore (members independently, the last member certainly lost), so
//! recovery really has something to throw away.
//!
//! Recovery then forgets the in-RAM mapping and rebuilds it from what is persistent only:
//! every programmed unit's OOB (LPN, sequence number, atomic group), the trim journal and the
//! durable sequence watermark written by the last flush. Per LPN the highest sequence number
//! wins; an atomic group newer than the watermark counts only if all its members are present;
//! a journaled trim newer than every surviving copy unmaps the LPN. Blocks that were open are
//! closed (no programming after a cut into a partially written block), free lists, valid
//! counts and GC buckets are rebuilt.

use super::ftl::{BState, Ftl, Kind, NONE};
use crate::PowerCutReport;
use std::collections::{HashMap, HashSet};

fn mix(mut z: u64) -> u64 {
    // splitmix64 finaliser
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn coin(seed: u64, seq: u64, salt: u64) -> bool {
    mix(seed ^ mix(seq ^ salt)) & 1 == 1
}

const GROUP_SALT: u64 = 0xA70A_11C0_0000_0000;

/// Whether an unflushed unit reached flash. Deterministic in (seed, OOB).
fn unit_survives(seed: u64, seq: u64, group_n: u16, group_idx: u16) -> bool {
    if group_n == 0 {
        return coin(seed, seq, 0);
    }
    let base = seq - u64::from(group_idx);
    if coin(seed, base, GROUP_SALT) {
        return true;
    }
    group_idx + 1 != group_n && coin(seed, seq, 0)
}

impl Ftl {
    /// Cuts power: applies the cut's fate to unflushed units and trims, then runs SPOR.
    pub(crate) fn power_cut(&mut self, seed: u64) -> PowerCutReport {
        let wm = self.flushed_seq;
        for o in &mut self.oob {
            if o.lpn != NONE && o.seq > wm && !unit_survives(seed, o.seq, o.group_n, o.group_idx) {
                o.lpn = NONE;
            }
        }
        self.trims.retain(|t| t.seq <= wm || coin(seed, t.seq, 0));
        let mut r = PowerCutReport {
            recovery_scanned_units: self.written.iter().map(|&w| u64::from(w)).sum(),
            ..PowerCutReport::default()
        };
        let log = std::mem::take(&mut self.unflushed);
        let groups = self.spor();

        for u in log {
            let n = u64::from(u.n);
            match u.kind {
                Kind::Write => {
                    let kept = (u.seq..u.seq + n)
                        .filter(|&s| unit_survives(seed, s, 0, 0))
                        .count() as u64;
                    r.kept_sectors += kept;
                    r.dropped_sectors += n - kept;
                }
                Kind::Atomic => {
                    if groups.get(&u.seq).copied() == Some(u.n) {
                        r.atomic_kept += 1;
                        r.kept_sectors += n;
                    } else {
                        r.atomic_dropped += 1;
                        r.dropped_sectors += n;
                    }
                }
                Kind::Trim => {
                    if coin(seed, u.seq, 0) {
                        r.kept_sectors += n;
                    } else {
                        r.dropped_sectors += n;
                    }
                }
            }
        }
        r
    }

    /// Rebuilds every volatile structure from OOB, the trim journal and the watermark.
    /// Returns the member counts of atomic groups newer than the watermark.
    fn spor(&mut self) -> HashMap<u64, u32> {
        let wm = self.flushed_seq;
        let mut groups: HashMap<u64, u32> = HashMap::new();
        let mut seen: HashSet<u64> = HashSet::new();
        for o in &self.oob {
            // `seen`: a member present twice (a copy whose source was not erased yet) counts once.
            if o.lpn != NONE && o.group_n > 0 && o.seq > wm && seen.insert(o.seq) {
                *groups.entry(o.seq - u64::from(o.group_idx)).or_default() += 1;
            }
        }
        let mut best = vec![0u64; self.l2p.len()];
        self.l2p.iter_mut().for_each(|m| *m = NONE);
        let mut max_seq = wm;
        for (ppn, o) in self.oob.iter_mut().enumerate() {
            if o.lpn == NONE {
                continue;
            }
            if o.group_n > 0
                && o.seq > wm
                && groups.get(&(o.seq - u64::from(o.group_idx))).copied()
                    != Some(u32::from(o.group_n))
            {
                // Member of a torn atomic group: recovery marks it garbage for good, so that
                // a later recovery (with a newer watermark) cannot resurrect it.
                o.lpn = NONE;
                continue;
            }
            max_seq = max_seq.max(o.seq);
            let l = o.lpn as usize;
            if o.seq > best[l] {
                best[l] = o.seq;
                self.l2p[l] = ppn as u32;
            }
        }
        for t in &self.trims {
            max_seq = max_seq.max(t.seq);
            for l in t.lpn..t.lpn + t.n {
                if best[l as usize] < t.seq {
                    best[l as usize] = t.seq;
                    self.l2p[l as usize] = NONE;
                }
            }
        }

        let upb = self.geo.units_per_block;
        self.valid.iter_mut().for_each(|v| *v = 0);
        for &ppn in &self.l2p {
            if ppn != NONE {
                self.valid[(ppn / upb) as usize] += 1;
            }
        }
        self.clear_pins();
        self.rebuild_valid_bits();
        self.buckets.clear();
        self.reset_write_points();
        for b in 0..self.geo.blocks {
            if self.written[b as usize] > 0 {
                // Partially written blocks are closed; their unwritten tail is wasted until GC.
                self.written[b as usize] = upb;
                self.state[b as usize] = BState::Closed;
                self.closed_seq[b as usize] = max_seq;
                self.buckets.insert(b, self.valid[b as usize]);
            }
        }
        self.rebuild_free_lists();
        self.next_seq = max_seq + 1;
        self.flushed_seq = max_seq;
        groups
    }
}
