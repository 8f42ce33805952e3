//! CuratorCache against real servers: Curator's `TestCuratorCache*` and kazoo's `TreeCache`
//! scenarios (create, change and delete at every depth, the root deleted and re-created, a
//! large fan-out, stats-only, single-node and children modes, a listener added late, close),
//! and convergence through faults (connection cut and black-holed, session expired) while a
//! writer keeps mutating the subtree: once the writer stops, the cache equals a fresh read of
//! the server (path, data and version).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;
use zk_recipes::testing::{self, CountingProxy, FaultProxy, ProxyMode, TestingServer};
use zk_recipes::zk::CreateMode;
use zk_recipes::{CacheEvent, CacheEventStream, CacheMode, CuratorCache, Error, Framework};

use crate::common::cache;

use crate::common::fixtures::shared_connect;
use cache::{
    bounded, cache_tree, converges, delete_tree, framework, next, resynced, server_tree, take, unique_path,
    watch_is_live, write_until, EVENT_LIMIT,
};

/// An event as a short string: `+path=data`, `~path=data`, `-path`, `init`.
fn show(event: &CacheEvent) -> String {
    let data = |node: &zk_recipes::ChildData| String::from_utf8_lossy(node.data().map_or(&[][..], |d| d)).into_owned();
    match event {
        CacheEvent::Created(node) => format!("+{}={}", node.path(), data(node)),
        CacheEvent::Changed(_, node) => format!("~{}={}", node.path(), data(node)),
        CacheEvent::Deleted(node) => format!("-{}", node.path()),
        CacheEvent::Initialized => "init".to_owned(),
        _ => "other".to_owned(),
    }
}

async fn expect_events(events: &mut CacheEventStream, expected: &[String]) {
    let mut got = Vec::new();
    while got.len() < expected.len() {
        got.push(show(&next(events).await));
    }
    assert_eq!(got, expected);
}

