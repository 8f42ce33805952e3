//! `PersistentNode` and `GroupMember` against real servers: the node deleted by another
//! client, the session expired, the connection black-holed past the session timeout (the node
//! is back within a bound derived from the session timeout, one node per registration, data
//! current), close through a connection loss, bad input, a node whose path the framework
//! watches persistently.

use crate::common;

use std::time::Duration;

use common::fixtures::{
    bounded, children, eventually, framework, init_tracing, server_without_persistent_watches, shared_connect,
    unique_path, wait_for_event, within, FaultyServer,
};
use common::timing::{back_within, EVENT, FAULT_SESSION, LIMIT, QUIET, SESSION};
use futures::StreamExt;
use zk_recipes::retry::{RetryForever, RetryNTimes};
use zk_recipes::testing::{CountingProxy, ProxyMode};
use zk_recipes::{
    CacheMode, ConnectionState, CreateMode, CuratorCache, Error, Framework, GroupMember, MembershipEvent,
    NodeEventKind, PersistentNode, WatchEvent, WatchMode,
};

/// Waits until the node is registered at `path`, with `data`, as the only child of `parent`.
async fn one_node_with(fw: &Framework, node: &PersistentNode, parent: &str, data: &[u8], limit: Duration) -> String {
    let mut registered = node.registered();
    within(limit, "the node registered", registered.wait_for(|r| *r)).await.unwrap();
    let path = node.actual_path().expect("a registered node has a path");
    eventually(limit, "one node with the current data", || async {
        let kids = children(fw, parent).await;
        let read = fw.get_data(&path).await.map(|(d, _)| d);
        match (kids.len(), read) {
            (1, Ok(d)) if d == data => Ok(()),
            (n, read) => Err(format!("{n} children {kids:?}, data {read:?}")),
        }
    })
    .await;
    path
}

#[tokio::test]
async fn deleted_by_another_client_comes_back_at_the_same_name_with_current_data() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = framework(&connect, SESSION).await;
        let other = framework(&connect, SESSION).await;
        let parent = unique_path("pnode", "deleted");
        let node = PersistentNode::builder(&fw, &format!("{parent}/instance-"))
            .mode(CreateMode::EphemeralSequential)
            .data(b"one".to_vec())
            .start()
            .unwrap();
        assert!(node.wait_for_initial_create(EVENT).await.unwrap());
        let first = one_node_with(&fw, &node, &parent, b"one", EVENT).await;
        let name = first.rsplit('/').next().unwrap();
        assert!(name.starts_with("_c_") && name.contains("-instance-"), "protected sequential name: {name}");

        node.set_data(b"two".to_vec()).await.unwrap();
        for _ in 0..3 {
            let (_, before) = other.get_data(&first).await.unwrap();
            other.delete(&first).await.unwrap();
            // The handle noticed the delete once the node is made again: `registered()` can be
            // false too briefly for a receiver to see (a watch channel keeps the last value).
            eventually(EVENT, "noticing the delete", || async {
                match other.get_data(&first).await {
                    Ok((_, stat)) if stat.czxid > before.czxid => Ok(()),
                    read => Err(format!("{read:?}")),
                }
            })
            .await;
            let again = one_node_with(&fw, &node, &parent, b"two", EVENT).await;
            assert_eq!(again, first, "a re-create keeps the name and the sequence number");
        }
        let (_, stat) = other.get_data(&first).await.unwrap();
        assert_eq!(stat.ephemeral_owner, fw.snapshot().session_id);

        node.close().await.unwrap();
        assert!(children(&other, &parent).await.is_empty());
        assert!(!node.is_registered());
        assert!(node.set_data(b"x".to_vec()).await.unwrap_err().is_closed());
        fw.close().await;
        other.close().await;
    })
    .await;
}

