//! Helpers shared by every test binary (each declares `#[path = "../common/mod.rs"] mod common;`
//! in its `main.rs`; a test module reaches them as `crate::common`).
//!
//! - [`fixtures`]: unique paths, bounded waits and polls, frameworks, the process-wide shared
//!   server, a server behind a fault proxy, checks of Curator's node names;
//! - [`timing`]: the time bounds every test derives its waits from;
//! - [`curator`]: the Curator peer (a JVM running `interop/CuratorPeer.java`);
//! - [`kazoo`]: the kazoo peer (`python3` running `interop/kazoo_peer.py`);
//! - [`election`]: a leadership log and its checks (leader and interop tests);
//! - [`cache`]: a fresh read of a subtree, a random writer and convergence waits (cache tests);
//! - [`history`]: the chaos run's recorded history and its checker.

pub mod cache;
pub mod curator;
pub mod election;
pub mod fixtures;
pub mod history;
pub mod kazoo;
pub mod schema;
pub mod timing;
