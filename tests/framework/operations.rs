//! The framework's operations against real servers: every create mode and option, reads with
//! one-shot watches, versioned writes, guaranteed and recursive deletes, ACLs, and bad input
//! refused before anything is sent.

use crate::common;

use std::future::IntoFuture;
use std::time::Duration;

use common::fixtures::*;
use common::timing::{LIMIT, SESSION};
use zk_recipes::retry::RetryNTimes;
use zk_recipes::testing::{CountingProxy, FaultProxy, ProxyMode, TestingServer};
use zk_recipes::zk::{Acl, AuthId, CreateMode, Permission};
use zk_recipes::{Error, Framework, NodeEventKind, Parents};

/// A server with TTL nodes enabled (`zookeeper.extendedTypesEnabled`), shared by this file.
async fn ttl_server() -> String {
    static SERVER: tokio::sync::OnceCell<TestingServer> = tokio::sync::OnceCell::const_new();
    let start = || TestingServer::builder().system_property("zookeeper.extendedTypesEnabled", "true").start();
    SERVER.get_or_try_init(start).await.expect("starting a ZooKeeper server").connect_string()
}

fn open_acl() -> Vec<Acl> {
    vec![Acl::new(Permission::ALL, AuthId::anyone())]
}

fn is_zk(result: &Result<impl std::fmt::Debug, Error>, code: zk_recipes::zk::Error) -> bool {
    matches!(result, Err(Error::ZooKeeper(e)) if *e == code)
}

#[tokio::test]
async fn every_create_mode_makes_its_node() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&ttl_server().await, SESSION).await;
        let base = unique_path("ops", "modes");
        let session = fw.snapshot().session_id;

        let persistent = fw.create(&format!("{base}/persistent")).data(b"p").await.unwrap();
        assert_eq!(persistent.path, format!("{base}/persistent"));
        assert!(!persistent.existed);
        assert_eq!(persistent.stat.ephemeral_owner, 0);
        assert_eq!(fw.get_data(&persistent.path).await.unwrap().0, b"p");

        let ephemeral = fw.create(&format!("{base}/ephemeral")).mode(CreateMode::Ephemeral).await.unwrap();
        assert_eq!(ephemeral.stat.ephemeral_owner, session);

        let seq = fw.create(&format!("{base}/seq-")).mode(CreateMode::PersistentSequential).await.unwrap();
        assert_eq!(seq.path.len(), format!("{base}/seq-").len() + 10, "{}", seq.path);
        let eseq = fw.create(&format!("{base}/eseq-")).mode(CreateMode::EphemeralSequential).await.unwrap();
        assert!(eseq.path.starts_with(&format!("{base}/eseq-")) && eseq.stat.ephemeral_owner == session);

        fw.create(&format!("{base}/container")).mode(CreateMode::Container).await.unwrap();
        fw.create(&format!("{base}/container/child")).await.unwrap();

        fw.create(&format!("{base}/ttl")).ttl(Duration::from_secs(60)).await.unwrap();
        // A short TTL: the server removes the node once it has been unchanged that long.
        let short = fw.create(&format!("{base}/short-ttl")).ttl(Duration::from_millis(200)).await.unwrap();
        eventually(LIMIT, "the TTL node's removal", || async {
            match fw.exists(&short.path).await.unwrap() {
                None => Ok(()),
                Some(_) => Err("still there".to_owned()),
            }
        })
        .await;
        let ttl_seq = fw
            .create(&format!("{base}/ttl-seq-"))
            .mode(CreateMode::PersistentSequential)
            .ttl(Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(ttl_seq.path.len(), format!("{base}/ttl-seq-").len() + 10);

        let mut names = fw.get_children(&base).await.unwrap();
        names.sort();
        assert_eq!(names.len(), 7, "{names:?}");
        fw.delete(&base).recursive().await.unwrap();
        assert!(fw.exists(&base).await.unwrap().is_none());
        fw.close().await;
    })
    .await;
}

