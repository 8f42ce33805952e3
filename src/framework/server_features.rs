//! What the server of the current session supports (3.5 or 3.6+), learned once per session
//! without four-letter words (servers often disable them).
//!
//! The probe is one `getEphemerals` request (ZooKeeper 3.6+) for a prefix under which the
//! session has no nodes: a read, allowed on read-only servers, with no effect on the server
//! and no watch to clean up. A 3.5 server answers `Unimplemented`. The recipes send only this
//! probe; `Framework::server_info` also confirms persistent watches once per session with an
//! `addWatch` on a probe path of its own (removed again: no other watch of the session is on
//! that path, so the removal cannot take one with it, as it could on a shared path on 3.6-3.8).
//! The answer holds for the session it was asked on; a session that started read-only and
//! moved to a read-write server asks again.
//!
//! What it decides: persistent watches (`Framework::watch`) need 3.6, and so does the lock
//! fast path (its reasoning needs 3.6's exact child count). A persistent watch also learns
//! from its own `addWatch`: any refusal (3.5's `Unimplemented`, or `MarshallingError` from a
//! server configured with `WatchManagerOptimized`, which has no persistent watches) is
//! recorded for the session.

use std::time::Duration;

use zookeeper_client::AddWatchMode;

use super::metrics::Op;
use super::{ConnectionState, Framework};
use crate::error::{is_zk_connection_error, is_zk_session_lost, Error, Result, ZkError};
use crate::watch::session::refuses_persistent_watches;

/// A path under which no session has ephemeral nodes (nothing may be created under
/// `/zookeeper`).
const PROBE_PREFIX: &str = "/zookeeper/zk-recipes-probe";

/// What a server supports, as far as this crate cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ServerFeatures {
    /// `addWatch` (persistent and persistent-recursive watches): 3.6+.
    pub(crate) persistent_watches: bool,
    /// A directory's child count survives restarts exactly (the sequential suffix never
    /// repeats): 3.6+.
    pub(crate) exact_child_count: bool,
}

impl ServerFeatures {
    /// ZooKeeper 3.6 and later.
    pub(crate) const SINCE_3_6: ServerFeatures = ServerFeatures { persistent_watches: true, exact_child_count: true };
    /// ZooKeeper 3.5 (or a server that refuses what 3.6 implements).
    pub(crate) const BEFORE_3_6: ServerFeatures =
        ServerFeatures { persistent_watches: false, exact_child_count: false };
}

/// What a framework knows of the server its current session is connected to
/// ([`Framework::server_info`]); the recipes decide by it which server features to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerInfo {
    /// The session the answer is about (its epoch: 1 for the first session).
    pub epoch: u64,
    /// The connection is to a read-only server (writes are refused there).
    pub read_only: bool,
    /// Persistent and persistent-recursive watches (`addWatch`, ZooKeeper 3.6+): caches,
    /// [`Framework::watch`] and the lock mirror need them (and fall back to one-shot watches,
    /// or refuse, without them). False on ZooKeeper 3.5, and on a server whose watch manager
    /// refuses them (`WatchManagerOptimized`, which answers the version probe as 3.6+):
    /// `server_info` asks once per session with an `addWatch` on a probe path of its own under
    /// `/zookeeper`, removed again (no other watch of the session is on that path, so the
    /// removal touches none).
    pub persistent_watches: bool,
    /// ZooKeeper 3.6 or later: the one request the probe sends (`getEphemerals`) exists
    /// there, and a directory's child count survives restarts exactly (what the lock fast
    /// path and the mirror's witness rest on).
    pub since_3_6: bool,
    /// The oldest ZooKeeper release whose answers match the server's: `(3, 6)` when it serves
    /// `getEphemerals`, `(3, 5)` otherwise. This is all the protocol tells: no request answers
    /// with the server's version, and the four-letter word that does (`srvr`) goes over a
    /// connection of its own to a server chosen by the caller, while zookeeper-client does not
    /// say which server of the ensemble the session is on (and servers often disable four-letter
    /// words, or accept only TLS). `/zookeeper/config` holds the ensemble's configuration; its
    /// `version` is the configuration's, not the server's.
    pub min_version: (u32, u32),
}

