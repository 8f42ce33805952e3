//! Test seams of the watches and of the mirrors built on them: a private trait whose default
//! does nothing. Only the `testing` feature (and the crate's own tests) supply another one,
//! which can turn a safety condition off for one path, hold a mirror's events back, and count
//! what the mirrors did; normal builds call the empty one.

use std::sync::Weak;
use std::time::Duration;

use futures::future::BoxFuture;

/// Safety conditions of a mirror (and of its session watch) that a test can turn off for one
/// path, to show what each guards against. All `false`: the library as shipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Ablations {
    /// Decide before our own node is in the view (no barrier).
    pub(crate) no_barrier: bool,
    /// Take a node that entered by its event without checking the create count.
    pub(crate) no_witness: bool,
    /// Keep counting creates across the directory's deletion and creation.
    pub(crate) no_count_reset: bool,
    /// Keep the view through a disconnection, and only add the watch again after it.
    pub(crate) keep_view_on_disconnect: bool,
    /// After the first watch, never add it again (as zookeeper-client leaves it after a
    /// reconnect): the resync still happens, with no watch on the server.
    pub(crate) no_readd_after_reconnect: bool,
    /// Apply each event this much later.
    pub(crate) event_delay: Option<Duration>,
    /// Take a watch the server refused as added.
    pub(crate) ignore_refusal: bool,
    /// Admit a semaphore's leases on the guess of room alone.
    pub(crate) no_lease_check: bool,
    /// Keep polling the watcher after the session ended.
    pub(crate) poll_after_terminal: bool,
}

/// What a live mirror tells a probe about itself (only the `testing` probe asks).
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
pub(crate) trait Inspect: Send + Sync {
    /// Entries the mirror keeps (children, kept order, change log).
    fn retained(&self) -> usize;
}

/// See the module docs. Every method is called with the watched node's full server path.
pub(crate) trait Probe: Send + Sync {
    fn ablations(&self, _path: &str) -> Ablations {
        Ablations::default()
    }

    /// A mirror of `path` started; it lives while the returned token does.
    fn mirror_started(&self, _path: &str, _inspect: Weak<dyn Inspect>) -> Box<dyn Send + Sync> {
        Box::new(())
    }

    /// A watch of `path` was added on the server.
    fn watch_added(&self, _path: &str) {}

    /// A decision on a mirror of `path` found the creates counted since the listing did not
    /// match our node's sequence, `mismatches` times while the count was exact.
    fn witness_failed(&self, _path: &str, _mismatches: usize) {}

    /// A semaphore admission's guess of room on `path` was wrong.
    fn lease_guess_missed(&self, _path: &str) {}

    /// Completes once the events of `path` may be applied.
    fn events_released<'a>(&'a self, _path: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// The probe that does nothing.
#[cfg(not(feature = "testing"))]
struct Off;

#[cfg(not(feature = "testing"))]
impl Probe for Off {}

/// The probe in use.
pub(crate) fn probe() -> &'static dyn Probe {
    #[cfg(feature = "testing")]
    {
        crate::testing::mirror_probe::probe()
    }
    #[cfg(not(feature = "testing"))]
    {
        &Off
    }
}
