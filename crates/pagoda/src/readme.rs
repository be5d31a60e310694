//! Generated excerpts in a README: a tool that measured something replaces the text between
//! the README's `<!-- NAME: begin ... -->` and `<!-- NAME: end -->` lines with its own
//! figures, so the README quotes results without anyone copying them by hand. The markers
//! stay, so the next run replaces the excerpt again.

use crate::error::{CliError, CliResult};
use std::path::Path;

/// Checks that `readme` has the block `name`, before a long run that will write it.
pub(crate) fn check_block(readme: &Path, name: &str) -> CliResult<()> {
    locate(&read(readme)?, readme, name).map(|_| ())
}

/// Replaces the block `name` of `readme` with `content` (which should end with a newline).
/// A README without the block's markers is refused with the lines to add.
pub(crate) fn replace_block(readme: &Path, name: &str, content: &str) -> CliResult<()> {
    let text = read(readme)?;
    let (after_begin, e) = locate(&text, readme, name)?;
    let out = format!("{}{content}{}", &text[..after_begin], &text[e..]);
    std::fs::write(readme, out).map_err(|e| CliError::Other(format!("{}: {e}", readme.display())))
}

fn read(readme: &Path) -> CliResult<String> {
    std::fs::read_to_string(readme)
        .map_err(|e| CliError::Usage(format!("cannot read the README {}: {e}", readme.display())))
}

/// The byte offsets of the line after the begin marker and of the end marker.
fn locate(text: &str, readme: &Path, name: &str) -> CliResult<(usize, usize)> {
    let (begin, end) = (
        format!("<!-- {name}: begin"),
        format!("<!-- {name}: end -->"),
    );
    let (Some(b), Some(e)) = (text.find(&begin), text.find(&end)) else {
        return Err(CliError::Usage(format!(
            "{} has no `{name}` markers: add a line `{begin} -->` and a line `{end}` where the \
             excerpt goes",
            readme.display()
        )));
    };
    if e < b {
        return Err(CliError::Usage(format!(
            "{}: the `{name}` end marker comes before its begin marker",
            readme.display()
        )));
    }
    Ok((
        b + text[b..].find('\n').map_or(text.len() - b, |n| n + 1),
        e,
    ))
}

/// `to` as a link from `readme`'s directory (both as given on the command line, usually
/// relative to the repository root).
pub(crate) fn link(readme: &Path, to: &Path) -> String {
    let base = readme.parent().unwrap_or(Path::new(""));
    to.strip_prefix(base)
        .unwrap_or(to)
        .to_string_lossy()
        .replace('\\', "/")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn only_the_text_between_the_markers_is_replaced_and_again_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let readme = dir.path().join("README.md");
        let old = "# T\nbefore\n<!-- x: begin (generated) -->\nstale\n<!-- x: end -->\nafter\n";
        std::fs::write(&readme, old).unwrap();
        replace_block(&readme, "x", "fresh 1\n").unwrap();
        let want = "# T\nbefore\n<!-- x: begin (generated) -->\nfresh 1\n<!-- x: end -->\nafter\n";
        assert_eq!(std::fs::read_to_string(&readme).unwrap(), want);
        replace_block(&readme, "x", "fresh 1\n").unwrap();
        assert_eq!(std::fs::read_to_string(&readme).unwrap(), want);
    }

    #[test]
    fn missing_or_swapped_markers_are_refused_and_the_file_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let readme = dir.path().join("README.md");
        std::fs::write(&readme, "# none\n").unwrap();
        let err = replace_block(&readme, "x", "y\n").unwrap_err();
        assert!(err.to_string().contains("no `x` markers"), "{err}");
        let swapped = "<!-- x: end -->\n<!-- x: begin -->\n";
        std::fs::write(&readme, swapped).unwrap();
        let err = replace_block(&readme, "x", "y\n").unwrap_err();
        assert!(err.to_string().contains("before its begin"), "{err}");
        assert_eq!(std::fs::read_to_string(&readme).unwrap(), swapped);
    }

    #[test]
    fn a_link_is_relative_to_the_readme() {
        assert_eq!(
            link(Path::new("README.md"), Path::new("docs/results/r.md")),
            "docs/results/r.md"
        );
        assert_eq!(
            link(Path::new("/repo/README.md"), Path::new("/repo/docs/r.md")),
            "docs/r.md"
        );
    }
}
