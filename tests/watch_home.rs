//! One home for watching: the framework's watch table covers every watcher of a session (its
//! own watched reads, `Framework::watch`, caches, lock mirrors), the lock mirror through
//! counts past 2^30, a listing refused for a while, and a holder under other sessions' tries,
//! and a cache subscriber that lags.

mod common;

use std::time::Duration;

use common::fixtures::*;
use common::timing::{EVENT, FAULT_SESSION, LIMIT, PROMPT, SESSION};
use futures::StreamExt;
use zk_recipes::testing::{mirror_retained_entries, mirror_tasks_running, CountingProxy};
use zk_recipes::{
    CacheEvent, CuratorCache, Error, Framework, InterProcessMutex, NodeEventKind, ResyncReason, WatchEvent, WatchMode,
};

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

/// A one-shot watch of the framework's reads on a path it watches persistently is refused;
/// one set before the persistent watch is let through, and when it goes away unfired (its
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
        // Now refused: the persistent watch holds the path.
        assert!(refused(fw.exists(&dir).watch().await), "a one-shot exists watch beside a persistent one");
        assert!(refused(fw.get_data(&dir).watch().await), "a one-shot data watch beside a persistent one");
        assert!(refused(fw.get_children(&dir).watch().await), "a one-shot children watch beside a persistent one");
        assert!(refused(fw.watch(&dir, WatchMode::Persistent).await), "the other mode");
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

/// A cache's root: a one-shot watch there is refused while the cache runs, and creations below
/// it keep reaching the cache.
#[tokio::test]
async fn a_one_shot_watch_on_a_cached_path_is_refused_and_the_cache_keeps_hearing_creations() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let other = plain_framework(&shared_connect().await, SESSION).await;
        let root = unique_path("watch-home", "cached");
        fw.create(&root).data(b"").await.unwrap();
        let cache = CuratorCache::builder(&fw, &root).build().unwrap();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        assert!(refused(fw.exists(&root).watch().await));
        assert!(refused(fw.get_data(&root).watch().await));
        assert!(refused(fw.watch(&root, WatchMode::Persistent).await));
        for n in 0..20 {
            other.create(&format!("{root}/child-{n}")).data(b"").await.unwrap();
        }
        eventually(EVENT, "every creation in the cache", || async {
            match cache.len() {
                21 => Ok(()),
                n => Err(format!("{n} nodes")),
            }
        })
        .await;
        assert!(cache.is_complete());
        cache.close().await;
        // Closed: the path is free again.
        let (_, oneshot) = fw.exists(&root).watch().await.unwrap();
        drop(oneshot);
        for n in 0..20 {
            other.delete(&format!("{root}/child-{n}")).await.unwrap();
        }
        other.delete(&root).await.unwrap();
        other.close().await;
        fw.close().await;
    })
    .await;
}

/// A lock directory mirrored by a session: that framework refuses a one-shot watch there and
/// a persistent one of the other mode, and a waiter on it is handed the lock at once when the
/// holder releases (a non-recursive watch on the directory would have left it waiting up to a
/// session timeout).
#[tokio::test]
async fn a_mirrored_lock_directory_refuses_other_watches_and_hands_over_at_once() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let a = mirror_framework(&connect, SESSION).await;
        let b = mirror_framework(&connect, SESSION).await;
        // The mirror waits until the server is known to keep it exact.
        for fw in [&a, &b] {
            assert!(fw.server_info().await.unwrap().since_3_6);
        }
        let path = unique_path("watch-home", "lock-dir");
        let holder = InterProcessMutex::new(&a, &path).unwrap();
        let waiter = InterProcessMutex::new(&b, &path).unwrap();
        let held = holder.acquire().await.unwrap();
        let waiting = tokio::spawn(async move {
            let guard = waiter.acquire().await.unwrap();
            (guard, tokio::time::Instant::now())
        });
        eventually(EVENT, "B's node queued and its mirror running", || async {
            match (children(&a, &path).await.len(), mirror_tasks_running(&path)) {
                (2, n) if n >= 2 => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        assert!(refused(b.watch(&path, WatchMode::Persistent).await), "B's mirror holds the directory recursively");
        assert!(refused(b.exists(&path).watch().await), "a one-shot watch beside B's mirror");
        assert!(refused(b.get_children(&path).watch().await), "a one-shot watch beside B's mirror");
        // The same mode is shared.
        let mut same = b.watch(&path, WatchMode::PersistentRecursive).await.unwrap();
        let released = tokio::time::Instant::now();
        held.release().await.unwrap();
        let (guard, granted) = within(PROMPT, "B granted the lock", waiting).await.unwrap();
        assert!(granted - released < SESSION / 2, "B waited {:?}", granted - released);
        let item = next_item(&mut same).await;
        assert!(matches!(item, WatchEvent::Node(ref e) if e.kind == NodeEventKind::Deleted), "{item:?}");
        drop(same);
        guard.release().await.unwrap();
        a.close().await;
        b.close().await;
    })
    .await;
}

