//! Persistent watches on the framework against real ZooKeeper servers: events in order with
//! the namespace stripped, a `Resync` item before any event after a connection cut, a server
//! pause, a session expiry and a leader change; removal on drop; bad input; the server hazards
//! a caller must know about.

use crate::common;

use std::time::Duration;

use common::fixtures::{
    bounded, eventually, framework, init_tracing, server_without_persistent_watches, shared_connect, unique_path,
    wait_for_state, within, FaultyServer,
};
use futures::StreamExt;
use zk_recipes::testing::{four_letter_word, CountingProxy, FaultProxy, TestingCluster, TestingServer};
use zk_recipes::zk::{Acls, CreateMode};
use zk_recipes::{
    ConnectionState, Error, Framework, NodeEvent, NodeEventKind, PersistentWatch, ResyncReason, SessionFailurePolicy,
    WatchEvent, WatchMode,
};

const LIMIT: Duration = Duration::from_secs(90);

/// The next item of `watch`, which must be `Ok`.
async fn next_item(watch: &mut PersistentWatch, limit: Duration) -> WatchEvent {
    match within(limit, "a watch item", watch.next()).await {
        Some(Ok(item)) => item,
        other => panic!("the watch on {} ended or failed: {other:?}", watch.path()),
    }
}

/// The items of `watch` up to and including the event `kind` on `path`.
async fn items_until(watch: &mut PersistentWatch, kind: NodeEventKind, path: &str, limit: Duration) -> Vec<WatchEvent> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut items = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let item = next_item(watch, left).await;
        let done = matches!(&item, WatchEvent::Node(e) if e.kind == kind && e.path == path);
        items.push(item);
        if done {
            return items;
        }
    }
}

fn node(item: &WatchEvent) -> Option<&NodeEvent> {
    match item {
        WatchEvent::Node(event) => Some(event),
        _ => None,
    }
}

