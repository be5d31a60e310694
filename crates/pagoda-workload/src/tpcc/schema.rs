//! TPC-C tables on a [`Store`](crate::store::Store): table names, order-preserving keys and row encodings.
//!
//! Every id is a big-endian u32 in keys, so a key prefix selects a warehouse, a district or an
//! order and scans return rows in id order. Money is kept in cents (i64) and rates (tax,
//! discount) in units of 1/10,000, so sums are exact and consistency condition 1 can be checked
//! with `==`. Rows use the crate's [`codec`](crate::codec) format.

use crate::codec::{key32, Dec, Enc};
use crate::store::StoreError;

/// `warehouse(w_id)`.
pub const WAREHOUSE: &str = "warehouse";
/// `district(d_w_id, d_id)`.
pub const DISTRICT: &str = "district";
/// `customer(c_w_id, c_d_id, c_id)`.
pub const CUSTOMER: &str = "customer";
/// `history(h_w_id, surrogate)`: TPC-C's history has no key; the surrogate is a u64.
pub const HISTORY: &str = "history";
/// `new_orders(no_w_id, no_d_id, no_o_id)`, empty values.
pub const NEW_ORDERS: &str = "new_orders";
/// `orders(o_w_id, o_d_id, o_id)`.
pub const ORDERS: &str = "orders";
/// `order_line(ol_w_id, ol_d_id, ol_o_id, ol_number)`.
pub const ORDER_LINE: &str = "order_line";
/// `item(i_id)`.
pub const ITEM: &str = "item";
/// `stock(s_w_id, s_i_id)`.
pub const STOCK: &str = "stock";
/// Secondary index `customer(c_w_id, c_d_id, c_last, c_first) → c_id`, empty values.
pub const CUSTOMER_BY_NAME: &str = "customer_by_name";
/// Secondary index `orders(o_w_id, o_d_id, o_c_id, o_id)`, empty values.
pub const ORDERS_BY_CUSTOMER: &str = "orders_by_customer";

/// All tables, in creation order.
pub const TABLES: [&str; 11] = [
    WAREHOUSE,
    DISTRICT,
    CUSTOMER,
    HISTORY,
    NEW_ORDERS,
    ORDERS,
    ORDER_LINE,
    ITEM,
    STOCK,
    CUSTOMER_BY_NAME,
    ORDERS_BY_CUSTOMER,
];

/// Key of a warehouse.
pub fn warehouse_key(w: u32) -> Vec<u8> {
    key32(&[w])
}
/// Key of a district (also the prefix of its customers, orders, new-orders, order lines).
pub fn district_key(w: u32, d: u32) -> Vec<u8> {
    key32(&[w, d])
}
/// Key of a customer.
pub fn customer_key(w: u32, d: u32, c: u32) -> Vec<u8> {
    key32(&[w, d, c])
}
/// Key of an order, a new-order, or the prefix of an order's lines.
pub fn order_key(w: u32, d: u32, o: u32) -> Vec<u8> {
    key32(&[w, d, o])
}
/// Key of an order line.
pub fn order_line_key(w: u32, d: u32, o: u32, n: u32) -> Vec<u8> {
    key32(&[w, d, o, n])
}
/// Key of an item.
pub fn item_key(i: u32) -> Vec<u8> {
    key32(&[i])
}
/// Key of a stock row.
pub fn stock_key(w: u32, i: u32) -> Vec<u8> {
    key32(&[w, i])
}
/// Key of a history row.
pub fn history_key(w: u32, seq: u64) -> Vec<u8> {
    let mut k = key32(&[w]);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}
