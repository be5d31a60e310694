//! The run report's renderings, tested on a real YCSB run: here rather than in `report.rs`,
//! which renders any workload's report and so does not depend on `ycsb`.

use crate::driver::{DriverConfig, RunLimit};
use crate::report::{
    render_linkbench, render_load, render_text, render_tpcc, render_ycsb, RunReport,
};
use crate::store::MemStore;
use crate::ycsb::{self, YcsbConfig, YcsbWorkload};

fn report() -> RunReport {
    let store = MemStore::new();
    let cfg = YcsbConfig::new(YcsbWorkload::B, 100);
    let l = ycsb::load(&store, &cfg, 1, 1, None).unwrap();
    assert!(render_load(&l).starts_with("load ycsb: 100 rows in "));
    let d = DriverConfig {
        limit: RunLimit::Ops(500),
        ..DriverConfig::default()
    };
    ycsb::run(&store, &cfg, &d, None).unwrap()
}

#[test]
fn json_has_the_cli_keys() {
    let r = report();
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(v["command"], "bench ycsb");
    assert_eq!(v["ops"], 500);
    for k in ["duration_s", "throughput_ops_s"] {
        assert!(v[k].as_f64().unwrap() > 0.0, "{k}");
    }
    for k in ["p50", "p95", "p99", "max"] {
        assert!(v["latency_us"][k].is_number(), "{k}");
    }
    assert!(v.get("tpmC").is_none(), "tpmC is tpcc only");
    assert_eq!(v["config"]["ycsb"]["record_count"], 100);
    assert_eq!(v["config"]["driver"]["threads"], 1);
    assert_eq!(v["config"]["driver"]["limit"]["ops"], 500);
    assert_eq!(v["config"]["driver"]["warmup_s"], 0.0);
    assert_eq!(v["engine"]["engine"], "mem");
    assert_eq!(v["operations"][0]["name"], "READ");
    assert!(v["operations"][0]["latency_us"]["p25"].is_number());
}

#[test]
fn text_renderings() {
    let r = report();
    let t = render_text(&r);
    assert!(t.starts_with("bench ycsb: 500 ops"));
    assert!(t.contains("READ") && t.contains("p99_us"));
    let y = render_ycsb(&r);
    for line in [
        "[OVERALL], RunTime(ms), ",
        "[OVERALL], Throughput(ops/sec), ",
        "[READ], Operations, ",
        "[READ], AverageLatency(us), ",
        "[READ], MinLatency(us), ",
        "[READ], MaxLatency(us), ",
        "[READ], 95thPercentileLatency(us), ",
        "[READ], 99thPercentileLatency(us), ",
        "[READ], Return=OK, ",
        "[UPDATE], Operations, ",
    ] {
        assert!(y.contains(line), "missing {line}");
    }
    let reads = r.op("READ").unwrap().count;
    assert!(y.contains(&format!("[READ], Operations, {reads}\n")));
    assert!(render_linkbench(&r).contains("READ count = "));
    assert!(render_tpcc(&r).contains("<TpmC>"));
}