#[tokio::test]
async fn session_expired_node_is_back_once() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let fw = framework(&servers.proxied(), FAULT_SESSION).await;
        let observer = framework(&servers.direct(), FAULT_SESSION).await;
        let parent = unique_path("pnode", "expired");
        let node = PersistentNode::builder(&fw, &format!("{parent}/member-"))
            .mode(CreateMode::EphemeralSequential)
            .data(b"a".to_vec())
            .start()
            .unwrap();
        assert!(node.wait_for_initial_create(EVENT).await.unwrap());
        let first = one_node_with(&observer, &node, &parent, b"a", EVENT).await;
        let bound = back_within(FAULT_SESSION);
        for round in 0..2 {
            let data = format!("after-{round}");
            node.set_data(data.clone().into_bytes()).await.unwrap();
            let new_session = servers.expire(&fw, bound).await;
            let path = one_node_with(&observer, &node, &parent, data.as_bytes(), bound).await;
            assert_eq!(path, first);
            let (_, stat) = observer.get_data(&path).await.unwrap();
            assert_eq!(stat.ephemeral_owner, new_session.session_id, "the new session owns the node");
        }
        node.close().await.unwrap();
        assert!(children(&observer, &parent).await.is_empty());
        fw.close().await;
        observer.close().await;
    })
    .await;
}

#[tokio::test]
async fn black_holed_past_the_session_timeout_node_is_back_once() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let fw = framework(&servers.proxied(), FAULT_SESSION).await;
        let observer = framework(&servers.direct(), FAULT_SESSION).await;
        let parent = unique_path("pnode", "blackhole");
        let node = PersistentNode::builder(&fw, &format!("{parent}/member-"))
            .mode(CreateMode::EphemeralSequential)
            .data(b"a".to_vec())
            .start()
            .unwrap();
        let first = one_node_with(&observer, &node, &parent, b"a", EVENT).await;
        let epoch = fw.snapshot().epoch;

        servers.proxy.set_mode(ProxyMode::BlackHole);
        // The fault itself lasts past the session timeout, so the server expires the session.
        tokio::time::sleep(FAULT_SESSION * 2).await;
        eventually(EVENT, "the old session's node gone", || async {
            let kids = children(&observer, &parent).await;
            if kids.is_empty() {
                Ok(())
            } else {
                Err(format!("{kids:?}"))
            }
        })
        .await;
        servers.proxy.set_mode(ProxyMode::Pass);
        servers.proxy.drop_connections();

        let path = one_node_with(&observer, &node, &parent, b"a", back_within(FAULT_SESSION)).await;
        assert_eq!(path, first);
        assert!(fw.snapshot().epoch > epoch, "a new session");
        node.close().await.unwrap();
        fw.close().await;
        observer.close().await;
    })
    .await;
}

