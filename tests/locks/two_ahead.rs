//! A mutex waiter two or more places back watches the node ahead, its own node and the node
//! ahead of the node ahead; when that one goes it lists the children while the node ahead
//! holds, and then the holder's deletion alone hands it the lock (no listing after the
//! handoff). Nodes ahead that are deleted without having held (abandoned waits) must never
//! hand it the lock. Against a real ZooKeeper 3.8 server, every waiter through
//! `WaitStrategy::PerWaiterWatch` (the default waits the same way in a crowded directory).

use crate::common;

use common::fixtures::reaperless_connect as server;
use common::fixtures::*;
use common::timing::{COUNTING_SESSION as SESSION, EVENT, LIMIT, QUIET};
use zk_recipes::testing::CountingProxy;
use zk_recipes::zk::{Acls, CreateMode};
use zk_recipes::{Framework, InterProcessMutex, MutexGuard};

/// Polls until the proxy has counted at least `at_least` requests of `kind`; returns the count.
async fn counted(proxy: &CountingProxy, kind: &'static str, at_least: u64) -> u64 {
    eventually(EVENT, &format!("{at_least} {kind} requests"), || async {
        let n = proxy.counts().get(kind);
        if n >= at_least {
            Ok(n)
        } else {
            Err(format!("{n}"))
        }
    })
    .await
}

/// Polls until our waiter has listed the children again (a `getChildren` past `listings`)
/// or has taken the lock; returns the listings counted.
async fn listed_again(proxy: &CountingProxy, listings: u64, waiter: &tokio::task::JoinHandle<MutexGuard>) -> u64 {
    eventually(EVENT, "our waiter listing again", || async {
        let n = proxy.counts().get("getChildren");
        if n > listings || waiter.is_finished() {
            Ok(n)
        } else {
            Err(format!("{n} listings"))
        }
    })
    .await
}

/// A lock at a new path, held by a session of the others', with our session behind a counting
/// proxy: `(path, others, proxy, ours, holder)`.
async fn held_lock(name: &str) -> (String, Framework, CountingProxy, Framework, MutexGuard) {
    let path = unique_path("two-ahead", name);
    let others = plain_classic_framework(&server().await, SESSION).await;
    let proxy = CountingProxy::start(&server().await).await.expect("counting proxy");
    let ours = plain_classic_framework(&proxy.connect_string(), SESSION).await;
    let holder = InterProcessMutex::new(&others, &path).unwrap().acquire().await.unwrap();
    (path, others, proxy, ours, holder)
}

/// `waiter`'s acquire gives up (its node goes, deleted by the dropped acquire), leaving
/// `nodes` children; `last`, waiting behind, lists again and still waits. Returns the listings
/// counted.
async fn gives_up(
    waiter: tokio::task::JoinHandle<MutexGuard>,
    nodes: usize,
    (fw, path): (&Framework, &str),
    (proxy, listings): (&CountingProxy, u64),
    last: &tokio::task::JoinHandle<MutexGuard>,
    what: &str,
) -> u64 {
    waiter.abort();
    children_count_becomes(fw, path, nodes, EVENT).await;
    let listings = listed_again(proxy, listings, last).await;
    tokio::time::sleep(QUIET).await;
    assert!(!last.is_finished(), "our waiter took the lock while the holder held it ({what})");
    listings
}

/// Starts an acquire of `path` on `fw` in a task, and returns once its node is the
/// `nodes`-th child of `path`.
async fn queue(fw: &Framework, path: &str, nodes: usize) -> tokio::task::JoinHandle<MutexGuard> {
    let mutex = InterProcessMutex::new(fw, path).unwrap();
    let waiting = tokio::spawn(async move { mutex.acquire().await.unwrap() });
    children_count_becomes(fw, path, nodes, EVENT).await;
    waiting
}

