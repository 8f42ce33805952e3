//! `Framework::using_namespace`: several namespaces on one session, and a view through a new
//! session.

use crate::common;

use common::fixtures::{bounded, framework, shared_framework, unique_path, within};
use common::timing::{back_within, EVENT, FAULT_SESSION, LIMIT, SESSION};
use futures::StreamExt;
use zk_recipes::testing::{expire_session, shared_server, FaultProxy};
use zk_recipes::{
    CacheEvent, CuratorCache, Error, InterProcessMutex, NodeEventKind, ResyncReason, WatchEvent, WatchMode,
};

#[tokio::test]
async fn two_namespaces_share_one_session_with_a_lock_and_a_cache_under_each() {
    bounded(LIMIT, async {
        let root = shared_framework().await;
        let base = unique_path("fw", "using-ns");
        let a = root.using_namespace(Some(&format!("{base}/a"))).unwrap();
        let b = root.using_namespace(Some(&format!("{}/b", base.trim_start_matches('/')))).unwrap();
        assert_eq!(a.namespace(), Some(format!("{base}/a").as_str()));
        assert_eq!(b.namespace(), Some(format!("{base}/b").as_str()), "a relative namespace is made absolute");

        // One session: the same id, the same epoch, no second connection.
        let id = root.snapshot().session_id;
        assert_ne!(id, 0);
        assert_eq!(a.snapshot().session_id, id);
        assert_eq!(b.snapshot().session_id, id);
        let created = a.create("/eph").mode(zk_recipes::zk::CreateMode::Ephemeral).await.unwrap();
        assert_eq!(created.path, "/eph", "paths come back without the view's namespace");
        let (_, stat) = root.get_data(&format!("{base}/a/eph")).await.unwrap();
        assert_eq!(stat.ephemeral_owner, id, "the view's ephemeral belongs to the shared session");

        // A lock under each namespace: the same user path, two different locks.
        let lock_a = InterProcessMutex::new(&a, "/locks/one").unwrap();
        let lock_b = InterProcessMutex::new(&b, "/locks/one").unwrap();
        let held_a = within(EVENT, "lock under a", lock_a.acquire()).await.unwrap();
        let held_b = within(EVENT, "lock under b (not blocked by a)", lock_b.acquire()).await.unwrap();
        assert!(held_a.lock_path().starts_with("/locks/one/_c_"), "{}", held_a.lock_path());
        assert_eq!(root.get_children(&format!("{base}/a/locks/one")).await.unwrap().len(), 1);
        assert_eq!(root.get_children(&format!("{base}/b/locks/one")).await.unwrap().len(), 1);
        // The same lock through another handle with the same namespace excludes.
        let same_a =
            InterProcessMutex::new(&root.using_namespace(Some(&format!("{base}/a"))).unwrap(), "/locks/one").unwrap();
        let other = tokio::spawn(async move { same_a.try_acquire().await.map(|g| g.is_some()) });
        assert!(!other.await.unwrap().unwrap(), "another task got the lock held under namespace a");
        held_a.release().await.unwrap();
        held_b.release().await.unwrap();

        // A cache under each namespace sees its own namespace's nodes, by user path.
        a.create("/data/x").data(b"a-x").await.unwrap();
        b.create("/data/x").data(b"b-x").await.unwrap();
        let cache_a = CuratorCache::builder(&a, "/data").build().unwrap();
        let cache_b = CuratorCache::builder(&b, "/data").build().unwrap();
        let mut events_b = cache_b.events();
        cache_a.start().await.unwrap();
        cache_b.start().await.unwrap();
        within(EVENT, "cache a initialized", cache_a.initialized()).await.unwrap();
        within(EVENT, "cache b initialized", cache_b.initialized()).await.unwrap();
        assert_eq!(cache_a.get("/data/x").unwrap().data().unwrap().as_slice(), b"a-x");
        assert_eq!(cache_b.get("/data/x").unwrap().data().unwrap().as_slice(), b"b-x");
        b.set_data("/data/x", b"b-x2").await.unwrap();
        loop {
            match within(EVENT, "b's change", events_b.next()).await {
                Some(CacheEvent::Changed(_, new)) => {
                    assert_eq!(new.path(), "/data/x");
                    assert_eq!(new.data().unwrap().as_slice(), b"b-x2");
                    break;
                }
                Some(_) => continue,
                None => panic!("cache b's events ended"),
            }
        }
        assert_eq!(cache_a.get("/data/x").unwrap().data().unwrap().as_slice(), b"a-x", "a's copy is not b's node");
        cache_a.close().await;
        cache_b.close().await;

        // No namespace: server paths as they are; bad namespaces are typed errors.
        let plain = a.using_namespace(None).unwrap();
        assert_eq!(plain.namespace(), None);
        assert_eq!(plain.get_data(&format!("{base}/b/data/x")).await.unwrap().0, b"b-x2");
        for bad in ["", "/", "/zookeeper", "a//b", "a/"] {
            assert!(matches!(root.using_namespace(Some(bad)), Err(Error::InvalidPath { .. })), "{bad:?}");
        }

        // Closing a view closes the framework: they are one.
        b.close().await;
        assert!(root.is_closed() && a.is_closed());
    })
    .await;
}