#[tokio::test]
async fn close_deletes_a_persistent_node_through_a_connection_loss() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let fw = framework(&servers.proxied(), FAULT_SESSION).await;
        let observer = framework(&servers.direct(), FAULT_SESSION).await;
        let path = unique_path("pnode", "close");
        let node =
            PersistentNode::builder(&fw, &path).mode(CreateMode::Persistent).data(b"p".to_vec()).start().unwrap();
        assert!(node.wait_for_initial_create(EVENT).await.unwrap());
        assert_eq!(node.actual_path().as_deref(), Some(path.as_str()));

        servers.proxy.set_mode(ProxyMode::BlackHole);
        servers.proxy.drop_connections();
        let closing = tokio::spawn(async move { node.close().await });
        // Shorter than the session timeout: the session survives, the delete waits for it.
        tokio::time::sleep(FAULT_SESSION / 4).await;
        assert!(observer.exists(&path).await.unwrap().is_some(), "nothing deleted while cut off");
        servers.proxy.set_mode(ProxyMode::Pass);
        servers.proxy.drop_connections();
        within(EVENT, "close", closing).await.unwrap().unwrap();
        assert!(observer.exists(&path).await.unwrap().is_none(), "close deleted the node");
        fw.close().await;
        observer.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_persistent_node_adopts_an_existing_node_and_writes_its_data() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&shared_connect().await, SESSION).await;
        let path = unique_path("pnode", "adopt");
        fw.create(&path).data(b"old").await.unwrap();
        let node =
            PersistentNode::builder(&fw, &path).mode(CreateMode::Persistent).data(b"new".to_vec()).start().unwrap();
        assert!(node.wait_for_initial_create(EVENT).await.unwrap());
        eventually(EVENT, "our data written", || async {
            match fw.get_data(&path).await {
                Ok((d, _)) if d == b"new" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        node.close().await.unwrap();
        assert!(fw.exists(&path).await.unwrap().is_none());
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn bad_input_is_refused_and_creates_nothing() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&shared_connect().await, SESSION).await;
        let parent = unique_path("pnode", "bad");
        fn refused<T: std::fmt::Debug>(r: zk_recipes::Result<T>) -> Error {
            r.unwrap_err()
        }
        assert!(matches!(refused(PersistentNode::builder(&fw, "/").start()), Error::InvalidPath { .. }));
        assert!(matches!(refused(PersistentNode::builder(&fw, "no-slash").start()), Error::InvalidPath { .. }));
        assert!(matches!(
            refused(PersistentNode::builder(&fw, &format!("{parent}/")).start()),
            Error::InvalidPath { .. }
        ));
        assert!(refused(
            PersistentNode::builder(&fw, &format!("{parent}/a"))
                .mode(CreateMode::EphemeralSequential)
                .protected(false)
                .start()
        )
        .is_invalid_argument());
        assert!(refused(
            PersistentNode::builder(&fw, &format!("{parent}/a")).mode(CreateMode::Ephemeral).ttl(EVENT).start()
        )
        .is_invalid_argument());
        let forever = PersistentNode::builder(&fw, &format!("{parent}/a"))
            .mode(CreateMode::Persistent)
            .ttl(Duration::MAX)
            .start();
        assert!(refused(forever).is_invalid_argument());
        // Data no request can carry is refused at the start, not by the task's first create.
        let big = vec![0u8; 2 << 20];
        fn too_big<T: std::fmt::Debug>(r: zk_recipes::Result<T>) -> bool {
            matches!(r, Err(Error::TooLarge { name: "data", .. }))
        }
        assert!(too_big(PersistentNode::builder(&fw, &format!("{parent}/a")).data(big.clone()).start()));
        assert!(too_big(GroupMember::new(&fw, &parent, "a", big.clone())));
        assert!(refused(GroupMember::new(&fw, &parent, "a/b", Vec::new())).is_invalid_argument());
        assert!(refused(GroupMember::new(&fw, &parent, "", Vec::new())).is_invalid_argument());
        assert!(refused(GroupMember::new(&fw, &parent, "..", Vec::new())).is_invalid_argument());
        // The node's keeper is a task: outside a runtime, a typed refusal rather than a panic.
        let outside = std::thread::spawn({
            let (fw, parent) = (fw.clone(), parent.clone());
            move || {
                let node = PersistentNode::builder(&fw, &format!("{parent}/a")).start().map(drop);
                let member = GroupMember::new(&fw, &parent, "a", Vec::new()).map(drop);
                (node, member)
            }
        });
        let (node, member) = outside.join().expect("no panic outside a runtime");
        assert!(refused(node).is_invalid_argument());
        assert!(refused(member).is_invalid_argument());
        assert!(fw.exists(&parent).await.unwrap().is_none(), "nothing created");
        // A wait that cannot wait is refused (`actual_path` tells without waiting); the
        // longest one waits as long as it takes.
        let node = PersistentNode::builder(&fw, &format!("{parent}/timed")).start().unwrap();
        assert!(node.wait_for_initial_create(Duration::ZERO).await.unwrap_err().is_invalid_argument());
        assert!(node.wait_for_initial_create(Duration::MAX).await.unwrap());
        node.close().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn two_group_members_see_each_other_join_change_and_leave() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw_a = framework(&connect, SESSION).await;
        let fw_b = framework(&connect, SESSION).await;
        let group = unique_path("group", "two");
        let a = GroupMember::new(&fw_a, &group, "a", b"pa".to_vec()).unwrap();
        a.start().await.unwrap();
        assert!(a.wait_for_initial_create(EVENT).await.unwrap());
        let mut events = a.events();
        let b = GroupMember::new(&fw_b, &group, "b", b"pb".to_vec()).unwrap();
        b.start().await.unwrap();
        assert!(b.wait_for_initial_create(EVENT).await.unwrap());

        let want = |pairs: &[(&str, &[u8])]| {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_vec())).collect::<std::collections::BTreeMap<_, _>>()
        };
        for member in [&a, &b] {
            eventually(EVENT, "both members seen", || async {
                let got = member.current_members();
                if got == want(&[("a", b"pa"), ("b", b"pb")]) {
                    Ok(())
                } else {
                    Err(format!("{got:?}"))
                }
            })
            .await;
        }
        within(EVENT, "b joining", async {
            while let Some(event) = events.next().await {
                if event == MembershipEvent::Joined("b".into(), b"pb".to_vec()) {
                    return;
                }
            }
        })
        .await;

        b.set_this_data(b"pb2".to_vec()).await.unwrap();
        within(EVENT, "b changing", async {
            while let Some(event) = events.next().await {
                if event == MembershipEvent::Changed("b".into(), b"pb2".to_vec()) {
                    return;
                }
            }
        })
        .await;
        b.close().await.unwrap();
        within(EVENT, "b leaving", async {
            while let Some(event) = events.next().await {
                if event == MembershipEvent::Left("b".into()) {
                    return;
                }
            }
        })
        .await;
        assert_eq!(a.current_members(), want(&[("a", b"pa")]));
        a.close().await.unwrap();
        fw_a.close().await;
        fw_b.close().await;
    })
    .await;
}