/// The holder, a waiter, and our waiter behind it: our waiter lists again when the holder
/// lets go (the waiter ahead of it then holds), and takes the lock on that waiter's
/// deletion without another listing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listing_goes_out_while_the_node_ahead_holds_and_the_handoff_needs_none() {
    init_tracing();
    bounded(LIMIT, async {
        let (path, others, proxy, ours, holder) = held_lock("handoff").await;
        let next = queue(&others, &path, 2).await;
        let before = proxy.counts();
        let last = queue(&ours, &path, 3).await;
        // Its own node, the node ahead and the holder's.
        counted(&proxy, "getData+watch", before.get("getData+watch") + 3).await;
        let listings = proxy.counts().get("getChildren");

        holder.release().await.unwrap();
        let next = within(EVENT, "the next waiter's lock", next).await.unwrap();
        let listings = listed_again(&proxy, listings, &last).await;
        tokio::time::sleep(QUIET).await;
        assert!(!last.is_finished(), "our waiter took the lock while the waiter ahead of it held it");

        next.release().await.unwrap();
        let guard = within(EVENT, "our waiter's lock", last).await.unwrap();
        assert_eq!(
            proxy.counts().get("getChildren"),
            listings,
            "the handoff from the waiter ahead needed no listing: {}",
            proxy.counts().since(&before)
        );
        assert!(ours.exists(guard.lock_path()).await.unwrap().is_some(), "the guard's node exists");
        guard.release().await.unwrap();
        assert!(children(&others, &path).await.is_empty());
        ours.close().await;
        others.close().await;
    })
    .await;
}

/// Waiters ahead of ours that give up (their nodes deleted without ever holding) while the
/// holder holds: first the one two places ahead (the node our waiter lists again for), then
/// the one right ahead (whose watch our waiter kept through that listing). Neither deletion
/// hands our waiter the lock; the holder's does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_given_up_ahead_of_ours_hand_it_nothing() {
    init_tracing();
    bounded(LIMIT, async {
        let (path, others, proxy, ours, holder) = held_lock("given-up").await;
        let first = queue(&others, &path, 2).await;
        let second = queue(&others, &path, 3).await;
        let before = proxy.counts();
        let last = queue(&ours, &path, 4).await;
        counted(&proxy, "getData+watch", before.get("getData+watch") + 3).await;
        let listings = proxy.counts().get("getChildren");

        // The waiter two places ahead of ours gives up, then the one right ahead: each time
        // our waiter lists again, and in the end waits on the holder.
        let listings = gives_up(first, 3, (&others, &path), (&proxy, listings), &last, "one waiter gone").await;
        gives_up(second, 2, (&others, &path), (&proxy, listings), &last, "both waiters gone").await;

        holder.release().await.unwrap();
        let guard = within(EVENT, "our waiter's lock", last).await.unwrap();
        assert_eq!(children(&others, &path).await.len(), 1, "only our node is left");
        guard.release().await.unwrap();
        ours.close().await;
        others.close().await;
    })
    .await;
}

/// A node two places ahead that our session may not read (its ACL) is not watched: the
/// waiter waits on the node ahead as Curator's does, instead of failing with `NoAuth`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_two_ahead_we_may_not_read_leaves_curators_wait() {
    init_tracing();
    bounded(LIMIT, async {
        let path = unique_path("two-ahead", "unreadable");
        let private = Framework::builder(&server().await)
            .session_timeout(SESSION)
            .auth("digest", b"two-ahead-private:secret")
            .wait_strategy(zk_recipes::WaitStrategy::PerWaiterWatch)
            .start()
            .await
            .expect("the private identity's framework");
        let ours = plain_classic_framework(&server().await, SESSION).await;
        // The directory, made by a first cycle.
        InterProcessMutex::new(&ours, &path).unwrap().acquire().await.unwrap().release().await.unwrap();
        // A lock node only its creator may read, first in line.
        let only_creator = CreateMode::EphemeralSequential.with_acls(Acls::creator_all());
        let prefix = format!("{path}/_c_00000000-0000-0000-0000-000000000000-lock-");
        let client = private.zk_client().unwrap();
        let (_, sequence) = client.create(&prefix, &[], &only_creator).await.unwrap();
        let first = format!("{prefix}{sequence}");
        // A waiter of the same identity behind it (it may read it), then ours.
        let next = queue(&private, &path, 2).await;
        let last = queue(&ours, &path, 3).await;
        tokio::time::sleep(QUIET).await;
        assert!(!last.is_finished(), "our waiter ended while the private node was first: {:?}", last.await);

        client.delete(&first, None).await.unwrap();
        let next = within(EVENT, "the next waiter's lock", next).await.unwrap();
        tokio::time::sleep(QUIET).await;
        assert!(!last.is_finished(), "our waiter ended while the waiter ahead held the lock");
        next.release().await.unwrap();
        let guard = within(EVENT, "our waiter's lock", last).await.unwrap();
        guard.release().await.unwrap();
        ours.close().await;
        private.close().await;
    })
    .await;
}
