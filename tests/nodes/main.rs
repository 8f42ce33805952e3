//! Nodes and discovery against real ZooKeeper servers: `PersistentNode`, `GroupMember`,
//! `PersistentTtlNode`, and curator-x-discovery compatible service discovery (feature
//! `discovery`).
//!
//! Every test here is named `nodes::<module>::<test>`, so
//! `cargo test --features testing,tls,sasl,discovery,serde,schema -- nodes::` runs them and the unit
//! tests of `src/nodes/` (the same room).
//! `tests/README.md` maps behaviours to binaries and modules.

#[path = "../common/mod.rs"]
mod common;

// One module per file beside this one, inside a module named after the binary: its name
// starts every test's.
#[path = "."]
mod nodes {
    /// Registration, queries, the service cache and providers.
    mod discovery;
    /// Bad names, ports, data and base paths refused, nothing registered.
    mod discovery_bad_input;
    /// A `ServiceCache` keeps each instance as last parsed.
    mod discovery_cache_parsed;
    /// Provider filters and strategies of the caller's; a `ServiceCache`'s change stream.
    mod discovery_extras;
    /// Server requests per discovery operation, counted by a proxy.
    mod discovery_request_counts;
    /// `PersistentNode` and `GroupMember`: back after deletes, expiry, black holes.
    mod persistent_node;
    /// A protected ephemeral sequential node through server faults.
    mod persistent_node_faults;
    /// `PersistentTtlNode`: Curator's layout, kept while alive, gone within the TTL.
    mod persistent_ttl_node;
    /// `GroupMember` and `ServiceCache` on a server without persistent watches (one-shot
    /// watches stand in).
    mod without_persistent_watches;
}
