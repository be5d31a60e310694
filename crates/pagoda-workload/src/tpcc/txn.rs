//! The five TPC-C transactions: inputs (clause 2.x.1) drawn before the transaction starts, so
//! a conflict retry repeats the same transaction, and bodies run through the driver's
//! [`TxnRunner`].

use std::collections::BTreeSet;

use rand::rngs::SmallRng;
use rand::Rng;

use super::random::{last_name, nurand, CConstants, A_C_ID, A_C_LAST, A_OL_I_ID};
use super::schema::*;
use super::DISTRICTS;
use crate::driver::{Finish, OpStatus, TxnRunner};
use crate::store::{prefix_end, Rows, Store, StoreError, StoreTxn};

/// Who a Payment or Order-Status is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CustomerSel {
    /// By C_ID.
    Id(u32),
    /// By C_LAST (the middle one in first-name order).
    Last(String),
}

/// New-Order inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOrderIn {
    /// Home warehouse.
    pub w: u32,
    /// District.
    pub d: u32,
    /// Customer.
    pub c: u32,
    /// Lines: (item id, supplying warehouse, quantity). An unused item id in the last line
    /// makes the transaction roll back.
    pub lines: Vec<(u32, u32, u32)>,
}

/// Payment inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentIn {
    /// Home warehouse.
    pub w: u32,
    /// District.
    pub d: u32,
    /// Customer's warehouse.
    pub c_w: u32,
    /// Customer's district.
    pub c_d: u32,
    /// The customer.
    pub customer: CustomerSel,
    /// Amount in cents.
    pub amount: i64,
}

/// Draws transaction inputs.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// Warehouses in the database.
    pub warehouses: u32,
    /// Items in the database.
    pub items: u32,
    /// Customers per district.
    pub customers: u32,
    /// The run's NURand constants.
    pub c: CConstants,
}

impl Inputs {
    fn other_warehouse(&self, rng: &mut SmallRng, w: u32) -> u32 {
        if self.warehouses == 1 {
            return w;
        }
        let o = rng.gen_range(1..self.warehouses);
        if o >= w {
            o + 1
        } else {
            o
        }
    }

    fn customer_id(&self, rng: &mut SmallRng) -> u32 {
        nurand(rng, A_C_ID, 1, self.customers, self.c.c_id)
    }

    fn customer(&self, rng: &mut SmallRng) -> CustomerSel {
        if rng.gen_range(1..=100) <= 60 {
            CustomerSel::Last(last_name(nurand(rng, A_C_LAST, 0, 999, self.c.c_last_run)))
        } else {
            CustomerSel::Id(self.customer_id(rng))
        }
    }

    /// New-Order: 5..15 lines, NURand items, 1 % remote lines, 1 % rolled back.
    pub fn new_order(&self, rng: &mut SmallRng, w: u32) -> NewOrderIn {
        let d = rng.gen_range(1..=DISTRICTS);
        let c = self.customer_id(rng);
        let n = rng.gen_range(5..=15);
        let rollback = rng.gen_range(1..=100) == 1;
        let lines = (0..n)
            .map(|i| {
                let item = if rollback && i == n - 1 {
                    self.items + 1
                } else {
                    nurand(rng, A_OL_I_ID, 1, self.items, self.c.ol_i_id)
                };
                let supply = if rng.gen_range(1..=100) == 1 {
                    self.other_warehouse(rng, w)
                } else {
                    w
                };
                (item, supply, rng.gen_range(1..=10))
            })
            .collect();
        NewOrderIn { w, d, c, lines }
    }

    /// Payment: 85 % home, 60 % by last name, 1.00..5000.00.
    pub fn payment(&self, rng: &mut SmallRng, w: u32) -> PaymentIn {
        let d = rng.gen_range(1..=DISTRICTS);
        let (c_w, c_d) = if self.warehouses == 1 || rng.gen_range(1..=100) <= 85 {
            (w, d)
        } else {
            (self.other_warehouse(rng, w), rng.gen_range(1..=DISTRICTS))
        };
        PaymentIn {
            w,
            d,
            c_w,
            c_d,
            customer: self.customer(rng),
            amount: rng.gen_range(100..=500_000),
        }
    }

