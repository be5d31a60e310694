//! No import cycles between modules, at any level of any crate's module tree.
//!
//! A cycle (`a` uses `b`, `b` uses `a`, or longer) means neither module can be read, tested or
//! moved alone. The check walks every crate of the workspace from its root file along `mod x;`
//! declarations, collects the `crate::`, `super::` and `self::` paths each module names (comments
//! and strings stripped; `pub use` re-exports followed to the module that defines the item), and
//! turns each into an edge between the two siblings under the paths' lowest common ancestor: a
//! use of `crate::db::x` in `buffer/undo.rs` is `buffer -> db` at the root, a use of
//! `super::record` in `ycsb/config.rs` is `config -> record` under `ycsb`. A child naming its
//! ancestor is not an edge (the parent owns the child). Any strongly connected set of siblings
//! fails the test with the cycle and the lines that make it.
//!
//! It lives in the engine's tests because it needs no dependency; it scans `crates/*/src`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Cycles in modules other engineers own, left for them to cut (`crate (root) level: cycle`,
/// as the failure prints it). A cycle not listed here fails the test; a listed one that is gone
/// is reported so that its line can go.
const KNOWN: &[&str] = &[
    "pagoda-device (lib.rs) under ssd: config -> layout -> config",
    "pagoda-device (lib.rs) under ssd: ftl -> gc -> ftl",
];

#[test]
fn no_module_imports_form_a_cycle_in_any_crate() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crates directory")
        .to_path_buf();
    let mut found = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&crates)
        .expect("crates directory")
        .map(|e| e.expect("crates entry").path())
        .collect();
    dirs.sort();
    let mut roots = 0;
    for dir in dirs {
        for root in ["lib.rs", "main.rs"] {
            let file = dir.join("src").join(root);
            if !file.exists() {
                continue;
            }
            roots += 1;
            let name = format!(
                "{} ({root})",
                dir.file_name().expect("name").to_string_lossy()
            );
            let tree = Tree::load(&file, &crates);
            found.extend(cycles(&name, &tree));
        }
    }
    assert!(
        roots >= 7,
        "found only {roots} crate roots under {crates:?}"
    );
    for known in KNOWN {
        if !found.iter().any(|c| c.starts_with(&format!("{known}\n"))) {
            eprintln!("known cycle gone, remove it from KNOWN: {known}");
        }
    }
    let new: Vec<&String> = found
        .iter()
        .filter(|c| !KNOWN.iter().any(|k| c.starts_with(&format!("{k}\n"))))
        .collect();
    assert!(
        new.is_empty(),
        "import cycles (cut each where its types belong):\n{}",
        new.iter().map(|c| c.as_str()).collect::<String>()
    );
}

#[test]
fn a_planted_two_module_cycle_is_found() {
    let tree = Tree::from_sources(&[
        ("", "mod a; mod b; mod c;"),
        ("a", "use crate::b::Thing; // crate::c::NotCounted\n"),
        (
            "b",
            "pub struct Thing; fn f() { let _ = \"crate::c\"; super::a::g(); }",
        ),
        ("c", "use crate::a::x;"),
    ]);
    let report = cycles("planted", &tree).concat();
    assert!(report.contains("a -> b -> a"), "{report}");
    assert!(
        !report.contains("-> c"),
        "comments and strings are not uses: {report}"
    );
}

#[test]
fn a_planted_three_module_cycle_below_the_root_is_found() {
    let tree = Tree::from_sources(&[
        ("", "mod w;"),
        ("w", "mod x; mod y; mod z; pub use self::z::Z;"),
        ("w::x", "use super::y::Y;"),
        ("w::y", "pub struct Y; use crate::w::Z;"),
        (
            "w::z",
            "pub struct Z; mod inner { use super::super::x::X; }",
        ),
    ]);
    let report = cycles("planted", &tree).concat();
    assert!(report.contains("under w: x -> y -> z -> x"), "{report}");
}

#[test]
fn a_child_naming_its_parent_is_not_a_cycle() {
    let tree = Tree::from_sources(&[
        ("", "mod p; pub use p::q::Q;"),
        ("p", "mod q; use self::q::Q;"),
        ("p::q", "pub struct Q; use super::helper; use crate::Q;"),
    ]);
    assert_eq!(cycles("planted", &tree), Vec::<String>::new());
}

