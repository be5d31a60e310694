//! Builds the WiredTiger shim (`src/wiredtiger/shim.c`) when the `wiredtiger` feature is on:
//! compiled against the installed `wiredtiger.h` and linked with `libwiredtiger`.
//! `WIREDTIGER_DIR` points at a WiredTiger built elsewhere (its `include/` and `lib/`).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CARGO_FEATURE_WIREDTIGER");
    if std::env::var_os("CARGO_FEATURE_WIREDTIGER").is_some() {
        wiredtiger();
    }
}

#[cfg(feature = "wiredtiger")]
fn wiredtiger() {
    use std::path::PathBuf;
    println!("cargo:rerun-if-changed=src/wiredtiger/shim.c");
    println!("cargo:rerun-if-env-changed=WIREDTIGER_DIR");
    let (include, lib) = match std::env::var_os("WIREDTIGER_DIR") {
        Some(d) => {
            let d = PathBuf::from(d);
            (vec![d.join("include")], Some(d.join("lib")))
        }
        None => (Vec::new(), None),
    };
    let found = include
        .iter()
        .chain(&[
            PathBuf::from("/usr/include"),
            PathBuf::from("/usr/local/include"),
        ])
        .any(|d| d.join("wiredtiger.h").exists());
    if !found {
        panic!(
            "the `wiredtiger` feature needs WiredTiger's header and library: install them \
             (Debian/Ubuntu: `apt-get install libwiredtiger-dev`) or set WIREDTIGER_DIR to a \
             WiredTiger build holding include/wiredtiger.h and lib/libwiredtiger.so"
        );
    }
    cc::Build::new()
        .file("src/wiredtiger/shim.c")
        .includes(&include)
        .warnings(true)
        .compile("pagoda_wiredtiger_shim");
    if let Some(lib) = lib {
        println!("cargo:rustc-link-search=native={}", lib.display());
    }
    println!("cargo:rustc-link-lib=dylib=wiredtiger");
}

#[cfg(not(feature = "wiredtiger"))]
fn wiredtiger() {}