/// ZooKeeper reports a directory's create count `c` as `cversion = 2c - numChildren` in a
/// Java `int`, which wraps past 2^30 creates. Through a proxy that shows the client every lock
/// node's sequence 2^30 higher (and the listing's `cversion` to match), the mirror's locks are
/// taken, handed over and released as before, one listing per mirror.
#[tokio::test]
async fn a_lock_directory_past_two_to_the_thirty_creates_still_hands_over() {
    init_tracing();
    bounded(LIMIT, async {
        let server = shared_connect().await;
        let proxy = CountingProxy::start(&server).await.expect("counting proxy");
        proxy.shift_sequences("lock-", 1 << 30);
        // Looks at the server directly (its listings do not cross the proxy).
        let observer = plain_framework(&server, SESSION).await;
        let a = mirror_framework(&proxy.connect_string(), SESSION).await;
        let b = mirror_framework(&proxy.connect_string(), SESSION).await;
        for fw in [&a, &b] {
            assert!(fw.server_info().await.unwrap().since_3_6);
        }
        let path = unique_path("watch-home", "wrapped");
        // A directory that never empties (a persistent node, not a container the server
        // reaps): its count only grows, as a busy lock's does.
        a.create(&path).data(b"").await.unwrap();
        let mutex_a = InterProcessMutex::new(&a, &path).unwrap();
        let mutex_b = InterProcessMutex::new(&b, &path).unwrap();
        // Warm both mirrors, then count.
        for mutex in [&mutex_a, &mutex_b] {
            within(PROMPT, "a first acquire", mutex.acquire()).await.unwrap().release().await.unwrap();
        }
        let before = proxy.counts();
        for _ in 0..20 {
            let held = within(PROMPT, "A acquires", mutex_a.acquire()).await.unwrap();
            assert!(held.fencing_token() > 0);
            let node = held.lock_path().to_owned();
            assert!(sequence_of(&node) >= 1 << 30, "the client sees shifted names: {node}");
            let waiting = {
                let mutex_b = mutex_b.clone();
                tokio::spawn(async move { mutex_b.acquire().await })
            };
            eventually(EVENT, "B queued", || async {
                match children(&observer, &path).await.len() {
                    2 => Ok(()),
                    n => Err(format!("{n} children")),
                }
            })
            .await;
            held.release().await.unwrap();
            let held = within(PROMPT, "B is handed the lock", waiting).await.unwrap().unwrap();
            held.release().await.unwrap();
        }
        let counts = proxy.counts().since(&before);
        assert_eq!(counts.get("getChildren"), 0, "no mirror listed again: {counts:?}");
        assert_eq!(counts.get("addWatch"), 0, "{counts:?}");
        assert_eq!(zk_recipes::testing::mirror_witness_failures(&path), 0);
        a.delete(&path).await.unwrap();
        a.close().await;
        b.close().await;
        observer.close().await;
    })
    .await;
}

