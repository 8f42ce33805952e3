//! Per-framework state of the data plane, kept in the framework's shared core: what each
//! session's server supports, and the live persistent watches.

use std::sync::Arc;

use super::server_features::Knowledge;
use super::watch_table::WatchTable;
use crate::sync::Mutex;

/// The data plane's state of one framework.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    /// What the current session's server supports.
    pub(crate) server: Mutex<Knowledge>,
    /// The watches the session holds (see `watch_table.rs`).
    pub(crate) watches: Arc<Mutex<WatchTable>>,
}
