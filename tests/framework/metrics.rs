//! Metrics through a debugging recorder (`metrics-util`). A recorder is process-wide: each test
//! runs its body (the ignored test of the same name with `_alone`) in a child process of its
//! own, which installs the recorder, on this process's shared server. The bodies name their
//! frameworks' series with a `metrics_name` of their own all the same, so that run together
//! (`--ignored`) they still read only theirs.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use metrics::Key;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use zk_recipes::{Framework, InterProcessMutex, InterProcessSemaphore};

use crate::common::fixtures::*;
use crate::common::timing::*;

/// The binary's recorder, installed by the first test that asks, and every value seen so far:
/// a snapshot drains what it reports (counters and gauges back to zero, histograms emptied),
/// and tests snapshot concurrently, so each snapshot is added to running totals. Gauges here
/// only go up and down by steps, so their totals are their values.
struct Recorded {
    snapshotter: Snapshotter,
    totals: Mutex<HashMap<String, (Key, Series)>>,
}

fn recorded() -> &'static Recorded {
    static RECORDED: OnceLock<Recorded> = OnceLock::new();
    RECORDED.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().expect("no other recorder in this binary");
        Recorded { snapshotter, totals: Mutex::default() }
    })
}

/// The total of the series of one metric whose labels include every pair of `labels`.
#[derive(Debug, Default, Clone)]
struct Series {
    counter: u64,
    gauge: f64,
    histogram: Vec<f64>,
    found: usize,
}

fn read(name: &str, labels: &[(&str, &str)]) -> Series {
    let recorded = recorded();
    let mut totals = recorded.totals.lock().unwrap();
    for (key, _, _, value) in recorded.snapshotter.snapshot().into_vec() {
        let (kind, key) = key.into_parts();
        let total = &mut totals.entry(format!("{kind:?} {key:?}")).or_insert_with(|| (key, Series::default())).1;
        match value {
            DebugValue::Counter(n) => total.counter += n,
            DebugValue::Gauge(g) => total.gauge += g.into_inner(),
            DebugValue::Histogram(values) => total.histogram.extend(values.iter().map(|v| v.into_inner())),
        }
    }
    let mut series = Series::default();
    for (key, total) in totals.values() {
        let matches =
            key.name() == name && labels.iter().all(|(k, v)| key.labels().any(|l| l.key() == *k && l.value() == *v));
        if matches {
            series.found += 1;
            series.counter += total.counter;
            series.gauge += total.gauge;
            series.histogram.extend(&total.histogram);
        }
    }
    series
}

/// Runs the ignored test `name` of this module in a child process, on this process's shared
/// server.
async fn alone(name: &str) {
    let connect = shared_connect().await;
    let full = format!("framework::metrics::{name}");
    run_alone_with(&full, &[("ZKR_TEST_CONNECT", connect.as_str())]).await;
}

/// A started framework with metrics under `name`, path labels on.
async fn counted_framework(connect: &str, name: &str, session: Duration) -> Framework {
    Framework::builder(connect)
        .session_timeout(session)
        .retry_policy(zk_recipes::retry::RetryForever::new(Duration::from_millis(50)))
        .metrics_name(name)
        .metrics_path_labels(true)
        .start()
        .await
        .expect("starting a framework")
}

