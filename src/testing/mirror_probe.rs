//! Seams into the crate's mirrors (a lock directory's, a cache's) and the watches under them,
//! for tests that show what each of the mirror's safety conditions guards against: turn one
//! off for one path, hold a mirror's events back, and count what the mirrors did.
//!
//! Every function takes the watched node's full server path (namespace included).

use std::sync::Weak;
use std::time::Duration;

use crate::watch::probe::{recorder, Ablations, Inspect};

/// Safety conditions of a lock directory's mirror that a test can turn off (all `false`: the
/// library as shipped).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MirrorHooks {
    /// Decide before our own node is in the view (no barrier).
    pub no_barrier: bool,
    /// Take a node that entered by its event without checking the create count.
    pub no_witness: bool,
    /// Keep counting creates across the directory's deletion and creation (the count the
    /// witness checks then never matches a new incarnation's suffixes).
    pub no_count_reset: bool,
    /// Keep the view through a disconnection, and only add the watch again after it (no
    /// invalidation, no listing).
    pub keep_view_on_disconnect: bool,
    /// After the first watch, list again without ever adding the watch again (as
    /// zookeeper-client leaves it after a reconnect: the server holds no watch).
    pub no_readd_after_reconnect: bool,
    /// Apply each batch of events of a valid view this much later.
    pub event_delay: Option<Duration>,
    /// Take a watch the server refused as added: list, and decide from the listing as if
    /// events would follow (none do).
    pub ignore_refusal: bool,
    /// Admit a semaphore's leases on the guess made when the internal lock was granted (the
    /// leases' mirror had room), without waiting for them in the view and counting again
    /// after their creates.
    pub no_lease_check: bool,
    /// Keep polling the watcher after the session ended: no stop at a terminal state, at the
    /// end of the client's task or when the framework gives the session up (zookeeper-client's
    /// watcher panics once its session's channel is gone).
    pub poll_after_terminal: bool,
}

impl From<MirrorHooks> for Ablations {
    fn from(hooks: MirrorHooks) -> Self {
        Ablations {
            no_barrier: hooks.no_barrier,
            no_witness: hooks.no_witness,
            no_count_reset: hooks.no_count_reset,
            keep_view_on_disconnect: hooks.keep_view_on_disconnect,
            no_readd_after_reconnect: hooks.no_readd_after_reconnect,
            event_delay: hooks.event_delay,
            ignore_refusal: hooks.ignore_refusal,
            no_lease_check: hooks.no_lease_check,
            poll_after_terminal: hooks.poll_after_terminal,
        }
    }
}

/// Sets the hooks of the lock directory `dir` (its full server path, namespace included) for
/// mirrors started from now on.
pub fn set_mirror_hooks(dir: &str, hooks: MirrorHooks) {
    recorder().table().hooks.insert(dir.to_owned(), hooks.into());
}

/// While `hold` is true, the running mirrors of `dir` (full server path) take their events and
/// apply none of them; once it is false again they apply them, in order. A view that lags
/// behind the server for exactly as long as a test wants.
pub fn hold_mirror_events(dir: &str, hold: bool) {
    recorder().hold(dir, hold);
}

/// How many persistent watches of `dir` (full server path) the framework's session watches
/// have added (a lock mirror's, a cache's, a [`Framework::watch`](crate::Framework::watch)'s).
pub fn mirror_watches_added(dir: &str) -> usize {
    recorder().table().added.get(dir).copied().unwrap_or(0)
}

/// How many times a decision on a mirror of `dir` (full server path) found that the creates
/// counted since the listing did not match our node's sequence (the witness failing) while
/// the count was exact. Not counted: a node whose create came while the directory was being
/// listed (not witnessed by design), and a count known to be low (a create right after a
/// listing's reply taken among the events before it).
pub fn mirror_witness_failures(dir: &str) -> usize {
    recorder().table().witness_failures.get(dir).copied().unwrap_or(0)
}

/// How many times a semaphore contender on a mirror of the lease directory `dir` (full server
/// path) released the internal lock with its lease create, on a guess of room, and then found
/// every lease taken (it deleted its lease and queued again).
pub fn mirror_lease_guesses_missed(dir: &str) -> usize {
    recorder().table().guesses_missed.get(dir).copied().unwrap_or(0)
}

/// How many mirror tasks of the lock directory `dir` (full server path) are running.
pub fn mirror_tasks_running(dir: &str) -> usize {
    recorder().table().running.get(dir).copied().unwrap_or(0)
}

/// How many entries the live mirrors of the lock directory `dir` (full server path) keep, in
/// all: the children of their views, the order they keep and its log of changes. A holder's
/// mirror must keep about as many as the directory has children, however many other
/// sessions come and go.
pub fn mirror_retained_entries(dir: &str) -> usize {
    let live: Vec<Weak<dyn Inspect>> = recorder().table().live.get(dir).cloned().unwrap_or_default();
    live.iter().filter_map(Weak::upgrade).map(|mirror| mirror.retained()).sum()
}
