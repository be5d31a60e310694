//! Records the commit the binary is built from, so that a result names the code that measured
//! it (`git describe` at run time named whatever was checked out then, not what ran).

use std::process::Command;

fn main() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let commit = git(&["describe", "--always", "--dirty", "--abbrev=10"])
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=PAGODA_BUILD_COMMIT={commit}");
    // Rebuilt when the checked-out commit or the index changes (a commit, a checkout, an add).
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for f in ["HEAD", "index"] {
            println!("cargo:rerun-if-changed={dir}/{f}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
