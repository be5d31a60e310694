use std::time::Instant;

use super::*;
use crate::driver::RunLimit;
use crate::report::render_tpcc;
use crate::store::MemStore;

fn small() -> TpccConfig {
    TpccConfig {
        warehouses: 2,
        scale: TpccScale {
            items: 2_000,
            customers_per_district: 300,
        },
        load_batch: 500,
    }
}

fn rows(store: &MemStore, table: &str) -> u64 {
    store.table_len(table) as u64
}

#[test]
fn full_scale_load_has_the_specified_rows_and_values() {
    let store = MemStore::new();
    let cfg = TpccConfig::new(1);
    let t0 = Instant::now();
    let r = load(&store, &cfg, 2, 11, None).unwrap();
    let secs = t0.elapsed().as_secs_f64();
    assert!(secs < 30.0, "full load of one warehouse took {secs:.1}s");
    for (table, n) in cfg.expected_rows_per_warehouse() {
        assert_eq!(rows(&store, table), n, "{table}");
    }
    assert_eq!(rows(&store, CUSTOMER), 30_000);
    assert_eq!(rows(&store, NEW_ORDERS), 9_000);
    assert_eq!(rows(&store, STOCK), 100_000);
    assert_eq!(rows(&store, ITEM), 100_000);
    assert_eq!(rows(&store, ORDERS_BY_CUSTOMER), 30_000);
    let lines = rows(&store, ORDER_LINE);
    assert!((280_000..=320_000).contains(&lines), "{lines} order lines");
    let total: u64 = TABLES.iter().map(|t| rows(&store, t)).sum();
    assert_eq!(r.rows, total);

    let mut t = store.begin_read().unwrap();
    let warehouse_t = t.open(WAREHOUSE).unwrap();
    let district_t = t.open(DISTRICT).unwrap();
    let new_orders_t = t.open(NEW_ORDERS).unwrap();
    let orders_t = t.open(ORDERS).unwrap();
    let customer_t = t.open(CUSTOMER).unwrap();
    let stock_t = t.open(STOCK).unwrap();
    let w =
        Warehouse::from_bytes(&t.get(warehouse_t, &warehouse_key(1)).unwrap().unwrap()).unwrap();
    assert_eq!(w.ytd, 300_000 * 100);
    let d =
        District::from_bytes(&t.get(district_t, &district_key(1, 3)).unwrap().unwrap()).unwrap();
    assert_eq!((d.ytd, d.next_o_id), (30_000 * 100, 3001));
    let nos = t
        .scan(new_orders_t, &district_key(1, 3), None, 900, false)
        .unwrap();
    assert_eq!(key_part(&nos[0].0, 2).unwrap(), 2101);
    assert_eq!(key_part(&nos[899].0, 2).unwrap(), 3000);
    let mut o =
        |id| Order::from_bytes(&t.get(orders_t, &order_key(1, 3, id)).unwrap().unwrap()).unwrap();
    assert!(o(2100).carrier_id.is_some());
    assert!(o(2101).carrier_id.is_none());
    let customers = t
        .scan(
            customer_t,
            &district_key(1, 1),
            Some(&district_key(1, 2)),
            usize::MAX,
            false,
        )
        .unwrap();
    assert_eq!(customers.len(), 3000);
    let mut bc = 0;
    for (_, v) in &customers {
        let c = Customer::from_bytes(v).unwrap();
        assert_eq!((c.balance, c.ytd_payment, c.payment_cnt), (-1000, 1000, 1));
        bc += usize::from(c.credit == "BC");
    }
    assert!((200..400).contains(&bc), "{bc} BC customers");
    let mut original = 0;
    let mut qty_ok = true;
    for (_, v) in t
        .scan(stock_t, &warehouse_key(1), None, 10000, false)
        .unwrap()
    {
        let s = Stock::from_bytes(&v).unwrap();
        qty_ok &= (10..=100).contains(&s.quantity);
        original += usize::from(s.data.contains("ORIGINAL"));
    }
    assert!(qty_ok);
    assert!((800..1200).contains(&original), "{original}");
    drop(t);

    let check = check(&store, 1).unwrap();
    assert!(check.is_consistent(), "{}", check.render());
    assert_eq!(check.districts, 10);
}

