use std::collections::BTreeMap;

use super::*;
use crate::driver::RunLimit;
use crate::report::render_linkbench;
use crate::store::MemStore;

const NODES: u64 = 2000;

fn loaded(mix: LinkMix) -> (MemStore, LinkbenchConfig) {
    let store = MemStore::new();
    let cfg = LinkbenchConfig::new(NODES, mix);
    load(&store, &cfg, 2, 3, None).unwrap();
    (store, cfg)
}

fn run_requests(store: &MemStore, cfg: &LinkbenchConfig, n: u64) -> RunReport {
    let d = DriverConfig {
        threads: 2,
        limit: RunLimit::Ops(n),
        seed: 17,
        ..DriverConfig::default()
    };
    let r = run(store, cfg, &d, None).unwrap();
    assert_eq!(r.ops, n);
    assert_eq!(r.errors, 0, "{:?}", r.first_error);
    r
}

fn all(store: &MemStore, table: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut t = store.begin_read().unwrap();
    let table_t = t.open(table).unwrap();
    t.scan(table_t, &[], None, usize::MAX, false).unwrap()
}

/// Counts, the time index and the visible links agree for every (id1, type).
fn assert_invariants(store: &MemStore) -> (u64, u64) {
    let mut visible: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    let mut hidden = 0;
    for (k, v) in all(store, LINK) {
        let l = Link::decode(&v).unwrap();
        if l.visibility == 1 {
            *visible.entry(k[..12].to_vec()).or_default() += 1;
            let id2 = u64::from_be_bytes(k[12..20].try_into().unwrap());
            let tk = link_time_key(
                u64::from_be_bytes(k[..8].try_into().unwrap()),
                u32::from_be_bytes(k[8..12].try_into().unwrap()),
                l.time,
                id2,
            );
            let mut t = store.begin_read().unwrap();
            let link_time_t = t.open(LINK_TIME).unwrap();
            assert!(
                t.get(link_time_t, &tk).unwrap().is_some(),
                "visible link not indexed"
            );
        } else {
            hidden += 1;
        }
    }
    let mut indexed: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    for (k, _) in all(store, LINK_TIME) {
        *indexed.entry(k[..12].to_vec()).or_default() += 1;
    }
    assert_eq!(indexed, visible, "time index != visible links");
    let mut counts: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    for (k, v) in all(store, COUNT) {
        let c = decode_count(&v).unwrap().0;
        if c > 0 {
            counts.insert(k, c);
        }
    }
    assert_eq!(counts, visible, "counts != visible links");
    (visible.values().sum(), hidden)
}

#[test]
fn load_writes_the_graph() {
    let (store, cfg) = loaded(LinkMix::DEFAULT);
    let g = Graph::new(NODES);
    let links: u64 = (1..=NODES).map(|id| u64::from(g.degree(id))).sum();
    assert_eq!(store.table_len(NODE) as u64, NODES);
    assert_eq!(store.table_len(LINK) as u64, links);
    let mean = links as f64 / NODES as f64;
    // 2,000 nodes cannot hold the table's extreme tail (up to 961,963 links), so the mean is
    // below the full table's 4.1; the 10^6-node check in graph.rs sees the tail.
    assert!((2.0..5.5).contains(&mean), "mean degree {mean}");
    let zero = (1..=NODES).filter(|&id| g.degree(id) == 0).count() as f64 / NODES as f64;
    assert!((zero - 0.4533).abs() < 0.01, "{zero}");
    let (visible, hidden) = assert_invariants(&store);
    assert_eq!((visible, hidden), (links, 0));
    // Node payloads: log-normal around 128 bytes.
    let mut sizes: Vec<usize> = all(&store, NODE)
        .iter()
        .map(|(_, v)| Node::decode(v).unwrap().data.len())
        .collect();
    sizes.sort_unstable();
    let median = sizes[sizes.len() / 2];
    assert!((100..160).contains(&median), "node payload median {median}");
    assert!(sizes.iter().all(|&s| s <= cfg.node_data_max));
    // Newest first, limited.
    let hot = g.id_at_rank(0);
    let list = get_link_list(&store, hot, 1, 10).unwrap();
    assert_eq!(
        list.len(),
        10.min(link_count(&store, hot, 1).unwrap() as usize)
    );
    assert!(list.windows(2).all(|w| w[0].1 > w[1].1), "not newest first");
}

