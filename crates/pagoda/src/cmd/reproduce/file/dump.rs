//! Writes a grid built in code as an experiment file: what turned the seeds' grids into
//! `experiments/seeds/*.toml` (`PAGODA_DUMP_SEEDS=1 cargo test -p pagoda --bin pagoda
//! dump_seed_grids`). An argument that differs between scales becomes a table of its value
//! per scale; arguments only some scales have, a table of the lists they insert.

use super::super::cell::{Cell, Scale};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A grid at one scale: its cells and the sets of cells its ratios compare.
pub(crate) type Grid = (Scale, Vec<Cell>, Vec<Vec<String>>);

pub(crate) const SCALES: [Scale; 4] = [Scale::Tiny, Scale::Quick, Scale::Standard, Scale::Full];

fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn per_scale<T>(m: &[(Scale, T)], show: impl Fn(&T) -> String) -> String {
    let parts: Vec<String> = m
        .iter()
        .map(|(s, v)| format!("{} = {}", s.name(), show(v)))
        .collect();
    format!("{{ {} }}", parts.join(", "))
}

fn list(v: &[String]) -> String {
    format!(
        "[{}]",
        v.iter().map(|s| q(s)).collect::<Vec<_>>().join(", ")
    )
}

/// The `args` of one cell from its argument lists per scale.
fn args(at: &[(Scale, Vec<String>)]) -> String {
    let first = &at[0].1;
    let same_len = at.iter().all(|(_, a)| a.len() == first.len());
    let mut items: Vec<String> = Vec::new();
    if same_len {
        for i in 0..first.len() {
            if at.iter().all(|(_, a)| a[i] == first[i]) {
                items.push(q(&first[i]));
            } else {
                let m: Vec<(Scale, String)> = at.iter().map(|(s, a)| (*s, a[i].clone())).collect();
                items.push(per_scale(&m, |v| q(v)));
            }
        }
    } else {
        let prefix = (0..first.len())
            .take_while(|&i| at.iter().all(|(_, a)| a.get(i) == Some(&first[i])))
            .count();
        let suffix = (0..first.len() - prefix)
            .take_while(|&k| {
                at.iter().all(|(_, a)| {
                    a.len() > prefix + k && a[a.len() - 1 - k] == first[first.len() - 1 - k]
                })
            })
            .count();
        items.extend(first[..prefix].iter().map(|s| q(s)));
        let middle: Vec<(Scale, Vec<String>)> = at
            .iter()
            .map(|(s, a)| (*s, a[prefix..a.len() - suffix].to_vec()))
            .filter(|(_, m)| !m.is_empty())
            .collect();
        if !middle.is_empty() {
            items.push(per_scale(&middle, |v| list(v)));
        }
        items.extend(first[first.len() - suffix..].iter().map(|s| q(s)));
    }
    let mut out = String::from("args = [\n");
    let mut line = String::from("   ");
    for it in items {
        if line.len() + it.len() > 92 {
            out.push_str(line.trim_end());
            out.push('\n');
            line = String::from("   ");
        }
        line.push(' ');
        line.push_str(&it);
        line.push(',');
    }
    out.push_str(line.trim_end());
    out.push_str("\n]\n");
    out
}

/// The experiment file of the cells `grids` gives per scale (with their comparisons).
pub(crate) fn file(name: &str, title: &str, grids: &[Grid]) -> String {
    // The cells in an order that keeps each scale's order.
    let mut order: Vec<String> = Vec::new();
    for (_, cells, _) in grids {
        let mut at = 0;
        for c in cells {
            match order.iter().position(|x| *x == c.id) {
                Some(i) => at = i + 1,
                None => {
                    order.insert(at, c.id.clone());
                    at += 1;
                }
            }
        }
    }
    let mut md = format!(
        "# Generated from the grid that was built in code (file/dump.rs), then kept by hand.\n\
         name = {}\ntitle = {}\n",
        q(name),
        q(title)
    );
    let mut compared: Vec<Vec<String>> = Vec::new();
    for (_, _, comps) in grids {
        for set in comps {
            let short: Vec<String> = set
                .iter()
                .map(|id| {
                    id.strip_prefix(&format!("{name}."))
                        .unwrap_or(id)
                        .to_string()
                })
                .collect();
            if !compared.contains(&short) {
                compared.push(short);
            }
        }
    }
    // A set inside another adds nothing: the scheduler links its cells already.
    let compared = without_subsets(compared);
    md.push_str("compared = [\n");
    for set in &compared {
        let _ = writeln!(md, "    {},", list(set));
    }
    md.push_str("]\n");
    for id in &order {
        let at: Vec<(Scale, &Cell)> = grids
            .iter()
            .filter_map(|(s, cells, _)| cells.iter().find(|c| c.id == *id).map(|c| (*s, c)))
            .collect();
        let c0 = at[0].1;
        let short = id.strip_prefix(&format!("{name}.")).unwrap_or(id);
        let _ = write!(md, "\n[[cell]]\nname = {}\n", q(short));
        if at.len() < SCALES.len() {
            let names: Vec<String> = at.iter().map(|(s, _)| q(s.name())).collect();
            let _ = writeln!(md, "scales = [{}]", names.join(", "));
        }
        let est: Vec<(Scale, u64)> = at.iter().map(|(s, c)| (*s, c.estimate_s)).collect();
        if est.iter().all(|e| e.1 == est[0].1) {
            let _ = writeln!(md, "estimate_s = {}", est[0].1);
        } else {
            let _ = writeln!(md, "estimate_s = {}", per_scale(&est, u64::to_string));
        }
        if c0.light {
            md.push_str("light = true\n");
        }
        if let Some(n) = c0.together {
            let _ = writeln!(md, "together = {n}");
        }
        if c0.may_fail {
            md.push_str("may_fail = true\n");
        }
        let params: Vec<(Scale, BTreeMap<String, toml::Value>)> = at
            .iter()
            .map(|(s, c)| {
                (
                    *s,
                    serde_json::from_value(c.params.clone()).unwrap_or_default(),
                )
            })
            .collect();
        let inline = |m: &BTreeMap<String, toml::Value>| {
            let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k} = {v}")).collect();
            format!("{{ {} }}", parts.join(", "))
        };
        let common: BTreeMap<String, toml::Value> = params[0]
            .1
            .iter()
            .filter(|(k, v)| params.iter().all(|(_, m)| m.get(*k) == Some(v)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !common.is_empty() {
            let _ = writeln!(md, "params = {}", inline(&common));
        }
        let differ: Vec<(Scale, BTreeMap<String, toml::Value>)> = params
            .iter()
            .map(|(s, m)| {
                let rest = m
                    .iter()
                    .filter(|(k, _)| !common.contains_key(*k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                (*s, rest)
            })
            .filter(|(_, m): &(Scale, BTreeMap<String, toml::Value>)| !m.is_empty())
            .collect();
        if !differ.is_empty() {
            let _ = writeln!(md, "params_at = {}", per_scale(&differ, inline));
        }
        let lists: Vec<(Scale, Vec<String>)> =
            at.iter().map(|(s, c)| (*s, c.args.clone())).collect();
        md.push_str(&args(&lists));
    }
    md
}

/// The sets that are not contained in another (the first of equal sets kept).
pub(crate) fn without_subsets(sets: Vec<Vec<String>>) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    for (i, a) in sets.iter().enumerate() {
        let inside = sets.iter().enumerate().any(|(j, b)| {
            j != i && a.iter().all(|x| b.contains(x)) && (b.len() > a.len() || j < i)
        });
        if !inside {
            out.push(a.clone());
        }
    }
    out
}