#[test]
fn a_run_keeps_the_database_consistent() {
    // Injected conflicts exercise the retry path inside multi-statement transactions.
    let store = MemStore::with_conflict_rate(0.05, 3);
    let cfg = small();
    load(&store, &cfg, 2, 5, None).unwrap();
    assert!(check(&store, 2).unwrap().is_consistent());
    let d = DriverConfig {
        threads: 2,
        limit: RunLimit::Ops(4000),
        seed: 5,
        ..DriverConfig::default()
    };
    let r = run(&store, &cfg, &d, None).unwrap();
    assert_eq!(r.ops, 4000);
    assert_eq!(r.errors, 0, "{:?}", r.first_error);
    assert!(r.conflicts > 50, "conflicts {}", r.conflicts);
    let share = |op: &str| r.op(op).unwrap().count as f64 / 4000.0;
    assert!((share("NewOrder") - 0.45).abs() < 0.04);
    assert!((share("Payment") - 0.43).abs() < 0.04);
    for op in ["OrderStatus", "Delivery", "StockLevel"] {
        assert!((share(op) - 0.04).abs() < 0.015, "{op}");
    }
    let no = r.op("NewOrder").unwrap();
    assert!(
        (2..=50).contains(&no.rolled_back),
        "rolled back {}",
        no.rolled_back
    );
    let minutes = r.duration_s / 60.0;
    assert!((r.tpmc.unwrap() - no.count as f64 / minutes).abs() < 1e-6 * r.tpmc.unwrap());
    assert!(render_tpcc(&r).contains("TpmC"));
    let json = serde_json::to_value(&r).unwrap();
    assert!(json["tpmC"].as_f64().unwrap() > 0.0);

    let c = check(&store, 2).unwrap();
    assert!(c.is_consistent(), "{}", c.render());
    // The run really changed the database: committed New-Orders advanced D_NEXT_O_ID.
    let committed = no.ok;
    let mut t = store.begin_read().unwrap();
    let district_t = t.open(DISTRICT).unwrap();
    let mut advanced = 0;
    for w in 1..=2 {
        for dd in 1..=DISTRICTS {
            let dist =
                District::from_bytes(&t.get(district_t, &district_key(w, dd)).unwrap().unwrap())
                    .unwrap();
            advanced += u64::from(dist.next_o_id - 301);
        }
    }
    assert_eq!(advanced, committed);
}

#[test]
fn check_finds_each_violated_condition() {
    let store = MemStore::new();
    let cfg = TpccConfig {
        warehouses: 1,
        ..small()
    };
    load(&store, &cfg, 1, 9, None).unwrap();
    let mut t = store.begin().unwrap();
    let warehouse_t = t.open(WAREHOUSE).unwrap();
    let district_t = t.open(DISTRICT).unwrap();
    let new_orders_t = t.open(NEW_ORDERS).unwrap();
    let order_line_t = t.open(ORDER_LINE).unwrap();
    // 1: W_YTD off by one cent.
    let wk = warehouse_key(1);
    let mut w = Warehouse::from_bytes(&t.get(warehouse_t, &wk).unwrap().unwrap()).unwrap();
    w.ytd += 1;
    t.put(warehouse_t, &wk, &w.encode()).unwrap();
    // 2: D_NEXT_O_ID of district 2 too high.
    let dk = district_key(1, 2);
    let mut d = District::from_bytes(&t.get(district_t, &dk).unwrap().unwrap()).unwrap();
    d.next_o_id += 1;
    t.put(district_t, &dk, &d.encode()).unwrap();
    // 3: a hole in district 3's new-orders.
    assert!(t.delete(new_orders_t, &order_key(1, 3, 250)).unwrap());
    // 4: a missing order line in district 4.
    assert!(t.delete(order_line_t, &order_line_key(1, 4, 7, 1)).unwrap());
    t.commit().unwrap();
    let c = check(&store, 1).unwrap();
    assert!(!c.is_consistent());
    for n in 1..=4 {
        assert!(!c.holds(n), "condition {n} not detected: {}", c.render());
    }
    assert!(c.render().contains("[NG]"));
}

