//! Fixtures of the cache fault and request-count tests: unique paths, a framework with a
//! given session timeout, a fresh read of a subtree, a random writer, convergence waits, and
//! a replay of a cache's event stream that checks every event against the one before it on
//! the same path.
#![allow(dead_code)] // each test binary uses a different part of this module

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;
use zk_recipes::{CacheEvent, CacheEventStream, CuratorCache, Error, Framework};

/// Bound on waiting for one event.
pub const EVENT_LIMIT: Duration = Duration::from_secs(20);

/// Path → (data, version).
pub type View = BTreeMap<String, (Vec<u8>, i32)>;

#[allow(unused_imports)] // not every binary that includes it calls it
pub use super::fixtures::framework;

/// A top-level path of its own: `/cache-<name>-...` ([`super::fixtures::unique_path`]).
pub fn unique_path(name: &str) -> String {
    super::fixtures::unique_path("cache", name)
}

/// [`super::fixtures::bounded`], with tracing set up.
pub async fn bounded<T>(limit: Duration, test: impl Future<Output = T>) -> T {
    super::fixtures::init_tracing();
    super::fixtures::bounded(limit, test).await
}

/// The next event, bounded.
pub async fn next(events: &mut CacheEventStream) -> CacheEvent {
    match tokio::time::timeout(EVENT_LIMIT, events.next()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("the event stream ended"),
        Err(_) => panic!("no cache event within {EVENT_LIMIT:?}"),
    }
}

/// `root` and everything below it, read fresh from the server.
pub async fn server_tree(fw: &Framework, root: &str) -> View {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(path) = stack.pop() {
        let (data, stat) = match fw.get_data(&path).await {
            Ok(found) => found,
            Err(Error::ZooKeeper(zk_recipes::zk::Error::NoNode)) => continue,
            Err(e) => panic!("reading {path}: {e}"),
        };
        out.insert(path.clone(), (data, stat.version));
        let children = match fw.get_children(&path).await {
            Ok(children) => children,
            Err(Error::ZooKeeper(zk_recipes::zk::Error::NoNode)) => Vec::new(),
            Err(e) => panic!("listing {path}: {e}"),
        };
        stack.extend(children.into_iter().map(|c| format!("{path}/{c}")));
    }
    out
}

pub fn cache_tree(cache: &CuratorCache) -> View {
    cache
        .nodes()
        .into_iter()
        .map(|n| (n.path().to_owned(), (n.data().cloned().unwrap_or_default(), n.stat().version)))
        .collect()
}

/// Deletes a test's subtree (children first).
pub async fn delete_tree(fw: &Framework, root: &str) {
    let tree = server_tree(fw, root).await;
    for path in tree.keys().rev() {
        let _ = fw.delete(path).await;
    }
}

fn differences(held: &View, truth: &View) -> String {
    let missing: Vec<_> = truth.keys().filter(|k| !held.contains_key(*k)).collect();
    let extra: Vec<_> = held.keys().filter(|k| !truth.contains_key(*k)).collect();
    let stale: Vec<_> = held.iter().filter(|(k, v)| truth.get(*k).is_some_and(|t| t != *v)).map(|(k, _)| k).collect();
    format!("missing {missing:?}, extra {extra:?}, stale {stale:?}")
}

