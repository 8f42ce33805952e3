//! The cache on a server without persistent watches (a 3.8 server whose watch manager is
//! `WatchManagerOptimized`, which refuses `addWatch` as ZooKeeper 3.5 does): one-shot watches
//! stand in, and the cache, its node view and its children view behave as on a 3.6+ server:
//! events at every depth, convergence after connection cuts and a session expiry while a
//! writer mutates the subtree; and what the one-shot watches cost per event, counted.

use std::time::Duration;

use futures::StreamExt;
use zk_recipes::testing::{self, CountingProxy, FaultProxy, RequestCounts, TestingServer};
use zk_recipes::zk::CreateMode;
use zk_recipes::{CacheEvent, CacheEventStream, CacheMode, CuratorCache, Framework};

use crate::common::cache::{
    bounded, converges, delete_tree, framework, next, replay, resynced, take, unique_path, watch_is_live, write_until,
    EVENT_LIMIT,
};
use crate::common::fixtures::{eventually, server_without_persistent_watches};

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

/// The framework learns that the server refuses persistent watches (the cache asked). The
/// refusal is noted when the cache's watch reads the add's reply, which may come after the
/// cache reported its load (the reads sent behind the add complete it): wait for it.
async fn refuses_persistent_watches(fw: &Framework) {
    eventually(EVENT_LIMIT, "the refusal of persistent watches noted", || async {
        let info = fw.server_info().await.map_err(|e| e.to_string())?;
        if info.persistent_watches {
            Err(format!("{info:?}"))
        } else {
            Ok(())
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_change_delete_at_every_depth_with_one_shot_watches() {
    bounded(Duration::from_secs(90), async {
        let server = server_without_persistent_watches().await;
        let fw = framework(&server.connect_string(), Duration::from_secs(10)).await;
        let root = unique_path("oneshot-depths");
        let cache = CuratorCache::builder(&fw, &root).build().unwrap();
        let mut events = cache.events();
        cache.start().await.unwrap();
        refuses_persistent_watches(&fw).await;
        // The root does not exist yet: the load finds nothing.
        expect_events(&mut events, &["init".to_owned()]).await;

        fw.create(&root).data(b"r").await.unwrap();
        expect_events(&mut events, &[format!("+{root}=r")]).await;
        let (a, b, c) = (format!("{root}/a"), format!("{root}/a/b"), format!("{root}/a/b/c"));
        fw.create(&a).data(b"1").await.unwrap();
        fw.create(&b).data(b"2").await.unwrap();
        fw.create(&c).data(b"3").await.unwrap();
        expect_events(&mut events, &[format!("+{a}=1"), format!("+{b}=2"), format!("+{c}=3")]).await;
        for (path, data) in [(&root, "r2"), (&a, "12"), (&c, "32"), (&b, "22")] {
            fw.set_data(path, data.as_bytes()).await.unwrap();
            expect_events(&mut events, &[format!("~{path}={data}")]).await;
        }
        assert_eq!(cache.len(), 4);
        assert!(cache.is_complete());

        fw.delete(&c).await.unwrap();
        fw.delete(&b).await.unwrap();
        expect_events(&mut events, &[format!("-{c}"), format!("-{b}")]).await;
        // A subtree created in one go is found whole.
        let nested = [format!("{a}/x"), format!("{a}/x/y"), format!("{a}/x/y/z")];
        let mut batch = fw.transaction();
        for path in &nested {
            batch = batch.create(path, b"n", CreateMode::Persistent);
        }
        batch.commit().await.unwrap();
        expect_events(&mut events, &nested.iter().map(|p| format!("+{p}=n")).collect::<Vec<_>>()).await;
        for path in nested.iter().rev() {
            fw.delete(path).await.unwrap();
        }
        fw.delete(&a).await.unwrap();
        let mut gone: Vec<String> = nested.iter().rev().map(|p| format!("-{p}")).collect();
        gone.push(format!("-{a}"));
        expect_events(&mut events, &gone).await;
        // The root deleted and created again.
        fw.delete(&root).await.unwrap();
        expect_events(&mut events, &[format!("-{root}")]).await;
        fw.create(&root).data(b"again").await.unwrap();
        expect_events(&mut events, &[format!("+{root}=again")]).await;
        assert_eq!(cache.len(), 1);
        cache.close().await;
        assert!(events.next().await.is_none(), "close() ends the stream");
        fw.delete(&root).await.unwrap();
        fw.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_and_children_views_with_one_shot_watches() {
    bounded(Duration::from_secs(90), async {
        let server = server_without_persistent_watches().await;
        let fw = framework(&server.connect_string(), Duration::from_secs(10)).await;
        let root = unique_path("oneshot-views");
        fw.create(&root).data(b"").await.unwrap();
        fw.create(&format!("{root}/one")).data(b"1").await.unwrap();

        // The node alone.
        let single = CuratorCache::builder(&fw, &root).mode(CacheMode::SingleNode).build().unwrap();
        let mut node = single.node_events(&root).unwrap();
        single.start().await.unwrap();
        single.initialized().await.unwrap();
        let current = tokio::time::timeout(EVENT_LIMIT, node.next()).await.unwrap().unwrap();
        assert_eq!(current.and_then(|n| n.data().cloned()), Some(Vec::new()));
        fw.set_data(&root, b"v2").await.unwrap();
        let changed = tokio::time::timeout(EVENT_LIMIT, node.next()).await.unwrap().unwrap();
        assert_eq!(changed.and_then(|n| n.data().cloned()), Some(b"v2".to_vec()));
        assert_eq!(single.len(), 1, "a single-node cache holds no child");

        // The children (from another framework: a session keeps one watch mode per path, and
        // the framework holds to that whatever the server).
        let other = framework(&server.connect_string(), Duration::from_secs(10)).await;
        let children = CuratorCache::builder(&other, &root).mode(CacheMode::Children).build().unwrap();
        let mut view = children.path_children_events(&root).unwrap();
        children.start().await.unwrap();
        let mut seen = take(&mut view, 2).await;
        fw.create(&format!("{root}/two")).data(b"2").await.unwrap();
        seen.extend(take(&mut view, 1).await);
        fw.create(&format!("{root}/two/grandchild")).data(b"").await.unwrap();
        fw.set_data(&format!("{root}/one"), b"1b").await.unwrap();
        seen.extend(take(&mut view, 1).await);
        fw.delete(&format!("{root}/two/grandchild")).await.unwrap();
        fw.delete(&format!("{root}/two")).await.unwrap();
        seen.extend(take(&mut view, 1).await);
        assert_eq!(seen, ["added one", "initialized", "added two", "updated one", "removed two"]);
        assert_eq!(children.len(), 1, "the root and grandchildren are not cached in children mode");

        delete_tree(&fw, &root).await;
        let deleted = tokio::time::timeout(EVENT_LIMIT, node.next()).await.unwrap().unwrap();
        assert!(deleted.is_none(), "the node view saw the deletion");
        single.close().await;
        children.close().await;
        other.close().await;
        fw.close().await;
    })
    .await
}

/// Connection cuts (the one-shot watches are set again by the client on the same session),
/// then a session expiry (the emulation sets every watch again on the new session), while a
/// writer mutates two levels below the root: the cache converges each time, its events add up
/// to the server's state, and it still hears writes afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converges_after_cuts_and_a_session_expiry_with_one_shot_watches() {
    bounded(Duration::from_secs(180), async {
        let server: TestingServer = server_without_persistent_watches().await;
        let proxy = FaultProxy::start(&server.connect_string()).await.expect("a proxy");
        let session_timeout = Duration::from_secs(6);
        let cached = framework(&proxy.connect_string(), session_timeout).await;
        let writer = framework(&server.connect_string(), session_timeout).await;
        let root = unique_path("oneshot-expiry");
        writer.create(&root).data(b"root").await.unwrap();
        let mine = format!("{root}/mine");
        cached.create(&mine).data(b"ephemeral").mode(CreateMode::Ephemeral).await.unwrap();
        let cache = CuratorCache::builder(&cached, &root).build().unwrap();
        let replayed = replay(cache.events());
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        refuses_persistent_watches(&cached).await;
        assert!(cache.get(&mine).is_some());

        // Connection cuts on the same session.
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let writing = tokio::spawn(write_until(writer.clone(), root.clone(), stopped, 0x0e5407));
        for _ in 0..3 {
            tokio::time::sleep(session_timeout / 6).await;
            proxy.drop_connections();
        }
        resynced(&cache, session_timeout * 3).await;
        tokio::time::sleep(session_timeout / 3).await;
        stop.send(true).unwrap();
        assert!(writing.await.unwrap() > 0, "the writer wrote");
        converges(&cache, &writer, &root, session_timeout * 3).await;
        assert_eq!(cached.snapshot().epoch, 1, "the cuts kept the session");
        watch_is_live(&cache, &writer, &root).await;

        // A session expiry.
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let writing = tokio::spawn(write_until(writer.clone(), root.clone(), stopped, 0xe1f));
        tokio::time::sleep(session_timeout / 4).await;
        let session = cached.zk_client().unwrap().session().clone();
        testing::expire_session(&proxy, &server.connect_string(), session).await.expect("expiring");
        let mut state = cached.state_watch();
        tokio::time::timeout(session_timeout * 3, state.wait_for(|s| s.epoch >= 2 && s.state.is_connected()))
            .await
            .expect("a new session")
            .unwrap();
        resynced(&cache, session_timeout * 3).await;
        tokio::time::sleep(session_timeout / 3).await;
        stop.send(true).unwrap();
        writing.await.unwrap();
        let truth = converges(&cache, &writer, &root, session_timeout * 3).await;
        assert!(cache.get(&mine).is_none(), "the old session's ephemeral node is gone from the cache");
        // Writes after the new session reach the cache through the watches set again, at depth.
        let deep = format!("{root}/a/deep-after-expiry");
        writer.create(&deep).data(b"d").await.unwrap();
        converges(&cache, &writer, &root, session_timeout * 3).await;
        watch_is_live(&cache, &writer, &root).await;
        let truth_now = converges(&cache, &writer, &root, session_timeout * 3).await;
        assert_ne!(truth, truth_now);
        cache.close().await;
        let replay = replayed.await.unwrap();
        assert!(replay.initialized);
        replay.assert_equals(&truth_now);
        delete_tree(&writer, &root).await;
        cached.close().await;
        writer.close().await;
    })
    .await
}

/// The requests in `counts`, by kind (pings, round trips, watch events and error replies left
/// out).
fn requests(counts: &RequestCounts) -> Vec<(&'static str, u64)> {
    counts
        .iter()
        .filter(|(kind, n)| {
            *n > 0 && !matches!(*kind, "ping" | "round-trip" | "watch-event") && !kind.starts_with("error:")
        })
        .collect()
}

/// Waits (bounded) until the requests counted since `before` are `expected`.
async fn requests_become(proxy: &CountingProxy, before: &RequestCounts, expected: &[(&'static str, u64)], what: &str) {
    let deadline = tokio::time::Instant::now() + EVENT_LIMIT;
    loop {
        let got = requests(&proxy.counts().since(before));
        if got == expected {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}: {got:?}, not {expected:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What the one-shot watches cost per event in a tree cache (the cost model of the server
/// versions guide): a created node, its parent's listing, an `exists` and a listing that set
/// its watches, and the cache's `getData`; a changed node, the `exists` that sets its watch
/// again and the cache's `getData`; a deleted node, its parent's listing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_watches_cost_a_few_reads_per_event() {
    bounded(Duration::from_secs(90), async {
        let server = server_without_persistent_watches().await;
        let proxy = CountingProxy::start(&server.connect_string()).await.expect("a counting proxy");
        let cached = framework(&proxy.connect_string(), Duration::from_secs(60)).await;
        let writer = framework(&server.connect_string(), Duration::from_secs(60)).await;
        let root = unique_path("oneshot-counts");
        writer.create(&root).data(b"r").await.unwrap();
        for path in ["a", "a/x", "b"] {
            writer.create(&format!("{root}/{path}")).data(path.as_bytes()).await.unwrap();
        }
        let cache = CuratorCache::builder(&cached, &root).build().unwrap();
        let mut events = cache.events();
        let before = proxy.counts();
        cache.start().await.unwrap();
        let load: Vec<String> = ["", "/a", "/b", "/a/x"]
            .iter()
            .map(|p| format!("+{root}{p}={}", &p.get(1..).filter(|p| !p.is_empty()).unwrap_or("r")))
            .collect();
        let mut expected = load;
        expected.push("init".to_owned());
        expect_events(&mut events, &expected).await;
        // The load: a watched `exists` and a watched listing per node (4), besides the
        // cache's own reads.
        let sent = proxy.counts().since(&before);
        assert_eq!((sent.get("exists+watch"), sent.get("getChildren+watch")), (4, 4), "{:?}", requests(&sent));
        assert_eq!(sent.get("addWatch"), 1, "one addWatch refused, then one-shot watches");

        let node = format!("{root}/n");
        let before = proxy.counts();
        writer.create(&node).data(b"1").await.unwrap();
        expect_events(&mut events, &[format!("+{node}=1")]).await;
        requests_become(
            &proxy,
            &before,
            &[("exists+watch", 1), ("getChildren+watch", 2), ("getData", 1)],
            "a created node",
        )
        .await;

        let before = proxy.counts();
        writer.set_data(&node, b"2").await.unwrap();
        expect_events(&mut events, &[format!("~{node}=2")]).await;
        requests_become(&proxy, &before, &[("exists+watch", 1), ("getData", 1)], "a changed node").await;

        let before = proxy.counts();
        writer.delete(&node).await.unwrap();
        expect_events(&mut events, &[format!("-{node}")]).await;
        requests_become(&proxy, &before, &[("getChildren+watch", 1)], "a deleted node").await;
        cache.close().await;
        delete_tree(&writer, &root).await;
        cached.close().await;
        writer.close().await;
    })
    .await
}

/// A directory wider than the emulation's bound on reads in flight (128): every child is found
/// and watched (its change reaches the cache), the reads waiting their turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wide_directory_is_watched_whole() {
    bounded(Duration::from_secs(120), async {
        let server = server_without_persistent_watches().await;
        let proxy = CountingProxy::start(&server.connect_string()).await.expect("a counting proxy");
        let cached = framework(&proxy.connect_string(), Duration::from_secs(60)).await;
        let writer = framework(&server.connect_string(), Duration::from_secs(60)).await;
        let root = unique_path("oneshot-wide");
        writer.create(&root).data(b"").await.unwrap();
        const CHILDREN: usize = 300;
        for batch in 0..CHILDREN / 100 {
            let mut transaction = writer.transaction();
            for i in 0..100 {
                transaction =
                    transaction.create(&format!("{root}/c{:03}", batch * 100 + i), b"0", CreateMode::Persistent);
            }
            transaction.commit().await.unwrap();
        }
        let cache = CuratorCache::builder(&cached, &root).build().unwrap();
        let before = proxy.counts();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        assert_eq!(cache.len(), CHILDREN + 1);
        let sent = proxy.counts().since(&before);
        assert_eq!(sent.get("exists+watch"), CHILDREN as u64 + 1, "{:?}", requests(&sent));
        // Every child's watch is set: a change of the last one reaches the cache.
        let last = format!("{root}/c{:03}", CHILDREN - 1);
        writer.set_data(&last, b"1").await.unwrap();
        converges(&cache, &writer, &root, Duration::from_secs(20)).await;
        cache.close().await;
        delete_tree(&writer, &root).await;
        cached.close().await;
        writer.close().await;
    })
    .await
}
