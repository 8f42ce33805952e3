//! Every program in `examples/` runs to completion against a real server.
//!
//! Every test here is named `examples::<module>::<test>`, so
//! `cargo test --features testing,tls,sasl,discovery,serde,schema -- examples::` runs them.
//! `tests/README.md` maps behaviours to binaries and modules.

#[path = "../common/mod.rs"]
mod common;

// One module per file beside this one, inside a module named after the binary: its name
// starts every test's.
#[path = "."]
mod examples {
    /// Builds the examples and runs each.
    mod every_example;
}
