//! Per-framework state of the data plane, kept beside the framework's core: what each
//! session's server supports, and the live persistent watches.
//!
//! It is found through a process-wide table keyed by the framework's shared core (held
//! weakly: an entry goes when its framework does), so that the core itself needs no field
//! for it.

use std::sync::{Arc, Weak};

use super::server_features::Knowledge;
use super::watches::Table;
use super::{Framework, Inner};
use crate::sync::Mutex;

/// The data plane's state of one framework.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    /// What the current session's server supports.
    pub(crate) server: Mutex<Knowledge>,
    /// The live persistent watches.
    pub(crate) watches: Mutex<Table>,
}

static TABLE: Mutex<Vec<(Weak<Inner>, Arc<Registry>)>> = Mutex::new(Vec::new());

/// The registry of `framework` (made on first use).
pub(crate) fn of(framework: &Framework) -> Arc<Registry> {
    let weak = framework.downgrade();
    let mut table = TABLE.lock();
    // A weak handle keeps its allocation, so a live entry's address cannot be reused by
    // another framework; entries of dropped frameworks go here.
    table.retain(|(owner, _)| owner.strong_count() > 0);
    if let Some((_, registry)) = table.iter().find(|(owner, _)| owner.ptr_eq(&weak)) {
        return registry.clone();
    }
    let registry = Arc::new(Registry::default());
    table.push((weak, registry.clone()));
    registry
}