#[test]
fn payment_by_last_name_takes_the_middle_customer() {
    let store = MemStore::new();
    create_tables(&store).unwrap();
    let mut t = store.begin().unwrap();
    let customer_t = t.open(CUSTOMER).unwrap();
    let customer_by_name_t = t.open(CUSTOMER_BY_NAME).unwrap();
    let warehouse_t = t.open(WAREHOUSE).unwrap();
    let district_t = t.open(DISTRICT).unwrap();
    let firsts = ["AAA", "BBB", "CCC"];
    for (c, first) in (1..=3).zip(firsts) {
        let cust = Customer {
            first: first.to_string(),
            middle: "OE".into(),
            last: "BARBARBAR".into(),
            address: Address {
                street_1: String::new(),
                street_2: String::new(),
                city: String::new(),
                state: String::new(),
                zip: String::new(),
            },
            phone: String::new(),
            since: 0,
            credit: "GC".into(),
            credit_lim: 0,
            discount: 0,
            balance: 0,
            ytd_payment: 0,
            payment_cnt: 0,
            delivery_cnt: 0,
            data: String::new(),
        };
        // Inserted out of first-name order: ids 1..3 get CCC, BBB, AAA reversed below.
        let id = 4 - c;
        t.put(customer_t, &customer_key(1, 1, id), &cust.encode())
            .unwrap();
        t.put(
            customer_by_name_t,
            &customer_name_key(1, 1, &cust.last, first, id),
            &[],
        )
        .unwrap();
    }
    let wh = Warehouse {
        name: "W".into(),
        address: Address {
            street_1: String::new(),
            street_2: String::new(),
            city: String::new(),
            state: String::new(),
            zip: String::new(),
        },
        tax: 0,
        ytd: 0,
    };
    t.put(warehouse_t, &warehouse_key(1), &wh.encode()).unwrap();
    let dist = District {
        name: "D".into(),
        address: wh.address.clone(),
        tax: 0,
        ytd: 0,
        next_o_id: 1,
    };
    t.put(district_t, &district_key(1, 1), &dist.encode())
        .unwrap();
    t.commit().unwrap();
    let mut txns = TxnRunner::new(0);
    let p = txn::PaymentIn {
        w: 1,
        d: 1,
        c_w: 1,
        c_d: 1,
        customer: txn::CustomerSel::Last("BARBARBAR".into()),
        amount: 500,
    };
    assert_eq!(txn::payment(&store, &mut txns, &p, 1, 0), Ok(OpStatus::Ok));
    let mut t = store.begin_read().unwrap();
    let customer_t = t.open(CUSTOMER).unwrap();
    // Sorted by first name: AAA (id 3), BBB (id 2), CCC (id 1); the middle one is id 2.
    let paid =
        Customer::from_bytes(&t.get(customer_t, &customer_key(1, 1, 2)).unwrap().unwrap()).unwrap();
    assert_eq!((paid.balance, paid.payment_cnt), (-500, 1));
    let other =
        Customer::from_bytes(&t.get(customer_t, &customer_key(1, 1, 1)).unwrap().unwrap()).unwrap();
    assert_eq!(other.payment_cnt, 0);
    drop(t);
    let missing = txn::PaymentIn {
        customer: txn::CustomerSel::Last("NOBODY".into()),
        ..p
    };
    assert_eq!(
        txn::payment(&store, &mut txns, &missing, 2, 0),
        Ok(OpStatus::NotFound)
    );
    assert_eq!(store.table_len(HISTORY), 1, "the miss rolled back");
}

#[test]
fn bad_configs_are_rejected_before_work() {
    let store = MemStore::new();
    let e = load(&store, &TpccConfig::new(0), 1, 1, None).unwrap_err();
    assert!(e.to_string().contains("--warehouses"), "{e}");
    assert!(store.table_names().is_empty());
    create_tables(&store).unwrap();
    let e = run(&store, &TpccConfig::new(1), &DriverConfig::default(), None).unwrap_err();
    assert!(matches!(e, WorkloadError::NotLoaded { .. }), "{e}");
    let mut c = TpccConfig::new(1);
    c.scale.items = 0;
    assert!(c.validate().is_err());
}

#[test]
fn ramp_up_is_excluded_from_tpmc() {
    let store = MemStore::new();
    let cfg = TpccConfig {
        warehouses: 1,
        ..small()
    };
    load(&store, &cfg, 2, 4, None).unwrap();
    let d = DriverConfig {
        threads: 2,
        limit: RunLimit::Duration(std::time::Duration::from_millis(300)),
        warmup: std::time::Duration::from_millis(150),
        seed: 4,
        ..DriverConfig::default()
    };
    let r = run(&store, &cfg, &d, None).unwrap();
    assert!(r.warmup_ops > 0, "ramp-up ran no transactions");
    assert!(
        (0.29..0.6).contains(&r.duration_s),
        "measured {}s",
        r.duration_s
    );
    let new_orders = r.op("NewOrder").unwrap().count as f64;
    let tpmc = r.tpmc.unwrap();
    assert!((tpmc - new_orders * 60.0 / r.duration_s).abs() < 1e-6 * tpmc.max(1.0));
    // Everything that ran, ramp-up included, left the database consistent.
    assert!(check(&store, 1).unwrap().is_consistent());
}
