//! Nothing to use: this package's tests (`tests/embed.rs`) run `pagoda-engine` as an embedder
//! builds it, with its default features alone (no fault injection), which the engine's own
//! tests cannot do. CI runs them with `cargo test -p pagoda-engine-embed --locked` by itself, so
//! no other package's features unify into the engine.

#![warn(missing_docs)]