/// A namespace view through a new session: its lock's guard reports the loss, its persistent
/// watch says `Resync` with the new session and goes on with paths inside the namespace, and
/// its lock works again on the new session, under the namespace.
#[tokio::test]
async fn a_view_loses_its_lock_and_keeps_its_watch_across_a_new_session() {
    bounded(LIMIT, async {
        let server = shared_server().await.unwrap();
        let direct = server.connect_string();
        let proxy = FaultProxy::start(&direct).await.unwrap();
        let root = framework(&proxy.connect_string(), FAULT_SESSION).await;
        let base = unique_path("fw", "ns-faults");
        let view = root.using_namespace(Some(&base)).unwrap();
        let observer = framework(&direct, SESSION).await;

        let lock = InterProcessMutex::new(&view, "/locks/one").unwrap();
        let guard = within(EVENT, "the lock under the view", lock.acquire()).await.unwrap();
        let mut watch = view.watch("/config", WatchMode::PersistentRecursive).await.unwrap();
        let first = root.snapshot().session_id;

        let info = root.zk_client().unwrap().session().clone();
        expire_session(&proxy, &direct, info).await.unwrap();
        within(back_within(FAULT_SESSION), "the guard reports the lost session", guard.lost()).await;
        drop(guard);

        // The watch's next item is the Resync, then events of the new session by view paths.
        match within(back_within(FAULT_SESSION), "the Resync", watch.next()).await {
            Some(Ok(WatchEvent::Resync { reason: ResyncReason::NewSession })) => {}
            other => panic!("expected a NewSession resync, got {other:?}"),
        }
        assert_ne!(root.snapshot().session_id, first);
        observer.create(&format!("{base}/config")).await.unwrap();
        match within(EVENT, "the create on the new session", watch.next()).await {
            Some(Ok(WatchEvent::Node(event))) => {
                assert_eq!((event.kind, event.path.as_str()), (NodeEventKind::Created, "/config"));
            }
            other => panic!("expected /config created, got {other:?}"),
        }

        // The lock again, on the new session: one node, under the namespace, this session's.
        let again = within(EVENT, "the lock on the new session", lock.acquire()).await.unwrap();
        let held = observer.get_children(&format!("{base}/locks/one")).await.unwrap();
        assert_eq!(held.len(), 1, "{held:?}");
        let (_, stat) = observer.get_data(&format!("{base}{}", again.lock_path())).await.unwrap();
        assert_eq!(stat.ephemeral_owner, root.snapshot().session_id);
        again.release().await.unwrap();

        drop(watch);
        root.close().await;
        observer.delete(&base).recursive().await.unwrap();
        observer.close().await;
    })
    .await
}

/// A connect string whose chroot does not exist: creating parents fails with `NoNode` at once
/// (no level can be made under a missing root), not after every retry the policy allows (the
/// test's framework retries for ever); with the chroot made, the same calls succeed.
#[tokio::test]
async fn a_missing_chroot_fails_parent_creation_at_once() {
    bounded(LIMIT, async {
        let connect = common::fixtures::shared_connect().await;
        let chroot = unique_path("fw", "missing-chroot");
        let fw = framework(&format!("{connect}{chroot}"), SESSION).await;
        let err = within(EVENT, "ensure_path under a missing chroot", fw.ensure_path("/a/b")).await.unwrap_err();
        assert!(err.is_no_node(), "{err:?}");
        let err = within(EVENT, "create with parents under a missing chroot", async { fw.create("/a/b/c").await })
            .await
            .unwrap_err();
        assert!(err.is_no_node(), "{err:?}");
        let err = within(EVENT, "create of a top level", async { fw.create("/top").await }).await.unwrap_err();
        assert!(err.is_no_node(), "{err:?}");

        let root = shared_framework().await;
        root.create(&chroot).parents(zk_recipes::Parents::Persistent).await.unwrap();
        within(EVENT, "ensure_path under the chroot made", fw.ensure_path("/a/b")).await.unwrap();
        within(EVENT, "create under the chroot made", async { fw.create("/a/b/c").await }).await.unwrap();
        fw.close().await;
        root.delete(&chroot).recursive().await.unwrap();
        root.close().await;
    })
    .await;
}

/// A namespace's node is made on first use, as Curator makes it, also by a transaction and by
/// a create whose parents must exist (both failed with `NoNode` in a fresh namespace); a
/// parent missing below the namespace is still `NoNode`.
#[tokio::test]
async fn a_fresh_namespace_is_made_by_a_transaction_and_a_create_without_parents() {
    bounded(LIMIT, async {
        let root = shared_framework().await;
        let first = unique_path("fw", "fresh-ns-tx");
        let view = root.using_namespace(Some(&first)).unwrap();
        let results =
            view.transaction().create("/x", b"x", zk_recipes::zk::CreateMode::Persistent).commit().await.unwrap();
        assert_eq!(results.len(), 1);
        assert_eq!(root.get_data(&format!("{first}/x")).await.unwrap().0, b"x");

        let second = unique_path("fw", "fresh-ns-create");
        let view = root.using_namespace(Some(&second)).unwrap();
        let err = view.create("/a/b").parents(zk_recipes::Parents::MustExist).await.unwrap_err();
        assert!(err.is_no_node(), "{err:?}");
        view.create("/y").parents(zk_recipes::Parents::MustExist).await.unwrap();
        assert!(root.exists(&format!("{second}/y")).await.unwrap().is_some());
        let err =
            view.transaction().create("/a/b", b"", zk_recipes::zk::CreateMode::Persistent).commit().await.unwrap_err();
        assert!(matches!(err, Error::TransactionFailed { index: 0, .. }), "{err:?}");

        for namespace in [first, second] {
            root.delete(&namespace).recursive().await.unwrap();
        }
        root.close().await;
    })
    .await;
}
