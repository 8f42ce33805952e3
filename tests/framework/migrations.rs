//! `MigrationManager`: sets of operations applied once, across processes, recorded in ZooKeeper
//! in curator-x-async's layout.

use crate::common;

use common::fixtures::{bounded, framework, init_tracing, shared_connect, unique_path, within};
use common::timing::{EVENT, LIMIT, SESSION};
use futures::StreamExt;
use zk_recipes::migrations::{Migration, MigrationManager, MigrationSet};
use zk_recipes::{CreateMode, Error, NodeEventKind, WatchEvent, WatchMode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_runs_once_across_two_racing_frameworks_and_a_changed_set_is_refused() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let (one, two) = (framework(&connect, SESSION).await, framework(&connect, SESSION).await);
        let base = unique_path("migrations", "race");
        let (locks, meta) = (format!("{base}/locks"), format!("{base}/meta"));
        let app = format!("{base}/app");
        let first = || Migration::new().create(&app, b"v1", CreateMode::Persistent);
        // Not idempotent: applied twice, the create fails with NodeExists and the versioned
        // write with BadVersion.
        let second =
            || Migration::new().create(&format!("{app}/config"), b"c", CreateMode::Persistent).set_data(&app, b"v2", 0);
        let set = MigrationSet::new("app", vec![first(), second()]).unwrap();
        let manager_one = MigrationManager::new(&one, &locks, &meta, SESSION).unwrap();
        let manager_two = MigrationManager::new(&two, &locks, &meta, SESSION).unwrap();

        // The lock's directories are containers, which the server removes once they are
        // empty: the lock's place is read from the creates a watch saw, not from what is left.
        let watcher = framework(&connect, SESSION).await;
        let mut lock_events = watcher.watch(&locks, WatchMode::PersistentRecursive).await.unwrap();
        let (a, b) = tokio::join!(manager_one.migrate(&set), manager_two.migrate(&set));
        let mut applied = [a.unwrap(), b.unwrap()];
        applied.sort_unstable();
        assert_eq!(applied, [0, 2], "one framework applied both migrations, the other none");
        assert_eq!(one.get_data(&app).await.unwrap().0, b"v2");
        assert!(one.exists(&format!("{app}/config")).await.unwrap().is_some());

        // The layout: one persistent sequential `meta-` node per migration, holding its
        // 32-byte fingerprint; the set's lock under the lock path.
        let mut names = one.get_children(&format!("{meta}/app")).await.unwrap();
        names.sort();
        assert_eq!(names, ["meta-0000000000", "meta-0000000001"]);
        for name in &names {
            let (hash, stat) = one.get_data(&format!("{meta}/app/{name}")).await.unwrap();
            assert_eq!(hash.len(), 32);
            assert_eq!(stat.ephemeral_owner, 0);
        }
        let lock_dir = format!("{locks}/app/");
        within(EVENT, "the set's lock node created under <locks>/<id>", async {
            while let Some(item) = lock_events.next().await {
                if let Ok(WatchEvent::Node(event)) = item {
                    if event.kind == NodeEventKind::Created && event.path.starts_with(&lock_dir) {
                        return;
                    }
                }
            }
            panic!("the watch ended");
        })
        .await;
        drop(lock_events);
        watcher.close().await;

        // Again, from either side: nothing to do.
        assert_eq!(manager_two.migrate(&set).await.unwrap(), 0);

        // A changed migration under the same id is refused; nothing is applied.
        let changed =
            MigrationSet::new("app", vec![Migration::new().create(&app, b"other", CreateMode::Persistent), second()])
                .unwrap();
        match manager_one.migrate(&changed).await {
            Err(Error::Migration { id, reason }) => {
                assert_eq!(id, "app");
                assert!(reason.starts_with("Metadata mismatch"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        // Fewer migrations than applied: refused too.
        let shorter = MigrationSet::new("app", vec![first()]).unwrap();
        assert!(matches!(
            manager_two.migrate(&shorter).await,
            Err(Error::Migration { reason, .. }) if reason.starts_with("More metadata than migrations")
        ));
        // Appended migrations: only the new one runs.
        let third = Migration::new().delete(&format!("{app}/config"), -1);
        let longer = MigrationSet::new("app", vec![first(), second(), third]).unwrap();
        assert_eq!(manager_two.migrate(&longer).await.unwrap(), 1);
        assert!(one.exists(&format!("{app}/config")).await.unwrap().is_none());
        assert_eq!(one.get_children(&format!("{meta}/app")).await.unwrap().len(), 3);

        // A migration the server refuses applies nothing, its metadata included.
        let refused = MigrationSet::new(
            "refused",
            vec![Migration::new().create(&format!("{base}/x"), b"", CreateMode::Persistent).set_data(&app, b"", 99)],
        )
        .unwrap();
        assert!(manager_one.migrate(&refused).await.is_err());
        assert!(one.exists(&format!("{base}/x")).await.unwrap().is_none());
        assert!(one.exists(&format!("{meta}/refused")).await.unwrap().is_none(), "no metadata node of its own either");
        // One that cannot even be sent (a relative path) leaves nothing behind as well.
        let unsendable =
            MigrationSet::new("unsendable", vec![Migration::new().create("relative", b"", CreateMode::Persistent)])
                .unwrap();
        assert!(matches!(manager_one.migrate(&unsendable).await, Err(Error::InvalidPath { .. })));
        assert!(one.exists(&format!("{meta}/unsendable")).await.unwrap().is_none());

        assert!(MigrationManager::new(&one, "relative", &meta, SESSION).is_err());
        for (lock_path, meta_path) in
            [("/zookeeper/l", meta.as_str()), (locks.as_str(), "/"), (meta.as_str(), meta.as_str())]
        {
            assert!(MigrationManager::new(&one, lock_path, meta_path, SESSION).is_err(), "{lock_path} {meta_path}");
        }
        let nested = format!("{meta}/locks");
        let refused = MigrationManager::new(&one, &nested, &meta, SESSION);
        assert!(matches!(refused, Err(Error::InvalidArgument { name: "meta_data_path", .. })), "{refused:?}");
        for id in ["a\u{0}b", "a\u{1}b", "", "a/b", ".."] {
            assert!(matches!(MigrationSet::new(id, vec![first()]), Err(Error::InvalidArgument { .. })), "{id:?}");
        }
        one.delete(&base).recursive().await.unwrap();
        one.close().await;
        two.close().await;
    })
    .await;
}

/// The migration's commit loses its reply: the outcome is unknown (it was applied, and is not
/// sent again), and the next `migrate` learns from the metadata that the set is applied.
/// A framework that compresses by default migrates a set twice: the second run reads the
/// fingerprints (stored uncompressed, as Curator stores them) and finds the set applied. It
/// failed with `CorruptData`, reading them as gzip.
#[tokio::test]
async fn a_compressing_framework_finds_its_set_applied() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = zk_recipes::Framework::builder(&connect)
            .session_timeout(SESSION)
            .enable_compression()
            .start()
            .await
            .unwrap();
        let base = unique_path("migrations", "compressing");
        let (locks, meta) = (format!("{base}/locks"), format!("{base}/meta"));
        let set = MigrationSet::new(
            "app",
            vec![Migration::new().create(&format!("{base}/app"), b"v1", CreateMode::Persistent)],
        )
        .unwrap();
        let manager = MigrationManager::new(&fw, &locks, &meta, SESSION).unwrap();
        assert_eq!(manager.migrate(&set).await.unwrap(), 1);
        assert_eq!(manager.migrate(&set).await.unwrap(), 0, "applied already");
        fw.delete(&base).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_commit_whose_reply_is_lost_is_unknown_and_the_next_migrate_finds_it_applied() {
    init_tracing();
    bounded(LIMIT, async {
        let proxy = zk_recipes::testing::CountingProxy::start(&shared_connect().await).await.unwrap();
        let fw = framework(&proxy.connect_string(), SESSION).await;
        let base = unique_path("migrations", "lost-reply");
        let (locks, meta, app) = (format!("{base}/locks"), format!("{base}/meta"), format!("{base}/app"));
        // Not idempotent: applied twice, the create would fail with NodeExists.
        let set = MigrationSet::new("app", vec![Migration::new().create(&app, b"v1", CreateMode::Persistent)]).unwrap();
        let manager = MigrationManager::new(&fw, &locks, &meta, SESSION).unwrap();

        let before = proxy.counts();
        proxy.lose_reply_to("multi");
        let unknown = manager.migrate(&set).await;
        assert!(matches!(unknown, Err(Error::OutcomeUnknown { .. })), "{unknown:?}");
        assert_eq!(proxy.counts().since(&before).get("multi"), 1, "the commit is not sent again");
        assert_eq!(manager.migrate(&set).await.unwrap(), 0, "the metadata tells it was applied");
        assert_eq!(fw.get_data(&app).await.unwrap().0, b"v1");
        assert_eq!(fw.get_children(&format!("{meta}/app")).await.unwrap().len(), 1, "one record per migration");
        fw.delete(&base).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}
