//! Result presentation: tables (aligned text or Markdown) and JSON files.

use super::error::{CliError, CliResult};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// How a column is aligned. `Auto` is the text table's default (the first column left, the
/// others right) and Markdown's plain `---`, so existing outputs keep their bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Align {
    /// Text: left for the first column, right for the others; Markdown: `---`.
    #[default]
    Auto,
    /// Text: left; Markdown: `:---`.
    Left,
    /// Text: right; Markdown: `---:`.
    Right,
}

/// A table with a header row, rendered as aligned text for the terminal (`render`) or as a
/// Markdown table for published pages (`markdown`). One builder for both, so the reports stop
/// formatting `| a | b |` rows and `|---|` rules by hand.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new<S: ToString>(header: &[S]) -> Self {
        Self {
            header: header.iter().map(ToString::to_string).collect(),
            align: vec![Align::Auto; header.len()],
            rows: Vec::new(),
        }
    }

    /// Sets the alignment of each column, from the first (columns not given stay `Auto`).
    #[must_use]
    pub fn align(mut self, align: &[Align]) -> Self {
        for (a, b) in self.align.iter_mut().zip(align) {
            *a = *b;
        }
        self
    }

    /// Appends a row (missing cells are blank).
    pub fn row<S: ToString>(&mut self, cells: &[S]) {
        self.rows
            .push(cells.iter().map(ToString::to_string).collect());
    }

    /// Whether no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Renders the table as aligned text.
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
                let sep = if i == 0 { "" } else { "  " };
                let _ = match (self.align[i], i) {
                    (Align::Left, _) | (Align::Auto, 0) => write!(out, "{sep}{c:<w$}"),
                    _ => write!(out, "{sep}{c:>w$}"),
                };
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

    /// Renders the table as Markdown: `| a | b |` lines, cells unpadded and unescaped (a
    /// caller whose cells may hold `|` replaces it), each line ending in a newline.
    pub fn markdown(&self) -> String {
        let cols = self.header.len();
        let mut out = String::new();
        let line = |out: &mut String, r: &[String]| {
            for i in 0..cols {
                let _ = write!(out, "| {} ", r.get(i).map_or("", String::as_str));
            }
            out.push_str("|\n");
        };
        line(&mut out, &self.header);
        for a in &self.align {
            out.push_str(match a {
                Align::Auto => "|---",
                Align::Left => "|:---",
                Align::Right => "|---:",
            });
        }
        out.push_str("|\n");
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
    fn markdown_rows_are_unpadded_and_the_rule_carries_the_alignment() {
        let mut t = Table::new(&["name", "n", "note"]).align(&[Align::Auto, Align::Right]);
        t.row(&["waf", "1.23", ""]);
        t.row(&["copybacks"]);
        assert_eq!(
            t.markdown(),
            "| name | n | note |\n|---|---:|---|\n| waf | 1.23 |  |\n| copybacks |  |  |\n"
        );
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
