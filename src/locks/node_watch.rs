//! The data watch on one of our lock nodes, kept for as long as the node and its session last:
//! what guards' `lost()` (a deletion) and revocation (a data change) are told by.
//!
//! The watch is set again after every data change, and after a failure the retry policy gave
//! up on while the session may still live (a cut connection): it waits until the framework is
//! connected again and sets it again, so a node deleted later is still noticed. It ends only
//! when the node is deleted, its session is over, or the server refuses to let us read it.

use std::time::Duration;

use zookeeper_client::{EventType, Stat};

use crate::error::{is_zk_retryable, is_zk_session_lost, ZkError};
use crate::framework::{ConnectionState, Framework};
use crate::retry::{Doubling, RetryLoop};

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
            let get = || client.get_and_watch_data(full_path);
            framework.retry_loop().run(get, |e| is_zk_retryable(e) && !is_zk_session_lost(e)).await
        };
        let watcher = match result {
            Ok((data, stat, watcher)) => {
                pause = RetryLoop::new(&REARM);
                read(&data, &stat);
                watcher
            }
            Err(ZkError::NoNode) => return End::Deleted,
            Err(e) if is_zk_session_lost(&e) => return End::SessionOver,
            Err(error) if is_zk_retryable(&error) => {
                // The retry policy gave up, but the session may live on: watch again once the
                // framework is connected (or stop when the session is over).
                tracing::debug!(node = %full_path, %error, "node watch not set; setting it again once connected");
                let back =
                    state.wait_for(|s| s.epoch != epoch || s.state == ConnectionState::Lost || s.state.is_connected());
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
        let session_over = state.wait_for(|s| s.epoch != epoch || s.state == ConnectionState::Lost);
        tokio::select! {
            // The session's end first: a watcher of a client whose task is gone is never
            // polled again.
            biased;
            _ = session_over => return End::SessionOver,
            event = watcher.changed() => match event.event_type {
                EventType::NodeDeleted => return End::Deleted,
                EventType::Session => return End::SessionOver,
                _ => {} // the data changed: read it again
            },
        }
    }
}