/// A module path from the crate root (`[]` is the root).
type ModPath = Vec<String>;

/// Every module of one crate, with the paths it names and the names it re-exports.
#[derive(Default)]
struct Tree {
    modules: BTreeSet<ModPath>,
    /// (from module, absolute path named, where)
    uses: Vec<(ModPath, Vec<String>, String)>,
    /// (module, exported name) -> absolute path it stands for
    reexports: BTreeMap<(ModPath, String), Vec<String>>,
}

impl Tree {
    /// Labels name files relative to `base`.
    fn load(root: &Path, base: &Path) -> Tree {
        let mut tree = Tree::default();
        let dir = root.parent().expect("src").to_path_buf();
        tree.add_file(Vec::new(), root, &dir, base);
        tree.resolve_relative_reexports();
        tree
    }

    /// Sources keyed by module path (`a::b`), for the tests of the checker itself.
    fn from_sources(sources: &[(&str, &str)]) -> Tree {
        let mut tree = Tree::default();
        for (module, text) in sources {
            let path: ModPath = module
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            tree.add_text(path, text, module);
        }
        tree.resolve_relative_reexports();
        tree
    }

    /// `dir` is where the files of this module's children live.
    fn add_file(&mut self, module: ModPath, file: &Path, dir: &Path, base: &Path) {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        let label = file
            .strip_prefix(base)
            .unwrap_or(file)
            .display()
            .to_string();
        let children = self.add_text(module.clone(), &text, &label);
        for child in children {
            let flat = dir.join(format!("{child}.rs"));
            let nested = dir.join(&child).join("mod.rs");
            let mut path = module.clone();
            path.push(child.clone());
            if flat.exists() {
                self.add_file(path, &flat, &dir.join(&child), base);
            } else if nested.exists() {
                self.add_file(path, &nested, &dir.join(&child), base);
            } else {
                panic!("{label}: `mod {child};` has no file");
            }
        }
    }