/// Reads `watch` up to its next `Resync` and returns the reason; node events on the way
/// must be ones that `may_precede` allows (made before the fault could be seen).
async fn await_resync(
    watch: &mut PersistentWatch,
    may_precede: impl Fn(&NodeEvent) -> bool,
    limit: Duration,
) -> ResyncReason {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match next_item(watch, left).await {
            WatchEvent::Resync { reason } => return reason,
            WatchEvent::Node(event) => assert!(may_precede(&event), "{event:?} came before the Resync"),
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// No node event may come before the `Resync`.
fn nothing(_: &NodeEvent) -> bool {
    false
}

#[tokio::test]
async fn events_arrive_in_order_with_the_namespace_stripped() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let namespace = unique_path("watch", "ns");
        let fw = Framework::builder(&connect).namespace(&namespace[1..]).start().await.unwrap();
        let dir = "/config";
        let mut recursive = fw.watch(dir, WatchMode::PersistentRecursive).await.unwrap();
        let mut own = fw.watch(dir, WatchMode::PersistentRecursive).await.unwrap();
        assert_eq!((recursive.path(), recursive.mode()), (dir, WatchMode::PersistentRecursive));

        fw.create(dir).data(b"").await.unwrap();
        fw.create("/config/a").data(b"1").await.unwrap();
        fw.set_data("/config/a", b"2").await.unwrap();
        fw.create("/config/a/deep").data(b"").await.unwrap();
        fw.delete("/config/a/deep").await.unwrap();
        fw.delete("/config/a").await.unwrap();
        let expected = [
            (NodeEventKind::Created, "/config"),
            (NodeEventKind::Created, "/config/a"),
            (NodeEventKind::DataChanged, "/config/a"),
            (NodeEventKind::Created, "/config/a/deep"),
            (NodeEventKind::Deleted, "/config/a/deep"),
            (NodeEventKind::Deleted, "/config/a"),
        ];
        for watch in [&mut recursive, &mut own] {
            for (kind, path) in expected {
                let item = next_item(watch, Duration::from_secs(10)).await;
                let event = node(&item).unwrap_or_else(|| panic!("expected {kind:?} {path}, got {item:?}"));
                assert_eq!((event.kind, event.path.as_str()), (kind, path), "{item:?}");
                // ZooKeeper 3.8 does not report the zxid (3.9 does).
                assert_eq!(event.zxid, None);
            }
        }
        // Dropping one of two watches on a path leaves the other one working.
        drop(own);
        fw.create("/config/b").data(b"").await.unwrap();
        let items = items_until(&mut recursive, NodeEventKind::Created, "/config/b", Duration::from_secs(10)).await;
        assert_eq!(items.len(), 1, "{items:?}");

        // The other mode: the node itself and its children changing.
        let mut persistent = fw.watch("/config/b", WatchMode::Persistent).await.unwrap();
        fw.create("/config/b/child").data(b"").await.unwrap();
        fw.set_data("/config/b", b"x").await.unwrap();
        let first = next_item(&mut persistent, Duration::from_secs(10)).await;
        assert_eq!(
            node(&first).map(|e| (e.kind, e.path.as_str())),
            Some((NodeEventKind::ChildrenChanged, "/config/b"))
        );
        let second = next_item(&mut persistent, Duration::from_secs(10)).await;
        assert_eq!(node(&second).map(|e| (e.kind, e.path.as_str())), Some((NodeEventKind::DataChanged, "/config/b")));

        // Closing the framework ends the streams.
        fw.close().await;
        let rest: Vec<_> = within(Duration::from_secs(10), "the stream's end", recursive.collect::<Vec<_>>()).await;
        assert!(rest.iter().all(|i| i.is_ok()), "{rest:?}");
    })
    .await
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_sent() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let proxy = CountingProxy::start(&connect).await.unwrap();
        let fw = Framework::connect(&proxy.connect_string()).await.unwrap();
        let before = proxy.counts();
        for bad in ["", "relative", "/trailing/", "/double//slash", "/nul\0", "/dot/./x", "/dot/../x"] {
            let refused = fw.watch(bad, WatchMode::PersistentRecursive).await;
            assert!(matches!(refused, Err(Error::InvalidPath { .. })), "{bad:?}: {refused:?}");
        }
        assert_eq!(proxy.counts().since(&before).get("addWatch"), 0);

        // The server keeps one mode per session and path: the framework refuses to mix them.
        let path = unique_path("watch", "modes");
        let _recursive = fw.watch(&path, WatchMode::PersistentRecursive).await.unwrap();
        let before = proxy.counts();
        let mixed = fw.watch(&path, WatchMode::Persistent).await;
        assert!(matches!(mixed, Err(Error::InvalidArgument { name: "mode", .. })), "{mixed:?}");
        assert_eq!(proxy.counts().since(&before).get("addWatch"), 0);

        // A framework that is not started.
        let unstarted = Framework::builder(&connect).build().unwrap();
        assert!(matches!(unstarted.watch("/x", WatchMode::Persistent).await, Err(Error::NotStarted)));
        fw.close().await;
        assert!(matches!(fw.watch("/x", WatchMode::Persistent).await, Err(Error::Closed)));
    })
    .await
}

