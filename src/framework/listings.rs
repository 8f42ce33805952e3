//! Children listings of one directory, shared by the callers of one session that need one at
//! the same time.
//!
//! A thousand tasks queueing on one lock through one session each list the lock directory
//! right after their create: a thousand replies of up to a thousand names each, which the
//! server serializes and the client decodes and sorts a thousand times over. Instead, per
//! session, at most a few listings of a directory are in flight ([`IN_FLIGHT`]); callers
//! arriving while all of them are join the next one, which is sent once a reply is in (or a
//! caller dropped its listing), and sorted once for all of them. Below that, each caller's
//! listing is sent at once, as it always was.
//!
//! Why a shared reply is as good as one's own: what a caller relies on is that its listing was
//! sent after everything it did before asking (its create was sent; the watch event it reacts
//! to was delivered). A batch is sent only after every caller that joined it has asked, so its
//! request follows all of theirs on the session's connection, ZooKeeper answers a session's
//! requests in order, and the reply reflects each joiner's create (and every change whose
//! notification reached the session before).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures::future::{BoxFuture, Either, FutureExt, Shared, WeakShared};
use tokio::sync::Notify;
use zookeeper_client::Client;

use super::errors::Observer;
use crate::error::ZkError;
use crate::framework::metrics::Op;
use crate::sync::Mutex;

/// A listing's reply: the children, sorted by the caller's order.
pub(crate) type Listing = Result<Arc<Vec<String>>, ZkError>;

type Batch = Shared<BoxFuture<'static, Listing>>;

/// A directory, and the name of the order its listings are sorted in.
type Key = (String, &'static str);

/// Listings of one directory a session may have in flight before callers share one. A few
/// waiters of one lock in a session (a task re-queueing while the next holder lists) list at
/// once, as each would alone: waiting for another's reply costs up to a round trip on a
/// handoff. Beyond this, sharing saves more than it costs.
const IN_FLIGHT: usize = 4;

/// Directories beyond this many are looked over for entries left idle by dropped callers.
const FORGET_ABOVE: usize = 64;

/// The shared listings of one session.
#[derive(Default)]
pub(crate) struct Listings {
    dirs: Mutex<HashMap<Key, Dir>>,
    /// Notified whenever a listing's reply is in (or it was dropped): a slot is free.
    freed: Notify,
    /// Counts the listings sent, when the session has metrics.
    observer: Option<Arc<Observer>>,
}

impl std::fmt::Debug for Listings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listings").field("directories", &self.dirs.lock().len()).finish()
    }
}

#[derive(Default)]
struct Dir {
    /// Listings sent and not answered yet.
    in_flight: usize,
    /// The next listing, not sent yet, which new callers join.
    next: Option<WeakShared<BoxFuture<'static, Listing>>>,
}

impl Dir {
    fn next(&self) -> Option<Batch> {
        self.next.as_ref().and_then(WeakShared::upgrade)
    }

    fn idle(&self) -> bool {
        self.in_flight == 0 && self.next().is_none()
    }

    /// Takes a slot for a listing about to be sent, if one is free.
    fn take_slot(&mut self, listings: &Arc<Listings>, key: &Key) -> Option<Slot> {
        (self.in_flight < IN_FLIGHT).then(|| {
            self.in_flight += 1;
            Slot { listings: listings.clone(), key: key.clone() }
        })
    }
}

/// One listing in flight; dropped when its reply is in, or with the caller's future.
struct Slot {
    listings: Arc<Listings>,
    key: Key,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut dirs = self.listings.dirs.lock();
        if let Some(dir) = dirs.get_mut(&self.key) {
            dir.in_flight = dir.in_flight.saturating_sub(1);
            if dir.idle() {
                dirs.remove(&self.key);
            }
        }
        drop(dirs);
        self.listings.freed.notify_waiters();
    }
}

impl Listings {
    /// The listings of a session whose requests `observer` counts.
    pub(crate) fn counted(observer: Arc<Observer>) -> Self {
        Self { observer: Some(observer), ..Self::default() }
    }

    fn sent(&self) {
        if let Some(observer) = &self.observer {
            observer.request(Op::GetChildren);
        }
    }

    /// The children of `dir`, sorted by `sort` (callers that name the same `order` must sort
    /// alike), from a listing sent after this call; decided now (send, or join the next
    /// batch), so the call's place in the session's request order is fixed when it returns.
    pub(crate) fn list<'a>(
        self: &Arc<Self>,
        client: &'a Client,
        dir: &str,
        order: &'static str,
        sort: impl FnOnce(&mut Vec<String>) + Send + 'static,
    ) -> impl Future<Output = Listing> + Send + 'a {
        let key: Key = (dir.to_owned(), order);
        let mut dirs = self.dirs.lock();
        if dirs.len() > FORGET_ABOVE {
            dirs.retain(|_, dir| !dir.idle()); // left by dropped callers
        }
        let entry = dirs.entry(key.clone()).or_default();
        if let Some(batch) = entry.next() {
            return Either::Left(batch);
        }
        if let Some(slot) = entry.take_slot(self, &key) {
            self.sent();
            let sent = client.list_children(dir);
            drop(dirs);
            return Either::Right(
                async move {
                    let reply = sent.await;
                    drop(slot);
                    reply.map(|children| sorted(children, sort))
                }
                .boxed(),
            );
        }
        let (listings, client) = (self.clone(), client.clone());
        let batch = async move {
            let (slot, sent) = loop {
                let freed = listings.freed.notified();
                {
                    let mut dirs = listings.dirs.lock();
                    let entry = dirs.entry(key.clone()).or_default();
                    if let Some(slot) = entry.take_slot(&listings, &key) {
                        entry.next = None; // no one joins once it is sent
                        listings.sent();
                        break (slot, client.list_children(&key.0));
                    }
                }
                freed.await;
            };
            let reply = sent.await;
            drop(slot);
            reply.map(|children| sorted(children, sort))
        }
        .boxed()
        .shared();
        entry.next = batch.downgrade();
        Either::Left(batch)
    }
}

fn sorted(mut children: Vec<String>, sort: impl FnOnce(&mut Vec<String>)) -> Arc<Vec<String>> {
    sort(&mut children);
    Arc::new(children)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_limited_and_freed() {
        let listings = Arc::new(Listings::default());
        let key: Key = ("/lock".to_owned(), "lock-");
        let mut dir = Dir::default();
        assert!(dir.idle());
        let slots: Vec<Slot> = (0..IN_FLIGHT).map_while(|_| dir.take_slot(&listings, &key)).collect();
        assert_eq!(slots.len(), IN_FLIGHT);
        assert!(dir.take_slot(&listings, &key).is_none(), "no slot beyond the limit");
        assert!(!dir.idle());
    }
}
