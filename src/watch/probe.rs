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
        recorder()
    }
    #[cfg(not(feature = "testing"))]
    {
        &Off
    }
}

#[cfg(feature = "testing")]
pub(crate) use self::recording::recorder;

/// The `testing` feature's probe: a table of what tests turned off and what the mirrors did,
/// read and set through the `testing` module.
#[cfg(feature = "testing")]
mod recording {
    use std::collections::{HashMap, HashSet};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{MutexGuard, OnceLock, Weak};

    use futures::future::BoxFuture;
    use tokio::sync::Notify;

    use super::{Ablations, Inspect, Probe};
    use crate::sync::Mutex;

    /// What the mirrors did, and what tests turned off, by full path.
    #[derive(Default)]
    pub(crate) struct Table {
        pub(crate) hooks: HashMap<String, Ablations>,
        pub(crate) running: HashMap<String, usize>,
        /// Live mirrors, to ask what they keep.
        pub(crate) live: HashMap<String, Vec<Weak<dyn Inspect>>>,
        /// Watches added.
        pub(crate) added: HashMap<String, usize>,
        /// Decisions the witness refused because the create count did not match.
        pub(crate) witness_failures: HashMap<String, usize>,
        /// Semaphore admissions whose guess of room was wrong once the leases were created.
        pub(crate) guesses_missed: HashMap<String, usize>,
        /// Directories whose mirrors apply no event for now.
        holding: HashSet<String>,
    }

    /// The recording probe.
    pub(crate) struct Recorder {
        table: Mutex<Table>,
        released: Notify,
        /// Some directory's events are held: only then does a mirror look at the table for its
        /// events (the benches run with this feature too).
        any_held: AtomicBool,
    }

    /// The one recorder of the process.
    pub(crate) fn recorder() -> &'static Recorder {
        static RECORDER: OnceLock<Recorder> = OnceLock::new();
        RECORDER.get_or_init(|| Recorder {
            table: Mutex::default(),
            released: Notify::new(),
            any_held: AtomicBool::new(false),
        })
    }

    impl Recorder {
        pub(crate) fn table(&self) -> MutexGuard<'_, Table> {
            self.table.lock()
        }

        /// While `hold`, the mirrors of `path` apply none of their events.
        pub(crate) fn hold(&self, path: &str, hold: bool) {
            let mut table = self.table.lock();
            if hold {
                table.holding.insert(path.to_owned());
            } else {
                table.holding.remove(path);
                self.released.notify_waiters();
            }
            self.any_held.store(!table.holding.is_empty(), Ordering::SeqCst);
        }
    }

    impl Table {
        /// Whether the path's counts are kept: a mirror of it runs, or a test set its hooks.
        fn follows(&self, path: &str) -> bool {
            self.running.contains_key(path) || self.hooks.contains_key(path)
        }
    }

    /// Counts a running mirror while it lives. Once none runs, what was recorded of a path no
    /// test set hooks for is forgotten (a process that locks many paths keeps nothing per
    /// path).
    struct Running(String);

    impl Drop for Running {
        fn drop(&mut self) {
            let mut table = recorder().table();
            let path = self.0.as_str();
            let left = table.running.get_mut(path).map(|n| {
                *n = n.saturating_sub(1);
                *n
            });
            if left == Some(0) && !table.hooks.contains_key(path) {
                table.running.remove(path);
                table.live.remove(path);
                table.added.remove(path);
                table.witness_failures.remove(path);
                table.guesses_missed.remove(path);
            }
        }
    }

    impl Probe for Recorder {
        fn ablations(&self, path: &str) -> Ablations {
            self.table.lock().hooks.get(path).copied().unwrap_or_default()
        }

        fn mirror_started(&self, path: &str, inspect: Weak<dyn Inspect>) -> Box<dyn Send + Sync> {
            let mut table = self.table.lock();
            *table.running.entry(path.to_owned()).or_default() += 1;
            let live = table.live.entry(path.to_owned()).or_default();
            live.retain(|mirror| mirror.strong_count() > 0);
            live.push(inspect);
            Box::new(Running(path.to_owned()))
        }

        fn watch_added(&self, path: &str) {
            let mut table = self.table.lock();
            if table.follows(path) {
                *table.added.entry(path.to_owned()).or_default() += 1;
            }
        }

        fn witness_failed(&self, path: &str, mismatches: usize) {
            let mut table = self.table.lock();
            if table.follows(path) {
                *table.witness_failures.entry(path.to_owned()).or_default() += mismatches;
            }
        }

        fn lease_guess_missed(&self, path: &str) {
            let mut table = self.table.lock();
            if table.follows(path) {
                *table.guesses_missed.entry(path.to_owned()).or_default() += 1;
            }
        }

        fn events_released<'a>(&'a self, path: &'a str) -> BoxFuture<'a, ()> {
            Box::pin(async move {
                if !self.any_held.load(Ordering::SeqCst) {
                    return;
                }
                loop {
                    // Made before the check: `notify_waiters` reaches it from here on.
                    let notified = self.released.notified();
                    if !self.table.lock().holding.contains(path) {
                        return;
                    }
                    notified.await;
                }
            })
        }
    }
}
