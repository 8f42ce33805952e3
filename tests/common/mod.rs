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

/// A file of the repository (`relative` to its root): under the manifest directory of the
/// package whose tests run, or of an enclosing one (the `zkr` package's tests share these
/// helpers).
pub fn repo_file(relative: &str) -> std::path::PathBuf {
    let manifest_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .ancestors()
        .map(|dir| dir.join(relative))
        .find(|path| path.is_file())
        .unwrap_or_else(|| manifest_dir.join(relative))
}
