//! CuratorCache's requests per event, counted by a proxy that reads the protocol's frames (the
//! cost model of the cache's docs): a created or changed node costs one read of it (`getData`,
//! or `exists` in stats-only mode), a deletion none; a load or a resync costs one `addWatch`,
//! a read of every node (the nodes found together in one `multiRead`) and one listing per node
//! that has children (stats-only: one listing per node, which carries the stat); events on a
//! node whose read is in flight share it, and the reads of events that arrive together go
//! out as one `multiRead`.

use crate::common::cache;
use crate::common::timing::COUNTING_SESSION as SESSION;

use std::time::Duration;

use cache::{bounded, delete_tree, framework, next, unique_path};
use futures::StreamExt;
use zk_recipes::testing::{CountingProxy, FaultProxy, RequestCounts, TestingServer};
use zk_recipes::{CacheEvent, CacheEventStream, CacheMode, CuratorCache, Framework};

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

/// The cache's client goes through `counting`, which goes through `cut` (for the resync), to
/// the server; the writer talks to the server directly.
struct Setup {
    server: TestingServer,
    cut: FaultProxy,
    counting: CountingProxy,
    cached: Framework,
    writer: Framework,
}

async fn setup() -> Setup {
    let server = TestingServer::start().await.expect("a server");
    let cut = FaultProxy::start(&server.connect_string()).await.expect("a fault proxy");
    let counting = CountingProxy::start(&cut.connect_string()).await.expect("a counting proxy");
    let cached = framework(&counting.connect_string(), SESSION).await;
    let writer = framework(&server.connect_string(), SESSION).await;
    Setup { server, cut, counting, cached, writer }
}

/// The next event that is not `Initialized`, shown as `+path`, `~path`, `-path`.
async fn event(events: &mut CacheEventStream) -> String {
    loop {
        match next(events).await {
            CacheEvent::Created(n) => return format!("+{}", n.path()),
            CacheEvent::Changed(_, n) => return format!("~{}", n.path()),
            CacheEvent::Deleted(n) => return format!("-{}", n.path()),
            _ => {}
        }
    }
}

/// Skips the events of the load, up to and including `Initialized`.
async fn loaded(events: &mut CacheEventStream) {
    while !matches!(next(events).await, CacheEvent::Initialized) {}
}

/// root, root/a, root/a/x, root/a/y, root/b, root/b/z, root/c: 7 nodes, 3 with children.
async fn make_tree(writer: &Framework, root: &str) {
    writer.create(root).data(b"r").await.unwrap();
    for path in ["a", "a/x", "a/y", "b", "b/z", "c"] {
        writer.create(&format!("{root}/{path}")).data(path.as_bytes()).await.unwrap();
    }
}

