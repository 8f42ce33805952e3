//! The framework's watch table: every watch of one session, whoever set it, by path. A
//! one-shot watch of the framework's reads on a persistently watched path is refused, and so is
//! a persistent watch of the other mode; a one-shot watch set before a persistent one is let
//! through and, when it goes away unfired, the persistent one is added again (ZooKeeper 3.6-3.8
//! keep one watch mode per session and path: ZOOKEEPER-4466, -4472). And what the framework
//! learns of its server, once per session.

use crate::common;

use common::fixtures::*;
use common::timing::{EVENT, LIMIT, SESSION};
use futures::{FutureExt, StreamExt};
use zk_recipes::testing::CountingProxy;
use zk_recipes::{Error, Framework, NodeEventKind, ResyncReason, WatchEvent, WatchMode};

async fn next_item(watch: &mut zk_recipes::PersistentWatch) -> WatchEvent {
    match tokio::time::timeout(EVENT, watch.next()).await {
        Ok(Some(Ok(item))) => item,
        other => panic!("no watch item: {other:?}"),
    }
}

/// Creates and deletes `{dir}/{name}` and returns the kind of the next node event: `Created`
/// when the watch hears creations, `Deleted` when they are silenced (deletions still arrive).
async fn probe_creates(
    fw: &Framework,
    watch: &mut zk_recipes::PersistentWatch,
    dir: &str,
    name: &str,
) -> NodeEventKind {
    let path = format!("{dir}/{name}");
    fw.create(&path).data(b"").await.unwrap();
    fw.delete(&path).await.unwrap();
    match next_item(watch).await {
        WatchEvent::Node(event) if event.path == path && event.kind == NodeEventKind::Created => {
            let deleted = next_item(watch).await;
            assert!(matches!(deleted, WatchEvent::Node(ref e) if e.kind == NodeEventKind::Deleted), "{deleted:?}");
            NodeEventKind::Created
        }
        WatchEvent::Node(event) if event.path == path => event.kind,
        other => panic!("unexpected {other:?}"),
    }
}

fn refused(result: Result<impl std::fmt::Debug, Error>) -> bool {
    matches!(result, Err(Error::InvalidArgument { .. }))
}

/// A watched read of the framework's on a path it watches persistently shares that watch
/// rather than setting a one-shot watch there (which would silence it); one set before the
/// persistent watch is let through, and when it goes away unfired (its
/// `RemoveWatches` would take the persistent watch's half with it on ZooKeeper 3.6-3.8), the
/// persistent watch is added again and says so.
#[tokio::test]
async fn one_shot_and_persistent_watches_of_one_framework_never_silence_each_other() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let dir = unique_path("watch-home", "table");
        fw.create(&dir).data(b"").await.unwrap();

        // The one-shot first, then the persistent watch.
        let (_, oneshot) = fw.exists(&dir).watch().await.unwrap();
        let mut watch = fw.watch(&dir, WatchMode::PersistentRecursive).await.unwrap();
        assert_eq!(probe_creates(&fw, &mut watch, &dir, "before").await, NodeEventKind::Created);
        // Now the persistent watch holds the path: watched reads share it (no one-shot watch),
        // and it keeps hearing creations below the path.
        let (_, exists) = fw.exists(&dir).watch().await.unwrap();
        let (_, _, data) = fw.get_data(&dir).watch().await.unwrap();
        let (_, _, children) = fw.get_children(&dir).watch().await.unwrap();
        assert!(refused(fw.watch(&dir, WatchMode::Persistent).await), "the other mode");
        assert_eq!(probe_creates(&fw, &mut watch, &dir, "shared").await, NodeEventKind::Created);
        let fired = within(EVENT, "the children watch", children.changed()).await.unwrap();
        assert_eq!((fired.kind, fired.path.as_str()), (NodeEventKind::ChildrenChanged, dir.as_str()));
        fw.set_data(&dir, b"x").await.unwrap();
        for watch in [data, exists] {
            let fired = within(EVENT, "a data watch", watch.changed()).await.unwrap();
            assert_eq!((fired.kind, fired.path.as_str()), (NodeEventKind::DataChanged, dir.as_str()));
        }
        let heard = next_item(&mut watch).await;
        assert!(matches!(heard, WatchEvent::Node(ref e) if e.kind == NodeEventKind::DataChanged), "{heard:?}");
        // The earlier one-shot goes away unfired: the watch is added again, with a resync.
        drop(oneshot);
        assert_eq!(next_item(&mut watch).await, WatchEvent::Resync { reason: ResyncReason::Rearmed });
        assert_eq!(probe_creates(&fw, &mut watch, &dir, "after").await, NodeEventKind::Created);

        // Another framework (another session) may do as it pleases.
        let other = plain_framework(&shared_connect().await, SESSION).await;
        let (_, elsewhere) = other.exists(&dir).watch().await.unwrap();
        drop(elsewhere);
        assert_eq!(probe_creates(&fw, &mut watch, &dir, "elsewhere").await, NodeEventKind::Created);

        // What the table keeps out, shown with the raw client (which it cannot see): a one-shot
        // watch of the same session on the path silences the creations below it
        // (ZOOKEEPER-4466, on ZooKeeper 3.6-3.8).
        let client = fw.zk_client().unwrap();
        let (_, raw) = client.check_and_watch_stat(&dir).await.unwrap();
        assert_eq!(probe_creates(&fw, &mut watch, &dir, "silenced").await, NodeEventKind::Deleted);
        drop(raw);

        drop(watch);
        // Once the watch is gone (its task notices the dropped stream), one-shot watches are
        // allowed again.
        eventually(EVENT, "the path free again", || async {
            fw.exists(&dir).watch().await.map(drop).map_err(|e| e.to_string())
        })
        .await;
        fw.delete(&dir).await.unwrap();
        other.close().await;
        fw.close().await;
    })
    .await;
}