/// The testing module's default server has no extended types: the server answers a TTL
/// create with `Unimplemented`, which is reported as `Unsupported`, at once.
#[tokio::test]
async fn a_ttl_create_on_a_server_without_extended_types_is_unsupported() {
    init_tracing();
    bounded(LIMIT, async {
        let proxy = CountingProxy::start(&shared_connect().await).await.unwrap();
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let path = unique_path("ops", "no-ttl");
        let before = proxy.counts();
        let refused = within(SESSION, "the refusal", fw.create(&path).ttl(Duration::from_secs(5)).into_future()).await;
        assert!(matches!(refused, Err(Error::Unsupported { feature: "ttl", .. })), "{refused:?}");
        let answered = proxy.counts().since(&before);
        assert_eq!((answered.get("createTtl"), answered.get("error:unimplemented")), (1, 1), "{answered:?}");
        let refused = fw.transaction().create_with_ttl(&path, b"", CreateMode::Persistent, Duration::from_secs(5));
        let refused = within(SESSION, "the refusal", refused.commit()).await;
        assert!(matches!(refused, Err(Error::Unsupported { feature: "ttl", .. })), "{refused:?}");
        assert!(fw.exists(&path).await.unwrap().is_none());
        assert!(fw.state().is_connected(), "the connection stayed up");
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_sent() {
    init_tracing();
    bounded(LIMIT, async {
        let proxy = CountingProxy::start(&shared_connect().await).await.unwrap();
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let base = unique_path("ops", "bad-input");
        let node = format!("{base}/node");
        let before = proxy.counts();

        for bad in ["", "relative", "/trailing/", "/a//b", "/a/./b"] {
            assert!(matches!(fw.create(bad).await, Err(Error::InvalidPath { .. })), "{bad:?}");
            assert!(matches!(fw.get_data(bad).await, Err(Error::InvalidPath { .. })), "{bad:?}");
            assert!(matches!(fw.delete(bad).await, Err(Error::InvalidPath { .. })), "{bad:?}");
        }
        assert!(matches!(fw.create("/").await, Err(Error::InvalidPath { .. })));
        assert!(matches!(fw.delete("/").await, Err(Error::InvalidPath { .. })));
        let ttl_on = |mode| fw.create(&node).mode(mode).ttl(Duration::from_secs(1));
        for mode in [CreateMode::Ephemeral, CreateMode::EphemeralSequential, CreateMode::Container] {
            let refused = ttl_on(mode).await;
            assert!(matches!(refused, Err(Error::InvalidArgument { name: "ttl", .. })), "{mode:?}: {refused:?}");
        }
        let refused = fw.create(&node).ttl(Duration::ZERO).await;
        assert!(matches!(refused, Err(Error::InvalidArgument { name: "ttl", .. })), "{refused:?}");
        let refused = fw.create(&node).acl(Vec::new()).await;
        assert!(matches!(refused, Err(Error::InvalidArgument { name: "acl", .. })), "{refused:?}");
        let refused = fw.create(&node).mode(CreateMode::PersistentSequential).idempotent().await;
        assert!(matches!(refused, Err(Error::InvalidArgument { name: "idempotent", .. })), "{refused:?}");
        let refused = fw.create(&node).protected().or_set().await;
        assert!(matches!(refused, Err(Error::InvalidArgument { name: "or_set", .. })), "{refused:?}");
        let refused = fw.set_acl(&node, &[], -1).await;
        assert!(matches!(refused, Err(Error::InvalidArgument { name: "acl", .. })), "{refused:?}");
        let big = vec![0u8; 2 << 20];
        assert!(matches!(fw.create(&node).data(&big).await, Err(Error::TooLarge { name: "data", .. })));
        assert!(matches!(fw.set_data(&node, &big).await, Err(Error::TooLarge { name: "data", .. })));
        // A path no request can carry is refused before it is sent (a server closes the
        // connection of a request over its buffer, and the framework would reconnect again and
        // again sending it).
        let long = format!("{base}/{}", "p".repeat(1 << 20));
        let too_long = |r: Result<(), Error>| matches!(r, Err(Error::TooLarge { name: "path", .. }));
        assert!(too_long(fw.get_data(&long).await.map(drop)));
        assert!(too_long(fw.exists(&long).await.map(drop)));
        assert!(too_long(fw.get_children(&long).await.map(drop)));
        assert!(too_long(fw.delete(&long).await.map(drop)));
        assert!(too_long(fw.set_data(&long, b"x").await.map(drop)));
        assert!(too_long(fw.create(&long).await.map(drop)));
        // So is an ACL no request can carry, named as the ACL (before, `set_acl` sent it, and
        // the connection was dropped and made again until the retries ran out).
        let huge_acl = [Acl::new(Permission::ALL, AuthId::new("digest", &"u".repeat(2 << 20)))];
        let refused = fw.set_acl(&node, &huge_acl, -1).await;
        assert!(matches!(refused, Err(Error::TooLarge { name: "acl", .. })), "{refused:?}");
        let refused = fw.create(&node).acl(huge_acl.to_vec()).await;
        assert!(matches!(refused, Err(Error::TooLarge { name: "acl", .. })), "{refused:?}");

        let sent = proxy.counts().since(&before);
        assert_eq!(sent.requests() - sent.get("ping"), 0, "nothing sent: {sent:?}");
        assert!(fw.exists(&base).await.unwrap().is_none(), "nothing created");
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn parents_are_containers_persistent_or_required() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let base = unique_path("ops", "parents");

        let missing = fw.create(&format!("{base}/strict/a/b")).parents(Parents::MustExist).await;
        assert!(is_zk(&missing, zk_recipes::zk::Error::NoNode), "{missing:?}");
        assert!(fw.exists(&base).await.unwrap().is_none());

        fw.create(&format!("{base}/c/x")).await.unwrap();
        let container = fw.exists(&format!("{base}/c")).await.unwrap().unwrap();
        fw.create(&format!("{base}/p/x")).parents(Parents::Persistent).await.unwrap();
        let persistent = fw.exists(&format!("{base}/p")).await.unwrap().unwrap();
        // A container's stat cannot tell it from a persistent node; its removal once empty can.
        fw.delete(&format!("{base}/c/x")).await.unwrap();
        fw.delete(&format!("{base}/p/x")).await.unwrap();
        eventually(LIMIT, "the empty container removed", || async {
            match fw.exists(&format!("{base}/c")).await.unwrap() {
                None => Ok(()),
                Some(_) => Err("still there".to_owned()),
            }
        })
        .await;
        let stays = fw.exists(&format!("{base}/p")).await.unwrap().map(|s| s.czxid);
        assert_eq!(stays, Some(persistent.czxid), "the persistent parent stays");
        assert_ne!(container.czxid, persistent.czxid);
        fw.delete(&base).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn idempotent_and_or_set_accept_an_existing_node() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("ops", "idempotent");
        fw.create(&path).data(b"v1").await.unwrap();

        let again = fw.create(&path).data(b"v1").idempotent().await.unwrap();
        assert!(again.existed && again.stat.version == 0);
        let other = fw.create(&path).data(b"v2").idempotent().await;
        assert!(is_zk(&other, zk_recipes::zk::Error::NodeExists), "{other:?}");
        let plain = fw.create(&path).data(b"v1").await;
        assert!(is_zk(&plain, zk_recipes::zk::Error::NodeExists), "{plain:?}");

        let set = fw.create(&path).data(b"v3").or_set().await.unwrap();
        assert!(set.existed && set.stat.version == 1);
        assert_eq!(fw.get_data(&path).await.unwrap().0, b"v3");
        let fresh = fw.create(&format!("{path}-new")).data(b"n").or_set().await.unwrap();
        assert!(!fresh.existed);
        fw.delete(&path).await.unwrap();
        fw.delete(&format!("{path}-new")).await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Curator's protected names; one create request when nothing fails.
#[tokio::test]
async fn a_protected_create_costs_one_create() {
    init_tracing();
    bounded(LIMIT, async {
        let proxy = CountingProxy::start(&shared_connect().await).await.unwrap();
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let dir = unique_path("ops", "protected");
        fw.create(&dir).await.unwrap();

        for mode in [CreateMode::EphemeralSequential, CreateMode::Persistent, CreateMode::Ephemeral] {
            let before = proxy.counts();
            let created = fw.create(&format!("{dir}/member-")).mode(mode).protected().data(b"me").await.unwrap();
            let sent = proxy.counts().since(&before);
            assert_eq!(sent.get("create2"), 1, "{mode:?}: {sent:?}");
            assert_eq!(sent.requests() - sent.get("ping"), 1, "{mode:?}: {sent:?}");
            let name = node_name(&created.path);
            assert!(is_curator_node_name(name, "member-") || name.len() == 40 + "member-".len(), "{name}");
            assert!(name.starts_with("_c_"), "{name}");
            assert_eq!(fw.get_data(&created.path).await.unwrap().0, b"me");
        }
        assert_eq!(fw.get_children(&dir).await.unwrap().len(), 3);
        fw.delete(&dir).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// The reply to the create is lost: a protected create finds its node by its prefix (one
/// node, one create sent); a plain sequential create does not send again and says the outcome
/// is unknown; a plain ephemeral create recognises its own node.
#[tokio::test]
async fn a_create_through_a_lost_reply_makes_one_node_or_says_it_does_not_know() {
    init_tracing();
    bounded(LIMIT, async {
        let proxy = CountingProxy::start(&shared_connect().await).await.unwrap();
        let fw = framework(&proxy.connect_string(), SESSION).await;
        let observer = plain_framework(&shared_connect().await, SESSION).await;
        let dir = unique_path("ops", "lost-create");
        fw.create(&dir).await.unwrap();

        for mode in [CreateMode::EphemeralSequential, CreateMode::PersistentSequential, CreateMode::Persistent] {
            let before = proxy.counts();
            proxy.lose_reply_to("create2");
            let created = fw.create(&format!("{dir}/p-")).mode(mode).protected().await.unwrap();
            let sent = proxy.counts().since(&before);
            assert_eq!(sent.get("create2"), 1, "{mode:?}: sent once, found by its prefix: {sent:?}");
            assert!(sent.get("sync") >= 1 && sent.get("getChildren") >= 1, "{mode:?}: {sent:?}");
            assert!(observer.exists(&created.path).await.unwrap().is_some(), "{mode:?}");
            let ours: Vec<_> = children(&observer, &dir).await;
            assert_eq!(ours.len(), 1, "{mode:?}: exactly one node: {ours:?}");
            fw.delete(&created.path).await.unwrap();
        }

        for mode in [CreateMode::PersistentSequential, CreateMode::EphemeralSequential] {
            let before = proxy.counts();
            proxy.lose_reply_to("create2");
            let unknown = fw.create(&format!("{dir}/s-")).mode(mode).await;
            assert!(matches!(unknown, Err(Error::OutcomeUnknown { operation: "create", .. })), "{unknown:?}");
            let sent = proxy.counts().since(&before);
            assert_eq!(sent.get("create2"), 1, "{mode:?}: not sent again: {sent:?}");
            // The server did make it: exactly one.
            let made = children(&observer, &dir).await;
            assert_eq!(made.len(), 1, "{mode:?}: {made:?}");
            observer.delete(&format!("{dir}/{}", made[0])).await.unwrap();
        }

        proxy.lose_reply_to("create2");
        let ephemeral = fw.create(&format!("{dir}/e")).mode(CreateMode::Ephemeral).await.unwrap();
        assert!(!ephemeral.existed, "its own node, not someone else's");
        assert_eq!(children(&observer, &dir).await.len(), 1);

        fw.close().await;
        observer.delete(&dir).recursive().await.unwrap();
        observer.close().await;
    })
    .await;
}

/// A protected create cancelled after its node was made (the reply lost, the create waiting to
/// look for it) leaves no node: the reaper deletes it by its prefix, as Curator deletes a
/// protected node whose create failed.
#[tokio::test]
async fn a_cancelled_protected_create_leaves_no_node() {
    init_tracing();
    bounded(LIMIT, async {
        let proxy = CountingProxy::start(&shared_connect().await).await.unwrap();
        // A long sleep before the retry: the cancellation comes while the create waits.
        let fw = Framework::builder(&proxy.connect_string())
            .session_timeout(SESSION)
            .retry_policy(RetryNTimes::new(3, Duration::from_secs(5)))
            .start()
            .await
            .unwrap();
        let observer = plain_framework(&shared_connect().await, SESSION).await;
        let dir = unique_path("ops", "cancelled-protected");
        fw.create(&dir).await.unwrap();

        for mode in [CreateMode::PersistentSequential, CreateMode::EphemeralSequential] {
            proxy.lose_reply_to("create2");
            let base = format!("{dir}/n-");
            let create = fw.create(&base).mode(mode).protected().into_future();
            let cancelled = tokio::time::timeout(Duration::from_millis(1500), create).await;
            assert!(cancelled.is_err(), "{mode:?}: still waiting to retry: {cancelled:?}");
            assert_eq!(children(&observer, &dir).await.len(), 1, "{mode:?}: the server made the node");
            children_count_becomes(&observer, &dir, 0, LIMIT).await;
        }
        fw.close().await;
        observer.delete(&dir).await.unwrap();
        observer.close().await;
    })
    .await;
}

#[tokio::test]
async fn reads_return_stats_and_one_shot_watches_fire_once() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let other = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("ops", "watched");

        let (missing, watch) = fw.exists(&path).watch().await.unwrap();
        assert!(missing.is_none());
        other.create(&path).data(b"1").await.unwrap();
        let event = within(LIMIT, "the creation", watch.changed()).await.unwrap();
        assert_eq!((event.kind, event.path.as_str()), (NodeEventKind::Created, path.as_str()));

        let (data, stat, watch) = fw.get_data(&path).watch().await.unwrap();
        assert_eq!((data.as_slice(), stat.version), (&b"1"[..], 0));
        other.set_data(&path, b"2").await.unwrap();
        let event = within(LIMIT, "the change", watch.changed()).await.unwrap();
        assert_eq!(event.kind, NodeEventKind::DataChanged);

        let (children, stat, watch) = fw.get_children(&path).watch().await.unwrap();
        assert!(children.is_empty() && stat.num_children == 0);
        other.create(&format!("{path}/kid")).await.unwrap();
        let event = within(LIMIT, "the child", watch.changed()).await.unwrap();
        assert_eq!((event.kind, event.path.as_str()), (NodeEventKind::ChildrenChanged, path.as_str()));
        let (children, stat) = fw.get_children(&path).with_stat().await.unwrap();
        assert_eq!((children, stat.num_children), (vec!["kid".to_owned()], 1));

        let (_, watch) = fw.exists(&path).watch().await.unwrap();
        other.delete(&path).recursive().await.unwrap();
        let event = within(LIMIT, "the deletion", watch.changed()).await.unwrap();
        assert_eq!(event.kind, NodeEventKind::Deleted);
        let gone = fw.get_data(&path).watch().await;
        assert!(is_zk(&gone, zk_recipes::zk::Error::NoNode), "{:?}", gone.map(|(d, s, _)| (d, s)));

        // A watch outlived by its framework: Closed, not a hang.
        let (_, watch) = fw.exists(&path).watch().await.unwrap();
        fw.close().await;
        let ended = within(LIMIT, "the close", watch.changed()).await;
        assert!(matches!(ended, Err(Error::Closed)), "{ended:?}");
        other.close().await;
    })
    .await;
}

/// The watch's session expires before anything happens to the node: the watch ends with
/// `SessionExpired` (and the framework goes on, on a new session).
#[tokio::test]
async fn a_watch_whose_session_expires_ends_with_an_error() {
    init_tracing();
    bounded(LIMIT, async {
        let faulty = FaultyServer::start().await;
        let fw = framework(&faulty.proxied(), SESSION).await;
        let path = unique_path("ops", "expired-watch");
        fw.create(&path).await.unwrap();
        let (_, _, watch) = fw.get_data(&path).watch().await.unwrap();
        faulty.expire(&fw, LIMIT).await;
        let ended = within(LIMIT, "the watch's end", watch.changed()).await;
        assert!(is_zk(&ended, zk_recipes::zk::Error::SessionExpired), "{ended:?}");
        // The framework's next read runs on the new session.
        assert!(fw.exists(&path).await.unwrap().is_some());
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn versioned_writes_compare_and_set() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("ops", "cas");
        fw.create(&path).data(b"0").await.unwrap();

        let stat = fw.set_data(&path, b"1").version(0).await.unwrap();
        assert_eq!(stat.version, 1);
        let stale = fw.set_data(&path, b"x").version(0).await;
        assert!(matches!(&stale, Err(Error::BadVersion { expected: 0, path: p }) if *p == path), "{stale:?}");
        assert_eq!(fw.get_data(&path).await.unwrap().0, b"1");
        let any = fw.set_data(&path, b"2").await.unwrap();
        assert_eq!(any.version, 2);
        // A version below -1 is a version a wrapped node can have, compared as given, never
        // read as "any".
        let wrapped = fw.set_data(&path, b"x").version(-2).await;
        assert!(matches!(wrapped, Err(Error::BadVersion { expected: -2, .. })), "{wrapped:?}");
        let wrapped = fw.transaction().set_data(&path, b"x").version(i32::MIN).commit().await;
        assert!(matches!(wrapped, Err(Error::TransactionFailed { index: 0, .. })), "{wrapped:?}");
        assert_eq!(fw.get_data(&path).await.unwrap().0, b"2");

        let stale = fw.delete(&path).version(1).await;
        assert!(matches!(stale, Err(Error::BadVersion { expected: 1, .. })), "{stale:?}");
        fw.delete(&path).version(2).await.unwrap();
        let gone = fw.delete(&path).await;
        assert!(is_zk(&gone, zk_recipes::zk::Error::NoNode), "{gone:?}");
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn recursive_delete_removes_a_tree() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let base = unique_path("ops", "tree");
        for leaf in ["a/1", "a/2/x", "b", "c/d/e/f"] {
            fw.create(&format!("{base}/{leaf}")).parents(Parents::Persistent).await.unwrap();
        }
        let refused = fw.delete(&base).await;
        assert!(is_zk(&refused, zk_recipes::zk::Error::NotEmpty), "{refused:?}");
        fw.delete(&base).recursive().await.unwrap();
        assert!(fw.exists(&base).await.unwrap().is_none());
        fw.close().await;
    })
    .await;
}

/// A container whose last child a recursive delete removes is reaped by the server (every
/// 100 ms on these servers) before the container's own delete arrives: the subtree is gone,
/// so the delete succeeds. Made certain here by losing the child's delete reply and holding
/// the reconnect until the server has reaped the container.
#[tokio::test]
async fn a_recursive_delete_whose_container_is_reaped_first_succeeds() {
    init_tracing();
    bounded(LIMIT, async {
        let counting = CountingProxy::start(&shared_connect().await).await.unwrap();
        let fault = FaultProxy::start(&counting.connect_string()).await.unwrap();
        let fw = plain_framework(&fault.connect_string(), SESSION).await;
        let observer = plain_framework(&shared_connect().await, SESSION).await;
        let base = unique_path("ops", "reaped");
        let container = format!("{base}/container");
        fw.create(&format!("{container}/child")).parents(Parents::Containers).await.unwrap();
        let (_, reaped) = observer.exists(&container).watch().await.unwrap();

        counting.lose_reply_to("delete");
        fault.refuse_new(true);
        let deleting = tokio::spawn({
            let (fw, container) = (fw.clone(), container.clone());
            async move { fw.delete(&container).recursive().await }
        });
        within(LIMIT, "the container's reaping", reaped.changed()).await.unwrap();
        fault.refuse_new(false);
        let deleted = within(LIMIT, "the recursive delete", deleting).await.unwrap();
        assert!(deleted.is_ok(), "{deleted:?}");
        // A node missing from the start is still NoNode.
        let missing = fw.delete(&container).recursive().await;
        assert!(is_zk(&missing, zk_recipes::zk::Error::NoNode), "{missing:?}");
        // The base is a container too: the server may have reaped it already.
        let _ = observer.delete(&base).await;
        fw.close().await;
        observer.close().await;
    })
    .await;
}

/// A guaranteed delete cancelled while its request is lost in a black-holed connection (the
/// client fails that request when it gives the connection up, and nobody sends it again) is
/// finished by the reaper once the connection is back; a plain delete through a lost reply
/// reports success (the node is gone).
#[tokio::test]
async fn a_guaranteed_delete_is_finished_in_the_background() {
    init_tracing();
    bounded(LIMIT, async {
        let server = shared_connect().await;
        let proxy = FaultProxy::start(&server).await.unwrap();
        // Short enough that the client notices the dead connection soon (0.4 of it), long
        // enough that the session outlives the outage.
        let fw = framework(&proxy.connect_string(), Duration::from_secs(6)).await;
        let observer = plain_framework(&server, SESSION).await;
        let path = unique_path("ops", "guaranteed");
        fw.create(&path).await.unwrap();

        proxy.set_mode(ProxyMode::BlackHole);
        let cancelled = tokio::time::timeout(Duration::from_millis(300), fw.delete(&path).guaranteed()).await;
        assert!(cancelled.is_err(), "the delete cannot finish while its connection is black-holed");
        assert_eq!(fw.pending_deletes(), 1, "handed to the reaper");
        wait_for_state(&fw, LIMIT, "Suspended", |s| !s.state.is_connected()).await;
        proxy.set_mode(ProxyMode::Pass);
        let epoch = fw.snapshot().epoch;
        wait_connected(&fw, LIMIT, epoch).await;
        assert_eq!(fw.snapshot().epoch, epoch, "the same session");
        eventually(LIMIT, "the background delete", || async {
            match (observer.exists(&path).await.unwrap(), fw.pending_deletes()) {
                (None, 0) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;

        let counting = CountingProxy::start(&server).await.unwrap();
        let fw2 = framework(&counting.connect_string(), SESSION).await;
        fw2.create(&path).await.unwrap();
        counting.lose_reply_to("delete");
        fw2.delete(&path).await.unwrap();
        assert!(observer.exists(&path).await.unwrap().is_none());
        fw.close().await;
        fw2.close().await;
        observer.close().await;
    })
    .await;
}

/// A guaranteed delete of a persistent node is finished after its session expired, through
/// the new session (as Curator's go on while the framework is open); a guaranteed delete of
/// an ephemeral node whose session ended leaves the ephemeral node another session made at
/// that path since.
#[tokio::test]
async fn a_guaranteed_delete_outlives_its_session_for_a_persistent_node() {
    init_tracing();
    bounded(LIMIT, async {
        let faulty = FaultyServer::start().await;
        let fw = framework(&faulty.proxied(), Duration::from_secs(6)).await;
        let observer = plain_framework(&faulty.direct(), SESSION).await;
        let persistent = unique_path("ops", "guaranteed-persistent");
        let ephemeral = unique_path("ops", "guaranteed-ephemeral");
        fw.create(&persistent).await.unwrap();
        fw.create(&ephemeral).mode(CreateMode::Ephemeral).await.unwrap();

        faulty.proxy.set_mode(ProxyMode::BlackHole);
        for path in [&persistent, &ephemeral] {
            let cancelled = tokio::time::timeout(Duration::from_millis(300), fw.delete(path).guaranteed()).await;
            assert!(cancelled.is_err(), "the delete cannot finish while its connection is black-holed");
        }
        assert_eq!(fw.pending_deletes(), 2, "handed to the reaper");
        // The session expires; another session makes an ephemeral node at the second path.
        let session = fw.zk_client().unwrap().session().clone();
        zk_recipes::testing::expire_session(&faulty.proxy, &faulty.direct(), session).await.unwrap();
        observer.create(&ephemeral).mode(CreateMode::Ephemeral).data(b"another session's").await.unwrap();
        faulty.proxy.set_mode(ProxyMode::Pass);
        eventually(LIMIT / 2, "the background deletes", || async {
            match (observer.exists(&persistent).await.unwrap(), fw.pending_deletes()) {
                (None, 0) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        assert_eq!(observer.get_data(&ephemeral).await.unwrap().0, b"another session's");
        assert!(fw.snapshot().epoch > 1, "on a new session");
        fw.close().await;
        observer.close().await;
    })
    .await;
}

/// A versioned guaranteed delete finished by the reaper keeps to its version: cancelled while
/// its request is held back, with the node written meanwhile by another session, it leaves
/// the node (the reaper's delete went without the version and deleted it).
#[tokio::test]
async fn a_versioned_guaranteed_delete_finished_in_the_background_keeps_to_its_version() {
    init_tracing();
    bounded(LIMIT, async {
        let server = shared_connect().await;
        let proxy = FaultProxy::start(&server).await.unwrap();
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let observer = plain_framework(&server, SESSION).await;
        let path = unique_path("ops", "guaranteed-versioned");
        fw.create(&path).await.unwrap();

        proxy.set_mode(ProxyMode::Hold);
        let deleting = {
            let (fw, path) = (fw.clone(), path.clone());
            tokio::spawn(async move { fw.delete(&path).version(0).guaranteed().await })
        };
        request_held_back(&proxy, "the delete sent").await;
        deleting.abort();
        assert!(deleting.await.unwrap_err().is_cancelled());
        assert_eq!(fw.pending_deletes(), 1, "handed to the reaper");
        observer.set_data(&path, b"written since").await.unwrap();
        proxy.set_mode(ProxyMode::Pass);
        eventually(LIMIT, "the reaper done", || async {
            match fw.pending_deletes() {
                0 => Ok(()),
                n => Err(n.to_string()),
            }
        })
        .await;
        let (data, stat) = observer.get_data(&path).await.unwrap();
        assert_eq!((data.as_slice(), stat.version), (&b"written since"[..], 1), "left: not the node asked for");
        observer.delete(&path).await.unwrap();
        fw.close().await;
        observer.close().await;
    })
    .await;
}

#[tokio::test]
async fn sync_and_acls() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("ops", "acl");
        fw.create(&path).await.unwrap();
        fw.sync(&path).await.unwrap();
        let (acl, stat) = fw.get_acl(&path).await.unwrap();
        assert_eq!(acl, open_acl());
        let read_only = [Acl::new(Permission::READ | Permission::ADMIN, AuthId::anyone())];
        let stat = fw.set_acl(&path, &read_only, stat.aversion).await.unwrap();
        assert_eq!(stat.aversion, 1);
        let stale = fw.set_acl(&path, &read_only, 0).await;
        assert!(matches!(stale, Err(Error::BadVersion { expected: 0, .. })), "{stale:?}");
        let refused = fw.set_data(&path, b"x").await;
        assert!(is_zk(&refused, zk_recipes::zk::Error::NoAuth), "{refused:?}");
        fw.set_acl(&path, &open_acl(), -1).await.unwrap();
        fw.delete(&path).await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn operations_are_namespaced() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let ns = unique_path("ops", "ns").trim_start_matches('/').replace('/', "-");
        let fw = Framework::builder(&connect).namespace(&ns).start().await.unwrap();
        let raw = plain_framework(&connect, SESSION).await;

        let created = fw.create("/cfg/x").protected().mode(CreateMode::PersistentSequential).await.unwrap();
        assert!(created.path.starts_with("/cfg/_c_"), "{}", created.path);
        assert!(raw.exists(&format!("/{ns}{}", created.path)).await.unwrap().is_some());
        assert_eq!(fw.get_children("/cfg").await.unwrap().len(), 1);
        let (_, watch) = fw.exists("/cfg/y").watch().await.unwrap();
        fw.create("/cfg/y").await.unwrap();
        assert_eq!(within(LIMIT, "the event", watch.changed()).await.unwrap().path, "/cfg/y");
        fw.delete("/cfg").recursive().await.unwrap();
        assert!(raw.exists(&format!("/{ns}/cfg")).await.unwrap().is_none());
        fw.close().await;
        // The namespace node is a container: the server may have removed it already.
        let _ = raw.delete(&format!("/{ns}")).recursive().await;
        raw.close().await;
    })
    .await;
}