fn s(text: &str) -> String {
    text.to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_change_delete_at_every_depth() {
    bounded(Duration::from_secs(60), async {
        let fw = framework(&shared_connect().await, Duration::from_secs(10)).await;
        let root = unique_path("depths");
        let cache = CuratorCache::builder(&fw, &root).build().unwrap();
        let mut events = cache.events();
        cache.start().await.unwrap();
        // The root does not exist yet: the load finds nothing.
        expect_events(&mut events, &[s("init")]).await;
        assert!(cache.is_empty());

        fw.create(&root).data(b"r").await.unwrap();
        expect_events(&mut events, &[format!("+{root}=r")]).await;
        let (a, b) = (format!("{root}/a"), format!("{root}/a/b"));
        fw.create(&a).data(b"1").await.unwrap();
        fw.create(&b).data(b"2").await.unwrap();
        expect_events(&mut events, &[format!("+{a}=1"), format!("+{b}=2")]).await;
        for (path, data) in [(&root, "r2"), (&a, "12"), (&b, "22")] {
            fw.set_data(path, data.as_bytes()).await.unwrap();
            expect_events(&mut events, &[format!("~{path}={data}")]).await;
        }
        let node = cache.get(&b).expect("b cached");
        assert_eq!(node.data().map(Vec::as_slice), Some(&b"22"[..]));
        assert_eq!(node.stat().version, 1);
        assert_eq!(cache.children(&root).iter().map(|c| c.name().to_owned()).collect::<Vec<_>>(), ["a"]);
        assert_eq!(cache.len(), 3);
        assert!(cache.is_complete());

        fw.delete(&b).await.unwrap();
        fw.delete(&a).await.unwrap();
        expect_events(&mut events, &[format!("-{b}"), format!("-{a}")]).await;
        // The root deleted and created again.
        fw.delete(&root).await.unwrap();
        expect_events(&mut events, &[format!("-{root}")]).await;
        fw.create(&root).data(b"again").await.unwrap();
        expect_events(&mut events, &[format!("+{root}=again")]).await;
        assert_eq!(cache.len(), 1);
        cache.close().await;
        assert!(events.next().await.is_none(), "close() ends the stream");
        assert!(!cache.is_complete());
        fw.delete(&root).await.unwrap();
        fw.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_load_of_a_large_fan_out() {
    bounded(Duration::from_secs(120), async {
        let fw = framework(&shared_connect().await, Duration::from_secs(10)).await;
        let root = unique_path("fanout");
        fw.create(&root).data(b"").await.unwrap();
        let creates = (0..40).map(|i| {
            let fw = fw.clone();
            let parent = format!("{root}/p{i:02}");
            async move {
                fw.create(&parent).data(b"parent").await.unwrap();
                for j in 0..25 {
                    fw.create(&format!("{parent}/c{j:02}")).data(format!("{i}-{j}").as_bytes()).await.unwrap();
                }
            }
        });
        futures::future::join_all(creates).await;
        let cache = CuratorCache::builder(&fw, &root).build().unwrap();
        let mut events = cache.events();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        assert_eq!(cache.len(), 1 + 40 + 40 * 25);
        let mut created = 0;
        loop {
            match next(&mut events).await {
                CacheEvent::Created(_) => created += 1,
                CacheEvent::Initialized => break,
                other => panic!("unexpected {other:?} during the load"),
            }
        }
        assert_eq!(created, cache.len(), "one Created per node, then Initialized");
        assert_eq!(cache_tree(&cache), server_tree(&fw, &root).await);
        assert_eq!(cache.children(&format!("{root}/p07")).len(), 25);
        cache.close().await;
        delete_tree(&fw, &root).await;
        fw.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_only_single_node_and_decoder() {
    bounded(Duration::from_secs(60), async {
        let fw = framework(&shared_connect().await, Duration::from_secs(10)).await;
        let root = unique_path("modes");
        fw.create(&root).data(b"7").await.unwrap();
        fw.create(&format!("{root}/kid")).data(b"8").await.unwrap();

        let stats = CuratorCache::builder(&fw, &root).stats_only().build().unwrap();
        stats.start().await.unwrap();
        stats.initialized().await.unwrap();
        assert_eq!(stats.len(), 2);
        let kid = stats.get(&format!("{root}/kid")).unwrap();
        assert!(kid.data().is_none(), "stats only");
        assert_eq!(kid.stat().data_length, 1);

        // A session keeps one watch mode per path: the single-node cache (a persistent watch)
        // on the root the tree cache watches recursively takes a framework of its own.
        let single_fw = framework(&shared_connect().await, Duration::from_secs(10)).await;
        let single = CuratorCache::builder(&single_fw, &root).mode(CacheMode::SingleNode).build().unwrap();
        let mut single_events = single.events();
        single.start().await.unwrap();
        expect_events(&mut single_events, &[format!("+{root}=7"), s("init")]).await;
        fw.create(&format!("{root}/other")).data(b"").await.unwrap();
        fw.set_data(&root, b"9").await.unwrap();
        expect_events(&mut single_events, &[format!("~{root}=9")]).await;
        assert_eq!(single.len(), 1, "children are not cached in single-node mode");

        let decoded = CuratorCache::builder(&fw, &root)
            .decoder(|bytes| {
                String::from_utf8(bytes).map_err(|e| e.to_string())?.parse::<u32>().map_err(|e| e.to_string())
            })
            .build()
            .unwrap();
        decoded.start().await.unwrap();
        decoded.initialized().await.unwrap();
        assert_eq!(decoded.get(&root).and_then(|n| n.data().copied()), Some(9));
        assert_eq!(decoded.get(&format!("{root}/other")).map(|n| n.data().copied()), Some(None), "refused: stat only");
        for cache in [&stats, &single] {
            cache.close().await;
        }
        decoded.close().await;
        single_fw.close().await;
        delete_tree(&fw, &root).await;
        fw.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_mode_and_the_path_children_view() {
    bounded(Duration::from_secs(60), async {
        let fw = framework(&shared_connect().await, Duration::from_secs(10)).await;
        let root = unique_path("children");
        fw.create(&root).data(b"").await.unwrap();
        fw.create(&format!("{root}/one")).data(b"1").await.unwrap();
        let cache = CuratorCache::builder(&fw, &root).mode(CacheMode::Children).build().unwrap();
        let mut view = cache.path_children_events(&root).unwrap();
        cache.start().await.unwrap();
        let mut seen = Vec::new();
        seen.extend(take(&mut view, 2).await);
        fw.create(&format!("{root}/two")).data(b"2").await.unwrap();
        fw.create(&format!("{root}/two/grandchild")).data(b"").await.unwrap();
        fw.set_data(&format!("{root}/one"), b"1b").await.unwrap();
        fw.delete(&format!("{root}/two/grandchild")).await.unwrap();
        fw.delete(&format!("{root}/two")).await.unwrap();
        seen.extend(take(&mut view, 3).await);
        assert_eq!(seen, ["added one", "initialized", "added two", "updated one", "removed two"]);
        assert_eq!(cache.len(), 1, "the root and grandchildren are not cached in children mode");
        assert!(cache.get(&root).is_none());
        cache.close().await;
        delete_tree(&fw, &root).await;
        fw.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_added_late_gets_the_current_state_and_the_node_view() {
    bounded(Duration::from_secs(60), async {
        let fw = framework(&shared_connect().await, Duration::from_secs(10)).await;
        let root = unique_path("late");
        fw.create(&root).data(b"x").await.unwrap();
        fw.create(&format!("{root}/a")).data(b"y").await.unwrap();
        let cache = CuratorCache::builder(&fw, &root).build().unwrap();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();

        let seen = Arc::new(Mutex::new(Vec::new()));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let handle = {
            let seen = Arc::clone(&seen);
            cache
                .on_event(move |event| {
                    let (seen, tx) = (Arc::clone(&seen), tx.clone());
                    async move {
                        seen.lock().unwrap().push(show(&event));
                        let _ = tx.send(());
                    }
                })
                .unwrap()
        };
        for _ in 0..3 {
            tokio::time::timeout(EVENT_LIMIT, rx.recv()).await.expect("listener called").unwrap();
        }
        assert_eq!(*seen.lock().unwrap(), [format!("+{root}=x"), format!("+{root}/a=y"), s("init")]);

        let mut node = cache.node_events(&format!("{root}/a")).unwrap();
        let mut absent = cache.node_events(&format!("{root}/none")).unwrap();
        let current = tokio::time::timeout(EVENT_LIMIT, node.next()).await.unwrap().unwrap();
        assert_eq!(current.and_then(|n| n.data().cloned()), Some(b"y".to_vec()));
        assert!(tokio::time::timeout(EVENT_LIMIT, absent.next()).await.unwrap().unwrap().is_none());
        fw.delete(&format!("{root}/a")).await.unwrap();
        assert!(tokio::time::timeout(EVENT_LIMIT, node.next()).await.unwrap().unwrap().is_none(), "deleted");
        tokio::time::timeout(EVENT_LIMIT, rx.recv()).await.expect("listener called").unwrap();
        assert_eq!(seen.lock().unwrap().last().cloned(), Some(format!("-{root}/a")));
        drop(handle);
        cache.close().await;
        assert!(node.next().await.is_none());
        delete_tree(&fw, &root).await;
        fw.close().await;
    })
    .await
}

struct Faulty {
    server: TestingServer,
    proxy: FaultProxy,
}

async fn faulty() -> Faulty {
    let server = TestingServer::start().await.expect("a server");
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("a proxy");
    Faulty { server, proxy }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converges_after_connections_cut_and_black_holed_while_a_writer_mutates() {
    bounded(Duration::from_secs(180), async {
        let setup = faulty().await;
        let session_timeout = Duration::from_secs(6);
        let cached = framework(&setup.proxy.connect_string(), session_timeout).await;
        let writer = framework(&setup.server.connect_string(), session_timeout).await;
        let root = unique_path("cut");
        writer.create(&root).data(b"root").await.unwrap();
        let cache = CuratorCache::builder(&cached, &root).build().unwrap();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();

        let (stop, stopped) = tokio::sync::watch::channel(false);
        let writing = tokio::spawn(write_until(writer.clone(), root.clone(), stopped, 0x5eed));
        for round in 0..4 {
            tokio::time::sleep(session_timeout / 6).await;
            if round % 2 == 0 {
                setup.proxy.drop_connections();
            } else {
                // Black-holed for a third of the session timeout: the client times the
                // connection out and reconnects on the same session.
                setup.proxy.set_mode(ProxyMode::BlackHole);
                tokio::time::sleep(session_timeout / 3).await;
                setup.proxy.set_mode(ProxyMode::Pass);
                setup.proxy.drop_connections();
            }
        }
        // The writer goes on after the cache has resynced: what it writes now only reaches
        // the cache through the watch added again.
        resynced(&cache, session_timeout * 3).await;
        tokio::time::sleep(session_timeout / 3).await;
        stop.send(true).unwrap();
        let ops = writing.await.unwrap();
        assert!(ops > 0, "the writer wrote");
        converges(&cache, &writer, &root, session_timeout * 3).await;
        assert_eq!(cached.snapshot().epoch, 1, "the faults kept the session");
        watch_is_live(&cache, &writer, &root).await;
        cache.close().await;
        delete_tree(&writer, &root).await;
        cached.close().await;
        writer.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converges_after_the_session_expires_while_a_writer_mutates() {
    bounded(Duration::from_secs(180), async {
        let setup = faulty().await;
        let session_timeout = Duration::from_secs(6);
        let cached = framework(&setup.proxy.connect_string(), session_timeout).await;
        let writer = framework(&setup.server.connect_string(), session_timeout).await;
        let root = unique_path("expiry");
        writer.create(&root).data(b"root").await.unwrap();
        // An ephemeral node of the cache's own session: it goes with the session.
        let mine = format!("{root}/mine");
        cached.create(&mine).data(b"ephemeral").mode(CreateMode::Ephemeral).await.unwrap();
        let cache = CuratorCache::builder(&cached, &root).build().unwrap();
        let mut events = cache.events();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        assert!(cache.get(&mine).is_some());

        let (stop, stopped) = tokio::sync::watch::channel(false);
        let writing = tokio::spawn(write_until(writer.clone(), root.clone(), stopped, 0xe1f));
        tokio::time::sleep(session_timeout / 4).await;
        let session = cached.zk_client().unwrap().session().clone();
        testing::expire_session(&setup.proxy, &setup.server.connect_string(), session).await.expect("expiring");
        let mut state = cached.state_watch();
        tokio::time::timeout(session_timeout * 3, state.wait_for(|s| s.epoch >= 2 && s.state.is_connected()))
            .await
            .expect("a new session")
            .unwrap();
        resynced(&cache, session_timeout * 3).await;
        tokio::time::sleep(session_timeout / 3).await;
        stop.send(true).unwrap();
        writing.await.unwrap();
        converges(&cache, &writer, &root, session_timeout * 3).await;
        assert!(cache.get(&mine).is_none(), "the old session's ephemeral node is gone from the cache");
        let mut deleted_mine = false;
        while let Ok(Some(event)) = tokio::time::timeout(Duration::from_millis(200), events.next()).await {
            if matches!(&event, CacheEvent::Deleted(node) if node.path() == mine) {
                deleted_mine = true;
            }
        }
        assert!(deleted_mine, "the resync told of the ephemeral node's deletion");
        watch_is_live(&cache, &writer, &root).await;
        cache.close().await;
        delete_tree(&writer, &root).await;
        cached.close().await;
        writer.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_cache_speaks_user_paths() {
    bounded(Duration::from_secs(60), async {
        let namespace = unique_path("ns").trim_start_matches('/').to_owned();
        let fw = Framework::builder(&shared_connect().await)
            .namespace(&namespace)
            .session_timeout(Duration::from_secs(10))
            .start()
            .await
            .expect("a namespaced framework");
        let cache = CuratorCache::builder(&fw, "/app").build().unwrap();
        let mut events = cache.events();
        cache.start().await.unwrap();
        expect_events(&mut events, &[s("init")]).await;
        fw.create("/app/x").data(b"1").await.unwrap();
        // The parent is created as a container on the way.
        expect_events(&mut events, &[s("+/app="), s("+/app/x=1")]).await;
        assert!(cache.get("/app/x").is_some());
        assert!(
            cache.get(&format!("/{namespace}/app/x")).is_none(),
            "paths are the framework's, without the namespace"
        );
        cache.close().await;
        delete_tree(&fw, "/app").await;
        fw.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converges_after_the_ensemble_leader_is_killed_while_a_writer_mutates() {
    bounded(Duration::from_secs(240), async {
        let mut cluster = testing::TestingCluster::start().await.expect("an ensemble");
        cluster.settle(Duration::from_secs(60)).await.expect("the ensemble settles");
        let session_timeout = Duration::from_secs(10);
        let cached = framework(&cluster.connect_string(), session_timeout).await;
        let writer = framework(&cluster.connect_string(), session_timeout).await;
        let root = unique_path("leader");
        writer.create(&root).data(b"root").await.unwrap();
        let cache = CuratorCache::builder(&cached, &root).build().unwrap();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();

        let (stop, stopped) = tokio::sync::watch::channel(false);
        let writing = tokio::spawn(write_until(writer.clone(), root.clone(), stopped, 0x1ead));
        tokio::time::sleep(session_timeout / 5).await;
        let leader = cluster.leader().await.expect("a leader");
        cluster.kill(leader).await.expect("killing the leader");
        // Every server drops its clients when the quorum changes: the cache resyncs.
        tokio::time::sleep(session_timeout / 2).await;
        resynced(&cache, session_timeout * 3).await;
        tokio::time::sleep(session_timeout / 5).await;
        stop.send(true).unwrap();
        writing.await.unwrap();
        converges(&cache, &writer, &root, session_timeout * 3).await;
        watch_is_live(&cache, &writer, &root).await;
        cache.close().await;
        delete_tree(&writer, &root).await;
        cached.close().await;
        writer.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converges_after_the_server_pauses_shorter_and_longer_than_the_session_timeout() {
    bounded(Duration::from_secs(240), async {
        let server = TestingServer::start().await.expect("a server");
        let session_timeout = Duration::from_secs(4);
        let cached = framework(&server.connect_string(), session_timeout).await;
        let writer = framework(&server.connect_string(), session_timeout).await;
        let root = unique_path("pause");
        writer.create(&root).data(b"root").await.unwrap();
        let cache = CuratorCache::builder(&cached, &root).build().unwrap();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        for (round, pause) in [session_timeout / 3, session_timeout * 2].into_iter().enumerate() {
            let (stop, stopped) = tokio::sync::watch::channel(false);
            let writing = tokio::spawn(write_until(writer.clone(), root.clone(), stopped, 0xa5 + round as u64));
            tokio::time::sleep(session_timeout / 4).await;
            server.pause().expect("pausing the server");
            tokio::time::sleep(pause).await;
            server.resume().expect("resuming the server");
            resynced(&cache, session_timeout * 4).await;
            tokio::time::sleep(session_timeout / 4).await;
            stop.send(true).unwrap();
            writing.await.unwrap();
            converges(&cache, &writer, &root, session_timeout * 4).await;
            watch_is_live(&cache, &writer, &root).await;
        }
        cache.close().await;
        delete_tree(&writer, &root).await;
        cached.close().await;
        writer.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_typed_error() {
    bounded(Duration::from_secs(30), async {
        let fw = framework(&shared_connect().await, Duration::from_secs(10)).await;
        assert!(matches!(CuratorCache::builder(&fw, "no-slash").build(), Err(Error::InvalidPath { .. })));
        assert!(matches!(
            CuratorCache::builder(&fw, "/x").max_reads_in_flight(0).build(),
            Err(Error::InvalidArgument { .. })
        ));
        let cache = CuratorCache::builder(&fw, &unique_path("closed")).build().unwrap();
        cache.close().await;
        assert!(matches!(cache.start().await, Err(Error::Closed)));
        assert!(matches!(cache.initialized().await, Err(Error::Closed)));
        fw.close().await;
    })
    .await
}

/// `initialized()` answers for a cache that was never started, one whose start failed, and one
/// whose framework closed before its load completed: none of them will load (before, each
/// waited for ever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialized_answers_when_no_load_can_complete() {
    bounded(Duration::from_secs(60), async {
        let connect = shared_connect().await;
        let writer = framework(&connect, Duration::from_secs(10)).await;
        let root = unique_path("never-loaded");
        writer.create(&root).await.unwrap();
        for child in ["a", "b", "c"] {
            writer.create(&format!("{root}/{child}")).await.unwrap();
        }

        let never_started = CuratorCache::builder(&writer, &root).build().unwrap();
        assert!(matches!(never_started.initialized().await, Err(Error::NotStarted)));

        let closed = framework(&connect, Duration::from_secs(10)).await;
        closed.close().await;
        let failed = CuratorCache::builder(&closed, &root).build().unwrap();
        assert!(failed.start().await.is_err());
        assert!(matches!(failed.initialized().await, Err(Error::NotStarted)));

        // Every request held half a second on its way: the children's reads go out only after
        // the root's listing comes back, which is after the framework's close was sent.
        let proxy = CountingProxy::start(&connect).await.expect("a proxy");
        let cached = framework(&proxy.connect_string(), Duration::from_secs(10)).await;
        proxy.delay_requests(Duration::from_millis(500));
        let cache = CuratorCache::builder(&cached, &root).build().unwrap();
        cache.start().await.unwrap();
        let (waited, ()) = tokio::join!(cache.initialized(), cached.close());
        assert!(matches!(waited, Err(Error::Closed)), "{waited:?}");
        cache.close().await;
        writer.delete(&root).recursive().await.unwrap();
        writer.close().await;
    })
    .await
}

/// Client memory per cached node: RSS before and after loading 10,000 nodes (two levels,
/// 100-byte data). Run by name with `--ignored --nocapture` (alone: the figure is the whole
/// process's RSS); it prints the figure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run it by name"]
async fn memory_per_cached_node() {
    memory_per_node(100, 99).await;
}

/// As [`memory_per_cached_node`], with 100,000 nodes (100 parents of 999 children each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run it by name"]
async fn memory_per_cached_node_100k() {
    memory_per_node(100, 999).await;
}

/// Loads `parents` nodes of `children` children each (100-byte data) into a cache and prints
/// the RSS growth per cached node, with the cache held.
async fn memory_per_node(parents: usize, children: usize) {
    fn rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }
    bounded(Duration::from_secs(900), async {
        let fw = framework(&shared_connect().await, Duration::from_secs(30)).await;
        let root = unique_path("memory");
        fw.create(&root).data(b"").await.unwrap();
        let data = vec![b'x'; 100];
        for i in 0..parents {
            let parent = format!("{root}/p{i:03}");
            fw.create(&parent).data(&data).await.unwrap();
            let creates = (0..children).map(|j| {
                let (fw, data) = (fw.clone(), data.clone());
                let path = format!("{parent}/c{j:03}");
                async move { fw.create(&path).data(&data).await.unwrap() }
            });
            futures::future::join_all(creates).await;
        }
        let before = rss_kib();
        let started = Instant::now();
        let cache = CuratorCache::builder(&fw, &root).build().unwrap();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        let load = started.elapsed();
        let after = rss_kib();
        let nodes = cache.len();
        assert_eq!(nodes, 1 + parents * (1 + children));
        println!(
            "cache-load: {nodes} nodes in {load:?}; RSS {before} KiB -> {after} KiB: {} bytes per cached node",
            (after.saturating_sub(before) * 1024) / nodes as u64
        );
        cache.close().await;
        delete_tree(&fw, &root).await;
        fw.close().await;
    })
    .await
}

/// When the cache's framework closes, nothing more can come: its streams end (after what was
/// queued), a stream taken afterwards ends too, and a listener is called no more; what the
/// cache held stays readable until the cache is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_end_when_the_framework_closes() {
    bounded(Duration::from_secs(60), async {
        let fw = framework(&shared_connect().await, Duration::from_secs(10)).await;
        let root = unique_path("framework-closes");
        fw.create(&format!("{root}/a")).data(b"1").await.unwrap();
        let cache = CuratorCache::builder(&fw, &root).build().unwrap();
        let mut events = cache.events();
        let listened = Arc::new(Mutex::new(0usize));
        let (listener_done_tx, listener_done) = tokio::sync::oneshot::channel::<()>();
        let handle = {
            let listened = listened.clone();
            let done = Mutex::new(Some(listener_done_tx));
            cache
                .on_event(move |_| {
                    *listened.lock().unwrap() += 1;
                    let _ = &done;
                    async {}
                })
                .unwrap()
        };
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        expect_events(&mut events, &[format!("+{root}=",), format!("+{root}/a=1"), s("init")]).await;

        fw.close().await;
        let end = tokio::time::timeout(EVENT_LIMIT, events.next()).await.expect("the stream ends");
        assert!(end.is_none(), "{end:?}");
        let mut later = cache.events();
        let mut taken = Vec::new();
        while let Some(event) = tokio::time::timeout(EVENT_LIMIT, later.next()).await.expect("a later stream ends") {
            taken.push(show(&event));
        }
        assert_eq!(taken, [format!("+{root}="), format!("+{root}/a=1"), s("init")]);
        // The listener's task ended with the cache's events: its closure (and the sender it
        // holds) is dropped.
        tokio::time::timeout(EVENT_LIMIT, listener_done).await.expect("the listener ends").unwrap_err();
        assert_eq!(*listened.lock().unwrap(), 3, "the listener was called for each queued event");
        assert_eq!(cache.get(&format!("{root}/a")).and_then(|n| n.data().cloned()), Some(b"1".to_vec()));
        drop(handle);
        cache.close().await;
        let cleanup = framework(&shared_connect().await, Duration::from_secs(10)).await;
        cleanup.delete(&root).recursive().await.unwrap();
        cleanup.close().await;
    })
    .await;
}
