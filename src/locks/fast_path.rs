//! The sequence-gap fast path: an uncontended mutex acquire in one request (the create).
//!
//! A lock directory's sequential suffix counts the child creates of the directory since it was
//! (last) created: the server takes it from the parent's stored child version, which every
//! successful create raises by one (deletes do not; failed creates do not; on ZooKeeper 3.6+
//! the count survives restarts exactly). So when this handle held node `N` (suffix `n`) alone,
//! deleted it, and its next create `M` gets suffix `n + 1`, nobody created a child in between:
//! every child present when `M` was created was present when `N` was alone, so it is `N`,
//! which the delete removed. `M` is alone and holds the lock; listing the children is not
//! needed. The one way this reasoning fails is a directory deleted (an empty container is
//! reaped by the server at any time) and created again, whose count starts over: a watch on
//! the directory (`exists`), armed before the delete and still quiet after `M`'s reply, proves
//! that did not happen (zookeeper-client delivers a notification before any later reply).
//!
//! The create alone takes the lock only when all of these hold, checked in this order:
//! - the last hold of this handle was sole (its listing showed only itself, or it came from
//!   this path itself) and its delete was the last request this handle sent before the create
//!   (the record of it is taken, under one lock, as the create is sent);
//! - the same session: epoch and session id, and not a read-only connection;
//! - the directory's watch that was armed (on this session) before the delete is the one
//!   still armed, and has not fired, both when the create is sent and after its reply (a
//!   session moved to another client counts as fired: the server sends the old client's
//!   watches nothing);
//! - the delete was answered `Ok` (so the node existed in this directory when deleted);
//! - the create succeeded on its first send;
//! - its suffix is `n + 1`, with `0 <= n < i32::MAX` (past that ZooKeeper's suffix wraps).
//!
//! Otherwise the create's node queues as usual (the children are listed: one more round trip
//! than when the listing goes with the create). The path is on by default and can be turned
//! off (`FrameworkBuilder::fast_path`): ZooKeeper 3.5 can hand out a suffix twice after a
//! restart (it may revert the child count when it replays a snapshot), which breaks this
//! reasoning, so turn it off for 3.5 servers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};

use crate::framework::metrics::Op;
use crate::framework::node::{CreatedNode, DeleteReply, Failure, SendDelete};
use crate::framework::protected::NodeSpec;
use crate::framework::{ConnectionState, Framework, Session};
use crate::sync::Mutex;

/// Why a fast-path try took the usual way instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum FastPathFallback {
    /// The handle's last hold was not sole, not released by its delete, or not on this session
    /// (the usual case when the lock is contended).
    NoRecord,
    /// The last hold was on another session (a new session, or another id).
    OtherSession,
    /// The connection is read-only.
    ReadOnly,
    /// No watch on the lock directory was armed on this session before the delete.
    WatchMissing,
    /// The directory's watch armed before the delete fired (the directory was changed,
    /// deleted or re-created), whatever watch was armed after it.
    WatchFired,
    /// The delete of the last hold was not answered `Ok` before the create's reply.
    DeleteNotConfirmed,
    /// The create failed on its first send.
    CreateFailed,
    /// Another create came between the delete and ours (the lock is contended).
    SequenceGap,
    /// The suffix is outside the range where the reasoning holds (near `i32::MAX`).
    SequenceRange,
}

/// How often an `InterProcessMutex` handle took its lock with the create alone, and why it
/// did not when it tried.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FastPathStats {
    /// Acquires that took the lock with the create alone.
    pub hits: u64,
    /// Acquires that took the usual way, by reason.
    pub fallbacks: BTreeMap<FastPathFallback, u64>,
}

impl FastPathStats {
    /// Fallbacks for `reason`.
    pub fn fallbacks_for(&self, reason: FastPathFallback) -> u64 {
        self.fallbacks.get(&reason).copied().unwrap_or(0)
    }
}

/// The fast path's state for one lock handle (shared by its clones).
#[derive(Debug, Default)]
pub(crate) struct FastPath {
    slot: Mutex<Slot>,
    stats: Mutex<FastPathStats>,
}

#[derive(Default)]
struct Slot {
    /// The delete of the handle's last sole hold.
    record: Option<Record>,
    /// The watch on the lock directory, while it has not fired.
    watch: Option<DirWatch>,
    /// The handle held its lock alone: its next listing arms a watch if none is. (Handles
    /// that only ever wait in a queue set no watch on the directory.)
    wants_watch: bool,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot").field("record", &self.record).field("watch", &self.watch.as_ref().map(|w| w.id)).finish()
    }
}