/// A one-shot watch of the same session on a persistently watched path silences the persistent
/// watch on ZooKeeper 3.6-3.8: there the framework's watched reads share the persistent watch
/// (an `addWatch` in its mode, then the read without a watch) and set no one-shot watch; each
/// completes with the path's next change of its kind.
#[tokio::test]
async fn a_watched_read_on_a_persistently_watched_path_shares_the_persistent_watch() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let proxy = CountingProxy::start(&connect).await.unwrap();
        let fw = Framework::connect(&proxy.connect_string()).await.unwrap();
        let path = unique_path("watch", "kinds");
        fw.create(&path).data(b"v").await.unwrap();
        let persistent = fw.watch(&path, WatchMode::PersistentRecursive).await.unwrap();
        let before = proxy.counts();
        let (data, _, on_data) = fw.get_data(&path).watch().await.unwrap();
        assert_eq!(data, b"v");
        let (_, on_exists) = fw.exists(&path).watch().await.unwrap();
        let (_, _, on_children) = fw.get_children(&path).watch().await.unwrap();
        let sent = proxy.counts().since(&before);
        assert_eq!(sent.get("addWatch"), 3, "{sent:?}");
        assert!(sent.iter().all(|(kind, _)| !kind.ends_with("+watch")), "no one-shot watch: {sent:?}");
        fw.set_data(&path, b"w").await.unwrap();
        for watch in [on_data, on_exists] {
            let fired = within(Duration::from_secs(10), "a data watch", watch.changed()).await.unwrap();
            assert_eq!((fired.kind, fired.path.as_str()), (NodeEventKind::DataChanged, path.as_str()));
        }
        fw.create(&format!("{path}/child")).data(b"").await.unwrap();
        let fired = within(Duration::from_secs(10), "the children watch", on_children.changed()).await.unwrap();
        assert_eq!((fired.kind, fired.path.as_str()), (NodeEventKind::ChildrenChanged, path.as_str()));
        // Once the persistent watch is gone (its task removes it after the drop returns), a
        // watched read sets its own one-shot watch again.
        drop(persistent);
        eventually(LIMIT, "a one-shot watch once the persistent one is gone", || async {
            let before = proxy.counts();
            let (_, _, watch) = fw.get_data(&path).watch().await.map_err(|e| e.to_string())?;
            drop(watch);
            match proxy.counts().since(&before).get("getData+watch") {
                1 => Ok(()),
                _ => Err("shared still".to_owned()),
            }
        })
        .await;
        fw.delete(&path).recursive().await.unwrap();
        fw.close().await;
    })
    .await
}

/// `wchc` lists the server's watches by session: whether `path` is among them.
async fn server_watches(server: &str, path: &str) -> bool {
    let wchc = four_letter_word(server, "wchc", Duration::from_secs(5)).await.expect("wchc");
    wchc.lines().any(|line| line.trim() == path)
}

#[tokio::test]
async fn dropping_the_watch_removes_it_from_the_server() {
    init_tracing();
    bounded(LIMIT, async {
        let server = zk_recipes::testing::shared_server().await.unwrap();
        let proxy = CountingProxy::start(&server.connect_string()).await.unwrap();
        let fw = Framework::connect(&proxy.connect_string()).await.unwrap();
        let path = unique_path("watch", "drop");
        let before = proxy.counts();
        let watch = fw.watch(&path, WatchMode::PersistentRecursive).await.unwrap();
        assert_eq!(proxy.counts().since(&before).get("addWatch"), 1);
        assert!(server_watches(&server.connect_string(), &path).await, "the server holds the watch");

        let before = proxy.counts();
        drop(watch);
        eventually(Duration::from_secs(10), "removeWatches sent", || async {
            let sent = proxy.counts().since(&before).get("removeWatches");
            if sent == 1 {
                Ok(())
            } else {
                Err(format!("{sent} removeWatches"))
            }
        })
        .await;
        eventually(Duration::from_secs(10), "the server forgot the watch", || async {
            match server_watches(&server.connect_string(), &path).await {
                false => Ok(()),
                true => Err("still listed by wchc".to_owned()),
            }
        })
        .await;
        fw.close().await;
    })
    .await
}

/// A writer on its own session, straight to `connect`.
async fn writer(connect: &str) -> Framework {
    framework(connect, Duration::from_secs(10)).await
}

#[tokio::test]
async fn a_cut_connection_on_the_same_session_resyncs_then_delivers() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let proxy = FaultProxy::start(&connect).await.unwrap();
        let fw = framework(&proxy.connect_string(), Duration::from_secs(6)).await;
        let other = writer(&connect).await;
        let dir = unique_path("watch", "cut");
        let mut watch = fw.watch(&dir, WatchMode::PersistentRecursive).await.unwrap();
        other.create(&dir).data(b"").await.unwrap();
        items_until(&mut watch, NodeEventKind::Created, &dir, Duration::from_secs(10)).await;
        let session = fw.snapshot();

        for cut in 0..3 {
            if cut % 2 == 0 {
                proxy.drop_connections();
            } else {
                proxy.reset_connections();
            }
            // Made while the connection is down, or just back: reported or not, but never
            // as if nothing had happened.
            let during = format!("{dir}/during-{cut}");
            other.create(&during).data(b"").await.unwrap();
            let reason = await_resync(&mut watch, |e| e.path == during, Duration::from_secs(10)).await;
            assert_eq!(reason, ResyncReason::Reconnected);
            let after = format!("{dir}/after-{cut}");
            other.create(&after).data(b"").await.unwrap();
            items_until(&mut watch, NodeEventKind::Created, &after, Duration::from_secs(10)).await;
        }
        let now = fw.snapshot();
        assert_eq!((now.session_id, now.epoch), (session.session_id, session.epoch), "the same session");
        fw.close().await;
        other.close().await;
    })
    .await
}