/// A watched read sent again after a connection loss can reach the server after a persistent
/// watch of the same path was added: ZooKeeper 3.6-3.8 then keep the one-shot mode for both,
/// and the event that fires the read's watch takes the persistent one too. The persistent
/// watch is added again when that read's watch fires, and goes on hearing changes.
#[tokio::test]
async fn a_persistent_watch_overtaken_by_a_read_sent_again_is_added_again_when_the_read_fires() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let proxy = CountingProxy::start(&connect).await.expect("counting proxy");
        let fw = Framework::builder(&proxy.connect_string())
            .session_timeout(SESSION)
            .retry_policy(zk_recipes::retry::RetryNTimes::new(3, std::time::Duration::from_secs(1)))
            .start()
            .await
            .unwrap();
        let dir = unique_path("watch-home", "overtaken");
        fw.create(&dir).data(b"").await.unwrap();

        // The read's first try reaches the server and its reply is lost (the connection with
        // it): the client reconnects, and the read is sent again a second later.
        proxy.lose_reply_to("getData+watch");
        let before = proxy.counts();
        let read = tokio::spawn({
            let (fw, dir) = (fw.clone(), dir.clone());
            async move { fw.get_data(&dir).watch().await.map(|(_, _, watch)| watch) }
        });
        eventually(EVENT, "the read's first try", || async {
            match proxy.counts().since(&before).get("getData+watch") {
                0 => Err("not sent".to_owned()),
                _ => Ok(()),
            }
        })
        .await;
        // Meanwhile the persistent watch is added (after the read's table entry).
        let mut watch = fw.watch(&dir, WatchMode::PersistentRecursive).await.unwrap();
        let one_shot = within(EVENT, "the read sent again", read).await.unwrap().unwrap();
        assert_eq!(proxy.counts().since(&before).get("getData+watch"), 2, "sent again after the persistent watch");

        fw.set_data(&dir, b"x").await.unwrap();
        let fired = within(EVENT, "the read's watch", one_shot.changed()).await.unwrap();
        assert_eq!(fired.kind, NodeEventKind::DataChanged);
        let heard = next_item(&mut watch).await;
        assert!(matches!(heard, WatchEvent::Node(ref e) if e.kind == NodeEventKind::DataChanged), "{heard:?}");
        assert_eq!(next_item(&mut watch).await, WatchEvent::Resync { reason: ResyncReason::Rearmed });
        assert_eq!(probe_creates(&fw, &mut watch, &dir, "after").await, NodeEventKind::Created);
        drop(watch);
        fw.delete(&dir).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// The server of each session is asked once what it supports (one `getEphemerals`, no
