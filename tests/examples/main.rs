//! Every program in `examples/` runs to completion against a real server.
//!
//! Every test here is named `examples::<module>::<test>`:
//! `cargo test --features testing,tls,sasl,discovery -- examples::` runs them; `tests/README.md` maps
//! behaviours to modules.

#[path = "../common/mod.rs"]
mod common;

#[path = "."]
mod examples {
    /// Builds the examples and runs each.
    mod every_example;
}
