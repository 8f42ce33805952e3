//! Queues (Curator's `recipes.queue` package): [`SimpleDistributedQueue`], raw items as
//! persistent sequential `qn-` nodes under one path, and [`DistributedQueue`] with its
//! variants [`DistributedIdQueue`], [`DistributedPriorityQueue`] and [`DistributedDelayQueue`]:
//! Curator's framed items as `queue-` nodes, named and ordered per variant
//! ([`protocol::queue_names`](crate::protocol::queue_names)), at most once or (lock-safe) at
//! least once. The four `DistributedQueue` types are thin over one engine; each consumer API
//! is a take, a bounded take, a lock-safe `consume`, and a [`QueueStream`] of takes. A
//! `DistributedQueue` may be bounded (`with_max_items`), put in the background with
//! [`PutEvents`] telling the outcomes, and sharded by a [`QueueSharder`].
//!
//! Curator's warning about queues in ZooKeeper, and the item size and queue length limits
//! measured, are in [`DistributedQueue`]'s documentation.

mod delay;
mod distributed;
mod engine;
mod id;
mod priority;
mod puts;
mod sharder;
mod simple;

pub use self::delay::DistributedDelayQueue;
pub use self::distributed::DistributedQueue;
pub use self::engine::QueueStream;
pub use self::id::DistributedIdQueue;
pub use self::priority::DistributedPriorityQueue;
pub use self::puts::{PutEvent, PutEvents};
pub use self::sharder::{QueueSharder, QueueSharderPolicies};
pub use self::simple::SimpleDistributedQueue;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::error::{is_zk_connection_error, Error, Result, ZkError};
use crate::framework::metrics::Op;
use crate::framework::Framework;

/// Deletes a queue item a consumer read (at `version`, or any): true when this delete removed
/// it, false when it was gone already (another consumer took it). A delete that broke
/// mid-flight and then finds the item gone may have been this one: that is reported as
/// [`Error::OutcomeUnknown`], not as taken (its bytes would be returned twice if another
/// consumer took it) nor as gone (they would be lost without a word, as Curator loses them).
pub(crate) async fn delete_taken(fw: &Framework, item: &str, version: Option<i32>) -> Result<bool> {
    delete_taken_after(fw, item, version, false, None).await
}

/// [`delete_taken`], after an earlier delete of the item whose answer was lost when
/// `in_doubt`. `locked_in` is the epoch of the session holding the consumer's lock node on
/// the item (lock-safe mode), if that is the current session: the consumers of a lock-safe
/// queue delete an item only under its lock, so while that session lasts no other consumer
/// can take the item, and a delete on it that finds the item gone after one in doubt finds
/// this consumer's own delete done.
pub(crate) async fn delete_taken_after(
    fw: &Framework,
    item: &str,
    version: Option<i32>,
    in_doubt: bool,
    locked_in: Option<u64>,
) -> Result<bool> {
    let full = fw.full_path(item)?;
    let in_doubt = AtomicBool::new(in_doubt);
    // The session of the last try.
    let sent_in = AtomicU64::new(0);
    let result = {
        let (full, in_doubt, sent_in) = (&full, &in_doubt, &sent_in);
        fw.with_retry(|s| async move {
            s.sent(Op::Delete);
            sent_in.store(s.epoch, Ordering::Relaxed);
            let reply = s.client.delete(full, version).await;
            if matches!(&reply, Err(e) if is_zk_connection_error(e)) {
                in_doubt.store(true, Ordering::Relaxed);
            }
            reply
        })
        .await
    };
    let unknown = || Error::OutcomeUnknown { operation: "take", path: item.to_owned(), error: ZkError::ConnectionLoss };
    let under_lock = locked_in.is_some_and(|epoch| epoch == sent_in.load(Ordering::Relaxed));
    match result {
        Ok(()) => Ok(true),
        Err(Error::ZooKeeper(ZkError::NoNode)) if in_doubt.load(Ordering::Relaxed) && under_lock => Ok(true),
        Err(Error::ZooKeeper(ZkError::NoNode | ZkError::BadVersion)) if in_doubt.load(Ordering::Relaxed) => {
            Err(unknown())
        }
        Err(Error::ZooKeeper(ZkError::NoNode | ZkError::BadVersion)) => Ok(false),
        Err(e) if e.is_connection_error() => Err(unknown()),
        Err(e) => Err(e),
    }
}