/// What the probe's answer says about the server; `None` when it says nothing (no answer:
/// ask again later).
pub(crate) fn from_probe(answer: std::result::Result<(), &ZkError>) -> Option<ServerFeatures> {
    match answer {
        Ok(()) => Some(ServerFeatures::SINCE_3_6),
        Err(e) if is_zk_connection_error(e) || is_zk_session_lost(e) => None,
        Err(ZkError::Throttled | ZkError::SessionMoved) => None,
        // 3.5's answer; any other refusal of a request that 3.6 serves to every session means
        // the server is not one to trust with 3.6 semantics either.
        Err(_) => Some(ServerFeatures::BEFORE_3_6),
    }
}

/// Whether the lock fast path may run: configured on, and the session's server known to
/// count children exactly. While the server is not known, it may not.
pub(crate) fn fast_path_allowed(configured: bool, known: Option<ServerFeatures>) -> bool {
    configured && known.is_some_and(|features| features.exact_child_count)
}

/// What is known about the server of one session.
#[derive(Debug, Default)]
pub(crate) struct Knowledge {
    /// The session (epoch) and whether it was read-only when this was learned.
    key: (u64, bool),
    /// The probe's answer.
    learned: Learned,
    /// An `addWatch` was refused on the session (whatever the probe says or will say).
    refused: bool,
    /// `server_info()` asked with an `addWatch` of its own, and the server accepted it.
    confirmed: bool,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Learned {
    #[default]
    Unknown,
    Probing,
    Known(ServerFeatures),
}

impl Knowledge {
    /// What is known for session `key` (forgetting what was known for another).
    fn for_session(&mut self, key: (u64, bool)) -> Learned {
        if self.key != key {
            *self = Knowledge { key, learned: Learned::Unknown, refused: false, confirmed: false };
        }
        match self.learned {
            Learned::Known(features) if self.refused => {
                Learned::Known(ServerFeatures { persistent_watches: false, ..features })
            }
            learned => learned,
        }
    }

    fn set(&mut self, key: (u64, bool), learned: Learned) {
        if self.key == key {
            self.learned = learned;
        }
    }

    /// Whether session `key`'s server refused an `addWatch`.
    fn refused(&mut self, key: (u64, bool)) -> bool {
        self.for_session(key);
        self.refused
    }

    fn note_refused(&mut self, key: (u64, bool)) {
        self.for_session(key);
        self.refused = true;
    }

    /// Whether session `key`'s persistent watches are settled: confirmed by an `addWatch` of
    /// `server_info()`'s, or known refused.
    fn settled(&mut self, key: (u64, bool)) -> bool {
        self.for_session(key);
        self.confirmed || self.refused
    }

    fn note_confirmed(&mut self, key: (u64, bool)) {
        self.for_session(key);
        self.confirmed = true;
    }
}

impl Framework {
    /// Which session the server knowledge is about: its epoch, and whether it is read-only
    /// now (a read-only session that reaches a read-write server becomes another session).
    fn server_key(&self) -> (u64, bool) {
        (self.epoch(), self.state() == ConnectionState::ReadOnly)
    }

    /// What the current session's server supports, if known; otherwise `None`, and the
    /// probe is sent in the background (once per session).
    pub(crate) fn server_features_now(&self) -> Option<ServerFeatures> {
        let key = self.server_key();
        let registry = self.registry();
        let mut knowledge = registry.server.lock();
        match knowledge.for_session(key) {
            Learned::Known(features) => return Some(features),
            Learned::Probing => return None,
            Learned::Unknown => {}
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return None };
        knowledge.set(key, Learned::Probing);
        drop(knowledge);
        let framework = self.clone();
        runtime.spawn(async move {
            let learned = framework.probe_server().await.map_or(Learned::Unknown, Learned::Known);
            framework.registry().server.lock().set(key, learned);
        });
        None
    }

    /// Whether the lock fast path may run on the current session (configured on, and the
    /// server known to be 3.6+). Sends the probe when the server is not known yet.
    pub(crate) fn server_supports_fast_path(&self) -> bool {
        let configured = self.config().fast_path;
        fast_path_allowed(configured, configured.then(|| self.server_features_now()).flatten())
    }