    /// Order-Status: (district, customer), 60 % by last name.
    pub fn order_status(&self, rng: &mut SmallRng) -> (u32, CustomerSel) {
        (rng.gen_range(1..=DISTRICTS), self.customer(rng))
    }

    /// Delivery: carrier 1..10.
    pub fn delivery(&self, rng: &mut SmallRng) -> u32 {
        rng.gen_range(1..=10)
    }

    /// Stock-Level: (district, threshold 10..20).
    pub fn stock_level(&self, rng: &mut SmallRng) -> (u32, u32) {
        (rng.gen_range(1..=DISTRICTS), rng.gen_range(10..=20))
    }
}

fn missing(what: String) -> StoreError {
    StoreError::Other(format!(
        "{what} is missing; load the database with the same --warehouses first"
    ))
}

fn get_row<R: Row>(
    t: &mut dyn StoreTxn,
    key: &[u8],
    what: impl Fn() -> String,
) -> Result<R, StoreError> {
    let table_t = t.open(R::TABLE)?;
    match t.get(table_t, key)? {
        Some(v) => R::from_bytes(&v),
        None => Err(missing(what())),
    }
}

fn prefix_scan(
    t: &mut dyn StoreTxn,
    table: &str,
    prefix: &[u8],
    limit: usize,
    reverse: bool,
) -> Result<Rows, StoreError> {
    let table_t = t.open(table)?;
    t.scan(
        table_t,
        prefix,
        prefix_end(prefix).as_deref(),
        limit,
        reverse,
    )
}

/// Resolves a customer selection to (id, row); `None` when no customer has that last name.
fn find_customer(
    t: &mut dyn StoreTxn,
    w: u32,
    d: u32,
    sel: &CustomerSel,
) -> Result<Option<(u32, Customer)>, StoreError> {
    let c = match sel {
        CustomerSel::Id(c) => *c,
        CustomerSel::Last(last) => {
            let hits = prefix_scan(
                t,
                CUSTOMER_BY_NAME,
                &customer_name_prefix(w, d, last),
                usize::MAX,
                false,
            )?;
            if hits.is_empty() {
                return Ok(None);
            }
            // Position ⌈n/2⌉ (1-based) in first-name order.
            customer_id_of_name_key(&hits[(hits.len() - 1) / 2].0)?
        }
    };
    let row = get_row::<Customer>(t, &customer_key(w, d, c), || {
        format!("customer {w}/{d}/{c}")
    })?;
    Ok(Some((c, row)))
}

