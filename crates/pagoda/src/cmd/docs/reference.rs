//! The CLI reference and man pages, generated from the clap definitions and compared with the
//! checked-in files (`docs/cli.md`, `docs/man/`); only the test needs them, so they are built
//! for tests alone.

use clap::Command;
use std::path::PathBuf;

/// How to regenerate the checked-in files (the test's failure says it too).
const REGENERATE: &str = "PAGODA_REGEN_DOCS=1 cargo test -p pagoda --bin pagoda cli_docs";

/// Help is rendered at a fixed width, so the generated files do not depend on the terminal.
const WIDTH: usize = 100;

/// The generated files, by path relative to `docs/`: `cli.md`, then `man/pagoda.1` and one
/// man page per visible subcommand (`man/pagoda-bench-ycsb.1`, as `clap_mangen` names them).
fn generate(cmd: Command) -> std::io::Result<Vec<(PathBuf, Vec<u8>)>> {
    // `pagoda help COMMAND` only repeats each command's `--help`: neither page lists it.
    let mut cmd = cmd.disable_help_subcommand(true).term_width(WIDTH);
    cmd.build();
    let mut files = vec![(PathBuf::from("cli.md"), markdown(&mut cmd).into_bytes())];
    man_pages(&cmd, &mut files)?;
    Ok(files)
}

/// One man page per command, hidden ones left out (as `clap_mangen::generate_to`, but in memory).
fn man_pages(cmd: &Command, files: &mut Vec<(PathBuf, Vec<u8>)>) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut page = Vec::new();
    man.render(&mut page)?;
    files.push((PathBuf::from("man").join(man.get_filename()), page));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        man_pages(sub, files)?;
    }
    Ok(())
}

/// One visible command: its full name (`pagoda bench ycsb`), depth, summary and `--help`.
struct Section {
    name: String,
    depth: usize,
    about: String,
    help: String,
}

/// The reference: an index of the commands, then each command's `--help` under its name.
/// Help text goes in code blocks, so nothing in it needs Markdown escaping.
fn markdown(cmd: &mut Command) -> String {
    let mut sections = Vec::new();
    let name = cmd.get_name().to_owned();
    collect(cmd, name, 0, &mut sections);
    let mut out = format!(
        "# The `pagoda` command line\n\n\
         Each section is what `COMMAND --help` prints. Generated from the clap definitions, as\n\
         are the [man pages](man/pagoda.1) and the shell completions (`pagoda completions\n\
         bash|zsh|fish|elvish|powershell`); do not edit, regenerate with\n\
         `{REGENERATE}`. `pagoda crashtest` runs the crash tester, whose own flags\n\
         `pagoda crashtest --help` lists.\n\n"
    );
    for s in &sections {
        let anchor = s.name.replace(' ', "-");
        let indent = "  ".repeat(s.depth);
        out.push_str(&format!(
            "{indent}- [`{}`](#{anchor}): {}\n",
            s.name, s.about
        ));
    }
    for s in &sections {
        out.push_str(&format!("\n## `{}`\n\n```text\n{}\n```\n", s.name, s.help));
    }
    out
}

fn collect(cmd: &mut Command, name: String, depth: usize, out: &mut Vec<Section>) {
    let help = cmd.render_long_help().to_string();
    // clap pads some lines with spaces; trailing blanks would only make diffs noisy.
    let help: Vec<&str> = help.lines().map(str::trim_end).collect();
    out.push(Section {
        about: cmd.get_about().map(ToString::to_string).unwrap_or_default(),
        help: help.join("\n").trim_end().to_owned(),
        name: name.clone(),
        depth,
    });
    for sub in cmd.get_subcommands_mut().filter(|s| !s.is_hide_set()) {
        let sub_name = format!("{name} {}", sub.get_name());
        collect(sub, sub_name, depth + 1, out);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use clap::CommandFactory;
    use std::fs;

    /// Fails when `docs/cli.md` or `docs/man/` differ from what the clap definitions generate;
    /// with `PAGODA_REGEN_DOCS=1` it rewrites them instead.
    #[test]
    fn cli_docs_match_the_clap_definitions() {
        let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs");
        let files = generate(crate::Cli::command()).unwrap();
        let man_dir = docs.join("man");
        let checked_in: Vec<PathBuf> = fs::read_dir(&man_dir)
            .map(|d| {
                d.map(|e| PathBuf::from("man").join(e.unwrap().file_name()))
                    .collect()
            })
            .unwrap_or_default();
        if std::env::var_os("PAGODA_REGEN_DOCS").is_some() {
            for old in &checked_in {
                fs::remove_file(docs.join(old)).unwrap();
            }
            fs::create_dir_all(&man_dir).unwrap();
            for (path, bytes) in &files {
                fs::write(docs.join(path), bytes).unwrap();
            }
            return;
        }
        let mut wrong: Vec<String> = files
            .iter()
            .filter(|(path, bytes)| fs::read(docs.join(path)).ok().as_ref() != Some(bytes))
            .map(|(path, _)| format!("{} (differs or missing)", path.display()))
            .collect();
        wrong.extend(
            checked_in
                .iter()
                .filter(|old| !files.iter().any(|(path, _)| path == *old))
                .map(|old| format!("{} (no such command)", old.display())),
        );
        assert!(
            wrong.is_empty(),
            "docs/ is not what the clap definitions generate: {}; regenerate with `{REGENERATE}`",
            wrong.join(", ")
        );
    }

    /// Every shell's script generates and offers the subcommands.
    #[test]
    fn completions_name_the_subcommands() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
            clap_complete::Shell::Elvish,
            clap_complete::Shell::PowerShell,
        ] {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut crate::Cli::command(), "pagoda", &mut script);
            let script = String::from_utf8(script).unwrap();
            for sub in ["bench", "reproduce", "completions"] {
                assert!(script.contains(sub), "{shell}: no {sub}");
            }
        }
    }
}
