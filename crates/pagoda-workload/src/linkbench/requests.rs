//! The request phase: one worker per client thread drawing LinkBench's ten request types.

use std::sync::atomic::{AtomicU64, Ordering};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::graph::Graph;
use super::schema::*;
use super::{LinkbenchConfig, COUNT, LINK, LINK_TIME, NODE, OP_NAMES};
use crate::dist::Zipfian;
use crate::driver::{Finish, OpStatus, TxnRunner, Worker, Workload};
use crate::store::{prefix_end, Store, StoreError, StoreTxn};

pub(super) struct LinkRun<'a> {
    pub(super) cfg: &'a LinkbenchConfig,
    pub(super) graph: Graph,
    pub(super) cumulative: [f64; 10],
    /// Taken when rounding puts the draw past the last cumulative bound.
    pub(super) last_op: usize,
    pub(super) link_read: Zipfian,
    pub(super) link_write: Zipfian,
    pub(super) node_read: Zipfian,
    pub(super) node_update: Zipfian,
    pub(super) next_node: AtomicU64,
    pub(super) clock: Clock,
}

impl Workload for LinkRun<'_> {
    fn op_names(&self) -> Vec<&'static str> {
        OP_NAMES.to_vec()
    }

    fn worker(&self, _thread: usize, seed: u64) -> Box<dyn Worker + '_> {
        Box::new(LinkWorker {
            run: self,
            rng: SmallRng::seed_from_u64(seed),
        })
    }
}

struct LinkWorker<'a> {
    run: &'a LinkRun<'a>,
    rng: SmallRng,
}

const ADD_LINK: usize = 0;
const DELETE_LINK: usize = 1;
const UPDATE_LINK: usize = 2;
const COUNT_LINK: usize = 3;
const GET_LINK: usize = 4;
const GET_LINK_LIST: usize = 5;
const GET_NODE: usize = 6;
const ADD_NODE: usize = 7;
const UPDATE_NODE: usize = 8;

impl LinkWorker<'_> {
    fn pick(&mut self, z: &Zipfian) -> u64 {
        self.run.graph.id_at_rank(z.sample(&mut self.rng))
    }

    fn link_type(&mut self) -> u32 {
        self.rng.gen_range(1..=self.run.cfg.link_types)
    }

    /// One of the node's loaded links (type, id2), or a random target when it has none.
    fn existing_link(&mut self, id1: u64) -> (u32, u64) {
        let g = &self.run.graph;
        let d = g.degree(id1);
        if d == 0 {
            let t = self.link_type();
            (t, self.rng.gen_range(1..=g.nodes()))
        } else {
            g.link(id1, self.rng.gen_range(0..d), self.run.cfg.link_types)
        }
    }

    fn link_payload(&mut self) -> Vec<u8> {
        let c = self.run.cfg;
        payload(
            &mut self.rng,
            c.link_data_median,
            c.data_sigma,
            c.link_data_max,
        )
    }

    fn node_payload(&mut self) -> Vec<u8> {
        let c = self.run.cfg;
        payload(
            &mut self.rng,
            c.node_data_median,
            c.data_sigma,
            c.node_data_max,
        )
    }
}

fn add_to_count(
    t: &mut dyn StoreTxn,
    id1: u64,
    lt: u32,
    delta: i64,
    time: u64,
) -> Result<(), StoreError> {
    let count_t = t.open(COUNT)?;
    let k = count_key(id1, lt);
    let (count, version, _) = match t.get(count_t, &k)? {
        Some(v) => decode_count(&v)?,
        None => (0, 0, 0),
    };
    let count = count.saturating_add_signed(delta);
    t.put(count_t, &k, &encode_count(count, version + 1, time))
}

