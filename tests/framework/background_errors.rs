//! Background errors, provoked for real with ACLs: a guaranteed delete the server refuses, a
//! node a cache may not read (on persistent and on one-shot watches), a persistent node that
//! may not be made again; and a watch that a new server cannot take again. Each arrives on
//! `Framework::errors()` (and at an `on_error` listener) with its recipe and path; a reader
//! that falls behind learns how many it missed.

use futures::StreamExt;
use zk_recipes::testing::TestingServer;
use zk_recipes::{
    Acl, AuthId, BackgroundError, BackgroundErrorKind, BackgroundErrors, BackgroundEvent, CuratorCache, Framework,
    InterProcessMutex, Permission, PersistentNode, WatchMode,
};

use crate::common::fixtures::*;
use crate::common::timing::*;

fn anyone(permissions: Permission) -> Vec<Acl> {
    vec![Acl::new(permissions, AuthId::anyone())]
}

/// The next error on `errors` (a lag is a failure here), within [`EVENT`].
async fn next_error(errors: &mut BackgroundErrors) -> BackgroundError {
    match within(EVENT, "a background error", errors.next()).await {
        Some(BackgroundEvent::Error(error)) => error,
        other => panic!("expected a background error, got {other:?}"),
    }
}

fn is_no_auth(error: &BackgroundError) -> bool {
    matches!(*error.error, zk_recipes::Error::ZooKeeper(zk_recipes::zk::Error::NoAuth))
}

#[tokio::test]
async fn a_refused_guaranteed_delete_is_reported_with_its_path() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&shared_connect().await, SESSION).await;
        let mut errors = fw.errors();
        let (tx, mut heard) = tokio::sync::mpsc::unbounded_channel();
        let _listener = fw.on_error(move |event| drop(tx.send(event))).unwrap();
        let path = unique_path("errors", "delete");
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let guard = mutex.acquire().await.unwrap();
        let node = fw.full_path(guard.lock_path()).unwrap();
        // Nobody may delete children of the lock directory now: the guard's delete is refused.
        let (_, stat) = fw.get_acl(&path).await.unwrap();
        fw.set_acl(&path, &anyone(Permission::READ | Permission::CREATE | Permission::ADMIN), stat.aversion)
            .await
            .unwrap();
        drop(guard);

        let error = next_error(&mut errors).await;
        assert_eq!((error.recipe, error.kind), ("mutex", BackgroundErrorKind::GuaranteedDelete));
        assert_eq!(error.path, node);
        assert!(is_no_auth(&error), "{error}");
        match within(EVENT, "the listener hears it", heard.recv()).await {
            Some(BackgroundEvent::Error(heard)) => assert_eq!(heard.path, node),
            other => panic!("expected the error at the listener, got {other:?}"),
        }
        fw.set_acl(&path, &anyone(Permission::ALL), -1).await.unwrap();
        fw.close().await;
        assert!(within(EVENT, "the stream's end", errors.next()).await.is_none(), "the stream ends with the framework");
        assert!(fw.errors().next().await.is_none(), "a stream taken after close() is over");
    })
    .await;
}

