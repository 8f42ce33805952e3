//! Children listings of one directory, shared by the callers of one session that need one at
//! the same time.
//!
//! A thousand tasks queueing on one lock through one session each list the lock directory
//! right after their create: a thousand replies of up to a thousand names each, which the
//! server serializes and the client decodes and sorts a thousand times over. Instead, per
//! session, at most one listing of a directory is in flight; callers arriving while it is join
//! the next one, which is sent once the reply to the current one is in (or it was dropped),
//! and sorted once for all of them. A lone caller's listing is sent at once, as before.
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
use tokio::sync::watch;
use zookeeper_client::Client;

use crate::error::ZkError;
use crate::sync::Mutex;

/// A listing's reply: the children, sorted by the caller's order.
pub(crate) type Listing = Result<Arc<Vec<String>>, ZkError>;

type Batch = Shared<BoxFuture<'static, Listing>>;

/// A directory, and the name of the order its listings are sorted in.
type Key = (String, &'static str);

/// Directories beyond this many are looked over for entries left idle by dropped callers.
const FORGET_ABOVE: usize = 64;

/// The shared listings of one session.
#[derive(Default)]
pub(crate) struct Listings {
    dirs: Mutex<HashMap<Key, Dir>>,
}

impl std::fmt::Debug for Listings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listings").field("directories", &self.dirs.lock().len()).finish()
    }
}

#[derive(Default)]
struct Dir {
    /// Closed when the listing in flight has its reply or was dropped.
    in_flight: Option<watch::Receiver<()>>,
    /// The next listing, not sent yet, which new callers join.
    next: Option<WeakShared<BoxFuture<'static, Listing>>>,
}

impl Dir {
    fn busy(&self) -> Option<watch::Receiver<()>> {
        self.in_flight.as_ref().filter(|done| done.has_changed().is_ok()).cloned()
    }

    fn next(&self) -> Option<Batch> {
        self.next.as_ref().and_then(WeakShared::upgrade)
    }
}

impl Listings {
    /// The children of `dir`, sorted by `sort` (callers that name the same `order` must sort
    /// alike), from a listing sent after
    /// this call; decided now (send, or join the next batch), so the call's place in the
    /// session's request order is fixed when it returns.
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
            dirs.retain(|_, dir| dir.busy().is_some() || dir.next().is_some()); // left by dropped callers
        }
        let entry = dirs.entry(key.clone()).or_default();
        if let Some(batch) = entry.next() {
            return Either::Left(batch);
        }
        match entry.busy() {
            None => {
                let (done, in_flight) = watch::channel(());
                entry.in_flight = Some(in_flight);
                let sent = client.list_children(dir);
                drop(dirs);
                let listings = self.clone();
                Either::Right(
                    async move {
                        let reply = sent.await;
                        listings.finish(&key, done);
                        reply.map(|children| sorted(children, sort))
                    }
                    .boxed(),
                )
            }
            Some(mut busy) => {
                let (listings, client) = (self.clone(), client.clone());
                let batch = async move {
                    let _ = busy.changed().await; // closed: the listing ahead is done
                    let (done, sent) = {
                        let mut dirs = listings.dirs.lock();
                        let entry = dirs.entry(key.clone()).or_default();
                        let (done, in_flight) = watch::channel(());
                        entry.next = None; // no one joins once it is sent
                        entry.in_flight = Some(in_flight);
                        (done, client.list_children(&key.0))
                    };
                    let reply = sent.await;
                    listings.finish(&key, done);
                    reply.map(|children| sorted(children, sort))
                }
                .boxed()
                .shared();
                entry.next = batch.downgrade();
                Either::Left(batch)
            }
        }
    }

    /// A listing's reply is in: the next batch may go; an idle directory is forgotten.
    fn finish(&self, key: &Key, done: watch::Sender<()>) {
        drop(done);
        let mut dirs = self.dirs.lock();
        if dirs.get(key).is_some_and(|dir| dir.busy().is_none() && dir.next().is_none()) {
            dirs.remove(key);
        }
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
    fn an_idle_directory_is_not_busy() {
        let mut dir = Dir::default();
        assert!(dir.busy().is_none() && dir.next().is_none());
        let (done, in_flight) = watch::channel(());
        dir.in_flight = Some(in_flight);
        assert!(dir.busy().is_some());
        drop(done);
        assert!(dir.busy().is_none(), "a dropped listing frees the directory");
    }
}