#[tokio::test]
async fn a_server_paused_shorter_than_the_session_timeout_resyncs_on_the_same_session() {
    init_tracing();
    bounded(LIMIT, async {
        let server = TestingServer::builder().max_session_timeout(Duration::from_secs(8)).start().await.unwrap();
        let session_timeout = Duration::from_secs(8);
        let fw = framework(&server.connect_string(), session_timeout).await;
        let dir = unique_path("watch", "pause");
        let mut watch = fw.watch(&dir, WatchMode::PersistentRecursive).await.unwrap();
        fw.create(&dir).data(b"").await.unwrap();
        items_until(&mut watch, NodeEventKind::Created, &dir, Duration::from_secs(10)).await;
        let session = fw.snapshot();

        server.pause().unwrap();
        // The client notices the silence after 2/5 of the session timeout.
        wait_for_state(&fw, session_timeout, "suspended", |s| s.state == ConnectionState::Suspended).await;
        server.resume().unwrap();
        assert_eq!(await_resync(&mut watch, nothing, session_timeout).await, ResyncReason::Reconnected);
        let after = format!("{dir}/after");
        let other = writer(&server.connect_string()).await;
        other.create(&after).data(b"").await.unwrap();
        items_until(&mut watch, NodeEventKind::Created, &after, session_timeout).await;
        let now = fw.snapshot();
        assert_eq!((now.session_id, now.epoch), (session.session_id, session.epoch), "the same session");
        fw.close().await;
        other.close().await;
    })
    .await
}

#[tokio::test]
async fn an_expired_session_resyncs_on_the_new_session() {
    init_tracing();
    bounded(LIMIT, async {
        let faulty = FaultyServer::start().await;
        let fw = framework(&faulty.proxied(), Duration::from_secs(4)).await;
        let other = writer(&faulty.direct()).await;
        let dir = unique_path("watch", "expiry");
        let mut watch = fw.watch(&dir, WatchMode::PersistentRecursive).await.unwrap();
        other.create(&dir).data(b"").await.unwrap();
        items_until(&mut watch, NodeEventKind::Created, &dir, Duration::from_secs(10)).await;

        // Twice: every new session gets the watch.
        for round in 0..2 {
            let back = faulty.expire(&fw, Duration::from_secs(30)).await;
            assert_eq!(back.epoch, 2 + round);
            assert_eq!(await_resync(&mut watch, nothing, Duration::from_secs(20)).await, ResyncReason::NewSession);
            let after = format!("{dir}/after-{round}");
            other.create(&after).data(b"").await.unwrap();
            items_until(&mut watch, NodeEventKind::Created, &after, Duration::from_secs(20)).await;
        }
        fw.close().await;
        other.close().await;
    })
    .await
}

#[tokio::test]
async fn a_killed_leader_resyncs_then_delivers() {
    init_tracing();
    bounded(Duration::from_secs(180), async {
        let mut cluster = TestingCluster::start().await.unwrap();
        cluster.settle(Duration::from_secs(60)).await.unwrap();
        let session_timeout = Duration::from_secs(15);
        let fw = framework(&cluster.connect_string(), session_timeout).await;
        let dir = unique_path("watch", "leader");
        let mut watch = fw.watch(&dir, WatchMode::PersistentRecursive).await.unwrap();
        fw.create(&dir).data(b"").await.unwrap();
        items_until(&mut watch, NodeEventKind::Created, &dir, Duration::from_secs(10)).await;

        // Every member closes its client connections when the leader goes.
        let leader = cluster.leader().await.expect("a leader");
        cluster.kill(leader).await.unwrap();
        let reason = await_resync(&mut watch, nothing, session_timeout * 2).await;
        // The session survives an election shorter than its timeout; a slow one may end it.
        assert!(matches!(reason, ResyncReason::Reconnected | ResyncReason::NewSession), "{reason:?}");
        let after = format!("{dir}/after");
        fw.create(&after).data(b"").await.unwrap();
        items_until(&mut watch, NodeEventKind::Created, &after, session_timeout).await;
        fw.close().await;
    })
    .await
}

