//! A cell as an experiment file writes it, and the cell it becomes at one scale: its
//! arguments (an element may differ per scale, or be there at some scales only), its
//! estimate, its params, and how it may share a round.

use super::super::cell::{Cell, Scale};
use serde::Deserialize;
use std::collections::BTreeMap;

/// A value a scale gives a variable (written as a string or a number).
#[derive(Clone, Debug, Deserialize)]
#[serde(try_from = "toml::Value")]
pub(crate) enum Value {
    Text(String),
    Int(i64),
    Float(f64),
}

impl Value {
    pub(crate) fn text(&self) -> String {
        match self {
            Value::Text(s) => s.clone(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => f.to_string(),
        }
    }
}

impl TryFrom<toml::Value> for Value {
    type Error = String;

    fn try_from(v: toml::Value) -> Result<Self, String> {
        match v {
            toml::Value::String(s) => Ok(Value::Text(s)),
            toml::Value::Integer(i) => Ok(Value::Int(i)),
            toml::Value::Float(f) => Ok(Value::Float(f)),
            other => Err(format!(
                "{} is no value for a command line: give a string or a number",
                other.type_str()
            )),
        }
    }
}

/// Seconds a cell takes, for every scale or per scale.
#[derive(Clone, Debug, Deserialize)]
#[serde(try_from = "toml::Value")]
pub(crate) enum Estimate {
    All(u64),
    PerScale(BTreeMap<Scale, u64>),
}

const WANT_ESTIMATE: &str =
    "give whole seconds (`estimate_s = 14`) or seconds per scale (`{ quick = 14, standard = 30 }`)";

fn scale_of(k: &str) -> Result<Scale, String> {
    Scale::deserialize(toml::Value::String(k.to_string()))
        .map_err(|_| format!("'{k}' is no scale (tiny, quick, standard, full)"))
}

impl TryFrom<toml::Value> for Estimate {
    type Error = String;

    fn try_from(v: toml::Value) -> Result<Self, String> {
        match v {
            toml::Value::Integer(i) => u64::try_from(i)
                .map(Estimate::All)
                .map_err(|_| format!("{i} seconds: {WANT_ESTIMATE}")),
            toml::Value::Table(t) => t
                .into_iter()
                .map(|(k, v)| {
                    let secs = v
                        .as_integer()
                        .and_then(|i| u64::try_from(i).ok())
                        .ok_or_else(|| format!("{k} = {v}: {WANT_ESTIMATE}"))?;
                    Ok((scale_of(&k)?, secs))
                })
                .collect::<Result<_, String>>()
                .map(Estimate::PerScale),
            other => Err(format!("a {}: {WANT_ESTIMATE}", other.type_str())),
        }
    }
}

/// Strings per scale: `{ quick = "10000", standard = ["--records", "100000"] }`.
type PerScale = BTreeMap<Scale, Vec<String>>;

fn per_scale(t: toml::Table) -> Result<PerScale, String> {
    t.into_iter()
        .map(|(k, v)| {
            let list = match v {
                toml::Value::String(s) => vec![s],
                toml::Value::Array(a) => a
                    .into_iter()
                    .map(|x| match x {
                        toml::Value::String(s) => Ok(s),
                        other => Err(format!("{k}: a {} among the arguments", other.type_str())),
                    })
                    .collect::<Result<_, String>>()?,
                other => {
                    return Err(format!(
                        "{k} = {other}: give a string or a list of strings for the scale"
                    ))
                }
            };
            Ok((scale_of(&k)?, list))
        })
        .collect()
}

/// A cell's arguments: a list whose elements are strings, or tables of what a scale puts
/// there (nothing at a scale the table leaves out); or a whole list per scale.
#[derive(Clone, Debug, Deserialize)]
#[serde(try_from = "toml::Value")]
pub(crate) enum Args {
    List(Vec<Arg>),
    PerScale(PerScale),
}

/// One element of a list of arguments.
#[derive(Clone, Debug)]
pub(crate) enum Arg {
    Text(String),
    PerScale(PerScale),
}

impl TryFrom<toml::Value> for Args {
    type Error = String;