/// A sole hold's delete, as sent.
#[derive(Debug)]
struct Record {
    epoch: u64,
    session_id: i64,
    sequence: i64,
    reply: DeleteReply,
    /// The directory watch that was armed and quiet when the delete was sent: the only one
    /// that proves the directory was not re-created after it.
    watch: Option<WatchId>,
}

/// Which directory watch: its session (epoch and id) and a serial unique in the process.
/// Watches are told apart by it, so that a watch armed after a delete (by another task of the
/// handle, on a directory that may have been re-created) never stands in for one armed
/// before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WatchId {
    epoch: u64,
    session_id: i64,
    serial: u64,
}

impl WatchId {
    fn next(session: &Session) -> Self {
        static SERIAL: AtomicU64 = AtomicU64::new(0);
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        Self { epoch: session.epoch, session_id: session.id(), serial }
    }

    fn of(&self, epoch: u64, session_id: i64) -> bool {
        self.epoch == epoch && self.session_id == session_id && session_id != 0
    }
}

struct DirWatch {
    id: WatchId,
    /// Completes when the watch fires, or when the session moves to another client (the
    /// server no longer sends this client's watches anything: it proves nothing from then on).
    fired: BoxFuture<'static, ()>,
}

/// What a held node needs to record its delete for the next acquire of its handle.
#[derive(Debug, Clone)]
pub(crate) struct SoleHold {
    fast: Arc<FastPath>,
    session_id: i64,
    sequence: i64,
}

impl SoleHold {
    /// Sends the node's delete with `send` and records it, under the handle's lock, so that
    /// an acquire that takes the record sends its create after this delete.
    pub(crate) fn record_delete(&self, epoch: u64, send: SendDelete<'_>) -> DeleteReply {
        let mut slot = self.fast.slot.lock();
        // The watch armed now was sent before this delete: it was kept once answered.
        let watch = slot.quiet_watch(epoch, self.session_id);
        let reply = send();
        let (session_id, sequence) = (self.session_id, self.sequence);
        slot.record = Some(Record { epoch, session_id, sequence, reply: reply.clone(), watch });
        slot.wants_watch = true;
        reply
    }
}

/// What a fast-path try gives the engine.
pub(crate) enum FastTry {
    /// The create alone took the lock.
    Held(CreatedNode),
    /// The create's node, to queue as usual.
    Queued(CreatedNode),
    /// Nothing was sent: queue as usual with a new node.
    NotTried,
}

impl FastPath {
    pub(crate) fn stats(&self) -> FastPathStats {
        self.stats.lock().clone()
    }

    /// The record a hold needs to take part, when its listing showed it alone (or it came
    /// from this path).
    pub(crate) fn sole_hold(self: &Arc<Self>, session: &Session, node: &CreatedNode) -> Option<SoleHold> {
        let sequence = node.sequence()?;
        Some(SoleHold { fast: self.clone(), session_id: session.id(), sequence })
    }

    /// Whether a watch on the directory must be armed on `session` (sent with the next
    /// listing): the handle held its lock alone, and no watch is armed and quiet.
    pub(crate) fn needs_watch(&self, session: &Session) -> bool {
        let mut slot = self.slot.lock();
        slot.wants_watch && slot.quiet_watch(session.epoch, session.id()).is_none()
    }

