//! The data watch on one of our lock nodes, kept for as long as the node and its session last:
//! what guards' `lost()` (a deletion) and revocation (a data change) are told by.
//!
//! A node whose session mirrors its directory (`dir_mirror.rs`) is watched through the mirror
//! instead ([`MirrorSeat`]): its deletion costs no request at all, and a revocable node costs
//! one plain `getData` when it starts and one per data change (and after each relisting,
//! which may hide a change made while the connection was down), with no watch of its own.
//!
//! The watch is set again after every data change, and after a failure the retry policy gave
//! up on while the session may still live (a cut connection): it waits until the framework is
//! connected again and sets it again, so a node deleted later is still noticed. It ends only
//! when the node is deleted, its session is over, or the server refuses to let us read it.

use std::sync::Arc;
use std::time::Duration;

use zookeeper_client::{EventType, Stat};

use super::dir_mirror::{Asker, DirMirror, Presence};
use crate::error::{is_zk_retryable, is_zk_session_lost, ZkError};
use crate::framework::metrics::Op;
use crate::framework::{ConnectionState, Framework};
use crate::path;
use crate::retry::{Doubling, RetryLoop};

/// A node's place on its session's mirror of its directory: the mirror, and what the node
/// knows about its presence there (created before `asker` was made; seen in the view once).
#[derive(Debug, Clone)]
pub(crate) struct MirrorSeat {
    pub(crate) mirror: Arc<DirMirror>,
    pub(crate) asker: Asker,
}

impl MirrorSeat {
    /// A seat for a node whose create's reply has come (the asker is made now).
    pub(crate) fn after_create(mirror: &Arc<DirMirror>) -> Self {
        MirrorSeat { mirror: mirror.clone(), asker: mirror.asker() }
    }

    /// Whether the mirror knows the node at `full_path` is gone (no request, no wait).
    pub(crate) fn knows_gone(&self, full_path: &str) -> bool {
        self.mirror.knows_gone(path::node_name(full_path), &self.asker)
    }
}

/// Why a node's watch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// The node was deleted (released, or deleted by someone).
    Deleted,
    /// The node's session is over (lost, replaced, or the framework closed).
    SessionOver,
    /// The server refused to let us read the node (for example `NoAuth`): nothing more can be
    /// learned about it.
    Unwatchable,
}

/// The pause between attempts to set the watch again once the retry policy gave up: 100 ms
/// doubling up to 5 s, so a connection that comes back but keeps failing is not hammered.
const REARM: Doubling = Doubling { first: Duration::from_millis(100), max: Duration::from_secs(5) };

/// Watches the node at `full_path` (of session `epoch`) until it is deleted or its session
/// ends: through `seat`'s mirror when it has one that runs, the classic way otherwise. With
/// `reads`, every version of the data is handed to `read`, as [`watch_data`] does.
pub(crate) async fn watch_node(
    framework: &Framework,
    epoch: u64,
    full_path: &str,
    seat: Option<MirrorSeat>,
    reads: bool,
    mut read: impl FnMut(&[u8], &Stat),
) -> End {
    if let Some(seat) = seat {
        if let Some(end) = watch_on_mirror(framework, epoch, full_path, seat, reads, &mut read).await {
            return end;
        }
    }
    watch_data(framework, epoch, full_path, read).await
}