#[tokio::test]
async fn data_set_while_the_first_create_is_cut_off_is_the_data_created() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let fw = framework(&servers.proxied(), FAULT_SESSION).await;
        let observer = framework(&servers.direct(), FAULT_SESSION).await;
        let parent = unique_path("pnode", "cutoff");
        servers.proxy.set_mode(ProxyMode::BlackHole);
        servers.proxy.drop_connections();
        let node = PersistentNode::builder(&fw, &format!("{parent}/member-"))
            .mode(CreateMode::EphemeralSequential)
            .data(b"old".to_vec())
            .start()
            .unwrap();
        within(EVENT, "set_data while cut off", node.set_data(b"new".to_vec())).await.unwrap();
        assert!(!node.wait_for_initial_create(Duration::from_millis(200)).await.unwrap());
        // Shorter than the session timeout: the same session goes on.
        servers.proxy.set_mode(ProxyMode::Pass);
        servers.proxy.drop_connections();
        one_node_with(&observer, &node, &parent, b"new", back_within(FAULT_SESSION)).await;
        node.close().await.unwrap();
        assert!(children(&observer, &parent).await.is_empty());
        fw.close().await;
        observer.close().await;
    })
    .await;
}

/// An unprotected ephemeral persistent node at `path` (a child of `parent`) holding `one`,
/// registered.
async fn ephemeral_at(fw: &Framework, parent: &str, path: &str) -> PersistentNode {
    let node = PersistentNode::builder(fw, path)
        .mode(CreateMode::Ephemeral)
        .protected(false)
        .data(b"one".to_vec())
        .start()
        .unwrap();
    assert!(node.wait_for_initial_create(EVENT).await.unwrap());
    assert_eq!(one_node_with(fw, &node, parent, b"one", EVENT).await, path);
    node
}