    /// Sends an `exists` watch on `dir` now and keeps it once answered (unless one is armed),
    /// under a new identity. The watch is entered in the framework's watch table while it
    /// lives (a persistent watch added on `dir` meanwhile is then set again if this one goes
    /// unfired); none is sent when the table refuses it (the framework watches `dir`
    /// persistently), and the fast path then finds no quiet watch.
    pub(crate) fn arm_watch<'a>(
        &'a self,
        framework: &'a Framework,
        session: &'a Session,
        dir: &str,
    ) -> impl std::future::Future<Output = ()> + 'a {
        let id = WatchId::next(session);
        let entry = framework.enter_oneshot_watch(dir).ok();
        let exists = entry.as_ref().map(|_| {
            session.sent(Op::Exists);
            session.client.check_and_watch_stat(dir)
        });
        async move {
            let (Some(mut entry), Some(exists)) = (entry, exists) else { return };
            if let Ok((Some(_), watcher)) = exists.await {
                let (framework, client) = (framework.clone(), session.client_key());
                let fired = async move {
                    tokio::select! {
                        _ = crate::watch::fired(watcher) => entry.fired(),
                        () = framework.client_left(&client) => {}
                    }
                };
                let mut slot = self.slot.lock();
                if slot.watch.is_none() {
                    slot.watch = Some(DirWatch { id, fired: fired.boxed() });
                }
            }
        }
    }

    /// Tries to take the lock with the create alone; see the module docs.
    pub(crate) async fn attempt(&self, spec: &NodeSpec<'_>, session: &Session) -> Result<FastTry, Failure> {
        let framework = spec.framework;
        let name = spec.protected_name()?;
        // The record is taken and the create sent under one lock: no delete of this handle
        // can come between (the client sends requests in call order).
        let (record, pending, reply) = {
            let mut slot = self.slot.lock();
            let record = slot.record.take();
            let server_ok = record.is_some() && framework.server_supports_fast_path(); // 3.6+ (learned per session)
            let skip = match &record {
                None => Some(FastPathFallback::NoRecord),
                Some(record) if record.epoch != session.epoch || record.session_id != session.id() => {
                    Some(FastPathFallback::OtherSession)
                }
                // Without the watch armed before the delete, quiet, the create alone cannot
                // win: list with it instead (and arm a watch in the same round trip).
                // Until the server is known to be 3.6+ (learned per session), no create alone.
                Some(record) => match slot.recorded_watch(record) {
                    WatchState::Missing => Some(FastPathFallback::WatchMissing),
                    WatchState::Fired => Some(FastPathFallback::WatchFired),
                    WatchState::Quiet if !server_ok => Some(FastPathFallback::NoRecord),
                    WatchState::Quiet => None,
                },
            };
            let (Some(record), None) = (record, skip) else {
                drop(slot);
                return Ok(self.fell_back(skip.unwrap_or(FastPathFallback::NoRecord), None));
            };
            let (pending, reply) = spec.send_create(session, &name);
            (record, pending, reply)
        };
        let (stat, sequence) = match reply.await {
            Ok(created) => created,
            // The create may have happened: dropping `pending` deletes by protected prefix.
            Err(_) => return Ok(self.fell_back(FastPathFallback::CreateFailed, None)),
        };
        session.learn_id(stat.ephemeral_owner);
        framework.note_session_id(session);
        let node = pending.created(sequence, stat.czxid);
        let observed = Observed {
            read_only: framework.state() == ConnectionState::ReadOnly,
            watch: self.slot.lock().recorded_watch(&record),
            delete_ok: matches!(record.reply.clone().now_or_never(), Some(Ok(()))),
            previous: record.sequence,
            sequence: sequence.into_i64(),
        };
        Ok(match observed.verdict() {
            Ok(()) => {
                self.stats.lock().hits += 1;
                tracing::debug!(node = node.name(), "fast path: the create alone took the lock");
                FastTry::Held(node)
            }
            Err(reason) => self.fell_back(reason, Some(node)),
        })
    }

    fn fell_back(&self, reason: FastPathFallback, node: Option<CreatedNode>) -> FastTry {
        *self.stats.lock().fallbacks.entry(reason).or_default() += 1;
        tracing::debug!(?reason, "fast path not taken");
        match node {
            Some(node) => FastTry::Queued(node),
            None => FastTry::NotTried,
        }
    }
}

impl Slot {
    /// The directory watch armed on this session that has not fired, if any. A fired or stale
    /// one is dropped (a finished future is never polled again), to be armed again with a
    /// listing.
    fn quiet_watch(&mut self, epoch: u64, session_id: i64) -> Option<WatchId> {
        let quiet = match self.watch.as_mut() {
            Some(watch) if watch.id.of(epoch, session_id) => watch.fired.as_mut().now_or_never().is_none(),
            _ => false,
        };
        if !quiet {
            self.watch = None;
        }
        self.watch.as_ref().map(|watch| watch.id)
    }

    /// Whether the watch `record` names is still the one armed, and quiet.
    fn recorded_watch(&mut self, record: &Record) -> WatchState {
        let now = self.quiet_watch(record.epoch, record.session_id);
        WatchState::of(record.watch, now)
    }
}

/// The directory watch a delete recorded, as seen when the create is sent and after its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WatchState {
    /// No watch was armed (and quiet) when the delete was sent.
    Missing,
    /// That watch fired, or went with its session: another watch (or none) is armed now.
    Fired,
    /// That very watch is armed, and quiet.
    Quiet,
}

impl WatchState {
    /// `recorded`: the watch armed when the delete was sent; `now`: the quiet watch armed now.
    fn of(recorded: Option<WatchId>, now: Option<WatchId>) -> Self {
        match recorded {
            None => WatchState::Missing,
            Some(recorded) if now == Some(recorded) => WatchState::Quiet,
            Some(_) => WatchState::Fired,
        }
    }
}

/// What the fast path decides on, once the create is answered.
#[derive(Debug, Clone, Copy)]
struct Observed {
    read_only: bool,
    watch: WatchState,
    delete_ok: bool,
    /// The suffix of the last sole hold.
    previous: i64,
    /// The suffix of the new node.
    sequence: i64,
}