/// Creates, changes and deletes `root/n` and checks each event's cost: `read` for a create or
/// a change, nothing for a delete.
async fn per_event(s: &Setup, events: &mut CacheEventStream, root: &str, read: &'static str) {
    let node = format!("{root}/n");
    let before = s.counting.counts();
    s.writer.create(&node).data(b"1").await.unwrap();
    assert_eq!(event(events).await, format!("+{node}"));
    assert_eq!(requests(&s.counting.counts().since(&before)), [(read, 1)], "a created node");

    let before = s.counting.counts();
    s.writer.set_data(&node, b"2").await.unwrap();
    assert_eq!(event(events).await, format!("~{node}"));
    assert_eq!(requests(&s.counting.counts().since(&before)), [(read, 1)], "a changed node");

    let before = s.counting.counts();
    s.writer.delete(&node).await.unwrap();
    assert_eq!(event(events).await, format!("-{node}"));
    // A create after the delete: its one read is all that crossed, so the delete sent nothing.
    s.writer.create(&node).data(b"3").await.unwrap();
    assert_eq!(event(events).await, format!("+{node}"));
    assert_eq!(requests(&s.counting.counts().since(&before)), [(read, 1)], "a deleted node, then a created one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tree_cache_costs_one_get_data_per_created_or_changed_node_and_none_per_delete() {
    bounded(Duration::from_secs(90), async {
        let s = setup().await;
        let root = unique_path("counts-tree");
        make_tree(&s.writer, &root).await;
        let cache = CuratorCache::builder(&s.cached, &root).build().unwrap();
        let mut events = cache.events();
        let before = s.counting.counts();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        let load = s.counting.counts().since(&before);
        // The root alone, then its children together, then theirs.
        let expected = [("addWatch", 1), ("getChildren", 3), ("getData", 1), ("multiRead", 2)];
        assert_eq!(requests(&load), expected, "the initial load");
        loaded(&mut events).await;
        per_event(&s, &mut events, &root, "getData").await;

        // A resync after a reconnect: the watch again, a read of every node (8 now: the root,
        // then 4, then 3 together), a listing of every node with children (3).
        let before = s.counting.counts();
        s.cut.drop_connections();
        let deadline = tokio::time::Instant::now() + SESSION / 2;
        while !(s.counting.counts().since(&before).get("addWatch") == 1 && cache.is_complete()) {
            assert!(tokio::time::Instant::now() < deadline, "no resync after the reconnect");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let resync = s.counting.counts().since(&before);
        // The framework's own: `sync` confirms the reconnect, `setWatches` re-arms the
        // client's one-shot watches.
        let resync: Vec<_> =
            requests(&resync).into_iter().filter(|(kind, _)| !matches!(*kind, "sync" | "setWatches")).collect();
        assert_eq!(resync, [("addWatch", 1), ("getChildren", 3), ("getData", 1), ("multiRead", 2)], "a resync");
        cache.close().await;
        delete_tree(&s.writer, &root).await;
        s.cached.close().await;
        s.writer.close().await;
        drop(s.server);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_only_costs_one_exists_per_created_or_changed_node_and_none_per_delete() {
    bounded(Duration::from_secs(90), async {
        let s = setup().await;
        let root = unique_path("counts-stats");
        make_tree(&s.writer, &root).await;
        let cache = CuratorCache::builder(&s.cached, &root).stats_only().build().unwrap();
        let mut events = cache.events();
        let before = s.counting.counts();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        // A listing carries the node's stat: one per node.
        let load = s.counting.counts().since(&before);
        assert_eq!(requests(&load), [("addWatch", 1), ("getChildren", 7)], "the initial load, stats only");
        loaded(&mut events).await;
        per_event(&s, &mut events, &root, "exists").await;
        cache.close().await;
        delete_tree(&s.writer, &root).await;
        s.cached.close().await;
        s.writer.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_and_single_node_modes_cost_one_read_per_event() {
    bounded(Duration::from_secs(90), async {
        let s = setup().await;
        let root = unique_path("counts-modes");
        make_tree(&s.writer, &root).await;

        let children = CuratorCache::builder(&s.cached, &root).mode(CacheMode::Children).build().unwrap();
        let mut events = children.events();
        let before = s.counting.counts();
        children.start().await.unwrap();
        children.initialized().await.unwrap();
        // One listing of the root, the children (a, b, c) read together.
        let load = s.counting.counts().since(&before);
        assert_eq!(requests(&load), [("addWatch", 1), ("getChildren", 1), ("multiRead", 1)], "children mode");
        loaded(&mut events).await;
        per_event(&s, &mut events, &root, "getData").await;
        // Closing removes the watch: the client sends one `removeWatches` once the watcher
        // is gone.
        let before = s.counting.counts();
        children.close().await;
        let deadline = tokio::time::Instant::now() + cache::EVENT_LIMIT;
        while s.counting.counts().since(&before).get("removeWatches") == 0 {
            assert!(tokio::time::Instant::now() < deadline, "no removeWatches after close()");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(requests(&s.counting.counts().since(&before)), [("removeWatches", 1)], "close()");

        let single =
            CuratorCache::builder(&s.cached, &format!("{root}/n")).mode(CacheMode::SingleNode).build().unwrap();
        let mut events = single.events();
        let before = s.counting.counts();
        single.start().await.unwrap();
        single.initialized().await.unwrap();
        let load = s.counting.counts().since(&before);
        assert_eq!(requests(&load), [("addWatch", 1), ("getData", 1)], "single-node mode");
        loaded(&mut events).await;
        let before = s.counting.counts();
        s.writer.set_data(&format!("{root}/n"), b"4").await.unwrap();
        assert_eq!(event(&mut events).await, format!("~{root}/n"));
        assert_eq!(requests(&s.counting.counts().since(&before)), [("getData", 1)], "a changed single node");
        single.close().await;
        delete_tree(&s.writer, &root).await;
        s.cached.close().await;
        s.writer.close().await;
    })
    .await
}

/// Many quick writes of one node: the events that arrive while its read is in flight share
/// that read (at most one more read follows it), so the reads never outnumber the events, and
/// the cache ends on the last version, having told every version it showed in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_changes_of_one_node_share_reads() {
    bounded(Duration::from_secs(90), async {
        let s = setup().await;
        let root = unique_path("counts-burst");
        s.writer.create(&root).data(b"0").await.unwrap();
        let cache = CuratorCache::builder(&s.cached, &root).build().unwrap();
        let mut events = cache.events();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        const WRITES: i32 = 200;
        let client = s.writer.zk_client().unwrap();
        let before = s.counting.counts();
        let writes = (1..=WRITES).map(|v| {
            let (client, root) = (client.clone(), root.clone());
            async move { client.set_data(&root, v.to_string().as_bytes(), None).await.unwrap() }
        });
        futures::future::join_all(writes).await;
        let mut last = 0;
        while last < WRITES {
            match tokio::time::timeout(cache::EVENT_LIMIT, events.next()).await {
                Ok(Some(CacheEvent::Changed(old, new))) => {
                    assert!(new.stat().version > old.stat().version);
                    last = new.stat().version;
                }
                Ok(Some(_)) => {}
                other => panic!("no event for the last version ({last} of {WRITES}): {other:?}"),
            }
        }
        let counts = s.counting.counts().since(&before);
        let (reads, notified) = (counts.get("getData"), counts.get("watch-event"));
        eprintln!("{WRITES} writes: {notified} watch events, {reads} getData");
        assert_eq!(notified, WRITES as u64, "one watch event per write");
        assert!(reads <= notified, "{reads} reads for {notified} events");
        assert!(reads >= 1);
        cache.close().await;
        delete_tree(&s.writer, &root).await;
        s.cached.close().await;
        s.writer.close().await;
    })
    .await
}

/// Changes that reach the cache together (here: transactions of 20 set-data each, whose
/// events the server sends back to back) are read together, in one `multiRead` per batch of
/// events the cache finds waiting: far fewer read requests than events. Every change still
/// ends in the cache, each node on its last version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_that_arrive_together_share_one_multi_read() {
    bounded(Duration::from_secs(90), async {
        let s = setup().await;
        let root = unique_path("counts-together");
        s.writer.create(&root).await.unwrap();
        const NODES: i32 = 20;
        const ROUNDS: i32 = 10;
        for i in 0..NODES {
            s.writer.create(&format!("{root}/n{i:02}")).data(b"0").await.unwrap();
        }
        let cache = CuratorCache::builder(&s.cached, &root).build().unwrap();
        let mut events = cache.events();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        let before = s.counting.counts();
        for round in 1..=ROUNDS {
            let data = round.to_string();
            let mut transaction = s.writer.transaction();
            for i in 0..NODES {
                transaction = transaction.set_data(&format!("{root}/n{i:02}"), data.as_bytes()).version(round - 1);
            }
            transaction.commit().await.unwrap();
        }
        let mut at_last = 0;
        while at_last < NODES {
            match tokio::time::timeout(cache::EVENT_LIMIT, events.next()).await {
                Ok(Some(CacheEvent::Changed(old, new))) => {
                    assert!(new.stat().version > old.stat().version);
                    if new.stat().version == ROUNDS {
                        at_last += 1;
                    }
                }
                Ok(Some(_)) => {}
                other => panic!("{at_last} of {NODES} nodes on their last version: {other:?}"),
            }
        }
        let counts = s.counting.counts().since(&before);
        let (reads, notified) = (counts.get("getData") + counts.get("multiRead"), counts.get("watch-event"));
        eprintln!("{notified} watch events, {reads} read requests ({:?})", requests(&counts));
        assert_eq!(notified, (NODES * ROUNDS) as u64, "one watch event per change");
        assert!(reads * 4 <= notified, "{reads} read requests for {notified} events");
        for i in 0..NODES {
            let node = cache.get(&format!("{root}/n{i:02}")).expect("a cached node");
            assert_eq!((node.stat().version, node.data().map(|d| d.as_slice())), (ROUNDS, Some(b"10".as_slice())));
        }
        cache.close().await;
        delete_tree(&s.writer, &root).await;
        s.cached.close().await;
        s.writer.close().await;
    })
    .await
}

/// A listing shows a node the cache's session may not read (a creator-only ACL of another
/// user): its read fails alone within the multi-read its siblings share, and the cache holds
/// every other node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_the_session_may_not_read_is_left_out_of_the_load_alone() {
    bounded(Duration::from_secs(90), async {
        let s = setup().await;
        let owner = Framework::builder(&s.server.connect_string())
            .auth("digest", b"cache-owner:secret")
            .start()
            .await
            .expect("a framework with digest auth");
        let root = unique_path("counts-acl");
        make_tree(&s.writer, &root).await;
        let secret = format!("{root}/secret");
        let creator_only = zk_recipes::zk::CreateMode::Persistent.with_acls(zk_recipes::zk::Acls::creator_all());
        owner.zk_client().unwrap().create(&secret, b"s", &creator_only).await.unwrap();

        let cache = CuratorCache::builder(&s.cached, &root).mode(CacheMode::Children).build().unwrap();
        let before = s.counting.counts();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        let load = s.counting.counts().since(&before);
        assert_eq!(requests(&load), [("addWatch", 1), ("getChildren", 1), ("multiRead", 1)], "the load");
        let names: Vec<String> = cache.nodes().iter().map(|n| n.name().to_owned()).collect();
        assert_eq!(names, ["a", "b", "c"], "every readable child, and not the other user's");
        assert!(cache.is_complete());
        cache.close().await;
        owner.zk_client().unwrap().delete(&secret, None).await.unwrap();
        owner.close().await;
        delete_tree(&s.writer, &root).await;
        s.cached.close().await;
        s.writer.close().await;
    })
    .await
}

/// A new session may be served by a follower behind what the last session read (ZooKeeper
/// keeps a session's reads in order across its reconnects, not across sessions): each watch's
/// add on the new session goes behind a `sync` of its own, which holds the add and the resync's
/// reads until that server has caught up with the leader. Three caches: three syncs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_syncs_each_watch_before_its_resync_reads() {
    bounded(Duration::from_secs(90), async {
        let s = setup().await;
        let root = unique_path("counts-new-session");
        let mut caches = Vec::new();
        for name in ["a", "b", "c"] {
            let path = format!("{root}/{name}");
            s.writer.create(&path).data(name.as_bytes()).await.unwrap();
            let cache = CuratorCache::builder(&s.cached, &path).build().unwrap();
            cache.start().await.unwrap();
            cache.initialized().await.unwrap();
            caches.push(cache);
        }
        let before = s.counting.counts();
        let session = s.cached.zk_client().unwrap().session().clone();
        zk_recipes::testing::expire_session(&s.cut, &s.server.connect_string(), session).await.expect("expiring");
        let deadline = tokio::time::Instant::now() + SESSION * 3;
        while !(s.counting.counts().since(&before).get("addWatch") == 3 && caches.iter().all(|c| c.is_complete())) {
            assert!(tokio::time::Instant::now() < deadline, "no resync on the new session");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(s.cached.state_watch().borrow().epoch, 2, "a new session");
        let syncs = s.counting.counts().since(&before).get("sync");
        assert!(syncs >= 3, "one sync per watch: {syncs}");
        for cache in caches {
            cache.close().await;
        }
        delete_tree(&s.writer, &root).await;
        s.cached.close().await;
        s.writer.close().await;
    })
    .await
}

/// A member of a ZooKeeper 3.6.0-3.8.0 ensemble sometimes answers a request only when another
/// request reaches it (the proxy does the same with `hold_next_reply`). The cache's read of a
/// changed node, held back, is let go by one `exists` the cache sends once it has waited a
/// second with nothing sent; without it the view stayed behind until the client's ping, 9 s
/// or more without a request at this session timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_the_server_holds_back_is_let_go_by_one_exists() {
    bounded(Duration::from_secs(90), async {
        let s = setup().await;
        let root = unique_path("counts-held");
        make_tree(&s.writer, &root).await;
        let cache = CuratorCache::builder(&s.cached, &root).build().unwrap();
        let mut events = cache.events();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        loaded(&mut events).await;
        let node = format!("{root}/a");
        let before = s.counting.counts();
        s.counting.hold_next_reply(); // the cache's read of the change
        s.writer.set_data(&node, b"changed").await.unwrap();
        // Well inside the 9 s the client stays silent before it pings.
        let changed = tokio::time::timeout(Duration::from_secs(3), event(&mut events)).await;
        assert_eq!(changed.expect("the change within 3 s"), format!("~{node}"));
        let during = s.counting.counts().since(&before);
        assert_eq!((during.get("exists"), during.get("ping")), (1, 0), "{during}");
        assert_eq!(cache.get(&node).expect("cached").data().map(Vec::as_slice), Some(&b"changed"[..]));
        cache.close().await;
        delete_tree(&s.writer, &root).await;
    })
    .await;
}