/// four-letter word, and `server_info` confirms persistent watches with one `addWatch`);
/// these servers are 3.8.
#[tokio::test]
async fn the_server_is_asked_once_per_session_what_it_supports() {
    init_tracing();
    bounded(LIMIT, async {
        let server = shared_connect().await;
        let proxy = CountingProxy::start(&server).await.expect("counting proxy");
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let before = proxy.counts();
        let info = fw.server_info().await.unwrap();
        assert!(info.since_3_6 && info.persistent_watches && !info.read_only, "{info:?}");
        assert_eq!(info.epoch, fw.snapshot().epoch);
        // Asked once.
        assert_eq!(fw.server_info().await.unwrap(), info);
        let sent = proxy.counts().since(&before);
        assert!(sent.get("getEphemerals") <= 1 && sent.errors() == 0, "{sent:?}");
        // Persistent watches confirmed once, with an `addWatch` on a probe path of its own
        // (removed again).
        assert_eq!(sent.get("addWatch"), 1, "{sent:?}");
        eventually(EVENT, "the probe's watch removed", || async {
            match proxy.counts().since(&before).get("removeWatches") {
                1 => Ok(()),
                n => Err(format!("{n} removeWatches")),
            }
        })
        .await;
        let total = proxy.counts().get("getEphemerals");
        assert_eq!(total, 1, "one question for the session, whoever asked first");
        fw.close().await;
    })
    .await;
}

/// The lock fast path's one-shot watch on its directory is in the table as well: a persistent
/// watch added on the directory while it is armed is set again when the lock's handle goes
/// away with the directory's watch unfired (that watch's `RemoveWatches` takes part of the
/// persistent one with it on ZooKeeper 3.6-3.8).
#[tokio::test]
async fn the_lock_fast_paths_directory_watch_is_in_the_table() {
    init_tracing();
    bounded(LIMIT, async {
        // The lock's directory is a container: a server whose reaper leaves it alone.
        let connect = reaperless_connect().await;
        let proxy = CountingProxy::start(&connect).await.expect("counting proxy");
        let fw = classic_framework(&proxy.connect_string(), SESSION).await;
        fw.server_info().await.unwrap();
        let dir = unique_path("watch-home", "fast-path");
        let mutex = zk_recipes::InterProcessMutex::new(&fw, &dir).unwrap();
        // Held alone, then acquired again: that acquire's listing arms the directory's watch.
        mutex.acquire().await.unwrap().release().await.unwrap();
        let before = proxy.counts();
        mutex.acquire().await.unwrap().release().await.unwrap();
        let armed = proxy.counts().since(&before);
        assert_eq!(armed.get("exists+watch"), 1, "the fast path armed its watch: {armed:?}");

        let mut watch = fw.watch(&dir, WatchMode::PersistentRecursive).await.unwrap();
        assert_eq!(probe_creates(&fw, &mut watch, &dir, "armed").await, NodeEventKind::Created);
        // The handle goes, and its unfired watch on the directory with it: the persistent watch
        // is added again.
        drop(mutex);
        assert_eq!(next_item(&mut watch).await, WatchEvent::Resync { reason: ResyncReason::Rearmed });
        assert_eq!(probe_creates(&fw, &mut watch, &dir, "after").await, NodeEventKind::Created);
        drop(watch);
        fw.close().await;
    })
    .await;
}

/// A semaphore waiting the classic way lists its lease directory with a children watch;
/// where its framework watches that directory persistently (a `Framework::watch`, a cache, the
/// session's mirror of it kept by another handle), the listing shares that watch instead of
/// setting a one-shot watch there, and the persistent watch goes on hearing every change while
/// the semaphore waits and after a wait given up (on ZooKeeper 3.6-3.8 the `RemoveWatches`
/// that a one-shot watch given up unfired sends took the persistent watch with it).
#[tokio::test]
async fn a_semaphores_lease_listing_shares_a_persistent_watch_of_its_directory() {
    init_tracing();
    bounded(LIMIT, async {
        let other = plain_framework(&shared_connect().await, SESSION).await;
        for mode in [WatchMode::Persistent, WatchMode::PersistentRecursive] {
            let fw = classic_framework(&shared_connect().await, SESSION).await;
            let path = unique_path("watch-home", "semaphore");
            let leases = format!("{path}/leases");
            let holder = zk_recipes::InterProcessSemaphore::new(&other, &path, 1).unwrap();
            let held = holder.acquire().await.unwrap();
            let mut watch = fw.watch(&leases, mode).await.unwrap();
            let semaphore = zk_recipes::InterProcessSemaphore::new(&fw, &path, 1).unwrap();
            // A wait given up: its listing's watch goes unfired.
            let given_up = semaphore.acquire_timeout(std::time::Duration::from_millis(300)).await.unwrap();
            assert!(given_up.is_none(), "{mode:?}: the semaphore is full");
            probe_leases(&fw, &mut watch, &leases, mode, "given-up").await;
            let mut waiting = tokio::spawn(async move { semaphore.acquire().await.unwrap().release().await });
            // The waiter's lease comes, and its listing right behind it (the same session's
            // requests are answered in order, so the probes below come after that listing).
            let heard = next_item(&mut watch).await;
            assert!(
                matches!(heard, WatchEvent::Node(ref e) if matches!(e.kind, NodeEventKind::Created | NodeEventKind::ChildrenChanged)),
                "{mode:?}: {heard:?}"
            );
            probe_leases(&fw, &mut watch, &leases, mode, "waiting").await;
            assert!((&mut waiting).now_or_never().is_none(), "{mode:?}: the semaphore is full");
            held.release().await.unwrap();
            within(EVENT, "the waiter's lease", &mut waiting).await.unwrap().unwrap();
            drop(watch);
            fw.close().await;
        }
        other.close().await;
    })
    .await;
}

