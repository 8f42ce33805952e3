//! The watch table seen from a cache (a watched read of its root shares the cache's watch,
//! creations keep reaching it), and a stream that lags behind the cache's event capacity (it gets the whole
//! cache, then every later event).

use crate::common;

use common::fixtures::*;
use common::timing::{EVENT, LIMIT, SESSION};
use futures::StreamExt;
use zk_recipes::{CacheEvent, CuratorCache, Error, WatchMode};

fn refused(result: Result<impl std::fmt::Debug, Error>) -> bool {
    matches!(result, Err(Error::InvalidArgument { .. }))
}

/// A cache's root: a watched read there shares the cache's persistent watch while the cache
/// runs (no one-shot watch is set), and creations below it keep reaching the cache.
#[tokio::test]
async fn a_watched_read_of_a_cached_path_shares_its_watch_and_the_cache_keeps_hearing_creations() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let other = plain_framework(&shared_connect().await, SESSION).await;
        let root = unique_path("watch-home", "cached");
        fw.create(&root).data(b"").await.unwrap();
        let cache = CuratorCache::builder(&fw, &root).build().unwrap();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        let (_, exists) = fw.exists(&root).watch().await.unwrap();
        let (_, _, data) = fw.get_data(&root).watch().await.unwrap();
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
        drop((exists, data));
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
        // The `Initialized` the dropped events held (the stream never took it) comes next: it
        // is sent once per cache, and consumers wait for it.
        let next = within(EVENT, "the owed Initialized", events.next()).await;
        assert!(matches!(next, Some(CacheEvent::Initialized)), "{next:?}");
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

/// A cache closed while its `start()` waits for the server to take the watch (the link held
/// back by a proxy) stays closed: the start ends with `Closed`, and nothing of it runs on.
/// (The start put the cache back to started, with its watch and task, after the close.)
#[tokio::test]
async fn a_cache_closed_while_it_starts_stays_closed() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let proxy = zk_recipes::testing::FaultProxy::start(&connect).await.unwrap();
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let path = unique_path("cache", "closed-while-starting");
        fw.create(&path).data(b"x").await.unwrap();
        let cache = CuratorCache::builder(&fw, &path).build().unwrap();
        proxy.set_mode(zk_recipes::testing::ProxyMode::Hold);
        let closing = async {
            request_held_back(&proxy, "the watch's add sent").await;
            cache.close().await;
            proxy.set_mode(zk_recipes::testing::ProxyMode::Pass);
        };
        let (started, ()) = tokio::join!(cache.start(), closing);
        assert!(matches!(started, Err(Error::Closed)), "{started:?}");
        assert!(!cache.is_complete());
        assert!(matches!(cache.start().await, Err(Error::Closed)));
        // The path is free again for this framework: no watch of the cache holds it.
        eventually(EVENT, "the cache's watch gone", || async {
            fw.watch(&path, WatchMode::Persistent).await.map(drop).map_err(|e| e.to_string())
        })
        .await;
        fw.delete(&path).await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Closing a cache ends its listeners: the call in progress is cancelled and the events still
/// queued for it are not delivered (they were, one by one, to a cache that held nothing).
#[tokio::test]
async fn closing_a_cache_cancels_its_listeners_call_and_drops_what_is_queued() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Set when the listener's call is dropped before it finished.
    struct Cancelled(Arc<AtomicBool>);
    impl Drop for Cancelled {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let root = unique_path("cache", "listener-after-close");
        fw.create(&root).data(b"").await.unwrap();
        for n in 0..5 {
            fw.create(&format!("{root}/n-{n}")).data(b"").await.unwrap();
        }
        let cache = CuratorCache::builder(&fw, &root).build().unwrap();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        let (calls, cancelled) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (release, released) = tokio::sync::watch::channel(false);
        let _handle = {
            let (calls, cancelled) = (calls.clone(), cancelled.clone());
            cache
                .on_event(move |_| {
                    let (calls, cancelled, mut released) = (calls.clone(), cancelled.clone(), released.clone());
                    async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        let guard = Cancelled(cancelled);
                        let _ = released.wait_for(|r| *r).await;
                        std::mem::forget(guard);
                    }
                })
                .unwrap()
        };
        // The listener is in its first call, with the other nodes' events queued behind it.
        eventually(EVENT, "the first call", || async {
            match calls.load(Ordering::SeqCst) {
                0 => Err("no call yet".to_owned()),
                _ => Ok(()),
            }
        })
        .await;
        cache.close().await;
        eventually(EVENT, "the call in progress cancelled", || async {
            if cancelled.load(Ordering::SeqCst) {
                Ok(())
            } else {
                Err("still running".to_owned())
            }
        })
        .await;
        release.send_replace(true);
        // Nothing more to call it with: the events queued behind were dropped.
        tokio::task::yield_now().await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        fw.delete(&root).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}