/// New-Order (clause 2.4.2).
pub fn new_order(
    store: &dyn Store,
    txns: &mut TxnRunner,
    i: &NewOrderIn,
    now: i64,
) -> Result<OpStatus, StoreError> {
    let all_local = u32::from(i.lines.iter().all(|l| l.1 == i.w));
    txns.run(store, false, |t| {
        let district_t = t.open(DISTRICT)?;
        let orders_t = t.open(ORDERS)?;
        let new_orders_t = t.open(NEW_ORDERS)?;
        let orders_by_customer_t = t.open(ORDERS_BY_CUSTOMER)?;
        let item_t = t.open(ITEM)?;
        let stock_t = t.open(STOCK)?;
        let order_line_t = t.open(ORDER_LINE)?;
        let wh = get_row::<Warehouse>(t, &warehouse_key(i.w), || format!("warehouse {}", i.w))?;
        let dk = district_key(i.w, i.d);
        let mut dist = get_row::<District>(t, &dk, || format!("district {}/{}", i.w, i.d))?;
        let o = dist.next_o_id;
        dist.next_o_id += 1;
        t.put(district_t, &dk, &dist.encode())?;
        let cust = get_row::<Customer>(t, &customer_key(i.w, i.d, i.c), || {
            format!("customer {}/{}/{}", i.w, i.d, i.c)
        })?;
        let order = Order {
            c_id: i.c,
            entry_d: now,
            carrier_id: None,
            ol_cnt: i.lines.len() as u32,
            all_local,
        };
        t.put(orders_t, &order_key(i.w, i.d, o), &order.encode())?;
        t.put(new_orders_t, &order_key(i.w, i.d, o), &[])?;
        t.put(
            orders_by_customer_t,
            &order_by_customer_key(i.w, i.d, i.c, o),
            &[],
        )?;
        let mut total = 0i64;
        for (n, &(item_id, supply_w, qty)) in i.lines.iter().enumerate() {
            let Some(iv) = t.get(item_t, &item_key(item_id))? else {
                // The 1 % "unused item" case: the whole order rolls back.
                return Ok(Finish::Rollback(OpStatus::RolledBack));
            };
            let item = Item::from_bytes(&iv)?;
            let sk = stock_key(supply_w, item_id);
            let mut s = get_row::<Stock>(t, &sk, || format!("stock {supply_w}/{item_id}"))?;
            s.quantity = if s.quantity >= qty + 10 {
                s.quantity - qty
            } else {
                s.quantity + 91 - qty
            };
            s.ytd += qty;
            s.order_cnt += 1;
            if supply_w != i.w {
                s.remote_cnt += 1;
            }
            t.put(stock_t, &sk, &s.encode())?;
            let amount = i64::from(qty) * item.price;
            total += amount;
            let line = OrderLine {
                i_id: item_id,
                supply_w_id: supply_w,
                delivery_d: None,
                quantity: qty,
                amount,
                dist_info: s.dist[(i.d - 1) as usize % 10].clone(),
            };
            t.put(
                order_line_t,
                &order_line_key(i.w, i.d, o, n as u32 + 1),
                &line.encode(),
            )?;
        }
        // The total the terminal would show; computed as the spec asks, not stored.
        let _total = total * i64::from(10_000 - cust.discount) / 10_000
            * i64::from(10_000 + wh.tax + dist.tax)
            / 10_000;
        Ok(Finish::Commit(OpStatus::Ok))
    })
}

/// Payment (clause 2.5.2). `history_seq` is a fresh surrogate for the history row.
pub fn payment(
    store: &dyn Store,
    txns: &mut TxnRunner,
    i: &PaymentIn,
    history_seq: u64,
    now: i64,
) -> Result<OpStatus, StoreError> {
    txns.run(store, false, |t| {
        let warehouse_t = t.open(WAREHOUSE)?;
        let district_t = t.open(DISTRICT)?;
        let customer_t = t.open(CUSTOMER)?;
        let history_t = t.open(HISTORY)?;
        let wk = warehouse_key(i.w);
        let mut wh = get_row::<Warehouse>(t, &wk, || format!("warehouse {}", i.w))?;
        wh.ytd += i.amount;
        t.put(warehouse_t, &wk, &wh.encode())?;
        let dk = district_key(i.w, i.d);
        let mut dist = get_row::<District>(t, &dk, || format!("district {}/{}", i.w, i.d))?;
        dist.ytd += i.amount;
        t.put(district_t, &dk, &dist.encode())?;
        let Some((c, mut cust)) = find_customer(t, i.c_w, i.c_d, &i.customer)? else {
            return Ok(Finish::Rollback(OpStatus::NotFound));
        };
        cust.balance -= i.amount;
        cust.ytd_payment += i.amount;
        cust.payment_cnt += 1;
        if cust.credit == "BC" {
            let mut data = format!(
                "{c} {} {} {} {} {}.{:02} | {}",
                i.c_d,
                i.c_w,
                i.d,
                i.w,
                i.amount / 100,
                i.amount % 100,
                cust.data
            );
            data.truncate(500);
            cust.data = data;
        }
        t.put(customer_t, &customer_key(i.c_w, i.c_d, c), &cust.encode())?;
        let h = History {
            c_id: c,
            c_d_id: i.c_d,
            c_w_id: i.c_w,
            d_id: i.d,
            w_id: i.w,
            date: now,
            amount: i.amount,
            data: format!("{}    {}", wh.name, dist.name),
        };
        t.put(history_t, &history_key(i.w, history_seq), &h.encode())?;
        Ok(Finish::Commit(OpStatus::Ok))
    })
}

