//! Watching, in one place: the only code that adds a persistent watch on the client and keeps
//! it added through reconnects and new sessions.
//!
//! - [`session`]: [`SessionWatch`](session::SessionWatch), one persistent or persistent
//!   recursive watch on the framework's session (or on one session), polled by its owner:
//!   events in server order, `Interrupted` when events may be missed, `Resync` each time the
//!   watch is in place again. Every caller goes through it: [`Framework::watch`]'s stream,
//!   the caches' and the lock directories' mirrors, shared values and atomic values.
//! - [`stream`]: the public [`PersistentWatch`] stream over one session watch.
//! - [`oneshot`]: a persistent watch emulated with one-shot watches, which a session watch
//!   turns into where the server has no persistent watches and its owner allows it (the
//!   caches: Curator's `CuratorCacheBridge` falls back to a `TreeCache` there).
//! - `probe`: the test seams of the watches and of the mirrors over them (a no-op outside
//!   the `testing` feature).
//!
//! [`Framework::watch`]: crate::Framework::watch
//! [`PersistentWatch`]: crate::PersistentWatch

pub(crate) mod oneshot;
pub(crate) mod probe;
pub(crate) mod session;
pub(crate) mod stream;

pub(crate) use self::oneshot::Depth;
pub(crate) use self::session::{Bound, SessionWatch, WatchItem};

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use zookeeper_client::{OneshotWatcher, SessionState, WatchedEvent};

/// The event of one of the client's one-shot watches. A client's task tells its watchers when
/// its session ends; one stopped before it could (the framework stops a closing session's task
/// that does not end by itself) drops them untold, and zookeeper-client's receiver panics then:
/// that is a `Closed` session event here.
pub(crate) async fn fired(watcher: OneshotWatcher) -> WatchedEvent {
    match AssertUnwindSafe(watcher.changed()).catch_unwind().await {
        Ok(event) => event,
        Err(_) => WatchedEvent::new_session(SessionState::Closed),
    }
}
