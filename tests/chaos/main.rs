//! Seeded chaos on a 3-server ensemble (see `ensemble.rs`): locks, caches, counters and
//! registrations through killed, paused and isolated servers, a member replaced by dynamic
//! reconfiguration, and cut, reset, black-holed and expired clients, then a check of the
//! recorded history. `ZKR_CHAOS_SECS` sets the length of the random schedule, `ZKR_CHAOS_SEED`
//! replays one.
//!
//! Every test here is named `chaos::<module>::<test>`, so
//! `cargo test --features testing,tls,sasl,discovery,serde,schema -- chaos::` runs them.
//! `tests/README.md` maps behaviours to binaries and modules.

#[path = "../common/mod.rs"]
mod common;

// One module per file beside this one, inside a module named after the binary: its name
// starts every test's.
#[path = "."]
mod chaos {
    /// The history checker on made-up histories.
    mod checker;
    /// The chaos run, twice: per-waiter watches and mirror waits.
    mod ensemble;
}