    /// Whether persistent watches are known to be refused on the current session.
    pub(crate) fn server_refuses_persistent_watches(&self) -> bool {
        let key = self.server_key();
        let registry = self.registry();
        let mut knowledge = registry.server.lock();
        let learned = knowledge.for_session(key);
        knowledge.refused(key) || matches!(learned, Learned::Known(features) if !features.persistent_watches)
    }

    /// The session `epoch`'s server refused an `addWatch`: it has no persistent watches
    /// (whatever the probe, which asks about the version, answers).
    pub(crate) fn note_persistent_watches_refused(&self, epoch: u64) {
        let key = self.server_key();
        if key.0 == epoch {
            self.registry().server.lock().note_refused(key);
        }
    }

    /// What the framework knows of the server of its current session, asking it first if
    /// that is not known yet (one `getEphemerals` per session, and one `addWatch` on a probe
    /// path, removed again, to confirm persistent watches; no four-letter word, which servers
    /// often refuse).
    ///
    /// # Errors
    /// [`Error::NotStarted`](crate::Error::NotStarted) or [`Error::Closed`](crate::Error::Closed);
    /// a connection error when the server does not answer within the session timeout.
    ///
    /// # Cancel safety
    /// Cancel-safe: the questions change nothing on the server but the probe path's watch; a
    /// cancelled call leaves the answer unknown, and the next call asks again (a watch on the
    /// probe path left by a cancelled `addWatch` goes with the session).
    pub async fn server_info(&self) -> Result<ServerInfo> {
        let key = self.server_key();
        let known = match self.registry().server.lock().for_session(key) {
            Learned::Known(features) => Some(features),
            Learned::Unknown | Learned::Probing => None,
        };
        let features = match known {
            Some(features) => features,
            None => {
                self.session()?;
                let features = self.probe_server().await.ok_or(Error::ZooKeeper(ZkError::ConnectionLoss))?;
                let mut knowledge = self.registry().server.lock();
                if let Learned::Known(known) = knowledge.for_session(key) {
                    known
                } else {
                    knowledge.set(key, Learned::Known(features));
                    // With an `addWatch` refused meanwhile.
                    match knowledge.for_session(key) {
                        Learned::Known(known) => known,
                        _ => features,
                    }
                }
            }
        };
        let persistent_watches = features.persistent_watches && self.confirm_persistent_watches(key).await;
        Ok(ServerInfo {
            epoch: key.0,
            read_only: key.1,
            persistent_watches,
            since_3_6: features.exact_child_count,
            min_version: if features.exact_child_count { (3, 6) } else { (3, 5) },
        })
    }

    /// Whether the server of session `key` keeps persistent watches, asked once per session
    /// with an `addWatch` on a path of its own (`/zookeeper/zk-recipes-probe-watch-…`, below the
    /// chroot if there is one; nothing else of the session
    /// watches it, so removing the watch again touches no other; the server refuses it when
    /// its watch manager has no persistent watches, as `WatchManagerOptimized` does, though it
    /// answers the version probe as 3.6+). No answer leaves the version probe's word.
    async fn confirm_persistent_watches(&self, key: (u64, bool)) -> bool {
        {
            let mut knowledge = self.registry().server.lock();
            if knowledge.settled(key) {
                return !knowledge.refused(key);
            }
        }
        let Ok(session) = self.session() else { return true };
        if session.epoch != key.0 {
            return true;
        }
        let path = format!("{PROBE_PREFIX}-watch-{:x}-{}", session.id(), key.0);
        let bound = self.config().session_timeout.max(Duration::from_secs(1));
        self.observer().request(Op::AddWatch);
        let added = tokio::time::timeout(bound, session.client.watch(&path, AddWatchMode::Persistent)).await;
        let mut knowledge = self.registry().server.lock();
        // The session changed meanwhile: what it learned is not this one's.
        let current = knowledge.key == key;
        match added {
            Ok(Ok(watcher)) => {
                if current {
                    knowledge.note_confirmed(key);
                }
                drop(knowledge);
                // Dropped, the watcher is removed from the server (the probe's path only).
                self.observer().request(Op::RemoveWatches);
                drop(watcher);
                true
            }
            Ok(Err(e)) if refuses_persistent_watches(&e) => {
                if current {
                    knowledge.note_refused(key);
                }
                false
            }
            _ => !(current && knowledge.refused(key)),
        }
    }