/// Order-Status (clause 2.6.2), read-only.
pub fn order_status(
    store: &dyn Store,
    txns: &mut TxnRunner,
    w: u32,
    d: u32,
    sel: &CustomerSel,
) -> Result<OpStatus, StoreError> {
    txns.run(store, true, |t| {
        let Some((c, _cust)) = find_customer(t, w, d, sel)? else {
            return Ok(Finish::Commit(OpStatus::NotFound));
        };
        let last = prefix_scan(t, ORDERS_BY_CUSTOMER, &customer_key(w, d, c), 1, true)?;
        let Some((k, _)) = last.first() else {
            return Ok(Finish::Commit(OpStatus::NotFound));
        };
        let o = key_part(k, 3)?;
        let _order = get_row::<Order>(t, &order_key(w, d, o), || format!("order {w}/{d}/{o}"))?;
        for (_, v) in prefix_scan(t, ORDER_LINE, &order_key(w, d, o), usize::MAX, false)? {
            OrderLine::from_bytes(&v)?;
        }
        Ok(Finish::Commit(OpStatus::Ok))
    })
}

/// Delivery (clause 2.7.4): each district in its own transaction, as the clause allows.
/// Returns `NotFound` when no district had an undelivered order.
pub fn delivery(
    store: &dyn Store,
    txns: &mut TxnRunner,
    w: u32,
    carrier: u32,
    now: i64,
) -> Result<OpStatus, StoreError> {
    let mut delivered = 0;
    for d in 1..=DISTRICTS {
        let done = txns.run(store, false, |t| {
            let new_orders_t = t.open(NEW_ORDERS)?;
            let orders_t = t.open(ORDERS)?;
            let order_line_t = t.open(ORDER_LINE)?;
            let customer_t = t.open(CUSTOMER)?;
            let oldest = prefix_scan(t, NEW_ORDERS, &district_key(w, d), 1, false)?;
            let Some((nk, _)) = oldest.first() else {
                return Ok(Finish::Commit(false));
            };
            let o = key_part(nk, 2)?;
            t.delete(new_orders_t, nk)?;
            let ok = order_key(w, d, o);
            let mut order = get_row::<Order>(t, &ok, || format!("order {w}/{d}/{o}"))?;
            order.carrier_id = Some(carrier);
            t.put(orders_t, &ok, &order.encode())?;
            let mut sum = 0;
            for (lk, lv) in prefix_scan(t, ORDER_LINE, &ok, usize::MAX, false)? {
                let mut line = OrderLine::from_bytes(&lv)?;
                line.delivery_d = Some(now);
                sum += line.amount;
                t.put(order_line_t, &lk, &line.encode())?;
            }
            let ck = customer_key(w, d, order.c_id);
            let mut cust =
                get_row::<Customer>(t, &ck, || format!("customer {w}/{d}/{}", order.c_id))?;
            cust.balance += sum;
            cust.delivery_cnt += 1;
            t.put(customer_t, &ck, &cust.encode())?;
            Ok(Finish::Commit(true))
        })?;
        delivered += u32::from(done);
    }
    Ok(if delivered > 0 {
        OpStatus::Ok
    } else {
        OpStatus::NotFound
    })
}

/// Stock-Level (clause 2.8.2), read-only: distinct items of the district's last 20 orders
/// whose stock is below `threshold`.
pub fn stock_level(
    store: &dyn Store,
    txns: &mut TxnRunner,
    w: u32,
    d: u32,
    threshold: u32,
) -> Result<OpStatus, StoreError> {
    txns.run(store, true, |t| {
        let order_line_t = t.open(ORDER_LINE)?;
        let dist = get_row::<District>(t, &district_key(w, d), || format!("district {w}/{d}"))?;
        let next = dist.next_o_id;
        let from = order_key(w, d, next.saturating_sub(20));
        let to = order_key(w, d, next);
        let mut items = BTreeSet::new();
        for (_, v) in t.scan(order_line_t, &from, Some(&to), usize::MAX, false)? {
            items.insert(OrderLine::from_bytes(&v)?.i_id);
        }
        // The count is the terminal's output; the driver only needs the reads done.
        let mut _low_stock = 0u32;
        for i in items {
            let s = get_row::<Stock>(t, &stock_key(w, i), || format!("stock {w}/{i}"))?;
            _low_stock += u32::from(s.quantity < threshold);
        }
        Ok(Finish::Commit(OpStatus::Ok))
    })
}
