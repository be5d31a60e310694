//! The consistency check of TPC-C clause 3.3.2, conditions 1–4.

use serde::Serialize;

use super::schema::*;
use super::DISTRICTS;
use crate::error::WorkloadError;
use crate::store::{prefix_end, Store, StoreError, StoreTxn};

/// One violated consistency condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// Condition number (1..=4) of clause 3.3.2.
    pub condition: u8,
    /// Where and what.
    pub detail: String,
}

/// Result of [`check`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// Warehouses checked.
    pub warehouses: u32,
    /// Districts checked.
    pub districts: u32,
    /// Every violation found (empty when consistent).
    pub violations: Vec<Violation>,
}

impl CheckReport {
    /// Whether all four conditions hold.
    pub fn is_consistent(&self) -> bool {
        self.violations.is_empty()
    }

    /// Whether condition `n` holds everywhere.
    pub fn holds(&self, n: u8) -> bool {
        self.violations.iter().all(|v| v.condition != n)
    }

    /// One line per condition, `[OK]` or `[NG]` with the first violation.
    pub fn render(&self) -> String {
        let names = [
            "W_YTD = sum(D_YTD)",
            "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)",
            "max(NO_O_ID) - min(NO_O_ID) + 1 = count(NEW_ORDER)",
            "sum(O_OL_CNT) = count(ORDER_LINE)",
        ];
        let mut s = format!(
            "consistency check: {} warehouses, {} districts\n",
            self.warehouses, self.districts
        );
        for (i, name) in names.iter().enumerate() {
            let n = i as u8 + 1;
            match self.violations.iter().find(|v| v.condition == n) {
                None => s.push_str(&format!("  condition {n} [OK]  {name}\n")),
                Some(v) => s.push_str(&format!("  condition {n} [NG]  {name}: {}\n", v.detail)),
            }
        }
        s
    }
}

/// Checks consistency conditions 1–4 of clause 3.3.2 over `warehouses` warehouses.
/// Violations are reported in the result; `Err` means the store could not be read.
pub fn check(store: &dyn Store, warehouses: u32) -> Result<CheckReport, WorkloadError> {
    let err = |e| WorkloadError::store("checking consistency", e);
    let mut report = CheckReport::default();
    for w in 1..=warehouses {
        report.warehouses += 1;
        let mut t = store.begin_read().map_err(err)?;
        let (warehouse_t, district_t) = (
            t.open(WAREHOUSE).map_err(err)?,
            t.open(DISTRICT).map_err(err)?,
        );
        let Some(wv) = t.get(warehouse_t, &warehouse_key(w)).map_err(err)? else {
            report.violations.push(Violation {
                condition: 1,
                detail: format!("warehouse {w} does not exist"),
            });
            continue;
        };
        let wh = Warehouse::from_bytes(&wv).map_err(err)?;
        let mut sum_d_ytd = 0;
        for d in 1..=DISTRICTS {
            report.districts += 1;
            let Some(dv) = t.get(district_t, &district_key(w, d)).map_err(err)? else {
                report.violations.push(Violation {
                    condition: 1,
                    detail: format!("district {w}/{d} does not exist"),
                });
                continue;
            };
            let dist = District::from_bytes(&dv).map_err(err)?;
            sum_d_ytd += dist.ytd;
            check_district(&mut *t, w, d, &dist, &mut report).map_err(err)?;
        }
        if wh.ytd != sum_d_ytd {
            report.violations.push(Violation {
                condition: 1,
                detail: format!("warehouse {w}: W_YTD {} != sum(D_YTD) {sum_d_ytd}", wh.ytd),
            });
        }
        let _ = t.commit();
    }
    Ok(report)
}

fn check_district(
    t: &mut dyn StoreTxn,
    w: u32,
    d: u32,
    dist: &District,
    report: &mut CheckReport,
) -> Result<(), StoreError> {
    let order_line_t = t.open(ORDER_LINE)?;
    let orders_t = t.open(ORDERS)?;
    let new_orders_t = t.open(NEW_ORDERS)?;
    let p = district_key(w, d);
    let end = prefix_end(&p);
    let orders = t.scan(orders_t, &p, end.as_deref(), usize::MAX, false)?;
    let new_orders = t.scan(new_orders_t, &p, end.as_deref(), usize::MAX, false)?;
    let lines = t
        .scan(order_line_t, &p, end.as_deref(), usize::MAX, false)?
        .len() as u64;
    let max_o = match orders.last() {
        Some((k, _)) => key_part(k, 2)?,
        None => 0,
    };
    let no_ids = new_orders
        .iter()
        .map(|(k, _)| key_part(k, 2))
        .collect::<Result<Vec<_>, _>>()?;
    let at = format!("district {w}/{d}");
    let expect = dist.next_o_id - 1;
    if max_o != expect {
        report.violations.push(Violation {
            condition: 2,
            detail: format!("{at}: D_NEXT_O_ID - 1 = {expect} but max(O_ID) = {max_o}"),
        });
    }
    if let (Some(&min_no), Some(&max_no)) = (no_ids.first(), no_ids.last()) {
        if max_no != expect {
            report.violations.push(Violation {
                condition: 2,
                detail: format!("{at}: D_NEXT_O_ID - 1 = {expect} but max(NO_O_ID) = {max_no}"),
            });
        }
        let span = u64::from(max_no - min_no) + 1;
        if span != no_ids.len() as u64 {
            report.violations.push(Violation {
                condition: 3,
                detail: format!(
                    "{at}: max(NO_O_ID) - min(NO_O_ID) + 1 = {span} but {} NEW-ORDER rows",
                    no_ids.len()
                ),
            });
        }
    }
    let mut ol_cnt = 0u64;
    for (_, v) in &orders {
        ol_cnt += u64::from(Order::from_bytes(v)?.ol_cnt);
    }
    if ol_cnt != lines {
        report.violations.push(Violation {
            condition: 4,
            detail: format!("{at}: sum(O_OL_CNT) = {ol_cnt} but {lines} ORDER-LINE rows"),
        });
    }
    Ok(())
}