/// Prefix of the name-index entries of customers named `last` in a district. Names hold no
/// NUL byte, so the NUL terminator keeps `last` from matching a longer name.
pub fn customer_name_prefix(w: u32, d: u32, last: &str) -> Vec<u8> {
    let mut k = key32(&[w, d]);
    k.extend_from_slice(last.as_bytes());
    k.push(0);
    k
}
/// Name-index entry; ordered by (last, first), so a prefix scan yields customers sorted by
/// first name as Payment and Order-Status need.
pub fn customer_name_key(w: u32, d: u32, last: &str, first: &str, c: u32) -> Vec<u8> {
    let mut k = customer_name_prefix(w, d, last);
    k.extend_from_slice(first.as_bytes());
    k.push(0);
    k.extend_from_slice(&c.to_be_bytes());
    k
}
/// The customer id at the end of a name-index key.
pub fn customer_id_of_name_key(k: &[u8]) -> Result<u32, StoreError> {
    k.last_chunk::<4>()
        .map(|b| u32::from_be_bytes(*b))
        .ok_or_else(|| StoreError::Other("corrupt customer name index key".to_string()))
}
/// Order-by-customer index entry.
pub fn order_by_customer_key(w: u32, d: u32, c: u32, o: u32) -> Vec<u8> {
    key32(&[w, d, c, o])
}
/// The u32 at position `i` (in 4-byte words) of a key.
pub fn key_part(k: &[u8], i: usize) -> Result<u32, StoreError> {
    k.get(i * 4..i * 4 + 4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_be_bytes)
        .ok_or_else(|| StoreError::Other(format!("TPC-C key too short: {k:02x?}")))
}

/// A row type with its encoding.
pub trait Row: Sized {
    /// The table it lives in.
    const TABLE: &'static str;
    /// Writes the fields.
    fn encode(&self) -> Vec<u8>;
    /// Reads the fields.
    fn decode(d: &mut Dec<'_>) -> Result<Self, StoreError>;
    /// Decodes a whole value.
    fn from_bytes(b: &[u8]) -> Result<Self, StoreError> {
        let mut d = Dec::new(b, Self::TABLE);
        let r = Self::decode(&mut d)?;
        d.end()?;
        Ok(r)
    }
}

/// Street address shared by warehouse, district and customer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// Street 1 (10..20).
    pub street_1: String,
    /// Street 2 (10..20).
    pub street_2: String,
    /// City (10..20).
    pub city: String,
    /// State (2).
    pub state: String,
    /// Zip (9).
    pub zip: String,
}

impl Address {
    fn enc(&self, e: &mut Enc) {
        e.str(&self.street_1)
            .str(&self.street_2)
            .str(&self.city)
            .str(&self.state)
            .str(&self.zip);
    }
    fn dec(d: &mut Dec<'_>) -> Result<Self, StoreError> {
        Ok(Address {
            street_1: d.str()?,
            street_2: d.str()?,
            city: d.str()?,
            state: d.str()?,
            zip: d.str()?,
        })
    }
}

/// A warehouse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warehouse {
    /// W_NAME.
    pub name: String,
    /// Address.
    pub address: Address,
    /// W_TAX in 1/10,000.
    pub tax: u32,
    /// W_YTD in cents.
    pub ytd: i64,
}

impl Row for Warehouse {
    const TABLE: &'static str = WAREHOUSE;
    fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new();
        e.str(&self.name);
        self.address.enc(&mut e);
        e.u32(self.tax).i64(self.ytd);
        e.finish()
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self, StoreError> {
        Ok(Warehouse {
            name: d.str()?,
            address: Address::dec(d)?,
            tax: d.u32()?,
            ytd: d.i64()?,
        })
    }
}

/// A district.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct District {
    /// D_NAME.
    pub name: String,
    /// Address.
    pub address: Address,
    /// D_TAX in 1/10,000.
    pub tax: u32,
    /// D_YTD in cents.
    pub ytd: i64,
    /// D_NEXT_O_ID.
    pub next_o_id: u32,
}

impl Row for District {
    const TABLE: &'static str = DISTRICT;
    fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new();
        e.str(&self.name);
        self.address.enc(&mut e);
        e.u32(self.tax).i64(self.ytd).u32(self.next_o_id);
        e.finish()
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self, StoreError> {
        Ok(District {
            name: d.str()?,
            address: Address::dec(d)?,
            tax: d.u32()?,
            ytd: d.i64()?,
            next_o_id: d.u32()?,
        })
    }
}

