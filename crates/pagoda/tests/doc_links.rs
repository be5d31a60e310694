//! The repository's documents stand alone: every relative link in README.md, ARCHITECTURE.md,
//! CHANGELOG.md, the crates' READMEs and docs/*.md names a file inside the repository (and,
//! with `#anchor`, a heading of that Markdown file). The README stays at most 200 lines.
#![allow(clippy::unwrap_used)]

use std::fs;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The documents whose links are checked.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "CHANGELOG.md"]
        .iter()
        .map(|d| root.join(d))
        .collect();
    for dir in ["docs", "docs/results"] {
        for entry in fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                docs.push(path);
            }
        }
    }
    for entry in fs::read_dir(root.join("crates")).unwrap() {
        let readme = entry.unwrap().path().join("README.md");
        if readme.exists() {
            docs.push(readme);
        }
    }
    docs.sort();
    docs
}

/// The targets of the document's inline links (`[text](target)`, `![alt](target)`) and
/// reference definitions (`[name]: target`), outside code blocks and code spans.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let line = without_code_spans(line);
        if let Some(rest) = line.trim_start().strip_prefix('[') {
            if let Some((_, target)) = rest.split_once("]: ") {
                out.push(target.split_whitespace().next().unwrap_or("").to_owned());
            }
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find([')', ' ']).unwrap_or(rest.len());
            out.push(rest[..end].trim_matches(['<', '>']).to_owned());
        }
    }
    out
}

/// The line with each `code span` removed (a span may show link syntax without being a link).
fn without_code_spans(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join("")
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn relative_links_resolve_inside_the_repository() {
    let root = repo();
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in documents(&root) {
        let text = fs::read_to_string(&doc).unwrap();
        for link in links(&text) {
            if link.is_empty() || link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, fragment) = link.split_once('#').unwrap_or((&link, ""));
            let name = doc.strip_prefix(&root).unwrap().display();
            let target = if file.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(file)
            };
            let Ok(target) = target.canonicalize() else {
                broken.push(format!("{name}: {link} (no such file)"));
                continue;
            };
            if !target.starts_with(&root) {
                broken.push(format!("{name}: {link} (outside the repository)"));
            } else if !fragment.is_empty() && target.extension().is_some_and(|e| e == "md") {
                let headings = anchors(&fs::read_to_string(&target).unwrap());
                if !headings.iter().any(|h| h == fragment) {
                    broken.push(format!("{name}: {link} (no heading #{fragment})"));
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: is the parser broken?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_stays_short() {
    let lines = fs::read_to_string(repo().join("README.md"))
        .unwrap()
        .lines()
        .count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines; at most 200 (replace, don't add)"
    );
}

#[test]
fn the_link_parser_finds_links_and_skips_code() {
    let text =
        "a [x](docs/a.md#b) `[y](no.md)` ![p](i.svg)\n```\n[z](no.md)\n```\n[r]: ref.md \"t\"";
    assert_eq!(links(text), ["docs/a.md#b", "i.svg", "ref.md"]);
    assert_eq!(anchor(" Torn-write protection"), "torn-write-protection");
    assert_eq!(anchor(" `pagoda bench ycsb`"), "pagoda-bench-ycsb");
}