/// A lease admitted through a share of the framework's persistent watch of the lease
/// directory does not keep that share: when the watch's own holder drops it, it leaves the
/// server (a share kept unpolled by the lease held it there and queued every event of the
/// directory for as long as the lease was held).
#[tokio::test]
async fn a_held_lease_keeps_no_share_of_a_persistent_watch() {
    init_tracing();
    bounded(LIMIT, async {
        let server = zk_recipes::testing::shared_server().await.unwrap();
        let proxy = CountingProxy::start(&server.connect_string()).await.unwrap();
        let fw = classic_framework(&proxy.connect_string(), SESSION).await;
        let path = unique_path("watch-home", "semaphore-share");
        let leases = format!("{path}/leases");
        fw.create(&leases).data(b"").parents(zk_recipes::Parents::Persistent).await.unwrap();
        let watch = fw.watch(&leases, WatchMode::Persistent).await.unwrap();
        let semaphore = zk_recipes::InterProcessSemaphore::new(&fw, &path, 2).unwrap();
        let lease = within(EVENT, "a lease", semaphore.acquire()).await.unwrap();

        let before = proxy.counts();
        drop(watch);
        eventually(EVENT, "the persistent watch removed while the lease is held", || async {
            let sent = proxy.counts().since(&before).get("removeWatches");
            (sent == 1).then_some(()).ok_or(format!("{sent} removeWatches"))
        })
        .await;
        lease.release().await.unwrap();
        fw.delete(&path).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Creates and deletes two children of `leases`, each heard twice by `watch` (a recursive
/// watch hears the creation and the deletion, a plain one that the children changed).
async fn probe_leases(
    fw: &Framework,
    watch: &mut zk_recipes::PersistentWatch,
    leases: &str,
    mode: WatchMode,
    when: &str,
) {
    for probe in ["a", "b"] {
        let path = format!("{leases}/{when}-{probe}");
        fw.create(&path).data(b"").await.unwrap();
        fw.delete(&path).await.unwrap();
        for _ in 0..2 {
            let heard = next_item(watch).await;
            assert!(matches!(heard, WatchEvent::Node(_)), "{mode:?}, {when}, probe {probe}: {heard:?}");
        }
    }
}

/// A `Framework::watch` being added again when the framework closes ends its stream, with no
/// error: the add held back by a stalled link, then `close()` (whose ended client answers the
/// add with an error of its own).
#[tokio::test]
async fn a_watch_added_again_when_the_framework_closes_just_ends() {
    init_tracing();
    bounded(LIMIT, async {
        let proxy = zk_recipes::testing::FaultProxy::start(&shared_connect().await).await.unwrap();
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let dir = unique_path("watch-home", "closing-add");
        fw.create(&dir).data(b"").await.unwrap();
        let (_, one_shot) = fw.exists(&dir).watch().await.unwrap();
        let watch = fw.watch(&dir, WatchMode::PersistentRecursive).await.unwrap();
        let items = tokio::spawn(async move { watch.collect::<Vec<_>>().await });
        // The one-shot watch goes unfired: the persistent one is added again, held back.
        proxy.set_mode(zk_recipes::testing::ProxyMode::Hold);
        drop(one_shot);
        request_held_back(&proxy, "the RemoveWatches and the add held back").await;
        fw.close().await;
        let items = within(EVENT, "the stream's end", items).await.unwrap();
        assert!(items.iter().all(Result::is_ok), "{items:?}");
    })
    .await;
}