    fn try_from(v: toml::Value) -> Result<Self, String> {
        match v {
            toml::Value::Array(a) => a
                .into_iter()
                .map(|x| match x {
                    toml::Value::String(s) => Ok(Arg::Text(s)),
                    toml::Value::Table(t) => per_scale(t).map(Arg::PerScale),
                    other => Err(format!(
                        "a {} among the arguments: give strings, or tables of a string per scale",
                        other.type_str()
                    )),
                })
                .collect::<Result<_, String>>()
                .map(Args::List),
            toml::Value::Table(t) => per_scale(t).map(Args::PerScale),
            other => Err(format!(
                "a {}: give a list of arguments, or a table of lists per scale",
                other.type_str()
            )),
        }
    }
}

impl Args {
    /// The arguments at `scale` (`None`: a per-scale table without this scale).
    fn at(&self, scale: Scale) -> Option<Vec<String>> {
        match self {
            Args::PerScale(m) => m.get(&scale).cloned(),
            Args::List(l) => Some(
                l.iter()
                    .flat_map(|a| match a {
                        Arg::Text(s) => vec![s.clone()],
                        Arg::PerScale(m) => m.get(&scale).cloned().unwrap_or_default(),
                    })
                    .collect(),
            ),
        }
    }
}

/// One cell as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CellSpec {
    /// `[a-z0-9.-]`, unique in the file.
    pub name: String,
    /// The `pagoda` arguments (a `bench`, `crashtest` or `advise` command), without `--seed`
    /// and `--json`.
    pub args: Args,
    /// Expected seconds on a 2-core machine: the progress bar's time left and the plan's
    /// estimate.
    pub estimate_s: Estimate,
    /// The scales the cell runs at (every scale the file runs at when not given).
    pub scales: Option<Vec<Scale>>,
    /// The run waits on an emulated disk at a few % of a core: it may share a round with
    /// other light cells (see `reproduce`'s schedule).
    #[serde(default)]
    pub light: bool,
    /// How many light cells may run at once with this one, itself included (2 if not given).
    pub together: Option<usize>,
    /// The command fails by design (a crash test of an unsafe mode): its JSON is the result.
    #[serde(default)]
    pub may_fail: bool,
    /// The cargo feature the cell's engine needs (`rocksdb`, `wiredtiger`): a binary built
    /// without it leaves the cell out of the grid, and the report says so.
    pub needs: Option<String>,
    /// What the report needs to place the result, and labels for its table
    /// (e.g. `{ cache_mib = 64 }`); strings may use `{NAME}`.
    #[serde(default)]
    pub params: BTreeMap<String, toml::Value>,
    /// Params that differ per scale, over `params` (`{ standard = { buffer = "5MiB" } }`).
    #[serde(default)]
    pub params_at: BTreeMap<Scale, BTreeMap<String, toml::Value>>,
}

impl CellSpec {
    /// The cell of experiment `exp` at `scale` with the scale's `vars` filled in, or `None`
    /// when the cell does not run at that scale.
    pub(crate) fn at(
        &self,
        exp: &str,
        scale: Scale,
        vars: Option<&BTreeMap<String, Value>>,
    ) -> Result<Option<Cell>, String> {
        let at = |e: String| format!("[[cell]] '{}' at scale {}: {e}", self.name, scale.name());
        if self.scales.as_ref().is_some_and(|s| !s.contains(&scale)) {
            return Ok(None);
        }
        let Some(raw) = self.args.at(scale) else {
            return Err(at("args has no list for this scale".to_string()));
        };
        let args = raw
            .iter()
            .map(|a| fill(a, vars))
            .collect::<Result<Vec<String>, String>>()
            .map_err(at)?;
        if !matches!(
            args.first().map(String::as_str),
            Some("bench" | "crashtest" | "advise")
        ) {
            return Err(at(
                "args must be a `pagoda bench|crashtest|advise ...` command".to_string(),
            ));
        }
        if args.iter().any(|a| a == "--seed" || a == "--json") {
            return Err(at(
                "leave out --seed and --json (the runner gives each repeat its \
                           seed and saves the JSON)"
                    .to_string(),
            ));
        }
        let estimate = match &self.estimate_s {
            Estimate::All(s) => *s,
            Estimate::PerScale(m) => *m
                .get(&scale)
                .ok_or_else(|| at("estimate_s has no value for this scale".to_string()))?,
        };
        let mut params = serde_json::Map::new();
        let scaled = self.params_at.get(&scale).into_iter().flatten();
        let merged: BTreeMap<&String, &toml::Value> = self.params.iter().chain(scaled).collect();
        for (k, v) in merged {
            let v = match v {
                toml::Value::String(s) => toml::Value::String(fill(s, vars).map_err(at)?),
                other => (*other).clone(),
            };
            let json = serde_json::to_value(&v).map_err(|e| at(format!("params.{k}: {e}")))?;
            params.insert(k.clone(), json);
        }
        let mut cell = Cell::new(exp, &self.name, &[], estimate, params.into());
        cell.args = args;
        cell.may_fail = self.may_fail;
        cell.light = self.light;
        cell.together = self.together;
        // Checked after the rest, so a cell is validated even where it does not run.
        if let Some(feature) = &self.needs {
            if !feature_built(feature).map_err(at)? {
                return Ok(None);
            }
        }
        Ok(Some(cell))
    }
}

/// Whether this binary was built with the peer engine behind cargo feature `feature`.
pub(crate) fn feature_built(feature: &str) -> Result<bool, String> {
    pagoda_peers::PeerKind::ALL
        .into_iter()
        .find(|k| k.feature() == Some(feature))
        .map(pagoda_peers::PeerKind::is_built)
        .ok_or_else(|| {
            let known: Vec<&str> = pagoda_peers::PeerKind::ALL
                .into_iter()
                .filter_map(pagoda_peers::PeerKind::feature)
                .collect();
            format!(
                "needs = \"{feature}\" is no feature of this pagoda; use one of: {}",
                known.join(", ")
            )
        })
}

/// `arg` with every `{NAME}` replaced by the scale's value.
pub(crate) fn fill(arg: &str, vars: Option<&BTreeMap<String, Value>>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| format!("'{arg}' opens '{{' without a closing '}}'"))?;
        let name = &after[..close];
        let v = vars.and_then(|m| m.get(name)).ok_or_else(|| {
            format!("'{arg}' uses {{{name}}}, which this scale's [scales.*] table does not set")
        })?;
        out.push_str(&v.text());
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}