#[tokio::test]
async fn the_session_failure_policy_decides_whether_an_operation_moves_to_the_new_session() {
    init_tracing();
    bounded(LIMIT, async {
        let faulty = FaultyServer::start().await;
        let path = unique_path("watch", "policy");
        let setup = writer(&faulty.direct()).await;
        setup.create(&path).data(b"data").await.unwrap();
        for policy in [SessionFailurePolicy::Fail, SessionFailurePolicy::Retry] {
            let fw = Framework::builder(&faulty.proxied())
                .session_timeout(Duration::from_secs(4))
                .retry_policy(zk_recipes::retry::RetryForever::new(Duration::from_millis(100)))
                .session_failure_policy(policy)
                .start()
                .await
                .unwrap();
            let session = fw.zk_client().unwrap().session().clone();
            // The read goes out into a silent network, then the session expires under it.
            faulty.proxy.set_mode(zk_recipes::testing::ProxyMode::BlackHole);
            let read = tokio::spawn({
                let (fw, path) = (fw.clone(), path.clone());
                async move { fw.get_data(&path).await }
            });
            // A create too (its own retry loop): under `Fail` not made on the new session.
            let ephemeral = format!("{path}-{policy:?}");
            let create = tokio::spawn({
                let (fw, ephemeral) = (fw.clone(), ephemeral.clone());
                async move { fw.create(&ephemeral).mode(zk_recipes::zk::CreateMode::Ephemeral).await }
            });
            tokio::time::sleep(Duration::from_millis(100)).await;
            zk_recipes::testing::expire_session(&faulty.proxy, &faulty.direct(), session).await.unwrap();
            let result = within(Duration::from_secs(30), "the read", read).await.unwrap();
            let created = within(Duration::from_secs(30), "the create", create).await.unwrap();
            match policy {
                SessionFailurePolicy::Fail => {
                    assert!(
                        matches!(result, Err(Error::ZooKeeper(zk_recipes::zk::Error::SessionExpired))),
                        "{result:?}"
                    );
                    assert!(
                        matches!(created, Err(Error::ZooKeeper(zk_recipes::zk::Error::SessionExpired))),
                        "{created:?}"
                    );
                    assert_eq!(setup.exists(&ephemeral).await.unwrap(), None);
                }
                _ => {
                    assert_eq!(result.unwrap().0, b"data");
                    assert_eq!(created.unwrap().path, ephemeral);
                }
            }
            fw.close().await;
        }
        setup.close().await;
    })
    .await
}

/// ACL filtering of watch events (ZooKeeper 3.8.4+, 3.9.2+, and Debian's 3.8.0 build): a
/// session is not told about nodes it may not read, though listing the parent shows them.
#[tokio::test]
async fn events_for_nodes_the_session_may_not_read_are_not_delivered() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = Framework::connect(&connect).await.unwrap();
        let owner = Framework::builder(&connect).auth("digest", b"watch-owner:secret").start().await.unwrap();
        let dir = unique_path("watch", "acl");
        owner.create(&dir).data(b"").await.unwrap();
        let mut watch = fw.watch(&dir, WatchMode::PersistentRecursive).await.unwrap();

        let secret = format!("{dir}/secret");
        let client = owner.zk_client().unwrap();
        let creator_only = CreateMode::Persistent.with_acls(Acls::creator_all());
        client.create(&secret, b"", &creator_only).await.unwrap();
        let open = format!("{dir}/open");
        owner.create(&open).data(b"").await.unwrap();
        let items = items_until(&mut watch, NodeEventKind::Created, &open, Duration::from_secs(10)).await;
        assert_eq!(items.len(), 1, "only the readable node is reported: {items:?}");
        let mut children = fw.get_children(&dir).await.unwrap();
        children.sort();
        assert_eq!(children, ["open", "secret"], "a listing shows both");
        owner.close().await;
        fw.close().await;
    })
    .await
}