#[tokio::test]
async fn reads_a_cache_may_not_make_are_reported_and_a_slow_reader_learns_what_it_missed() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        // Room for one error: a reader that has not read three gets a lag first.
        let fw = Framework::builder(&connect).session_timeout(SESSION).event_capacity(1).start().await.unwrap();
        let mut errors = fw.errors();
        let root = unique_path("errors", "cache");
        fw.create(&root).await.unwrap();
        let secrets: Vec<String> = (0..3).map(|i| format!("{root}/secret-{i}")).collect();
        for secret in &secrets {
            fw.create(secret).acl(anyone(Permission::WRITE | Permission::DELETE | Permission::ADMIN)).await.unwrap();
        }
        let cache = CuratorCache::builder(&fw, &root).build().unwrap();
        cache.start().await.unwrap();
        within(EVENT, "the cache's load", cache.initialized()).await.unwrap();
        assert_eq!(cache.len(), 1, "only the root is readable");

        match within(EVENT, "the lag", errors.next()).await {
            Some(BackgroundEvent::Lagged(missed)) => assert_eq!(missed, 2),
            other => panic!("expected a lag, got {other:?}"),
        }
        let error = next_error(&mut errors).await;
        assert_eq!((error.recipe, error.kind), ("cache", BackgroundErrorKind::CacheReadRefused));
        assert!(secrets.contains(&error.path), "{error}");
        assert!(is_no_auth(&error), "{error}");
        cache.close().await;
        for secret in &secrets {
            fw.delete(secret).await.unwrap();
        }
        fw.delete(&root).await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_persistent_node_that_may_not_be_made_again_is_reported() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&shared_connect().await, SESSION).await;
        let mut errors = fw.errors();
        let parent = unique_path("errors", "node");
        fw.create(&parent).await.unwrap();
        let path = format!("{parent}/registered");
        let node = PersistentNode::builder(&fw, &path).start().unwrap();
        assert!(node.wait_for_initial_create(EVENT).await.unwrap(), "the node's create");
        // Nobody may create under the parent now; the node is deleted from outside.
        let (_, stat) = fw.get_acl(&parent).await.unwrap();
        fw.set_acl(&parent, &anyone(Permission::READ | Permission::DELETE | Permission::ADMIN), stat.aversion)
            .await
            .unwrap();
        let actual = node.actual_path().expect("the node was made");
        fw.delete(&actual).await.unwrap();

        let error = next_error(&mut errors).await;
        assert_eq!((error.recipe, error.kind), ("persistent_node", BackgroundErrorKind::NodeNotRecreated));
        assert_eq!(error.path, path);
        assert!(is_no_auth(&error), "{error}");
        let _ = node.close().await;
        fw.set_acl(&parent, &anyone(Permission::ALL), -1).await.unwrap();
        fw.delete(&parent).await.unwrap();
        fw.close().await;
    })
    .await;
}

/// The same on a server without persistent watches, where the cache runs on one-shot watches
/// (a listing of each node): a node it may not read is left out and reported, and the cache
/// still completes its load.
#[tokio::test]
async fn a_cache_on_one_shot_watches_reports_a_node_it_may_not_read_and_loads_the_rest() {
    init_tracing();
    bounded(LIMIT, async {
        let server = server_without_persistent_watches().await;
        let fw = framework(&server.connect_string(), SESSION).await;
        let mut errors = fw.errors();
        let root = unique_path("errors", "oneshot-cache");
        fw.create(&root).await.unwrap();
        fw.create(&format!("{root}/open")).data(b"o").await.unwrap();
        let secret = format!("{root}/secret");
        fw.create(&secret).acl(anyone(Permission::WRITE | Permission::DELETE | Permission::ADMIN)).await.unwrap();
        let cache = CuratorCache::builder(&fw, &root).build().unwrap();
        cache.start().await.unwrap();
        assert!(!fw.server_info().await.unwrap().persistent_watches, "the server refused addWatch");
        within(EVENT, "the cache's load", cache.initialized()).await.unwrap();
        assert_eq!(cache.len(), 2, "the root and the open node");
        assert_eq!(cache.get(&format!("{root}/open")).unwrap().data().unwrap().as_slice(), b"o");
        let error = next_error(&mut errors).await;
        assert_eq!(
            (error.recipe, error.kind, error.path.as_str()),
            ("cache", BackgroundErrorKind::CacheReadRefused, secret.as_str())
        );
        assert!(is_no_auth(&error), "{error}");

        // Changes still reach the cache.
        fw.create(&format!("{root}/later")).data(b"l").await.unwrap();
        eventually(EVENT, "the new node cached", || async {
            match cache.get(&format!("{root}/later")) {
                Some(node) => Ok(node),
                None => Err("not yet".to_owned()),
            }
        })
        .await;
        cache.close().await;
        fw.close().await;
    })
    .await;
}

