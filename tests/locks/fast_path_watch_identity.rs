//! The mutex's fast path proves that its lock directory was not deleted and created again
//! with a watch on the directory that was armed *before* the delete of the last sole hold and
//! is still quiet after the next create's reply. A watch armed later (by another task of the
//! same handle, on the directory as re-created) proves nothing about the gap: this file
//! forces that interleaving against a real ZooKeeper 3.8 server.

use crate::common;

use std::time::Duration;

use common::fixtures::*;
use common::timing::{EVENT, LIMIT, SESSION};
use zk_recipes::retry::RetryNTimes;
use zk_recipes::testing::{CountingProxy, FaultProxy, ProxyMode, TestingServer};
use zk_recipes::zk::{self, Acls, CreateMode};
use zk_recipes::{ConnectionState, FastPathFallback, Framework, InterProcessMutex};

/// The retry policy's one sleep. B's create fails and B sleeps this long before it looks for
/// its node and creates again; meanwhile the test reconnects, releases A's node, lets the
/// server reap the empty directory (checked every 100 ms) and re-creates it, all awaited as
/// events, which take well under a second on loopback.
const BACKOFF: Duration = Duration::from_secs(6);

/// Requests of `kind` the counting proxy has passed on.
fn count(proxy: &CountingProxy, kind: &str) -> u64 {
    proxy.counts().get(kind)
}

async fn counted(proxy: &CountingProxy, kind: &'static str, above: u64, what: &str) {
    eventually(EVENT, what, || async {
        let n = count(proxy, kind);
        if n > above {
            Ok(())
        } else {
            Err(format!("{kind}: {n}"))
        }
    })
    .await;
}

/// Tasks A and B share one mutex handle on one session. A holds its node alone, with the
/// directory's watch armed. B's create is lost on the way to the server (a connection reset),
/// and B backs off. A releases (the delete is answered), the server reaps the empty
/// directory (the watch fires), another session re-creates it and holds the lock with suffix
/// 0. B's retry creates suffix 1 and its listing arms a new watch, quiet, on the new
/// directory. A's next create gets suffix 2, one after its last node's: the sequence alone
/// would say nobody came in between. A must wait: the watch armed before its delete fired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_armed_after_the_delete_does_not_prove_the_directory() {
    init_tracing();
    bounded(LIMIT, async {
        let server = TestingServer::start().await.unwrap(); // reaps empty containers every 100 ms
        let cut = FaultProxy::start(&server.connect_string()).await.unwrap();
        let counting = CountingProxy::start(&cut.connect_string()).await.unwrap();
        let fw = Framework::builder(&counting.connect_string())
            .wait_strategy(zk_recipes::WaitStrategy::PerWaiterWatch)
            .session_timeout(SESSION)
            .retry_policy(RetryNTimes::new(10, BACKOFF))
            .start()
            .await
            .unwrap();
        let other =
            zk::Client::connector().with_session_timeout(SESSION).connect(&server.connect_string()).await.unwrap();
        // A: suffix 0 alone (no watch yet), then suffix 1 alone, listed with the watch armed.
        // Between the two the directory is empty, and the server may reap it (it checks every
        // 100 ms), so that the second create starts over at 0: then again, on a new directory.
        let mut attempts = 0;
        let (dir, mutex, held) = loop {
            attempts += 1;
            let dir = unique_path("fast-identity", "recreated");
            let mutex = InterProcessMutex::new(&fw, &dir).unwrap();
            mutex.acquire().await.unwrap().release().await.unwrap();
            let held = mutex.acquire().await.unwrap();
            if sequence_of(held.lock_path()) == 1 {
                break (dir, mutex, held);
            }
            assert!(attempts < 10, "the directory was reaped between two acquires {attempts} times");
            held.release().await.unwrap();
        };
        let stats = mutex.fast_path_stats();
        assert_eq!(stats.hits, 0, "{stats:?}");

        // B's create goes into a black hole, and the connection is reset: ConnectionLoss.
        let creates = count(&counting, "create2");
        cut.set_mode(ProxyMode::BlackHole);
        let b = {
            let mutex = mutex.clone();
            tokio::spawn(async move { mutex.acquire().await.unwrap() })
        };
        counted(&counting, "create2", creates, "B's create sent").await;
        cut.reset_connections();
        cut.set_mode(ProxyMode::Pass);
        eventually(EVENT, "reconnected", || async {
            match fw.state() {
                ConnectionState::Reconnected => Ok(()),
                state => Err(format!("{state:?}")),
            }
        })
        .await;

        // A releases; the empty directory is reaped; another session re-creates it and holds.
        held.release().await.unwrap();
        eventually(EVENT, "the empty directory reaped", || async {
            match other.check_stat(&dir).await.unwrap() {
                None => Ok(()),
                Some(_) => Err("still there".to_owned()),
            }
        })
        .await;
        other.create(&dir, &[], &CreateMode::Container.with_acls(Acls::anyone_all())).await.unwrap();
        let prefix = format!("{dir}/_c_00000000-0000-4000-8000-000000000000-lock-");
        let ephemeral_sequential = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
        let (_, sequence) = other.create(&prefix, &[], &ephemeral_sequential).await.unwrap();
        let theirs = format!("{prefix}{sequence}");
        assert_eq!(sequence_of(&theirs), 0, "the directory counts from zero again");

        // B's retry: its node is suffix 1, and it watches the other session's node (its
        // listing, which armed the new directory watch, was answered before that watch).
        let watches = count(&counting, "getData+watch");
        counted(&counting, "getData+watch", watches, "B waiting behind the other session").await;
        assert!(!b.is_finished(), "B took the lock while the other session holds it");

        // A again: suffix 2 = 1 + 1. It must wait.
        let before = mutex.fast_path_stats();
        let a = {
            let mutex = mutex.clone();
            tokio::spawn(async move { mutex.acquire().await.unwrap() })
        };
        // A's create is on the server (the fast path's choice is counted before the create
        // is sent, so the count alone does not say the create landed).
        let names = eventually(EVENT, "A's create answered", || async {
            let mut names = other.list_children(&dir).await.unwrap();
            names.sort_by_key(|name| sequence_of(name));
            if names.len() >= 3 {
                Ok(names)
            } else {
                Err(format!("{names:?}"))
            }
        })
        .await;
        assert_eq!(names.iter().map(|name| sequence_of(name)).collect::<Vec<_>>(), [0, 1, 2], "{names:?}");
        let stats = mutex.fast_path_stats();
        assert_eq!(stats.hits, before.hits, "the create alone took the lock while another session holds it: {stats:?}");
        assert_eq!(
            stats.fallbacks_for(FastPathFallback::WatchFired),
            before.fallbacks_for(FastPathFallback::WatchFired) + 1,
            "{stats:?}"
        );
        assert!(!a.is_finished(), "A took the lock while the other session holds it");

        // The queue drains in order: the other session, B, A.
        other.delete(&theirs, None).await.unwrap();
        let b = within(EVENT, "B's lock once the other session released", b).await.unwrap();
        assert!(!a.is_finished(), "A took the lock while B holds it");
        b.release().await.unwrap();
        within(EVENT, "A's lock once B released", a).await.unwrap().release().await.unwrap();
        fw.close().await;
    })
    .await;
}