#[tokio::test]
async fn an_acquire_that_waited_is_counted_once_in_the_histogram() {
    alone("an_acquire_that_waited_is_counted_once_in_the_histogram_alone").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the body of `an_acquire_that_waited_is_counted_once_in_the_histogram`, run alone in a child process"]
async fn an_acquire_that_waited_is_counted_once_in_the_histogram_alone() {
    init_tracing();
    recorded();
    bounded(LIMIT, async {
        let name = unique_path("metrics", "wait").trim_start_matches('/').to_owned();
        let fw = counted_framework(&shared_connect().await, &name, SESSION).await;
        let path = unique_path("metrics", "mutex");
        let labels = [("framework", name.as_str()), ("recipe", "mutex"), ("path", path.as_str())];
        let holder = InterProcessMutex::new(&fw, &path).unwrap();
        let guard = holder.try_acquire().await.unwrap().expect("the lock is free");
        assert_eq!(read("zk_recipes_lock_holds", &labels).gauge, 1.0);

        // A timed acquire that runs out of time counts a timeout and no wait.
        let impatient = InterProcessMutex::new(&fw, &path).unwrap();
        let timed = tokio::spawn(async move { impatient.acquire_timeout(Duration::from_millis(200)).await });
        assert!(timed.await.unwrap().unwrap().is_none());
        assert_eq!(read("zk_recipes_lock_acquire_timeouts_total", &labels).counter, 1);

        let waiter = InterProcessMutex::new(&fw, &path).unwrap();
        let waiting = tokio::spawn(async move {
            let guard = waiter.acquire().await.unwrap();
            (waiter, guard)
        });
        eventually(EVENT, "the waiter counted", || async {
            let waiters = read("zk_recipes_lock_waiters", &labels).gauge;
            if waiters == 1.0 {
                Ok(())
            } else {
                Err(format!("{waiters} waiters"))
            }
        })
        .await;
        let held_for = Duration::from_millis(300);
        tokio::time::sleep(held_for).await;
        drop(guard);
        let (_waiter, guard) = within(EVENT, "the waiter's acquire", waiting).await.unwrap();

        let waits = read("zk_recipes_lock_acquire_wait_seconds", &labels).histogram;
        assert_eq!(waits.len(), 1, "one acquire waited: {waits:?}");
        assert!(waits[0] >= held_for.as_secs_f64(), "it waited at least the hold: {waits:?}");
        assert_eq!(read("zk_recipes_lock_waiters", &labels).gauge, 0.0);
        // The holder's node was deleted in the background (one hold less); the waiter holds.
        eventually(EVENT, "one hold", || async {
            let holds = read("zk_recipes_lock_holds", &labels).gauge;
            if holds == 1.0 {
                Ok(())
            } else {
                Err(format!("{holds} holds"))
            }
        })
        .await;
        guard.release().await.unwrap();
        assert_eq!(read("zk_recipes_lock_holds", &labels).gauge, 0.0);
        assert_eq!(read("zk_recipes_lock_lost_total", &labels).counter, 0);
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_lost_session_counts_an_expiry_a_new_session_and_a_lost_hold() {
    alone("a_lost_session_counts_an_expiry_a_new_session_and_a_lost_hold_alone").await;
}

#[tokio::test]
#[ignore = "the body of `a_lost_session_counts_an_expiry_a_new_session_and_a_lost_hold`, run alone in a child process"]
async fn a_lost_session_counts_an_expiry_a_new_session_and_a_lost_hold_alone() {
    init_tracing();
    recorded();
    bounded(LIMIT, async {
        let faulty = FaultyServer::start().await;
        let name = unique_path("metrics", "expiry").trim_start_matches('/').to_owned();
        let fw = counted_framework(&faulty.proxied(), &name, FAULT_SESSION).await;
        let framework = [("framework", name.as_str())];
        assert_eq!(read("zk_recipes_sessions_opened_total", &framework).counter, 1);
        assert_eq!(read("zk_recipes_session_expirations_total", &framework).counter, 0);

        let path = unique_path("metrics", "lost");
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let guard = mutex.acquire().await.unwrap();
        // Two leases taken together count as two holds and one wait.
        let leases_path = unique_path("metrics", "leases");
        let semaphore = InterProcessSemaphore::new(&fw, &leases_path, 3).unwrap();
        let leases = semaphore.acquire_many(2).await.unwrap();
        let leased = [("framework", name.as_str()), ("path", leases_path.as_str())];
        assert_eq!(read("zk_recipes_lock_holds", &leased).gauge, 2.0);
        assert_eq!(read("zk_recipes_lock_acquire_wait_seconds", &leased).histogram.len(), 1);
        let lock = [("framework", name.as_str()), ("path", path.as_str())];
        assert_eq!(read("zk_recipes_lock_holds", &lock).gauge, 1.0);

        faulty.expire(&fw, EVENT).await;
        within(EVENT, "the guard learns it lost the lock", guard.lost()).await;
        // Counted when the session ended, while the guards are still alive.
        assert_eq!(read("zk_recipes_lock_lost_total", &lock).counter, 1);
        assert_eq!(read("zk_recipes_lock_holds", &lock).gauge, 0.0);
        assert_eq!(read("zk_recipes_lock_lost_total", &leased).counter, 2);
        assert_eq!(read("zk_recipes_lock_holds", &leased).gauge, 0.0);
        drop(guard);
        drop(leases);

        assert_eq!(read("zk_recipes_session_expirations_total", &framework).counter, 1);
        assert_eq!(read("zk_recipes_sessions_opened_total", &framework).counter, 2);
        // The new session's first `Reconnected` is no reconnection.
        assert_eq!(read("zk_recipes_reconnects_total", &framework).counter, 0);
        let lost = [("framework", name.as_str()), ("state", "lost")];
        assert_eq!(read("zk_recipes_connection_state_changes_total", &lost).counter, 1);
        let suspended = [("framework", name.as_str()), ("state", "suspended")];
        assert!(read("zk_recipes_connection_state_changes_total", &suspended).counter >= 1);
        // Dropping the lost guards counts nothing again.
        assert_eq!(read("zk_recipes_lock_lost_total", &lock).counter, 1);
        assert_eq!(read("zk_recipes_lock_holds", &lock).gauge, 0.0);
        assert_eq!(read("zk_recipes_lock_lost_total", &leased).counter, 2);
        assert_eq!(read("zk_recipes_lock_holds", &leased).gauge, 0.0);

        // A cut connection that comes back on the same session is a reconnection.
        let epoch = fw.snapshot().epoch;
        faulty.proxy.drop_connections();
        eventually(EVENT, "one reconnection counted", || async {
            match read("zk_recipes_reconnects_total", &framework).counter {
                1 => Ok(()),
                n => Err(format!("{n} reconnections")),
            }
        })
        .await;
        assert_eq!(fw.snapshot().epoch, epoch, "the same session");
        assert_eq!(read("zk_recipes_sessions_opened_total", &framework).counter, 2);
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn requests_are_counted_by_operation() {
    alone("requests_are_counted_by_operation_alone").await;
}

#[tokio::test]
#[ignore = "the body of `requests_are_counted_by_operation`, run alone in a child process"]
async fn requests_are_counted_by_operation_alone() {
    init_tracing();
    recorded();
    bounded(LIMIT, async {
        let name = unique_path("metrics", "ops").trim_start_matches('/').to_owned();
        let fw = counted_framework(&shared_connect().await, &name, SESSION).await;
        let op = |op: &'static str| read("zk_recipes_requests_total", &[("framework", name.as_str()), ("op", op)]);
        let before: Vec<u64> = ["create", "get_data", "set_data", "delete"].iter().map(|o| op(o).counter).collect();
        assert_eq!(op("create").found, 1, "every operation's series is registered at build");

        let path = unique_path("metrics", "node");
        fw.create(&path).await.unwrap();
        fw.set_data(&path, b"one").await.unwrap();
        fw.get_data(&path).await.unwrap();
        fw.get_data(&path).await.unwrap();
        fw.delete(&path).await.unwrap();

        let after: Vec<u64> = ["create", "get_data", "set_data", "delete"].iter().map(|o| op(o).counter).collect();
        let sent: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        assert_eq!(sent, [1, 2, 1, 1], "create, get_data, set_data, delete");
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_cache_counts_its_nodes_and_events() {
    alone("a_cache_counts_its_nodes_and_events_alone").await;
}

#[tokio::test]
#[ignore = "the body of `a_cache_counts_its_nodes_and_events`, run alone in a child process"]
async fn a_cache_counts_its_nodes_and_events_alone() {
    init_tracing();
    recorded();
    bounded(LIMIT, async {
        let name = unique_path("metrics", "cache").trim_start_matches('/').to_owned();
        let fw = counted_framework(&shared_connect().await, &name, SESSION).await;
        let root = unique_path("metrics", "cached");
        fw.create(&root).await.unwrap();
        fw.create(&format!("{root}/a")).await.unwrap();
        let cache = zk_recipes::CuratorCache::builder(&fw, &root).build().unwrap();
        cache.start().await.unwrap();
        within(EVENT, "the cache's load", cache.initialized()).await.unwrap();
        let labels = [("framework", name.as_str()), ("recipe", "cache"), ("path", root.as_str())];
        assert_eq!(read("zk_recipes_cache_nodes", &labels).gauge, 2.0);

        let kind = |kind: &'static str| {
            let labels = [("framework", name.as_str()), ("path", root.as_str()), ("kind", kind)];
            read("zk_recipes_cache_events_total", &labels).counter
        };
        // One change at a time: a node deleted before the cache read its new data is one delete.
        let applied = |what: &'static str, n: u64| {
            eventually(EVENT, what, move || async move {
                match kind(what) {
                    seen if seen == n => Ok(()),
                    seen => Err(format!("{seen} {what}")),
                }
            })
        };
        fw.set_data(&format!("{root}/a"), b"new").await.unwrap();
        applied("changed", 1).await;
        fw.delete(&format!("{root}/a")).await.unwrap();
        applied("deleted", 1).await;
        assert_eq!((kind("created"), kind("changed")), (2, 1));
        assert_eq!(read("zk_recipes_cache_nodes", &labels).gauge, 1.0);
        cache.close().await;
        assert_eq!(read("zk_recipes_cache_nodes", &labels).gauge, 0.0, "a closed cache holds nothing");
        fw.delete(&root).await.unwrap();
        fw.close().await;
    })
    .await;
}