    /// Records the module, its inline modules, uses and re-exports; returns the names of the
    /// file modules it declares (`mod x;`).
    fn add_text(&mut self, module: ModPath, text: &str, label: &str) -> Vec<String> {
        let tokens = tokenize(text);
        let mut children = Vec::new();
        // Inline modules: (path, brace depth at which they close).
        let mut stack: Vec<(ModPath, usize)> = vec![(module.clone(), 0)];
        self.modules.insert(module);
        let mut depth = 0;
        let mut i = 0;
        while i < tokens.len() {
            let current = stack.last().expect("module").0.clone();
            let (tok, line) = (&tokens[i].0, tokens[i].1);
            match tok.as_str() {
                "{" => depth += 1,
                "}" => {
                    depth -= 1;
                    if stack.len() > 1 && stack.last().expect("module").1 == depth {
                        stack.pop();
                    }
                }
                "mod" if i + 2 < tokens.len() && is_ident(&tokens[i + 1].0) => {
                    let name = tokens[i + 1].0.clone();
                    if tokens[i + 2].0 == ";" && stack.len() == 1 {
                        children.push(name);
                    } else if tokens[i + 2].0 == "{" {
                        let mut path = current.clone();
                        path.push(name);
                        self.modules.insert(path.clone());
                        stack.push((path, depth));
                        depth += 1;
                        i += 3;
                        continue;
                    }
                }
                "use" => {
                    let public = i > 0 && (tokens[i - 1].0 == "pub" || tokens[i - 1].0 == ")");
                    let mut leaves = Vec::new();
                    let end = use_tree(&tokens, i + 1, Vec::new(), &mut leaves);
                    for (path, alias) in leaves {
                        let Some(abs) = absolute(&current, &path) else {
                            if public && path.len() > 1 {
                                // Relative to this module (`pub use db::X`): resolved later.
                                let mut rel = vec!["self".to_string()];
                                rel.extend(path);
                                self.reexports.insert((current.clone(), alias), rel);
                            }
                            continue;
                        };
                        if public {
                            self.reexports.insert((current.clone(), alias), abs.clone());
                        }
                        self.uses
                            .push((current.clone(), abs, format!("{label}:{line}")));
                    }
                    i = end;
                    continue;
                }
                "crate" | "super" | "self" if i + 1 < tokens.len() && tokens[i + 1].0 == "::" => {
                    let prev = if i > 0 { tokens[i - 1].0.as_str() } else { "" };
                    if prev != "::" && prev != "in" {
                        let mut leaves = Vec::new();
                        let end = use_tree(&tokens, i, Vec::new(), &mut leaves);
                        for (path, _) in leaves {
                            if let Some(abs) = absolute(&current, &path) {
                                self.uses
                                    .push((current.clone(), abs, format!("{label}:{line}")));
                            }
                        }
                        i = end;
                        continue;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        children
    }

    /// `pub use db::X` in the root names the child module `db`: such re-exports become
    /// absolute once all modules are known; ones naming another crate are dropped.
    fn resolve_relative_reexports(&mut self) {
        let mut resolved = BTreeMap::new();
        for ((module, name), path) in std::mem::take(&mut self.reexports) {
            if path[0] != "self" {
                resolved.insert((module, name), path);
                continue;
            }
            let mut child = module.clone();
            child.push(path[1].clone());
            if self.modules.contains(&child) {
                let mut abs = module.clone();
                abs.extend(path[1..].iter().cloned());
                self.uses
                    .push((module.clone(), abs.clone(), "re-export".into()));
                resolved.insert((module, name), abs);
            }
        }
        self.reexports = resolved;
    }

    /// The module that defines what `path` names: its longest module prefix, following a
    /// re-export of the next name.
    fn target(&self, path: &[String]) -> ModPath {
        let mut path = path.to_vec();
        for _ in 0..8 {
            let mut module: ModPath = Vec::new();
            let mut rest = path.iter();
            for seg in rest.by_ref() {
                let mut next = module.clone();
                next.push(seg.clone());
                if !self.modules.contains(&next) {
                    // `seg` is an item of `module`: re-exported from elsewhere?
                    match self.reexports.get(&(module.clone(), seg.clone())) {
                        Some(to) if to != &path => {
                            let mut next_path = to.clone();
                            next_path.extend(rest.cloned());
                            path = next_path;
                        }
                        _ => return module,
                    }
                    break;
                }
                module = next;
            }
            if module.len() == path.len() {
                return module;
            }
        }
        path
    }
}

/// Tokens with their line numbers: identifiers, `::`, and single punctuation characters;
/// comments, strings and character literals are dropped.
fn tokenize(text: &str) -> Vec<(String, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied().unwrap_or('\0');
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c == '/' && next == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == '*' {
            let mut level = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    level += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    level -= 1;
                    i += 2;
                    if level == 0 {
                        break;
                    }
                } else {
                    line += usize::from(chars[i] == '\n');
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == '"'
                || (next == '#' && chars.get(i + 2).is_some_and(|&c| c == '#' || c == '"')))
        {
            // Raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            j += 1;
            while j < chars.len() {
                if chars[j] == '"' && (0..hashes).all(|k| chars.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                line += usize::from(chars[j] == '\n');
                j += 1;
            }
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                line += usize::from(chars[i] == '\n');
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if next == '\\' {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((chars[start..i].iter().collect(), line));
        } else if c == ':' && next == ':' {
            out.push(("::".into(), line));
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            out.push((c.to_string(), line));
            i += 1;
        }
    }
    out
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Parses a path or use tree at `i` (`a::b::{c, d::e as f}`, `a::*`), appending each leaf
/// path with the name it binds; returns the index after it.
fn use_tree(
    tokens: &[(String, usize)],
    mut i: usize,
    mut prefix: Vec<String>,
    leaves: &mut Vec<(Vec<String>, String)>,
) -> usize {
    while let Some((tok, _)) = tokens.get(i) {
        if tok == "{" {
            i += 1;
            loop {
                match tokens.get(i).map(|t| t.0.as_str()) {
                    None => return i,
                    Some("}") => return i + 1,
                    Some(",") => i += 1,
                    _ => i = use_tree(tokens, i, prefix.clone(), leaves),
                }
            }
        }
        if tok == "*" {
            leaves.push((prefix, "*".into()));
            return i + 1;
        }
        if !is_ident(tok) {
            break;
        }
        prefix.push(tok.clone());
        i += 1;
        if tokens.get(i).map(|t| t.0.as_str()) == Some("::") {
            i += 1;
            continue;
        }
        let mut alias = prefix.last().expect("segment").clone();
        if tokens.get(i).map(|t| t.0.as_str()) == Some("as") {
            alias = tokens.get(i + 1).map_or(alias, |t| t.0.clone());
            i += 2;
        }
        leaves.push((prefix, alias));
        return i;
    }
    if !prefix.is_empty() {
        let alias = prefix.last().expect("segment").clone();
        leaves.push((prefix, alias));
    }
    i
}

/// `crate::`, `super::` and `self::` paths made absolute; `None` for other crates and
/// paths relative to the current module.
fn absolute(current: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut abs = current.to_vec();
    let mut segs = path.iter().peekable();
    match segs.peek().map(|s| s.as_str()) {
        Some("crate") => {
            abs.clear();
            segs.next();
        }
        Some("self") => {
            segs.next();
        }
        Some("super") => {
            while segs.peek().map(|s| s.as_str()) == Some("super") {
                abs.pop()?;
                segs.next();
            }
        }
        _ => return None,
    }
    abs.extend(
        segs.filter(|s| s.as_str() != "*" && s.as_str() != "self")
            .cloned(),
    );
    Some(abs)
}

/// The cycles among siblings at every level of `tree`, one paragraph each: a headline
/// (`name level: a -> b -> a`), then the lines that make each edge.
fn cycles(name: &str, tree: &Tree) -> Vec<String> {
    // (parent, from child, to child) -> where
    let mut edges: BTreeMap<(ModPath, String, String), Vec<String>> = BTreeMap::new();
    for (from, path, at) in &tree.uses {
        let to = tree.target(path);
        let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
        if common == from.len() || common == to.len() {
            continue; // one contains the other
        }
        let key = (
            from[..common].to_vec(),
            from[common].clone(),
            to[common].clone(),
        );
        edges
            .entry(key)
            .or_default()
            .push(format!("{at} {}", path.join("::")));
    }
    let mut parents: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (parent, a, b) in edges.keys() {
        parents
            .entry(parent.clone())
            .or_default()
            .entry(a.clone())
            .or_default()
            .insert(b.clone());
    }
    let mut found = Vec::new();
    for (parent, graph) in &parents {
        for cycle in find_cycles(graph) {
            let mut out = String::new();
            let level = if parent.is_empty() {
                "at the root".to_string()
            } else {
                format!("under {}", parent.join("::"))
            };
            let _ = writeln!(out, "{name} {level}: {}", cycle.join(" -> "));
            for pair in cycle.windows(2) {
                let key = (parent.clone(), pair[0].clone(), pair[1].clone());
                let at = &edges[&key];
                let _ = writeln!(out, "    {} -> {}: {}", pair[0], pair[1], at.join("; "));
            }
            found.push(out);
        }
    }
    found
}

/// One cycle per strongly connected set of two or more nodes, as a closed walk from its
/// smallest node (`a -> b -> a`).
fn find_cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for m in graph.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    };
    let nodes: BTreeSet<&String> = graph.keys().chain(graph.values().flatten()).collect();
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for start in &nodes {
        if done.contains(*start) || !reaches[start].contains(*start) {
            continue;
        }
        let scc: BTreeSet<String> = nodes
            .iter()
            .filter(|n| reaches[start].contains(**n) && reaches[**n].contains(*start))
            .map(|n| (*n).clone())
            .collect();
        done.extend(scc.iter().cloned());
        // Shortest path back to `start` inside the set (breadth first).
        let mut prev: BTreeMap<String, String> = BTreeMap::new();
        let mut frontier = vec![(*start).clone()];
        'search: while !frontier.is_empty() {
            let mut next = Vec::new();
            for n in frontier {
                for m in graph
                    .get(&n)
                    .into_iter()
                    .flatten()
                    .filter(|m| scc.contains(*m))
                {
                    if m == *start {
                        prev.insert(format!("{start}#end"), n.clone());
                        break 'search;
                    }
                    if !prev.contains_key(m) {
                        prev.insert(m.clone(), n.clone());
                        next.push(m.clone());
                    }
                }
            }
            frontier = next;
        }
        let mut walk = vec![(*start).clone()];
        let mut at = prev[&format!("{start}#end")].clone();
        while &at != *start {
            walk.push(at.clone());
            at = prev[&at].clone();
        }
        walk.push((*start).clone());
        walk.reverse();
        out.push(walk);
    }
    out
}