/// Writes a link visible at `time`, keeping the time index and the count in step.
fn upsert_link(
    t: &mut dyn StoreTxn,
    id1: u64,
    lt: u32,
    id2: u64,
    data: &[u8],
    time: u64,
) -> Result<(), StoreError> {
    let link_t = t.open(LINK)?;
    let link_time_t = t.open(LINK_TIME)?;
    let lk = link_key(id1, lt, id2);
    let old = t.get(link_t, &lk)?.map(|v| Link::decode(&v)).transpose()?;
    let version = match &old {
        Some(l) if l.visibility == 1 => {
            t.delete(link_time_t, &link_time_key(id1, lt, l.time, id2))?;
            l.version + 1
        }
        Some(l) => {
            add_to_count(t, id1, lt, 1, time)?;
            l.version + 1
        }
        None => {
            add_to_count(t, id1, lt, 1, time)?;
            0
        }
    };
    let link = Link {
        visibility: 1,
        version,
        time,
        data: data.to_vec(),
    };
    t.put(
        link_time_t,
        &link_time_key(id1, lt, time, id2),
        &link.index_value(),
    )?;
    t.put(link_t, &lk, &link.encode())
}

impl LinkWorker<'_> {
    /// Adds, deletes or updates a link (keeping the time index and the count in step).
    fn write_link(
        &mut self,
        op: usize,
        store: &dyn Store,
        txns: &mut TxnRunner,
        now: u64,
    ) -> Result<OpStatus, StoreError> {
        let run = self.run;
        match op {
            ADD_LINK => {
                let id1 = self.pick(&run.link_write);
                let lt = self.link_type();
                let id2 = self.rng.gen_range(1..=run.graph.nodes());
                let data = self.link_payload();
                txns.run(store, false, |t| {
                    upsert_link(t, id1, lt, id2, &data, now)?;
                    Ok(Finish::Commit(OpStatus::Ok))
                })
            }
            DELETE_LINK => {
                let id1 = self.pick(&run.link_write);
                let (lt, id2) = self.existing_link(id1);
                txns.run(store, false, |t| {
                    let link_t = t.open(LINK)?;
                    let link_time_t = t.open(LINK_TIME)?;
                    let lk = link_key(id1, lt, id2);
                    let Some(v) = t.get(link_t, &lk)? else {
                        return Ok(Finish::Rollback(OpStatus::NotFound));
                    };
                    let mut link = Link::decode(&v)?;
                    if link.visibility == 0 {
                        return Ok(Finish::Rollback(OpStatus::NotFound));
                    }
                    t.delete(link_time_t, &link_time_key(id1, lt, link.time, id2))?;
                    link.visibility = 0;
                    link.version += 1;
                    t.put(link_t, &lk, &link.encode())?;
                    add_to_count(t, id1, lt, -1, now)?;
                    Ok(Finish::Commit(OpStatus::Ok))
                })
            }
            _ => {
                let id1 = self.pick(&run.link_write);
                let (lt, id2) = self.existing_link(id1);
                let data = self.link_payload();
                txns.run(store, false, |t| {
                    let link_t = t.open(LINK)?;
                    match t.get(link_t, &link_key(id1, lt, id2))? {
                        Some(v) if Link::decode(&v)?.visibility == 1 => {}
                        _ => return Ok(Finish::Rollback(OpStatus::NotFound)),
                    }
                    upsert_link(t, id1, lt, id2, &data, now)?;
                    Ok(Finish::Commit(OpStatus::Ok))
                })
            }
        }
    }

    /// Counts a node's links of a type, reads a link, or lists a node's newest links.
    fn read_link(
        &mut self,
        op: usize,
        store: &dyn Store,
        txns: &mut TxnRunner,
    ) -> Result<OpStatus, StoreError> {
        let run = self.run;
        match op {
            COUNT_LINK => {
                let id1 = self.pick(&run.link_read);
                let lt = self.link_type();
                txns.run(store, true, |t| {
                    let count_t = t.open(COUNT)?;
                    if let Some(v) = t.get(count_t, &count_key(id1, lt))? {
                        decode_count(&v)?;
                    }
                    Ok(Finish::Commit(OpStatus::Ok))
                })
            }
            GET_LINK => {
                let id1 = self.pick(&run.link_read);
                let (lt, id2) = self.existing_link(id1);
                txns.run(store, true, |t| {
                    let link_t = t.open(LINK)?;
                    Ok(Finish::Commit(
                        match t.get(link_t, &link_key(id1, lt, id2))? {
                            Some(v) if Link::decode(&v)?.visibility == 1 => OpStatus::Ok,
                            _ => OpStatus::NotFound,
                        },
                    ))
                })
            }
            _ => {
                let id1 = self.pick(&run.link_read);
                let lt = self.link_type();
                let limit = run.cfg.max_link_list;
                txns.run(store, true, |t| {
                    let link_time_t = t.open(LINK_TIME)?;
                    let p = count_key(id1, lt);
                    t.scan(link_time_t, &p, prefix_end(&p).as_deref(), limit, true)?;
                    Ok(Finish::Commit(OpStatus::Ok))
                })
            }
        }
    }

    /// Reads, adds, updates or deletes a node.
    fn node_op(
        &mut self,
        op: usize,
        store: &dyn Store,
        txns: &mut TxnRunner,
        now: u64,
    ) -> Result<OpStatus, StoreError> {
        let run = self.run;
        match op {
            GET_NODE => {
                let id = self.pick(&run.node_read);
                txns.run(store, true, |t| {
                    let node_t = t.open(NODE)?;
                    Ok(Finish::Commit(match t.get(node_t, &node_key(id))? {
                        Some(v) => {
                            Node::decode(&v)?;
                            OpStatus::Ok
                        }
                        None => OpStatus::NotFound,
                    }))
                })
            }
            ADD_NODE => {
                let id = run.next_node.fetch_add(1, Ordering::Relaxed);
                let node = Node {
                    node_type: 1,
                    version: 0,
                    time: now,
                    data: self.node_payload(),
                };
                txns.run(store, false, |t| {
                    let node_t = t.open(NODE)?;
                    t.put(node_t, &node_key(id), &node.encode())?;
                    Ok(Finish::Commit(OpStatus::Ok))
                })
            }
            UPDATE_NODE => {
                let id = self.pick(&run.node_update);
                let data = self.node_payload();
                txns.run(store, false, |t| {
                    let node_t = t.open(NODE)?;
                    let k = node_key(id);
                    let Some(v) = t.get(node_t, &k)? else {
                        return Ok(Finish::Rollback(OpStatus::NotFound));
                    };
                    let mut node = Node::decode(&v)?;
                    node.version += 1;
                    node.time = now;
                    node.data.clone_from(&data);
                    t.put(node_t, &k, &node.encode())?;
                    Ok(Finish::Commit(OpStatus::Ok))
                })
            }
            _ => {
                let id = self.rng.gen_range(1..=run.graph.nodes());
                txns.run(store, false, |t| {
                    let node_t = t.open(NODE)?;
                    Ok(if t.delete(node_t, &node_key(id))? {
                        Finish::Commit(OpStatus::Ok)
                    } else {
                        Finish::Rollback(OpStatus::NotFound)
                    })
                })
            }
        }
    }
}

impl Worker for LinkWorker<'_> {
    fn step(
        &mut self,
        store: &dyn Store,
        txns: &mut TxnRunner,
    ) -> (usize, Result<OpStatus, StoreError>) {
        let run = self.run;
        let u = self.rng.gen::<f64>() * 100.0;
        let op = run
            .cumulative
            .iter()
            .position(|&c| u < c)
            .unwrap_or(run.last_op);
        let now = run.clock.tick();
        let r = match op {
            ADD_LINK | DELETE_LINK | UPDATE_LINK => self.write_link(op, store, txns, now),
            COUNT_LINK | GET_LINK | GET_LINK_LIST => self.read_link(op, store, txns),
            _ => self.node_op(op, store, txns, now),
        };
        (op, r)
    }
}