impl Observed {
    /// `Ok` when the new node holds the lock alone; otherwise why not.
    fn verdict(&self) -> Result<(), FastPathFallback> {
        if self.read_only {
            return Err(FastPathFallback::ReadOnly);
        }
        match self.watch {
            WatchState::Missing => return Err(FastPathFallback::WatchMissing),
            WatchState::Fired => return Err(FastPathFallback::WatchFired),
            WatchState::Quiet => {}
        }
        if !self.delete_ok {
            return Err(FastPathFallback::DeleteNotConfirmed);
        }
        if !(0..i64::from(i32::MAX)).contains(&self.previous) {
            return Err(FastPathFallback::SequenceRange);
        }
        if self.sequence != self.previous + 1 {
            return Err(FastPathFallback::SequenceGap);
        }
        Ok(())
    }
}

/// Whether the framework allows the fast path (`FrameworkBuilder::fast_path`).
pub(crate) fn enabled(framework: &Framework) -> bool {
    framework.config().fast_path
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet(previous: i64, sequence: i64) -> Observed {
        Observed { read_only: false, watch: WatchState::Quiet, delete_ok: true, previous, sequence }
    }

    #[test]
    fn the_next_suffix_alone_takes_the_lock() {
        assert_eq!(quiet(0, 1).verdict(), Ok(()));
        assert_eq!(quiet(41, 42).verdict(), Ok(()));
        assert_eq!(quiet(i64::from(i32::MAX) - 1, i64::from(i32::MAX)).verdict(), Ok(()));
    }

    #[test]
    fn a_gap_or_an_older_suffix_queues() {
        assert_eq!(quiet(41, 43).verdict(), Err(FastPathFallback::SequenceGap));
        assert_eq!(quiet(41, 41).verdict(), Err(FastPathFallback::SequenceGap));
        assert_eq!(quiet(41, 0).verdict(), Err(FastPathFallback::SequenceGap));
    }

    #[test]
    fn suffixes_at_the_limits_queue() {
        // At i32::MAX the next suffix wraps (ZooKeeper prints -2147483648): never fast.
        assert_eq!(quiet(i64::from(i32::MAX), i64::from(i32::MAX) + 1).verdict(), Err(FastPathFallback::SequenceRange));
        assert_eq!(quiet(-1, 0).verdict(), Err(FastPathFallback::SequenceRange));
        assert_eq!(quiet(-2147483648, -2147483647).verdict(), Err(FastPathFallback::SequenceRange));
        // A 19-digit suffix (past i32::MAX) is out of range too.
        assert_eq!(quiet(3_000_000_000, 3_000_000_001).verdict(), Err(FastPathFallback::SequenceRange));
    }

    fn watch(serial: u64) -> WatchId {
        WatchId { epoch: 1, session_id: 7, serial }
    }

    #[test]
    fn only_the_watch_armed_before_the_delete_proves_the_directory() {
        assert_eq!(WatchState::of(Some(watch(3)), Some(watch(3))), WatchState::Quiet);
        // It fired, and another task's listing armed a new one (maybe on a re-created
        // directory): the new one proves nothing about the gap.
        assert_eq!(WatchState::of(Some(watch(3)), Some(watch(4))), WatchState::Fired);
        assert_eq!(WatchState::of(Some(watch(3)), None), WatchState::Fired);
        // No watch when the delete was sent: one armed since is not enough.
        assert_eq!(WatchState::of(None, Some(watch(4))), WatchState::Missing);
        assert_eq!(WatchState::of(None, None), WatchState::Missing);
        // Same serial, other session: not the same watch.
        let other_session = WatchId { session_id: 8, ..watch(3) };
        assert_eq!(WatchState::of(Some(watch(3)), Some(other_session)), WatchState::Fired);
    }

    #[test]
    fn a_watch_belongs_to_one_known_session() {
        assert!(watch(1).of(1, 7));
        assert!(!watch(1).of(2, 7), "another epoch");
        assert!(!watch(1).of(1, 8), "another session id");
        assert!(!WatchId { session_id: 0, ..watch(1) }.of(1, 0), "an unknown session id proves nothing");
    }

    #[test]
    fn a_fired_or_missing_watch_an_unconfirmed_delete_or_read_only_queue() {
        let fired = Observed { watch: WatchState::Fired, ..quiet(1, 2) };
        assert_eq!(fired.verdict(), Err(FastPathFallback::WatchFired));
        let missing = Observed { watch: WatchState::Missing, ..quiet(1, 2) };
        assert_eq!(missing.verdict(), Err(FastPathFallback::WatchMissing));
        let pending = Observed { delete_ok: false, ..quiet(1, 2) };
        assert_eq!(pending.verdict(), Err(FastPathFallback::DeleteNotConfirmed));
        let read_only = Observed { read_only: true, ..quiet(1, 2) };
        assert_eq!(read_only.verdict(), Err(FastPathFallback::ReadOnly));
    }
}
