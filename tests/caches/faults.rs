//! CuratorCache through two more faults while a writer keeps mutating the subtree: connections
//! reset (RST) between the cache's client and the server, and an ensemble follower — the one
//! the cache's session is on — cut off from its quorum, shorter and longer than the session
//! timeout. When the faults end and the writer stops, the cache equals a fresh read of the
//! server (path, data and version), and its events, replayed from nothing, add up to the same
//! state, each event consistent with the one before it on its path.
//!
//! Every wait is bounded by a multiple of the session timeout the test configures (or of the
//! ensemble's `syncLimit × tickTime`, how long a cut-off follower keeps serving its clients).

use crate::common::cache;

use std::time::Duration;

use cache::{bounded, converges, delete_tree, framework, replay, resynced, unique_path, watch_is_live, write_until};
use zk_recipes::testing::{FaultProxy, TestingCluster, TestingServer};
use zk_recipes::CuratorCache;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converges_after_connections_are_reset_while_a_writer_mutates() {
    bounded(Duration::from_secs(180), async {
        let server = TestingServer::start().await.expect("a server");
        let proxy = FaultProxy::start(&server.connect_string()).await.expect("a proxy");
        let session_timeout = Duration::from_secs(6);
        let cached = framework(&proxy.connect_string(), session_timeout).await;
        let writer = framework(&server.connect_string(), session_timeout).await;
        let root = unique_path("reset");
        writer.create(&root).data(b"root").await.unwrap();
        let cache = CuratorCache::builder(&cached, &root).build().unwrap();
        let log = replay(cache.events());
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();

        let (stop, stopped) = tokio::sync::watch::channel(false);
        let writing = tokio::spawn(write_until(writer.clone(), root.clone(), stopped, 0x7e5e7));
        for round in 0..4 {
            tokio::time::sleep(session_timeout / 6).await;
            if round % 2 == 0 {
                // RST on both sides; the client reconnects at once.
                proxy.reset_connections();
            } else {
                // RST, then new connections reset on arrival for a third of the session
                // timeout (a crashed host): the client keeps trying on the same session.
                proxy.refuse_new(true);
                proxy.reset_connections();
                tokio::time::sleep(session_timeout / 3).await;
                proxy.refuse_new(false);
            }
        }
        // The writer goes on after the cache has resynced: what it writes now reaches the
        // cache only through the watch added again.
        resynced(&cache, session_timeout * 3).await;
        tokio::time::sleep(session_timeout / 3).await;
        stop.send(true).unwrap();
        let ops = writing.await.unwrap();
        assert!(ops > 0, "the writer wrote");
        converges(&cache, &writer, &root, session_timeout * 3).await;
        assert_eq!(cached.snapshot().epoch, 1, "the resets kept the session");
        watch_is_live(&cache, &writer, &root).await;
        let truth = converges(&cache, &writer, &root, session_timeout * 3).await;
        cache.close().await;
        let replayed = log.await.unwrap();
        assert!(replayed.initialized);
        replayed.assert_equals(&truth);
        eprintln!("reset: {ops} writes, {} events, {} nodes at the end", replayed.events, truth.len());
        delete_tree(&writer, &root).await;
        cached.close().await;
        writer.close().await;
    })
    .await
}

/// The cache's session is on a follower (its connect string names that member alone); the
/// writer's on the leader. Isolating the follower silences it first (for `syncLimit ×
/// tickTime` it still answers its clients, with no new commits, so the cache sees no events
/// and cannot tell), then it drops its clients and refuses them until healed. Round one cuts it
/// for twice that, well within the session timeout: the session survives and the cache
/// resyncs on it. Round two cuts it for longer than the session timeout: the leader expires
/// the session, and the cache resyncs on a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converges_after_its_follower_is_isolated_while_a_writer_mutates() {
    bounded(Duration::from_secs(420), async {
        let cluster = TestingCluster::builder().quorum_proxies(true).start().await.expect("an ensemble");
        cluster.settle(Duration::from_secs(60)).await.expect("the ensemble settles");
        let sync = cluster.sync_timeout();
        let leader = cluster.leader().await.expect("a leader");
        let follower = (0..cluster.len()).find(|&i| i != leader).unwrap();
        let others: Vec<String> =
            (0..cluster.len()).filter(|&i| i != follower).map(|i| cluster.server_connect_string(i)).collect();
        // Long enough that a cut of 2 × sync plus the follower's rejoin leaves the session alive.
        let session_timeout = sync * 6;
        let cached = framework(&cluster.server_connect_string(follower), session_timeout).await;
        let writer = framework(&others.join(","), session_timeout).await;
        let root = unique_path("isolated");
        writer.create(&root).data(b"root").await.unwrap();
        let cache = CuratorCache::builder(&cached, &root).build().unwrap();
        let log = replay(cache.events());
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();

        let mut ops = 0;
        for (round, cut) in [sync * 2, session_timeout * 3 / 2].into_iter().enumerate() {
            let epoch = cached.snapshot().epoch;
            let (stop, stopped) = tokio::sync::watch::channel(false);
            let writing = tokio::spawn(write_until(writer.clone(), root.clone(), stopped, 0xf011 + round as u64));
            tokio::time::sleep(sync / 2).await;
            cluster.isolate(follower).expect("isolating the follower");
            tokio::time::sleep(cut).await;
            cluster.heal(follower).expect("healing the follower");
            // The follower rejoins (within the ensemble's limits) and the client reconnects.
            let mut state = cached.state_watch();
            tokio::time::timeout(session_timeout * 3, state.wait_for(|s| s.state.is_connected()))
                .await
                .expect("the cache's client connected again")
                .unwrap();
            resynced(&cache, session_timeout * 3).await;
            tokio::time::sleep(sync / 2).await;
            stop.send(true).unwrap();
            ops += writing.await.unwrap();
            converges(&cache, &writer, &root, session_timeout * 3).await;
            watch_is_live(&cache, &writer, &root).await;
            let now = cached.snapshot().epoch;
            eprintln!("isolated follower, round {round}: cut {cut:?}, session epoch {epoch} -> {now}");
            if round == 1 {
                assert!(now > epoch, "a cut longer than the session timeout ends the session");
            }
        }
        assert!(ops > 0, "the writer wrote");
        let truth = converges(&cache, &writer, &root, session_timeout * 3).await;
        cache.close().await;
        let replayed = log.await.unwrap();
        assert!(replayed.initialized);
        replayed.assert_equals(&truth);
        eprintln!("isolated follower: {ops} writes, {} events, {} nodes at the end", replayed.events, truth.len());
        delete_tree(&writer, &root).await;
        cached.close().await;
        writer.close().await;
    })
    .await
}
