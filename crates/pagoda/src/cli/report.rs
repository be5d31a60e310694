//! Result presentation: aligned text tables and JSON files.

use super::error::{CliError, CliResult};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// A text table with a header row; columns are right-aligned except the first.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new<S: ToString>(header: &[S]) -> Self {
        Self {
            header: header.iter().map(ToString::to_string).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (missing cells are blank).
    pub fn row<S: ToString>(&mut self, cells: &[S]) {
        self.rows
            .push(cells.iter().map(ToString::to_string).collect());
    }

    /// Renders the table.
    pub fn render(&self) -> String {
        let cols = self.header.len();
        let mut width = vec![0usize; cols];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(cols) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        let line = |out: &mut String, r: &[String]| {
            for (i, w) in width.iter().enumerate() {
                let c = r.get(i).map_or("", String::as_str);
                if i == 0 {
                    let _ = write!(out, "{c:<w$}");
                } else {
                    let _ = write!(out, "  {c:>w$}");
                }
            }
            out.push('\n');
        };
        line(&mut out, &self.header);
        let total: usize = width.iter().sum::<usize>() + 2 * (cols.saturating_sub(1));
        out.push_str(&"-".repeat(total));
        out.push('\n');
        for r in &self.rows {
            line(&mut out, r);
        }
        out
    }
}

/// Writes `value` as pretty JSON to `path`.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> CliResult<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::Other(format!("cannot encode JSON: {e}")))?;
    std::fs::write(path, text + "\n").map_err(|e| CliError::Io {
        path: path.to_path_buf(),
        source: e,
    })
}

/// Formats a count with thousands separators.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns() {
        let mut t = Table::new(&["name", "value"]);
        t.row(&["waf", "1.23"]);
        t.row(&["copybacks", "100"]);
        let s = t.render();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines.iter().all(|l| l.len() == lines[0].len()));
        assert!(lines[3].starts_with("copybacks"));
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
