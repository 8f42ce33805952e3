//! The mirror's event source: one persistent (recursive) watch on the framework's current
//! session, added again after every reconnect and on every new session.
//!
//! zookeeper-client 0.11 never re-registers persistent watches after a reconnect (the server
//! then holds no watch for the path at all), and its watcher panics when polled after a
//! terminal session state. So this source reads the watcher's own session events: at
//! `Disconnected` it says [`SourceItem::Interrupted`]; at `SyncConnected` it adds a new watch
//! (the old watcher is dropped only once the new one exists, so no `RemoveWatches` goes out)
//! and says [`SourceItem::Resync`] once the server answered; at a terminal state it stops
//! polling that watcher and waits for the framework's next session. It also follows the
//! framework's state: a new session (a new epoch) moves the watch there.
//!
//! Limits: a failed `AddWatch` is retried with a pause (bounded, doubling) while the framework
//! is connected, forever; the watch is never removed from the server explicitly (dropping the
//! last watcher lets the client send `RemoveWatches`).

use std::time::Duration;

use futures::Stream;
use tokio::sync::watch;
use zookeeper_client::{AddWatchMode, EventType, PersistentWatcher, SessionState};

use super::state::EventKind;
use crate::framework::{Framework, StateSnapshot};

/// Why a resync is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResyncReason {
    /// The watch was just added for the first time.
    Started,
    /// The connection came back on the same session; events in between are lost.
    Reconnected,
    /// A new session replaced the old one.
    NewSession,
}

/// What the source yields, in server order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SourceItem {
    /// A watch event on `path` (the server's full path).
    Event { kind: EventKind, path: String, zxid: Option<i64> },
    /// The connection broke: events from here to the next `Resync` may be missing.
    Interrupted,
    /// The watch is in place (again): events after this item are complete; read now.
    Resync { reason: ResyncReason },
}

/// The longest pause between two failed attempts to add the watch.
const MAX_PAUSE: Duration = Duration::from_secs(2);

struct Source {
    framework: Framework,
    path: String,
    mode: AddWatchMode,
    watcher: Option<PersistentWatcher>,
    epoch: u64,
    state: watch::Receiver<StateSnapshot>,
    /// A resync to announce before anything else.
    announce: Option<ResyncReason>,
    /// The watch must be added (again) before reading events.
    needed: Option<ResyncReason>,
}

/// Adds the watch on the framework's current session, for `start()` to report a refusal
/// (`Unimplemented` from a 3.5 server, `MarshallingError` from a server whose watch manager
/// cannot keep persistent watches).
///
/// # Errors
/// The client's or the server's error.
pub(crate) async fn add_watch(
    framework: &Framework,
    path: &str,
    mode: AddWatchMode,
) -> crate::Result<(PersistentWatcher, u64)> {
    let session = framework.session()?;
    let watcher = session.client.watch(path, mode).await?;
    Ok((watcher, session.epoch))
}

/// The source as a stream, starting from a watch `first` already added (on session `epoch`).
/// It yields `Resync { Started }` first and ends when the framework closes.
///
/// `StreamExt::next` on it is cancel-safe and returns at once when an event is queued, so a
/// consumer may drain what arrived with `now_or_never`.
pub(crate) fn stream(
    framework: Framework,
    path: String,
    mode: AddWatchMode,
    first: (PersistentWatcher, u64),
) -> impl Stream<Item = SourceItem> + Send + Unpin {
    let state = framework.state_watch();
    let source = Source {
        framework,
        path,
        mode,
        watcher: Some(first.0),
        epoch: first.1,
        state,
        announce: Some(ResyncReason::Started),
        needed: None,
    };
    Box::pin(futures::stream::unfold(source, |mut source| async move {
        let item = source.next().await?;
        Some((item, source))
    }))
}

impl Source {
    async fn next(&mut self) -> Option<SourceItem> {
        if let Some(reason) = self.announce.take() {
            return Some(SourceItem::Resync { reason });
        }
        loop {
            if let Some(reason) = self.needed {
                self.add(reason).await?;
                self.needed = None;
                return Some(SourceItem::Resync { reason });
            }
            let Some(watcher) = self.watcher.as_mut() else {
                self.needed = Some(ResyncReason::NewSession);
                continue;
            };
            tokio::select! {
                event = watcher.changed() => {
                    let kind = match event.event_type {
                        EventType::NodeCreated => EventKind::Created,
                        EventType::NodeDeleted => EventKind::Deleted,
                        EventType::NodeDataChanged => EventKind::DataChanged,
                        EventType::NodeChildrenChanged => continue,
                        EventType::Session => match event.session_state {
                            SessionState::Disconnected => return Some(SourceItem::Interrupted),
                            SessionState::SyncConnected | SessionState::ConnectedReadOnly => {
                                self.needed = Some(ResyncReason::Reconnected);
                                continue;
                            }
                            state if state.is_terminated() => {
                                // Never poll this watcher again (it panics after a terminal state).
                                self.watcher = None;
                                self.needed = Some(ResyncReason::NewSession);
                                return Some(SourceItem::Interrupted);
                            }
                            _ => continue,
                        },
                    };
                    let zxid = (event.zxid >= 0).then_some(event.zxid);
                    return Some(SourceItem::Event { kind, path: event.path, zxid });
                }
                changed = self.state.changed() => {
                    changed.ok()?;
                    let snapshot = *self.state.borrow_and_update();
                    if snapshot.epoch != self.epoch && snapshot.epoch != 0 {
                        self.watcher = None;
                        self.needed = Some(ResyncReason::NewSession);
                        return Some(SourceItem::Interrupted);
                    }
                }
            }
        }
    }

    /// Adds the watch on the current session once the framework is connected (on a new
    /// session when `reason` says so); `None` once the framework is closed.
    async fn add(&mut self, reason: ResyncReason) -> Option<()> {
        let mut pause = Duration::from_millis(50);
        loop {
            let snapshot = *self.state.borrow_and_update();
            if self.framework.is_closed() {
                return None;
            }
            let ready =
                snapshot.state.is_connected() && (reason != ResyncReason::NewSession || snapshot.epoch != self.epoch);
            if !ready {
                self.state.changed().await.ok()?;
                continue;
            }
            match add_watch(&self.framework, &self.path, self.mode).await {
                // The old watcher (if any) goes only now: with the new one in place the
                // client sends no RemoveWatches for the path.
                Ok((watcher, epoch)) => {
                    self.watcher = Some(watcher);
                    self.epoch = epoch;
                    return Some(());
                }
                Err(crate::Error::Closed) => return None,
                Err(e) => {
                    if e.is_connection_error() || e.is_session_lost() {
                        tracing::debug!(path = %self.path, error = %e, "adding the watch failed; trying again");
                    } else {
                        tracing::warn!(path = %self.path, error = %e, "the server refused the watch; trying again");
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        changed = self.state.changed() => changed.ok()?,
                    }
                    pause = (pause * 2).min(MAX_PAUSE);
                }
            }
        }
    }
}
