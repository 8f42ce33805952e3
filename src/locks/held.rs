//! The one release core: a lock node this process holds, and what happens when it is let go.
//!
//! Every guard of every recipe ends in a [`HeldNode`]. `release().await` deletes the node and
//! reports the outcome; `Drop` sends the delete on the session at once (so it is ordered before
//! any request made after the drop) and leaves the reply to the framework's reaper. Neither
//! path blocks, spawns or needs a runtime in `Drop`.

use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::EventType;

use crate::error::{is_zk_connection_error, is_zk_session_lost, Error, Result, ZkError};
use crate::framework::{ConnectionState, Framework, ReaperCmd};

/// A lock or lease node held by this process.
#[derive(Debug)]
pub(crate) struct HeldNode {
    framework: Framework,
    /// Full server path of the node (namespace included).
    full_path: String,
    /// The session (epoch) that created it.
    epoch: u64,
    /// The node's creation zxid: the fencing token.
    czxid: i64,
    released: bool,
}

impl HeldNode {
    pub(crate) fn new(framework: Framework, full_path: String, epoch: u64, czxid: i64) -> Self {
        Self { framework, full_path, epoch, czxid, released: false }
    }

    /// A copy for observing (`is_held`, `lost`) that never deletes anything.
    pub(crate) fn observer(&self) -> HeldNode {
        HeldNode {
            framework: self.framework.clone(),
            full_path: self.full_path.clone(),
            epoch: self.epoch,
            czxid: self.czxid,
            released: true,
        }
    }

    /// The node's path as the user sees it (namespace stripped).
    pub(crate) fn user_path(&self) -> &str {
        self.framework.unfix_path(&self.full_path)
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    pub(crate) fn fencing_token(&self) -> i64 {
        self.czxid
    }

    /// Whether the lock can still be trusted: its session is current and the connection state
    /// is not an error state under the framework's error policy.
    pub(crate) fn is_held(&self) -> bool {
        let snapshot = self.framework.snapshot();
        snapshot.epoch == self.epoch
            && !snapshot.state.is_error_state(self.framework.error_policy())
            && !self.framework.is_closed()
    }

    /// Whether the session that created the node is over (`Lost`, replaced by a new session,
    /// or the framework closed): the node, and the lock, went with it.
    pub(crate) fn session_ended(&self) -> bool {
        let snapshot = self.framework.snapshot();
        snapshot.epoch != self.epoch || snapshot.state == ConnectionState::Lost || self.framework.is_closed()
    }

    /// Completes when the lock can no longer be trusted: an error state under the policy, a
    /// new session, or the node deleted (or its data watch ended by the session's end).
    /// Completes at its first poll when [`is_held`](Self::is_held) is already false (which also
    /// covers a framework whose task was starved), without waiting on any request.
    pub(crate) async fn lost(&self) {
        if !self.is_held() {
            return;
        }
        let policy = self.framework.error_policy();
        let epoch = self.epoch;
        let mut state = self.framework.state_watch();
        let state_says_lost = async move {
            let _ = state.wait_for(|s| s.epoch != epoch || s.state.is_error_state(policy)).await;
        };
        tokio::select! {
            () = state_says_lost => {}
            () = self.node_gone() => {}
        }
    }

    /// Completes when the node is deleted or its session ends.
    async fn node_gone(&self) {
        let mut delay = Duration::from_millis(50);
        loop {
            let Some(client) = self.framework.inner().client_of(self.epoch) else { return };
            match client.get_and_watch_data(&self.full_path).await {
                Err(ZkError::NoNode) => return,
                Err(e) if is_zk_connection_error(&e) => {
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(1));
                }
                Err(_) => return,
                Ok((_, _, watcher)) => {
                    let event = watcher.changed().await;
                    if matches!(event.event_type, EventType::NodeDeleted | EventType::Session) {
                        return;
                    }
                }
            }
        }
    }

    /// Deletes the node now, retrying connection loss under the retry policy. A node whose
    /// session is gone counts as released (the server deleted it).
    ///
    /// On failure the delete is handed to the reaper and the error returned.
    pub(crate) async fn release(mut self) -> Result<()> {
        let started = Instant::now();
        let mut attempt = 0u32;
        loop {
            let Some(client) = self.framework.inner().client_of(self.epoch) else {
                self.released = true;
                return Ok(());
            };
            match client.delete(&self.full_path, None).await {
                Ok(()) | Err(ZkError::NoNode) => {
                    self.released = true;
                    return Ok(());
                }
                Err(e) if is_zk_session_lost(&e) => {
                    self.released = true;
                    return Ok(());
                }
                Err(e) if is_zk_connection_error(&e) => match self.framework.retry_delay(attempt, started) {
                    Some(delay) => {
                        attempt += 1;
                        tokio::time::sleep(delay).await;
                    }
                    None => {
                        self.hand_to_reaper();
                        return Err(e.into());
                    }
                },
                Err(e) => {
                    self.hand_to_reaper();
                    return Err(Error::from(e));
                }
            }
        }
    }

    fn hand_to_reaper(&mut self) {
        self.released = true;
        let cmd = ReaperCmd::Delete { path: std::mem::take(&mut self.full_path), epoch: self.epoch };
        self.framework.inner().reap(cmd);
    }
}

impl Drop for HeldNode {
    fn drop(&mut self) {
        if !self.released {
            self.framework.inner().delete_in_background(std::mem::take(&mut self.full_path), self.epoch);
        }
    }
}
