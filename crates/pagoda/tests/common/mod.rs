//! Helpers the CLI tests share: run the binary, check a refusal.
#![allow(clippy::unwrap_used, dead_code)] // each test file uses some of them

use std::process::{Command, Output};

/// Runs `pagoda ARGS` and waits for it.
pub fn pagoda(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pagoda"))
        .args(args)
        .output()
        .unwrap()
}

/// The run failed with exactly one `pagoda: error` line, and it contains `needle`.
pub fn fails_with(o: &Output, needle: &str) {
    assert!(
        !o.status.success(),
        "should fail: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("pagoda: error"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains(needle), "want '{needle}' in: {err}");
}