/// A customer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Customer {
    /// C_FIRST.
    pub first: String,
    /// C_MIDDLE.
    pub middle: String,
    /// C_LAST.
    pub last: String,
    /// Address.
    pub address: Address,
    /// C_PHONE.
    pub phone: String,
    /// C_SINCE (seconds since the epoch).
    pub since: i64,
    /// C_CREDIT: "GC" or "BC".
    pub credit: String,
    /// C_CREDIT_LIM in cents.
    pub credit_lim: i64,
    /// C_DISCOUNT in 1/10,000.
    pub discount: u32,
    /// C_BALANCE in cents.
    pub balance: i64,
    /// C_YTD_PAYMENT in cents.
    pub ytd_payment: i64,
    /// C_PAYMENT_CNT.
    pub payment_cnt: u32,
    /// C_DELIVERY_CNT.
    pub delivery_cnt: u32,
    /// C_DATA (300..500).
    pub data: String,
}

impl Row for Customer {
    const TABLE: &'static str = CUSTOMER;
    fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new();
        e.str(&self.first).str(&self.middle).str(&self.last);
        self.address.enc(&mut e);
        e.str(&self.phone)
            .i64(self.since)
            .str(&self.credit)
            .i64(self.credit_lim)
            .u32(self.discount)
            .i64(self.balance)
            .i64(self.ytd_payment)
            .u32(self.payment_cnt)
            .u32(self.delivery_cnt)
            .str(&self.data);
        e.finish()
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self, StoreError> {
        Ok(Customer {
            first: d.str()?,
            middle: d.str()?,
            last: d.str()?,
            address: Address::dec(d)?,
            phone: d.str()?,
            since: d.i64()?,
            credit: d.str()?,
            credit_lim: d.i64()?,
            discount: d.u32()?,
            balance: d.i64()?,
            ytd_payment: d.i64()?,
            payment_cnt: d.u32()?,
            delivery_cnt: d.u32()?,
            data: d.str()?,
        })
    }
}

/// A history row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History {
    /// H_C_ID.
    pub c_id: u32,
    /// H_C_D_ID.
    pub c_d_id: u32,
    /// H_C_W_ID.
    pub c_w_id: u32,
    /// H_D_ID.
    pub d_id: u32,
    /// H_W_ID.
    pub w_id: u32,
    /// H_DATE.
    pub date: i64,
    /// H_AMOUNT in cents.
    pub amount: i64,
    /// H_DATA.
    pub data: String,
}

impl Row for History {
    const TABLE: &'static str = HISTORY;
    fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new();
        e.u32(self.c_id)
            .u32(self.c_d_id)
            .u32(self.c_w_id)
            .u32(self.d_id)
            .u32(self.w_id)
            .i64(self.date)
            .i64(self.amount)
            .str(&self.data);
        e.finish()
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self, StoreError> {
        Ok(History {
            c_id: d.u32()?,
            c_d_id: d.u32()?,
            c_w_id: d.u32()?,
            d_id: d.u32()?,
            w_id: d.u32()?,
            date: d.i64()?,
            amount: d.i64()?,
            data: d.str()?,
        })
    }
}

/// An order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    /// O_C_ID.
    pub c_id: u32,
    /// O_ENTRY_D.
    pub entry_d: i64,
    /// O_CARRIER_ID (NULL until delivered).
    pub carrier_id: Option<u32>,
    /// O_OL_CNT.
    pub ol_cnt: u32,
    /// O_ALL_LOCAL.
    pub all_local: u32,
}

impl Row for Order {
    const TABLE: &'static str = ORDERS;
    fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new();
        e.u32(self.c_id)
            .i64(self.entry_d)
            .opt_u32(self.carrier_id)
            .u32(self.ol_cnt)
            .u32(self.all_local);
        e.finish()
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self, StoreError> {
        Ok(Order {
            c_id: d.u32()?,
            entry_d: d.i64()?,
            carrier_id: d.opt_u32()?,
            ol_cnt: d.u32()?,
            all_local: d.u32()?,
        })
    }
}