#[test]
fn small_load_transactions_give_the_same_graph() {
    let store = MemStore::new();
    let mut cfg = LinkbenchConfig::new(300, LinkMix::DEFAULT);
    cfg.load_max_rows_per_txn = 7;
    let r = load(&store, &cfg, 2, 3, None).unwrap();
    let g = Graph::new(300);
    let links: u64 = (1..=300).map(|id| u64::from(g.degree(id))).sum();
    assert_eq!(store.table_len(LINK) as u64, links);
    let (visible, _) = assert_invariants(&store);
    assert_eq!(visible, links);
    assert_eq!(
        r.rows,
        (store.table_len(NODE) + store.table_len(LINK) * 2 + store.table_len(COUNT)) as u64
    );
    assert!(store.stats_json()["commits"].as_u64().unwrap() > links / 4);
}

#[test]
fn default_mix_run() {
    let (store, cfg) = loaded(LinkMix::DEFAULT);
    let n = 6000;
    let r = run_requests(&store, &cfg, n);
    for (name, pct) in OP_NAMES.iter().zip(LinkMix::DEFAULT.percent) {
        let share = 100.0 * r.op(name).unwrap().count as f64 / n as f64;
        assert!((share - pct).abs() < 3.5, "{name}: {share} vs {pct}");
    }
    // Hot nodes have links, so most getlink lookups hit.
    let gl = r.op("MULTIGET_LINK").unwrap();
    assert!(gl.ok > 0);
    assert!(r.op("GET_NODE").unwrap().ok > r.op("GET_NODE").unwrap().not_found);
    assert_invariants(&store);
    let text = render_linkbench(&r);
    assert!(text.contains("GET_LINKS_LIST count = "));
    assert!(text.contains("p25 = ") && text.contains("mean = "));
    assert!(text.contains("Requests/second = "));
}

#[test]
fn write_only_mix_only_writes() {
    let (store, cfg) = loaded(LinkMix::WRITE_ONLY);
    let r = run_requests(&store, &cfg, 4000);
    for name in ["COUNT_LINK", "MULTIGET_LINK", "GET_LINKS_LIST", "GET_NODE"] {
        assert_eq!(r.op(name).unwrap().count, 0, "{name}");
    }
    let share = |name: &str| 100.0 * r.op(name).unwrap().count as f64 / 4000.0;
    assert!((share("ADD_LINK") - 29.0).abs() < 3.5);
    assert!((share("UPDATE_NODE") - 23.5).abs() < 3.5);
    let added = r.op("ADD_NODE").unwrap().count;
    let deleted = r.op("DELETE_NODE").unwrap().ok;
    assert_eq!(store.table_len(NODE) as u64, NODES + added - deleted);
    let (_, hidden) = assert_invariants(&store);
    assert!(hidden > 0, "deletelink must hide links");
}

#[test]
fn deletelink_hides_instead_of_removing() {
    let mix = LinkMix::parse("deletelink = 100\n").unwrap();
    let (store, cfg) = loaded(mix);
    let before = store.table_len(LINK);
    let r = run_requests(&store, &cfg, 300);
    let deleted = r.op("DELETE_LINK").unwrap().ok;
    assert!(deleted > 100, "{deleted}");
    assert_eq!(store.table_len(LINK), before, "rows stay, hidden");
    let (visible, hidden) = assert_invariants(&store);
    assert_eq!(hidden, deleted);
    assert_eq!(visible + hidden, before as u64);
}

#[test]
fn bad_configs_are_rejected_before_work() {
    let store = MemStore::new();
    let e = load(
        &store,
        &LinkbenchConfig::new(0, LinkMix::DEFAULT),
        1,
        1,
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("--nodes"), "{e}");
    let bad_mix = LinkMix {
        percent: [10.0; 10],
    };
    bad_mix.validate().unwrap();
    let bad_mix = LinkMix { percent: [5.0; 10] };
    assert!(LinkbenchConfig::new(10, bad_mix).validate().is_err());
    assert!(store.table_names().is_empty());
    create_tables(&store).unwrap();
    let cfg = LinkbenchConfig::new(10, LinkMix::DEFAULT);
    let e = run(&store, &cfg, &DriverConfig::default(), None).unwrap_err();
    assert!(matches!(e, WorkloadError::NotLoaded { .. }), "{e}");
}