/// Nothing goes through `proxy` for a while (a standing node sends nothing). A window that
/// can only let a test pass wrongly, never fail it wrongly.
async fn stands_quiet(proxy: &CountingProxy) {
    let before = proxy.counts();
    tokio::time::sleep(QUIET * 3).await;
    let quiet = proxy.counts().since(&before);
    assert_eq!(quiet.requests(), 0, "requests while the node stands: {}", quiet.per_op(1));
}

/// `other` deletes the node at `path`, which is then made again (a newer creation).
async fn deleted_and_made_again(other: &Framework, path: &str) {
    let (_, first) = other.get_data(path).await.unwrap();
    other.delete(path).await.unwrap();
    eventually(EVENT, "the node made again", || async {
        match other.get_data(path).await {
            Ok((_, stat)) if stat.czxid > first.czxid => Ok(()),
            read => Err(format!("{read:?}")),
        }
    })
    .await;
}

/// A persistent node whose own path this framework already watches persistently (a watch or a
/// cache on the node itself), which refuses a one-shot watch there: the node shares that watch,
/// sends nothing while it stands, and comes back when another client deletes it.
#[tokio::test]
async fn a_node_whose_path_the_framework_watches_shares_the_watch_and_comes_back() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let proxy = CountingProxy::start(&connect).await.unwrap();
        let fw = framework(&proxy.connect_string(), SESSION).await;
        let other = framework(&connect, SESSION).await;
        let parent = unique_path("pnode", "watched");
        let path = format!("{parent}/me");
        let mut watch = fw.watch(&path, WatchMode::Persistent).await.unwrap();
        let node = ephemeral_at(&fw, &parent, &path).await;

        // Standing, the node costs nothing: no create, no read, no watch sent again.
        stands_quiet(&proxy).await;

        // Deleted by another client: made again, and the user's watch still reports.
        deleted_and_made_again(&other, &path).await;
        one_node_with(&fw, &node, &parent, b"one", EVENT).await;
        let mut seen = Vec::new();
        while seen.len() < 3 {
            match within(EVENT, "the user's watch", watch.next()).await {
                Some(Ok(WatchEvent::Node(event))) => seen.push(event.kind),
                Some(Ok(WatchEvent::Resync { .. })) => {}
                other => panic!("the user's watch ended: {other:?}"),
            }
        }
        // The first creation (the watch came first), the delete, the creation again.
        assert_eq!(seen, [NodeEventKind::Created, NodeEventKind::Deleted, NodeEventKind::Created]);

        node.close().await.unwrap();
        assert!(children(&other, &parent).await.is_empty());
        drop(watch);
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// The same on a server without persistent watches, where the framework's cache on the node's
/// path runs on one-shot watches: the node sets its own one-shot watch beside them, sends
/// nothing while it stands, and comes back when another client deletes it.
#[tokio::test]
async fn a_node_beside_a_one_shot_cache_on_its_path_sends_nothing_while_it_stands() {
    init_tracing();
    bounded(LIMIT, async {
        let server = server_without_persistent_watches().await;
        let proxy = CountingProxy::start(&server.connect_string()).await.unwrap();
        let fw = framework(&proxy.connect_string(), SESSION).await;
        let other = framework(&server.connect_string(), SESSION).await;
        let parent = unique_path("pnode", "oneshot-cache");
        let path = format!("{parent}/me");
        let cache = CuratorCache::builder(&fw, &path).mode(CacheMode::SingleNode).build().unwrap();
        cache.start().await.unwrap();
        within(EVENT, "the cache's load", cache.initialized()).await.unwrap();
        assert!(!fw.server_info().await.unwrap().persistent_watches, "the server refused addWatch");
        let node = ephemeral_at(&fw, &parent, &path).await;
        eventually(EVENT, "the cache sees the node", || async {
            cache.get(&path).map(drop).ok_or_else(|| "not yet".to_owned())
        })
        .await;

        stands_quiet(&proxy).await;

        deleted_and_made_again(&other, &path).await;
        node.close().await.unwrap();
        cache.close().await;
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// A framework through `connect` whose retry policy gives up at once, so that a lost answer
/// or a cut-off connection reaches the recipe as the error it is.
async fn framework_without_retries(connect: &str, session_timeout: Duration) -> Framework {
    Framework::builder(connect)
        .session_timeout(session_timeout)
        .retry_policy(RetryNTimes::new(0, Duration::from_millis(50)))
        .start()
        .await
        .expect("starting a framework")
}

/// The create limit for the data of an unprotected ephemeral node at `path`: what `start`
/// refuses more data than any request carries with.
fn create_limit(fw: &Framework, path: &str) -> usize {
    let refused = PersistentNode::builder(fw, path).protected(false).data(vec![0u8; 1 << 20]).start();
    match refused {
        Err(Error::TooLarge { name: "data", limit, .. }) => limit,
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

/// Data a create of the node could not carry is refused by `set_data`, even where a write
/// would take it, and the node keeps its data: a re-create after the session's end still
/// works, with the data of before.
#[tokio::test]
async fn set_data_too_large_for_a_create_is_refused_and_the_node_keeps_its_data() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let fw = Framework::builder(&servers.proxied())
            .session_timeout(FAULT_SESSION)
            .retry_policy(RetryForever::new(Duration::from_millis(50)))
            .max_request_bytes(4096)
            .start()
            .await
            .unwrap();
        let observer = framework(&servers.direct(), FAULT_SESSION).await;
        let parent = unique_path("pnode", "too-large");
        let path = format!("{parent}/me");
        let limit = create_limit(&fw, &path);
        let node = PersistentNode::builder(&fw, &path)
            .mode(CreateMode::Ephemeral)
            .protected(false)
            .data(b"old".to_vec())
            .start()
            .unwrap();
        one_node_with(&observer, &node, &parent, b"old", EVENT).await;

        // One byte over a create's limit, which a write's request still has room for.
        let over = node.set_data(vec![1u8; limit + 1]).await;
        assert!(matches!(over, Err(Error::TooLarge { name: "data", .. })), "{over:?}");
        let far_over = node.set_data(vec![1u8; 4096]).await;
        assert!(matches!(far_over, Err(Error::TooLarge { name: "data", .. })), "{far_over:?}");
        assert_eq!(observer.get_data(&path).await.unwrap().0, b"old");

        // Made again on the new session with the data it kept.
        let new_session = servers.expire(&fw, back_within(FAULT_SESSION)).await;
        one_node_with(&observer, &node, &parent, b"old", back_within(FAULT_SESSION)).await;
        let (_, stat) = observer.get_data(&path).await.unwrap();
        assert_eq!(stat.ephemeral_owner, new_session.session_id);
        // Data at the limit is taken.
        node.set_data(vec![2u8; limit]).await.unwrap();
        assert_eq!(observer.get_data(&path).await.unwrap().0, vec![2u8; limit]);
        node.close().await.unwrap();
        fw.close().await;
        observer.close().await;
    })
    .await;
}

/// A member's payload refused as too large is not taken: the member and its node keep the
/// payload of before.
#[tokio::test]
async fn a_group_member_keeps_its_payload_when_a_new_one_is_too_large() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = Framework::builder(&connect).session_timeout(SESSION).max_request_bytes(4096).start().await.unwrap();
        let group = unique_path("group", "too-large");
        let limit = create_limit(&fw, &format!("{group}/m"));
        let member = GroupMember::new(&fw, &group, "m", b"small".to_vec()).unwrap();
        member.start().await.unwrap();
        assert!(member.wait_for_initial_create(EVENT).await.unwrap());
        let over = member.set_this_data(vec![1u8; limit + 1]).await;
        assert!(matches!(over, Err(Error::TooLarge { name: "data", .. })), "{over:?}");
        assert_eq!(member.current_members().get("m").map(Vec::as_slice), Some(&b"small"[..]));
        assert_eq!(fw.get_data(&format!("{group}/m")).await.unwrap().0, b"small");
        member.close().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// An ephemeral node that finds a node no session owns at its name (a persistent node, as a
/// crashed static registration leaves) replaces it with its own instead of waiting for ever.
#[tokio::test]
async fn an_ephemeral_node_replaces_a_persistent_node_at_its_name() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = framework(&connect, SESSION).await;
        let other = framework(&connect, SESSION).await;
        let parent = unique_path("pnode", "replace");
        let path = format!("{parent}/me");
        other.create(&path).data(b"left").await.unwrap();
        let node = PersistentNode::builder(&fw, &path)
            .mode(CreateMode::Ephemeral)
            .protected(false)
            .data(b"mine".to_vec())
            .start()
            .unwrap();
        one_node_with(&other, &node, &parent, b"mine", EVENT).await;
        let (_, stat) = other.get_data(&path).await.unwrap();
        assert_eq!(stat.ephemeral_owner, fw.snapshot().session_id, "ours, ephemeral");
        node.close().await.unwrap();
        assert!(children(&other, &parent).await.is_empty());
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// A member whose session the server expired while it was cut off, closed before it learns
/// that: another client's ephemeral node at the member's name since then stays.
#[tokio::test]
async fn close_after_the_session_expired_leaves_another_clients_node_at_the_name() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let fw = framework(&servers.proxied(), FAULT_SESSION).await;
        let other = framework(&servers.direct(), FAULT_SESSION).await;
        let group = unique_path("group", "expired-close");
        let path = format!("{group}/m");
        let member = std::sync::Arc::new(GroupMember::new(&fw, &group, "m", b"mine".to_vec()).unwrap());
        assert!(member.wait_for_initial_create(EVENT).await.unwrap());
        let mut registered = member.node().registered();

        servers.proxy.set_mode(ProxyMode::BlackHole);
        eventually(back_within(FAULT_SESSION), "the cut-off session's node gone", || async {
            match other.exists(&path).await {
                Ok(None) => Ok(()),
                read => Err(format!("{read:?}")),
            }
        })
        .await;
        other.create(&path).mode(CreateMode::Ephemeral).data(b"theirs").await.unwrap();
        let closing = tokio::spawn({
            let member = member.clone();
            async move { member.close().await }
        });
        // The close has begun (it unregisters first) while the member is still cut off.
        within(EVENT, "the close begun", registered.wait_for(|r| !*r)).await.unwrap();
        servers.proxy.set_mode(ProxyMode::Pass);
        servers.proxy.drop_connections();
        within(back_within(FAULT_SESSION), "close", closing).await.unwrap().unwrap();

        let (data, stat) = other.get_data(&path).await.unwrap();
        assert_eq!(data, b"theirs");
        assert_eq!(stat.ephemeral_owner, other.snapshot().session_id, "the other client's node stays");
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// A persistent node whose first create's answer was lost, closed while the task pauses
/// before trying again: the node the create made is deleted.
#[tokio::test]
async fn close_after_a_lost_create_deletes_the_persistent_node_it_made() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let proxy = CountingProxy::start(&connect).await.unwrap();
        let fw = framework_without_retries(&proxy.connect_string(), SESSION).await;
        let observer = framework(&connect, SESSION).await;
        let path = unique_path("pnode", "lost-create");
        let mut states = fw.state_changes();
        proxy.lose_reply_to("create2");
        let node =
            PersistentNode::builder(&fw, &path).mode(CreateMode::Persistent).data(b"p".to_vec()).start().unwrap();
        // The create failed with the connection (no retries): the task pauses before its next
        // try, which it would make once the connection is back.
        wait_for_event(&mut states, ConnectionState::Reconnected, EVENT).await;
        assert!(observer.exists(&path).await.unwrap().is_some(), "the lost create made the node");
        node.close().await.unwrap();
        assert!(observer.exists(&path).await.unwrap().is_none(), "close deleted the node the create made");
        fw.close().await;
        observer.close().await;
    })
    .await;
}