    /// Asks the current session's server; `None` without an answer.
    async fn probe_server(&self) -> Option<ServerFeatures> {
        let client = self.session().ok()?.client;
        let bound = self.config().session_timeout.max(Duration::from_secs(1));
        self.observer().request(Op::GetEphemerals);
        let answer = tokio::time::timeout(bound, client.list_ephemerals(PROBE_PREFIX)).await.ok()?;
        let features = from_probe(answer.as_ref().map(drop));
        tracing::debug!(?features, "learned what the server supports");
        features
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_answer_decides_the_features() {
        assert_eq!(from_probe(Ok(())), Some(ServerFeatures::SINCE_3_6));
        assert_eq!(from_probe(Err(&ZkError::Unimplemented)), Some(ServerFeatures::BEFORE_3_6));
        assert_eq!(from_probe(Err(&ZkError::MarshallingError)), Some(ServerFeatures::BEFORE_3_6));
        for unanswered in [ZkError::ConnectionLoss, ZkError::SessionExpired, ZkError::ClientClosed, ZkError::Throttled]
        {
            assert_eq!(from_probe(Err(&unanswered)), None, "{unanswered:?}");
        }
    }

    #[test]
    fn the_fast_path_needs_a_known_3_6_server_and_the_switch_on() {
        assert!(fast_path_allowed(true, Some(ServerFeatures::SINCE_3_6)));
        assert!(!fast_path_allowed(true, Some(ServerFeatures::BEFORE_3_6)), "3.5 can repeat a suffix");
        assert!(!fast_path_allowed(true, None), "not known yet");
        assert!(!fast_path_allowed(false, Some(ServerFeatures::SINCE_3_6)), "the builder's override");
    }

    #[test]
    fn knowledge_is_per_session() {
        let mut knowledge = Knowledge::default();
        assert_eq!(knowledge.for_session((1, false)), Learned::Unknown);
        knowledge.set((1, false), Learned::Known(ServerFeatures::SINCE_3_6));
        assert_eq!(knowledge.for_session((1, false)), Learned::Known(ServerFeatures::SINCE_3_6));
        // A stale answer for an older session is dropped.
        assert_eq!(knowledge.for_session((2, false)), Learned::Unknown);
        knowledge.set((1, false), Learned::Known(ServerFeatures::SINCE_3_6));
        assert_eq!(knowledge.for_session((2, false)), Learned::Unknown);
        // A read-only session that moved to a read-write server asks again.
        assert_eq!(knowledge.for_session((2, true)), Learned::Unknown);
        knowledge.set((2, true), Learned::Known(ServerFeatures::BEFORE_3_6));
        assert_eq!(knowledge.for_session((2, true)), Learned::Known(ServerFeatures::BEFORE_3_6));
        assert_eq!(knowledge.for_session((2, false)), Learned::Unknown);
    }

    #[test]
    fn a_refused_add_watch_outlives_the_probe_answer_of_its_session_only() {
        let mut knowledge = Knowledge::default();
        // Refused before the probe answered (a cache started at once).
        knowledge.note_refused((1, false));
        assert!(knowledge.refused((1, false)));
        assert_eq!(knowledge.for_session((1, false)), Learned::Unknown);
        knowledge.set((1, false), Learned::Known(ServerFeatures::SINCE_3_6));
        let without = ServerFeatures { persistent_watches: false, exact_child_count: true };
        assert_eq!(knowledge.for_session((1, false)), Learned::Known(without), "3.6+, without persistent watches");
        // The next session asks again.
        assert!(!knowledge.refused((2, false)));
        knowledge.set((2, false), Learned::Known(ServerFeatures::SINCE_3_6));
        assert_eq!(knowledge.for_session((2, false)), Learned::Known(ServerFeatures::SINCE_3_6));
    }
}
