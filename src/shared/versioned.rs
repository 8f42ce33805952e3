//! Compare-and-set writes whose outcome after a connection loss is settled, when it can be,
//! by reading the node back: the one place the value recipes decide "applied", "not applied"
//! or "unknown".
//!
//! A versioned `setData(v)` that broke mid-flight and, sent again, finds another version may
//! have been applied by its first send. Reading back proves it was **not** when the node is
//! at `v + 1` with other bytes than ours: only one write at `v` can succeed, and it was not
//! ours. Everything else (our bytes at `v + 1`: another writer may have written the same
//! bytes, as two increments of one value do; a later version; no node) cannot be told apart
//! from our own success and is reported as [`Error::OutcomeUnknown`]. A create that found a
//! node after a connection loss is settled the same way (version 0 with other bytes: not
//! ours).

use std::sync::atomic::{AtomicBool, Ordering};

use zookeeper_client::Stat;

use crate::error::{is_zk_connection_error, Error, Result, ZkError};
use crate::framework::metrics::Op;
use crate::framework::Framework;

/// What a compare-and-set did.
#[derive(Debug)]
pub(crate) enum Cas {
    /// Written; the node's stat after the write.
    Written(Stat),
    /// Not written: the node was at another version (or went away).
    Conflict,
}

/// The error for a write whose outcome cannot be known.
fn unknown(operation: &'static str, path: &str) -> Error {
    Error::OutcomeUnknown { operation, path: path.to_owned(), error: ZkError::ConnectionLoss }
}

/// `setData(path, data, version)`, retried under the framework's policy, with the outcome
/// settled as the module says. `version` may be any version a node can have (versions wrap to
/// negative numbers after `i32::MAX` writes) except -1, which ZooKeeper reads as "any".
///
/// # Errors
/// [`Error::InvalidArgument`] for version -1; [`Error::TooLarge`]; [`Error::OutcomeUnknown`];
/// the server's refusals other than `BadVersion` and `NoNode` (`NoAuth`, ...).
pub(crate) async fn set_versioned(
    fw: &Framework,
    path: &str,
    data: &[u8],
    version: i32,
    operation: &'static str,
) -> Result<Cas> {
    if version == -1 {
        return Err(Error::invalid_argument(
            "version",
            "-1 cannot be compared and set: ZooKeeper reads it as any version (the node's version wrapped)",
        ));
    }
    let full = fw.full_path(path)?;
    let limit = fw.config().max_request_bytes.saturating_sub(full.len() + 20);
    if data.len() > limit {
        return Err(Error::TooLarge { name: "data", size: data.len(), limit });
    }
    let in_doubt = AtomicBool::new(false);
    let result = {
        let (full, in_doubt) = (&full, &in_doubt);
        fw.with_retry(|s| async move {
            s.sent(Op::SetData);
            let reply = s.client.set_data(full, data, Some(version)).await;
            if matches!(&reply, Err(e) if is_zk_connection_error(e)) {
                in_doubt.store(true, Ordering::Relaxed);
            }
            reply
        })
        .await
    };
    let doubt = in_doubt.load(Ordering::Relaxed);
    match result {
        Ok(stat) => Ok(Cas::Written(stat)),
        Err(Error::ZooKeeper(ZkError::BadVersion | ZkError::NoNode)) if !doubt => Ok(Cas::Conflict),
        Err(Error::ZooKeeper(ZkError::BadVersion)) => match fw.get_data(path).plain().await {
            Ok((found, stat)) if stat.version == version.wrapping_add(1) && found != data => Ok(Cas::Conflict),
            Ok(_) | Err(Error::ZooKeeper(ZkError::NoNode)) => Err(unknown(operation, path)),
            Err(e) => Err(e),
        },
        Err(e) if doubt && (e.is_retryable() || e.is_no_node()) => Err(unknown(operation, path)),
        Err(e) => Err(e),
    }
}

/// What a create of a value node did.
#[derive(Debug)]
pub(crate) enum Create {
    /// Created.
    Created,
    /// Someone else's node is there.
    Exists,
}

/// Creates the persistent node `path` holding `data` (missing parents as containers), with
/// the outcome settled as the module says.
///
/// # Errors
/// [`Error::OutcomeUnknown`]; the create's other errors.
pub(crate) async fn create_value(fw: &Framework, path: &str, data: &[u8], operation: &'static str) -> Result<Create> {
    match fw.create(path).plain().data(data).await {
        Ok(_) => Ok(Create::Created),
        Err(Error::ZooKeeper(ZkError::NodeExists)) => Ok(Create::Exists),
        Err(Error::OutcomeUnknown { .. }) => match fw.get_data(path).plain().await {
            Ok((found, stat)) if stat.version == 0 && found != data => Ok(Create::Exists),
            Ok(_) | Err(Error::ZooKeeper(ZkError::NoNode)) => Err(unknown(operation, path)),
            Err(e) => Err(e),
        },
        Err(e) if e.is_connection_error() => Err(unknown(operation, path)),
        Err(e) => Err(e),
    }
}