/// Waits until the cache is complete and equals a fresh read of the server through `reader`.
pub async fn converges(cache: &CuratorCache, reader: &Framework, root: &str, limit: Duration) -> View {
    let deadline = Instant::now() + limit;
    loop {
        let truth = server_tree(reader, root).await;
        if cache.is_complete() && cache_tree(cache) == truth {
            return truth;
        }
        if Instant::now() >= deadline {
            panic!(
                "cache of {root} did not converge within {limit:?}: complete {}, {}",
                cache.is_complete(),
                differences(&cache_tree(cache), &truth)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the cache is complete (its resync after the faults is done).
pub async fn resynced(cache: &CuratorCache, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !cache.is_complete() {
        assert!(Instant::now() < deadline, "the cache did not resync within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A write to the root reaches the cache (its watch is in place on the server).
pub async fn watch_is_live(cache: &CuratorCache, writer: &Framework, root: &str) {
    let stat = writer.set_data(root, b"marker").await.unwrap();
    let deadline = Instant::now() + EVENT_LIMIT;
    while cache.get(root).map(|n| n.stat().version) != Some(stat.version) {
        assert!(Instant::now() < deadline, "the cache did not see a write to {root}: its watch is gone");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A writer mutating a subtree at random (creates, set-data and deletes at two depths) until
/// `stop`; returns how many writes succeeded.
pub async fn write_until(fw: Framework, root: String, stop: tokio::sync::watch::Receiver<bool>, seed: u64) -> u64 {
    let mut x = seed | 1;
    let mut ops = 0;
    let names = ["a", "b", "c", "d"];
    while !*stop.borrow() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let depth = 1 + (x % 2) as usize;
        let mut path = root.clone();
        for level in 0..depth {
            path.push('/');
            path.push_str(names[((x >> (8 * level + 3)) % 4) as usize]);
        }
        let result = match (x >> 40) % 3 {
            0 => fw.create(&path).data(format!("{ops}").as_bytes()).await.map(drop),
            1 => fw.set_data(&path, format!("{ops}").as_bytes()).await.map(drop),
            _ => fw.delete(&path).await,
        };
        match result {
            Ok(()) => ops += 1,
            Err(Error::ZooKeeper(
                zk_recipes::zk::Error::NoNode | zk_recipes::zk::Error::NodeExists | zk_recipes::zk::Error::NotEmpty,
            )) => {}
            // A write whose reply was lost: the server may or may not have it, and the
            // cache is compared with the server at the end either way.
            Err(Error::OutcomeUnknown { .. }) => {}
            Err(e) if e.is_retryable() => {}
            Err(e) => panic!("writer: {path}: {e}"),
        }
    }
    ops
}

/// A consumer's view built from nothing but a cache's events, checked event by event: a
/// `Created` only for a path it does not hold, a `Changed` or `Deleted` only for one it holds
/// and with the `old` node it holds, and a `Changed` only to a newer modification
/// (`(czxid, mzxid)` grows).
#[derive(Debug, Default)]
pub struct Replay {
    nodes: BTreeMap<String, zk_recipes::ChildData>,
    pub events: u64,
    pub initialized: bool,
}

impl Replay {
    pub fn apply(&mut self, event: CacheEvent) {
        self.events += 1;
        let key = |n: &zk_recipes::ChildData| (n.stat().czxid, n.stat().mzxid);
        match event {
            CacheEvent::Created(node) => {
                let path = node.path().to_owned();
                assert!(!self.nodes.contains_key(&path), "Created for {path}, which the events already hold");
                self.nodes.insert(path, node);
            }
            CacheEvent::Changed(old, new) => {
                let path = new.path().to_owned();
                let held = self.nodes.get(&path).unwrap_or_else(|| panic!("Changed for {path}, not held"));
                assert_eq!(key(held), key(&old), "Changed for {path}: its old node is not the one told before");
                assert!(key(&new) > key(&old), "Changed for {path} to an older or equal modification");
                self.nodes.insert(path, new);
            }
            CacheEvent::Deleted(old) => {
                let path = old.path().to_owned();
                let held = self.nodes.remove(&path).unwrap_or_else(|| panic!("Deleted for {path}, not held"));
                assert_eq!(key(&held), key(&old), "Deleted for {path}: its old node is not the one told before");
            }
            CacheEvent::Initialized => self.initialized = true,
            _ => {}
        }
    }

    pub fn view(&self) -> View {
        self.nodes.iter().map(|(p, n)| (p.clone(), (n.data().cloned().unwrap_or_default(), n.stat().version))).collect()
    }

    /// Applies every event that comes within `quiet` of the previous one.
    pub async fn drain(&mut self, events: &mut CacheEventStream, quiet: Duration) {
        while let Ok(Some(event)) = tokio::time::timeout(quiet, events.next()).await {
            self.apply(event);
        }
    }

    /// Panics unless the events told `truth`.
    pub fn assert_equals(&self, truth: &View) {
        let view = self.view();
        assert!(
            view == *truth,
            "the cache's events do not add up to the server's state: {}",
            differences(&view, truth)
        );
    }
}

/// Replays `events` on a task of its own until the stream ends; the task returns the replay.
pub fn replay(mut events: CacheEventStream) -> tokio::task::JoinHandle<Replay> {
    tokio::spawn(async move {
        let mut replay = Replay::default();
        while let Some(event) = events.next().await {
            replay.apply(event);
        }
        replay
    })
}

/// The next `n` events of a path-children view, as short strings.
pub async fn take(view: &mut zk_recipes::PathChildrenStream, n: usize) -> Vec<String> {
    let mut got = Vec::new();
    for _ in 0..n {
        let event = tokio::time::timeout(EVENT_LIMIT, view.next()).await.expect("a view event").expect("open");
        got.push(match event {
            zk_recipes::PathChildrenEvent::ChildAdded(n) => format!("added {}", n.name()),
            zk_recipes::PathChildrenEvent::ChildUpdated(n) => format!("updated {}", n.name()),
            zk_recipes::PathChildrenEvent::ChildRemoved(n) => format!("removed {}", n.name()),
            zk_recipes::PathChildrenEvent::Initialized => "initialized".to_owned(),
            _ => "other".to_owned(),
        });
    }
    got
}
