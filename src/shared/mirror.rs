//! The task that keeps a shared value's local copy current on a server without persistent
//! watches ([`follow`](super::follow) is the one used elsewhere): a watched read of the node, again
//! after every change it reports, and again after every (re)connection, so that a change made
//! while the connection was down, or under a session that ended, is read in the end.
//!
//! A node that is missing is watched for its creation (an `exists` watch), so the copy follows
//! a node deleted and made again; Curator's `getData` watch is not set on a missing node, and
//! its SharedValue stops following the node then.

use tokio::sync::watch;
use tokio::task::AbortHandle;
use zookeeper_client::Stat;

use super::version::VersionedValue;
use crate::error::{Error, ZkError};
use crate::framework::{Framework, OneshotWatch, StateSnapshot};

/// Stores `(data, stat)` in `tx` when it is newer than what is there: ordered by the node's
/// `mzxid`, not its version, which wraps after `i32::MAX` writes. True when stored.
pub(crate) fn offer(tx: &watch::Sender<VersionedValue<Vec<u8>>>, data: Vec<u8>, stat: &Stat) -> bool {
    tx.send_if_modified(|current| {
        let newer = stat.mzxid > current.zxid();
        if newer {
            *current = VersionedValue::new(stat.version, stat.mzxid, data);
        }
        newer
    })
}

/// Starts the task on the current runtime. It ends when the framework closes or the returned
/// handle aborts it.
pub(crate) fn spawn(fw: Framework, path: String, tx: watch::Sender<VersionedValue<Vec<u8>>>) -> AbortHandle {
    tokio::spawn(run(fw, path, tx)).abort_handle()
}

/// What one round armed.
enum Armed {
    /// A watch on the node (its data, or its creation).
    Watch(OneshotWatch),
    /// Nothing: the read failed; wait for the next connection.
    Nothing,
}

pub(crate) async fn run(fw: Framework, path: String, tx: watch::Sender<VersionedValue<Vec<u8>>>) {
    let mut states = fw.state_watch();
    states.borrow_and_update();
    loop {
        let armed = match read(&fw, &path, &tx).await {
            Ok(armed) => armed,
            Err(Error::Closed) => return,
            Err(e) => {
                tracing::debug!(path = %path, error = %e, "shared value: read failed; waiting for a connection");
                Armed::Nothing
            }
        };
        let reconnected = next_connected(&fw, &mut states);
        match armed {
            Armed::Watch(watch) => {
                tokio::select! {
                    event = watch.changed() => {
                        if matches!(event, Err(Error::Closed)) {
                            return;
                        }
                    }
                    open = reconnected => if !open { return },
                }
            }
            Armed::Nothing => {
                if !reconnected.await {
                    return;
                }
            }
        }
        if fw.is_closed() {
            return;
        }
    }
}

/// Reads the node with a watch and stores what it found; a missing node gets an `exists`
/// watch instead (and is read at once if it appeared meanwhile).
async fn read(fw: &Framework, path: &str, tx: &watch::Sender<VersionedValue<Vec<u8>>>) -> Result<Armed, Error> {
    loop {
        match fw.get_data(path).plain().watch().await {
            Ok((data, stat, watch)) => {
                offer(tx, data, &stat);
                return Ok(Armed::Watch(watch));
            }
            Err(Error::ZooKeeper(ZkError::NoNode)) => match fw.exists(path).watch().await? {
                (None, watch) => return Ok(Armed::Watch(watch)),
                (Some(_), _) => continue,
            },
            Err(e) => return Err(e),
        }
    }
}

/// Waits until the framework reports a connected state (a reconnection, or a new session):
/// the watch may have been lost, and changes missed. False when the framework went away.
async fn next_connected(fw: &Framework, states: &mut watch::Receiver<StateSnapshot>) -> bool {
    loop {
        if states.changed().await.is_err() || fw.is_closed() {
            return false;
        }
        if states.borrow_and_update().state.is_connected() {
            return true;
        }
    }
}