/// An order line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderLine {
    /// OL_I_ID.
    pub i_id: u32,
    /// OL_SUPPLY_W_ID.
    pub supply_w_id: u32,
    /// OL_DELIVERY_D (NULL until delivered).
    pub delivery_d: Option<i64>,
    /// OL_QUANTITY.
    pub quantity: u32,
    /// OL_AMOUNT in cents.
    pub amount: i64,
    /// OL_DIST_INFO (24).
    pub dist_info: String,
}

impl Row for OrderLine {
    const TABLE: &'static str = ORDER_LINE;
    fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new();
        e.u32(self.i_id)
            .u32(self.supply_w_id)
            .opt_i64(self.delivery_d)
            .u32(self.quantity)
            .i64(self.amount)
            .str(&self.dist_info);
        e.finish()
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self, StoreError> {
        Ok(OrderLine {
            i_id: d.u32()?,
            supply_w_id: d.u32()?,
            delivery_d: d.opt_i64()?,
            quantity: d.u32()?,
            amount: d.i64()?,
            dist_info: d.str()?,
        })
    }
}

/// An item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// I_IM_ID.
    pub im_id: u32,
    /// I_NAME.
    pub name: String,
    /// I_PRICE in cents.
    pub price: i64,
    /// I_DATA.
    pub data: String,
}

impl Row for Item {
    const TABLE: &'static str = ITEM;
    fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new();
        e.u32(self.im_id)
            .str(&self.name)
            .i64(self.price)
            .str(&self.data);
        e.finish()
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self, StoreError> {
        Ok(Item {
            im_id: d.u32()?,
            name: d.str()?,
            price: d.i64()?,
            data: d.str()?,
        })
    }
}

/// A stock row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stock {
    /// S_QUANTITY.
    pub quantity: u32,
    /// S_DIST_01..S_DIST_10 (24 each).
    pub dist: [String; 10],
    /// S_YTD.
    pub ytd: u32,
    /// S_ORDER_CNT.
    pub order_cnt: u32,
    /// S_REMOTE_CNT.
    pub remote_cnt: u32,
    /// S_DATA.
    pub data: String,
}

impl Row for Stock {
    const TABLE: &'static str = STOCK;
    fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new();
        e.u32(self.quantity);
        for d in &self.dist {
            e.str(d);
        }
        e.u32(self.ytd)
            .u32(self.order_cnt)
            .u32(self.remote_cnt)
            .str(&self.data);
        e.finish()
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self, StoreError> {
        let quantity = d.u32()?;
        let mut dist: [String; 10] = Default::default();
        for s in &mut dist {
            *s = d.str()?;
        }
        Ok(Stock {
            quantity,
            dist,
            ytd: d.u32()?,
            order_cnt: d.u32()?,
            remote_cnt: d.u32()?,
            data: d.str()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_index_orders_by_last_then_first() {
        let a = customer_name_key(1, 2, "BAR", "ZED", 9);
        let b = customer_name_key(1, 2, "BARBAR", "AL", 1);
        let c = customer_name_key(1, 2, "BAR", "AMY", 3);
        assert!(c < a && a < b);
        assert!(a.starts_with(&customer_name_prefix(1, 2, "BAR")));
        assert!(!b.starts_with(&customer_name_prefix(1, 2, "BAR")));
        assert_eq!(customer_id_of_name_key(&a).unwrap(), 9);
    }

    #[test]
    fn rows_round_trip() {
        let s = Stock {
            quantity: 5,
            dist: Default::default(),
            ytd: 1,
            order_cnt: 2,
            remote_cnt: 3,
            data: "ORIGINAL".into(),
        };
        assert_eq!(Stock::from_bytes(&s.encode()).unwrap(), s);
        let o = Order {
            c_id: 1,
            entry_d: 2,
            carrier_id: None,
            ol_cnt: 5,
            all_local: 1,
        };
        assert_eq!(Order::from_bytes(&o.encode()).unwrap(), o);
        assert!(Order::from_bytes(&o.encode()[1..]).is_err());
    }
}