/// [`watch_node`] on the mirror; `None` once the mirror does not run (the caller watches the
/// classic way from there).
///
/// The holder is registered for its node's events before each read is sent, so a change
/// after the version a read returns wakes it. A view that cannot tell for a quarter of the
/// session timeout (our create's event not applied) asks the mirror for a resync.
async fn watch_on_mirror(
    framework: &Framework,
    epoch: u64,
    full_path: &str,
    mut seat: MirrorSeat,
    reads: bool,
    read: &mut impl FnMut(&[u8], &Stat),
) -> Option<End> {
    let name = path::node_name(full_path);
    // The session's timeout is fixed for its life; a new session ends this watch.
    let Some(timeout) = framework.client_of(epoch).map(|client| client.session_timeout()) else {
        return Some(End::SessionOver);
    };
    let mut state = framework.state_watch();
    let mut read_due = reads;
    let mut pause = RetryLoop::new(&REARM);
    loop {
        let (wake, sure) = match seat.mirror.presence(name, &mut seat.asker) {
            Presence::Unwatched => return None,
            Presence::Gone => return Some(End::Deleted),
            Presence::Present(wake) => (wake, true),
            Presence::Unsure(wake) => (wake, false),
        };
        if sure && read_due {
            let result = {
                let Some(client) = framework.client_of(epoch) else { return Some(End::SessionOver) };
                let get = || {
                    framework.observer().request(Op::GetData);
                    client.get_data(full_path)
                };
                framework.retry_loop().run(get, |e| is_zk_retryable(e) && !is_zk_session_lost(e)).await
            };
            match result {
                Ok((data, stat)) => {
                    read_due = false;
                    pause = RetryLoop::new(&REARM);
                    read(&data, &stat);
                }
                Err(ZkError::NoNode) => return Some(End::Deleted),
                Err(e) if is_zk_session_lost(&e) && framework.session_gone(epoch) => return Some(End::SessionOver),
                // A session-lost error from a client the session moved away from, or a
                // connection error: read again (through the session's client) after a pause.
                Err(error) if is_zk_retryable(&error) || is_zk_session_lost(&error) => {
                    tracing::debug!(node = %full_path, %error, "node not read; reading it again after a pause");
                }
                Err(error) => {
                    tracing::warn!(node = %full_path, %error, "cannot read the lock node; its guards stop trusting it");
                    return Some(End::Unwatchable);
                }
            }
        }
        let session_over = state.wait_for(|s| s.session_over(epoch));
        let retry = async {
            if !sure {
                tokio::time::sleep(timeout / 4).await;
            } else if read_due {
                pause.backoff().await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            biased;
            _ = session_over => return Some(End::SessionOver),
            () = wake.notified() => read_due = reads,
            () = retry => {
                if !sure {
                    seat.mirror.request_resync();
                }
            }
        }
    }
}

/// Watches the data of the node at `full_path` (of session `epoch`) until it is deleted or its
/// session ends, handing every version read to `read` (the first read included: a change
/// made before the watch was set is not missed). Never holds the session's client across a
/// wait, so it never keeps a closed framework's session open.
pub(crate) async fn watch_data(
    framework: &Framework,
    epoch: u64,
    full_path: &str,
    mut read: impl FnMut(&[u8], &Stat),
) -> End {
    let mut state = framework.state_watch();
    let mut pause = RetryLoop::new(&REARM);
    loop {
        let result = {
            let Some(client) = framework.client_of(epoch) else { return End::SessionOver };
            let get = || {
                framework.observer().request(Op::GetData);
                client.get_and_watch_data(full_path)
            };
            framework.retry_loop().run(get, |e| is_zk_retryable(e) && !is_zk_session_lost(e)).await
        };
        let watcher = match result {
            Ok((data, stat, watcher)) => {
                pause = RetryLoop::new(&REARM);
                read(&data, &stat);
                watcher
            }
            Err(ZkError::NoNode) => return End::Deleted,
            Err(e) if is_zk_session_lost(&e) && framework.session_gone(epoch) => return End::SessionOver,
            // A session-lost error from a client the session moved away from, or a connection
            // error the retry policy gave up on: watch again through the session's client.
            Err(error) if is_zk_retryable(&error) || is_zk_session_lost(&error) => {
                // The retry policy gave up, but the session may live on: watch again once the
                // framework is connected (or stop when the session is over).
                tracing::debug!(node = %full_path, %error, "node watch not set; setting it again once connected");
                let back = state.wait_for(|s| s.session_over(epoch) || s.state.is_connected());
                match back.await.map(|s| *s) {
                    Ok(s) if s.epoch == epoch && s.state != ConnectionState::Lost => {}
                    _ => return End::SessionOver,
                }
                pause.backoff().await;
                continue;
            }
            Err(error) => {
                tracing::warn!(node = %full_path, %error, "cannot watch the lock node; its guards stop trusting it");
                return End::Unwatchable;
            }
        };
        let session_over = state.wait_for(|s| s.session_over(epoch));
        tokio::select! {
            // The session's end first: a watcher of a client whose task is gone is never
            // polled again.
            biased;
            _ = session_over => return End::SessionOver,
            event = crate::watch::fired(watcher) => match event.event_type {
                EventType::NodeDeleted => return End::Deleted,
                // The watcher's client ended: the session may live on another client (it
                // moved to the ensemble's current members); reading again tells.
                EventType::Session => {}
                _ => {} // the data changed: read it again
            },
        }
    }
}