/// A server whose watch manager has no persistent watches (ZooKeeper's
/// `WatchManagerOptimized`, as a 3.5 server): `Unimplemented`, remembered for the session, so a
/// second watch is refused without a request.
#[tokio::test]
async fn a_server_without_persistent_watches_refuses_them_with_a_typed_error() {
    init_tracing();
    bounded(LIMIT, async {
        let server = server_without_persistent_watches().await;
        let proxy = CountingProxy::start(&server.connect_string()).await.unwrap();
        let fw = Framework::connect(&proxy.connect_string()).await.unwrap();
        let path = unique_path("watch", "refused");
        // A fresh session, before any watch of its own: `server_info` asks with an `addWatch`
        // on a probe path, which this server refuses, though it serves 3.6's `getEphemerals`.
        let fresh = Framework::connect(&server.connect_string()).await.unwrap();
        let info = fresh.server_info().await.unwrap();
        assert!(!info.persistent_watches && info.since_3_6, "{info:?}");
        fresh.close().await;
        let before = proxy.counts();
        let refused = fw.watch(&path, WatchMode::PersistentRecursive).await;
        // The server answers MarshallingError; the framework reports the missing feature and
        // the version it needs.
        let unsupported = |e: &Result<_, Error>| {
            matches!(e, Err(Error::Unsupported { feature: "persistent watches", reason }) if reason.contains("3.6"))
        };
        assert!(unsupported(&refused), "{refused:?}");
        let again = fw.watch(&path, WatchMode::Persistent).await;
        assert!(unsupported(&again), "{again:?}");
        assert_eq!(proxy.counts().since(&before).get("addWatch"), 1, "the second watch was refused locally");
        // What the framework knows of the server: 3.6+ (it serves getEphemerals), without
        // persistent watches.
        let info = fw.server_info().await.unwrap();
        assert!(!info.persistent_watches && info.since_3_6 && info.min_version == (3, 6), "{info:?}");
        // Everything else works.
        fw.create(&path).data(b"").await.unwrap();
        fw.close().await;
    })
    .await
}

#[test]
fn watch_types_can_move_between_tasks() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<PersistentWatch>();
    assert_send_sync::<WatchEvent>();
    assert_send_sync::<SessionFailurePolicy>();
}

/// A consumer that stops reading holds back no growing queue: past a full buffer the events
/// are dropped, and once it reads again the stream says `Resync` (`Lagged`) before the events
/// that follow.
#[tokio::test]
async fn a_consumer_that_falls_a_buffer_behind_gets_a_lagged_resync() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&shared_connect().await, Duration::from_secs(10)).await;
        let dir = unique_path("watch", "lagged");
        fw.create(&dir).data(b"").await.unwrap();
        let mut watch = fw.watch(&dir, WatchMode::Persistent).await.unwrap();
        // 300 changes, far more than the stream buffers, with nobody reading.
        for i in 0..300u32 {
            fw.set_data(&dir, &i.to_be_bytes()).await.unwrap();
        }
        let mut changes = 0;
        loop {
            match next_item(&mut watch, Duration::from_secs(10)).await {
                WatchEvent::Node(event) if event.kind == NodeEventKind::DataChanged => changes += 1,
                WatchEvent::Resync { reason } => {
                    assert_eq!(reason, ResyncReason::Lagged);
                    break;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!((1..300).contains(&changes), "{changes} changes before the resync");
        // After the resync, what follows is delivered.
        fw.create(&format!("{dir}/marker")).data(b"").await.unwrap();
        let items = items_until(&mut watch, NodeEventKind::ChildrenChanged, &dir, Duration::from_secs(10)).await;
        assert!(items.iter().all(|item| matches!(item, WatchEvent::Node(_))), "{items:?}");
        drop(watch);
        fw.delete(&dir).recursive().await.unwrap();
        fw.close().await;
    })
    .await
}