/// A listing the server refuses for a while (`Throttled`) leaves the mirror on: it lists
/// again after a pause, and waiters go on deciding from it within a session timeout.
#[tokio::test]
async fn a_throttled_listing_recovers_within_a_session_timeout() {
    init_tracing();
    bounded(LIMIT, async {
        let server = shared_connect().await;
        let proxy = CountingProxy::start(&server).await.expect("counting proxy");
        let fw = mirror_framework(&proxy.connect_string(), FAULT_SESSION).await;
        let other = mirror_framework(&server, FAULT_SESSION).await;
        let path = unique_path("watch-home", "throttled");
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let before = proxy.counts();
        proxy.refuse_next("getChildren", -127);
        let started = tokio::time::Instant::now();
        within(FAULT_SESSION, "the first acquire, its listing throttled", mutex.acquire())
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        let counts = proxy.counts().since(&before);
        assert!(counts.get("getChildren") >= 2, "the refused listing was sent again: {counts:?}");
        assert!(started.elapsed() < FAULT_SESSION);
        // Still on the mirror: a handoff from another session costs no listing.
        let held = InterProcessMutex::new(&other, &path).unwrap().acquire().await.unwrap();
        let waiting = {
            let mutex = mutex.clone();
            tokio::spawn(async move { mutex.acquire().await })
        };
        eventually(EVENT, "queued", || async {
            match children(&other, &path).await.len() {
                2 => Ok(()),
                n => Err(format!("{n} children")),
            }
        })
        .await;
        let before = proxy.counts();
        held.release().await.unwrap();
        within(PROMPT, "handed over", waiting).await.unwrap().unwrap().release().await.unwrap();
        assert_eq!(proxy.counts().since(&before).get("getChildren"), 0);
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// A holder's mirror keeps about as many entries as the directory has children, however many
/// tries other sessions make on the lock meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holders_memory_does_not_grow_with_other_sessions_tries() {
    init_tracing();
    bounded(Duration::from_secs(240), async {
        let connect = shared_connect().await;
        let holder_fw = mirror_framework(&connect, SESSION).await;
        // On the mirror from the first acquire: the server is known.
        assert!(holder_fw.server_info().await.unwrap().since_3_6);
        let path = unique_path("watch-home", "long-hold");
        let held = InterProcessMutex::new(&holder_fw, &path).unwrap().acquire().await.unwrap();
        assert_eq!(mirror_tasks_running(&path), 1, "the holder holds on its mirror");
        let tries: usize = 100_000;
        let tasks = 8;
        let mut runs = Vec::new();
        for _ in 0..tasks {
            let fw = mirror_framework(&connect, SESSION).await;
            fw.server_info().await.unwrap();
            let mutex = InterProcessMutex::new(&fw, &path).unwrap();
            runs.push(tokio::spawn(async move {
                for _ in 0..tries / tasks {
                    assert!(mutex.try_acquire().await.unwrap().is_none(), "the lock is held");
                }
                fw.close().await;
            }));
        }
        let mut peak = 0;
        while runs.iter().any(|run| !run.is_finished()) {
            peak = peak.max(mirror_retained_entries(&path));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for run in runs {
            run.await.unwrap();
        }
        peak = peak.max(mirror_retained_entries(&path));
        // One child held, up to eight tries at a time, and each mirror's kept order: a few
        // dozen entries, not two per try.
        assert!(peak < 200, "the mirrors of {path} kept {peak} entries during {tries} tries");
        assert!(held.is_held());
        held.release().await.unwrap();
        holder_fw.close().await;
    })
    .await;
}

/// A stream that falls behind the cache's event capacity gets `Lagged` with the whole cache,
/// then every later event: a consumer that replaces its view with it ends equal to the cache.
#[tokio::test]
async fn a_lagging_cache_stream_gets_the_whole_cache_and_goes_on() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let root = unique_path("watch-home", "lagging");
        fw.create(&root).data(b"").await.unwrap();
        let cache = CuratorCache::builder(&fw, &root).event_capacity(8).build().unwrap();
        let mut events = cache.events();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        // Nobody reads while 50 nodes come and go.
        for n in 0..50 {
            fw.create(&format!("{root}/n-{n}")).data(format!("{n}").as_bytes()).await.unwrap();
        }
        for n in 0..10 {
            fw.delete(&format!("{root}/n-{n}")).await.unwrap();
        }
        eventually(EVENT, "the cache caught up", || async {
            match cache.len() {
                41 => Ok(()),
                n => Err(format!("{n} nodes")),
            }
        })
        .await;
        let mut view = std::collections::BTreeMap::new();
        let lagged = loop {
            let event = within(EVENT, "an event", events.next()).await.expect("the stream goes on");
            match event {
                CacheEvent::Lagged { missed, nodes } => {
                    view = nodes.into_iter().map(|n| (n.path().to_owned(), n.data().cloned())).collect();
                    break Some(missed);
                }
                CacheEvent::Created(n) | CacheEvent::Changed(_, n) => {
                    view.insert(n.path().to_owned(), n.data().cloned());
                }
                CacheEvent::Deleted(n) => {
                    view.remove(n.path());
                }
                _ => {}
            }
        };
        assert!(lagged.is_some_and(|missed| missed > 0), "a lag signal with what was missed");
        // Later events follow on the view.
        fw.create(&format!("{root}/late")).data(b"late").await.unwrap();
        match within(EVENT, "the late node", events.next()).await.expect("the stream goes on") {
            CacheEvent::Created(n) if n.path().ends_with("/late") => {
                view.insert(n.path().to_owned(), n.data().cloned());
            }
            other => panic!("unexpected {other:?}"),
        }
        let cached: std::collections::BTreeMap<String, Option<Vec<u8>>> =
            cache.nodes().into_iter().map(|n| (n.path().to_owned(), n.data().cloned())).collect();
        assert_eq!(view, cached, "the replayed view is the cache");
        cache.close().await;
        for child in children(&fw, &root).await {
            fw.delete(&format!("{root}/{child}")).await.unwrap();
        }
        fw.delete(&root).await.unwrap();
        fw.close().await;
    })
    .await;
}

/// The server of each session is asked once what it supports (one `getEphemerals`, no
/// four-letter word); these servers are 3.8.
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
        let total = proxy.counts().get("getEphemerals");
        assert_eq!(total, 1, "one question for the session, whoever asked first");
        fw.close().await;
    })
    .await;
}