/// A persistent watch that a new session cannot have again (the ensemble now runs servers
/// without persistent watches, as after a move back to 3.5): the stream ends with
/// `Unsupported`, and the framework reports the watch it could not add again.
#[tokio::test]
async fn a_watch_the_next_server_refuses_is_reported() {
    init_tracing();
    bounded(LIMIT, async {
        let mut first = TestingServer::start().await.unwrap();
        let port = first.port();
        let fw = framework(&first.connect_string(), FAULT_SESSION).await;
        let mut errors = fw.errors();
        let path = unique_path("errors", "rewatch");
        let mut watch = fw.watch(&path, WatchMode::Persistent).await.unwrap();
        first.stop().await.unwrap();
        // A server of a fresh ensemble on the same address: the session is unknown there, and
        // the framework's new session asks for the watch again.
        let _second = TestingServer::builder()
            .port(port)
            .system_property("zookeeper.watchManagerName", "org.apache.zookeeper.server.watch.WatchManagerOptimized")
            .start()
            .await
            .unwrap();
        let error = next_error(&mut errors).await;
        assert_eq!((error.recipe, error.kind), ("watch", BackgroundErrorKind::WatchNotReAdded));
        assert_eq!(error.path, path);
        let ended = within(back_within(FAULT_SESSION), "the stream's error", async {
            loop {
                match watch.next().await {
                    Some(Ok(_)) => continue,
                    other => return other,
                }
            }
        })
        .await;
        assert!(matches!(ended, Some(Err(zk_recipes::Error::Unsupported { .. }))), "{ended:?}");
        fw.close().await;
    })
    .await;
}

/// A node a cache may not read is reported once, not again at every resync: after the
/// connection is cut and the cache has read the subtree again, the stream holds no second
/// report of it.
#[tokio::test]
async fn a_node_a_cache_may_not_read_is_reported_once() {
    init_tracing();
    bounded(LIMIT, async {
        let proxy = zk_recipes::testing::CountingProxy::start(&shared_connect().await).await.unwrap();
        let fw = framework(&proxy.connect_string(), SESSION).await;
        let mut errors = fw.errors();
        let root = unique_path("errors", "reported-once");
        fw.create(&root).await.unwrap();
        let secret = format!("{root}/secret");
        fw.create(&secret).acl(anyone(Permission::WRITE | Permission::DELETE | Permission::ADMIN)).await.unwrap();
        let cache = CuratorCache::builder(&fw, &root).build().unwrap();
        cache.start().await.unwrap();
        within(EVENT, "the cache's load", cache.initialized()).await.unwrap();
        let error = next_error(&mut errors).await;
        assert_eq!((error.kind, error.path.as_str()), (BackgroundErrorKind::CacheReadRefused, secret.as_str()));

        // The connection is cut (the reply to a read of ours is lost with it): the cache's
        // watch is added again and the subtree read again, the secret node refused again.
        let before = proxy.counts();
        proxy.lose_reply_to("getData");
        let _ = fw.get_data(&root).await;
        eventually(EVENT, "the subtree read again", || async {
            let reads = proxy.counts().since(&before);
            let read_again = reads.get("addWatch") >= 1 && reads.get("multiRead") + reads.get("getData") >= 2;
            if read_again && cache.is_complete() {
                Ok(())
            } else {
                Err(format!("{reads:?}, complete: {}", cache.is_complete()))
            }
        })
        .await;
        let again = futures::FutureExt::now_or_never(errors.next());
        assert!(again.is_none(), "reported again: {again:?}");
        cache.close().await;
        fw.delete(&secret).await.unwrap();
        fw.delete(&root).await.unwrap();
        fw.close().await;
    })
    .await;
}
