//! `DistributedQueue`'s extras and `QueueSharder` against real servers: an item limit that
//! holds puts back (and fails timed ones), background puts told as events (through a
//! connection that keeps breaking: each event's item is in the queue once or reported
//! failed) and flushed, and shards added by the sharders' leader past the threshold, also
//! after the leader's session expired.

use crate::common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::fixtures::*;
use common::timing::{back_within, EVENT, FAULT_SESSION, LIMIT, QUIET, SESSION};
use futures::{FutureExt, StreamExt};
use zk_recipes::protocol::queue_names::is_shard_name;
use zk_recipes::testing::{FaultProxy, ProxyMode};
use zk_recipes::{
    DistributedDelayQueue, DistributedIdQueue, DistributedPriorityQueue, DistributedQueue, Error, QueueSharder,
    QueueSharderPolicies,
};

#[tokio::test]
async fn a_full_queue_holds_puts_back_until_a_take() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("queue-extras", "max");
        let queue = DistributedQueue::new(&fw, &path).unwrap().with_max_items(3).unwrap();
        assert_eq!(queue.max_items(), Some(3));
        assert!(matches!(
            DistributedQueue::new(&fw, &path).unwrap().with_max_items(0),
            Err(Error::InvalidArgument { .. })
        ));
        for i in 0..3 {
            queue.put(format!("item-{i}").as_bytes()).await.unwrap();
        }
        assert_eq!(queue.put_timeout(b"late", QUIET).await.unwrap(), None, "full: nothing put");
        assert_eq!(children(&fw, &path).await.len(), 3);
        let blocked = {
            let queue = queue.clone();
            tokio::spawn(async move { queue.put(b"item-3").await })
        };
        tokio::time::sleep(QUIET).await; // a put that must not happen
        assert!(!blocked.is_finished(), "the put waits for room");
        let consumer = DistributedQueue::new(&fw, &path).unwrap();
        assert_eq!(consumer.take().await.unwrap(), [b"item-0".to_vec()]);
        within(EVENT, "the held put", blocked).await.unwrap().unwrap();
        let mut rest = Vec::new();
        for _ in 0..3 {
            rest.extend(consumer.take().await.unwrap());
        }
        assert_eq!(rest, [b"item-1".to_vec(), b"item-2".to_vec(), b"item-3".to_vec()]);
        fw.delete(&path).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// The id, priority and delay queues have the limit, the timed put and the background puts
/// too (Curator's `QueueBuilder` gives them to every variant): a full queue refuses a timed
/// put, and a background put waits for room, is told as an event and is flushed.
#[tokio::test]
async fn every_variant_has_the_limit_the_timed_put_and_background_puts() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let base = unique_path("queue-extras", "variants-max");
        let soon = std::time::SystemTime::now() + Duration::from_millis(1);

        let priority =
            DistributedPriorityQueue::new(&fw, &format!("{base}/priority")).unwrap().with_max_items(1).unwrap();
        assert_eq!(priority.max_items(), Some(1));
        assert!(matches!(priority.clone().with_max_items(0), Err(Error::InvalidArgument { .. })));
        priority.put(b"first", 5).await.unwrap();
        assert_eq!(priority.put_timeout(b"late", 1, QUIET).await.unwrap(), None, "full: nothing put");
        let mut events = priority.put_events();
        priority.put_in_background(&[b"waits"], -1).unwrap();
        assert!(!priority.flush_puts(QUIET).await.unwrap(), "the background put waits for room");
        assert_eq!(children(&fw, &format!("{base}/priority")).await.len(), 1, "the background put waits for room");
        assert_eq!(priority.take().await.unwrap(), [b"first".to_vec()]);
        assert!(priority.flush_puts(EVENT).await.unwrap());
        let event = within(EVENT, "the background put's event", events.next()).await.unwrap();
        assert!(event.path().is_some_and(|p| p.contains("/queue-0")), "priority -1's name: {event:?}");
        assert_eq!(priority.take().await.unwrap(), [b"waits".to_vec()]);

        let delay = DistributedDelayQueue::new(&fw, &format!("{base}/delay")).unwrap().with_max_items(1).unwrap();
        delay.put(b"first", soon).await.unwrap();
        assert_eq!(delay.put_timeout(b"late", soon, QUIET).await.unwrap(), None, "full: nothing put");
        let mut events = delay.put_events();
        assert!(matches!(delay.put_in_background::<&[u8]>(&[], soon), Err(Error::InvalidArgument { .. })));
        assert_eq!(delay.take().await.unwrap(), [b"first".to_vec()]);
        delay.put_in_background(&[b"second"], soon).unwrap();
        assert!(matches!(delay.flush_puts(Duration::ZERO).await, Err(Error::InvalidArgument { .. })));
        assert!(delay.flush_puts(EVENT).await.unwrap());
        let event = within(EVENT, "the background put's event", events.next()).await.unwrap();
        assert_eq!((event.items(), event.error().is_none()), (&[b"second".to_vec()][..], true));
        assert_eq!(delay.take().await.unwrap(), [b"second".to_vec()]);

        let ids = DistributedIdQueue::new(&fw, &format!("{base}/id")).unwrap().with_max_items(1).unwrap();
        ids.put(b"first", "a").await.unwrap();
        assert_eq!(ids.put_timeout(b"late", "b", QUIET).await.unwrap(), None, "full: nothing put");
        assert!(matches!(ids.put_in_background(b"x", "a/b"), Err(Error::InvalidArgument { .. })));
        let mut events = ids.put_events();
        assert_eq!(ids.take().await.unwrap(), [b"first".to_vec()]);
        ids.put_in_background(b"second", "c").unwrap();
        assert!(ids.flush_puts(EVENT).await.unwrap());
        let event = within(EVENT, "the background put's event", events.next()).await.unwrap();
        assert!(event.path().is_some_and(|p| p.contains("|c|")), "{event:?}");
        assert_eq!(ids.take().await.unwrap(), [b"second".to_vec()]);

        fw.delete(&base).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Background puts through a connection that keeps breaking: every put is told as an event;
/// an event with a path names an item in the queue, each item is in the queue at most once,
/// and the queue holds no more items than events with a path plus those whose outcome was
/// unknown.
#[tokio::test]
async fn background_puts_are_told_as_events_through_cuts() {
    init_tracing();
    bounded(LIMIT, async {
        const N: usize = 40;
        let faulty = Arc::new(FaultyServer::start().await);
        let path = unique_path("queue-extras", "background");
        let fw = framework(&faulty.proxied(), FAULT_SESSION).await;
        let queue = DistributedQueue::new(&fw, &path).unwrap();
        let mut events = queue.put_events();
        assert!(matches!(queue.put_in_background::<&[u8]>(&[]), Err(Error::InvalidArgument { .. })));
        let stop = Arc::new(AtomicBool::new(false));
        let breaker = {
            let (stop, faulty) = (stop.clone(), faulty.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    faulty.proxy.reset_connections();
                }
            })
        };
        for i in 0..N {
            queue.put_in_background(&[format!("item-{i:02}")]).unwrap();
        }
        let (mut put, mut unknown, mut failed) = (HashSet::new(), 0, 0);
        for _ in 0..N {
            let event = within(back_within(FAULT_SESSION), "a put event", events.next()).await.unwrap();
            let item = String::from_utf8(event.items()[0].clone()).unwrap();
            match (event.path(), event.error()) {
                (Some(path), None) => {
                    assert!(path.contains("/queue-"), "{path}");
                    assert!(put.insert(item));
                }
                (None, Some(Error::OutcomeUnknown { .. })) => unknown += 1,
                (None, Some(e)) => {
                    eprintln!("{item}: {e}");
                    failed += 1;
                }
                other => panic!("{other:?}"),
            }
        }
        stop.store(true, Ordering::Relaxed);
        breaker.await.unwrap();
        let checker = plain_framework(&faulty.direct(), SESSION).await;
        let reader = DistributedQueue::new(&checker, &path).unwrap();
        let mut found = HashSet::new();
        while let Some(items) = reader.take_timeout(QUIET).await.unwrap() {
            for item in items {
                assert!(found.insert(String::from_utf8(item).unwrap()), "an item twice");
            }
        }
        eprintln!("{} put, {unknown} unknown, {failed} failed; {} in the queue", put.len(), found.len());
        assert!(put.is_subset(&found), "every put told as done is in the queue");
        assert!(found.len() <= put.len() + unknown, "no more items than puts that may have happened");
        fw.close().await;
        checker.close().await;
    })
    .await;
}

/// `flush_puts` (Curator's `flushPuts`): while background puts are held back on their way to
/// the server it is false when its timeout ends; once they go through it is true, with every
/// put's event told and every item in the queue. A zero timeout is refused. Puts still pending
/// when the framework is closed fail with `Closed`.
#[tokio::test]
async fn flush_puts_is_true_once_every_background_put_is_done() {
    init_tracing();
    bounded(LIMIT, async {
        const N: usize = 5;
        let connect = shared_connect().await;
        let proxy = FaultProxy::start(&connect).await.unwrap();
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let checker = plain_framework(&connect, SESSION).await;
        let path = unique_path("queue-extras", "flush");
        let queue = DistributedQueue::new(&fw, &path).unwrap();
        assert!(matches!(queue.flush_puts(Duration::ZERO).await, Err(Error::InvalidArgument { .. })));
        assert!(queue.flush_puts(QUIET).await.unwrap(), "none pending");
        let mut events = queue.put_events();
        proxy.set_mode(ProxyMode::Hold);
        let items: Vec<String> = (0..N).map(|i| format!("item-{i}")).collect();
        for item in &items {
            queue.put_in_background(&[item]).unwrap();
        }
        request_held_back(&proxy, "the puts sent").await;
        assert!(!queue.flush_puts(QUIET).await.unwrap(), "the puts are held back");
        let flushing = {
            let queue = queue.clone();
            tokio::spawn(async move { queue.flush_puts(EVENT).await })
        };
        proxy.set_mode(ProxyMode::Pass);
        assert!(within(EVENT, "the flush", flushing).await.unwrap().unwrap(), "every put done");
        for _ in 0..N {
            let event = events.next().now_or_never().flatten().expect("each put told before the flush ended");
            assert!(event.error().is_none(), "{event:?}");
        }
        let reader = DistributedQueue::new(&checker, &path).unwrap();
        let mut found = HashSet::new();
        while let Some(taken) = reader.take_timeout(QUIET).await.unwrap() {
            found.insert(String::from_utf8(taken.concat()).unwrap());
        }
        assert_eq!(found, items.iter().cloned().collect::<HashSet<_>>());

        // Still pending when the framework closes (waiting for room in a full queue): each
        // fails with `Closed`, told as its event, and leaves no flush waiting.
        let full = DistributedQueue::new(&fw, &path).unwrap().with_max_items(1).unwrap();
        full.put(b"fills it").await.unwrap();
        let mut late_events = full.put_events();
        for i in 0..N {
            full.put_in_background(&[format!("late-{i}")]).unwrap();
        }
        assert!(!full.flush_puts(QUIET).await.unwrap(), "the puts wait for room");
        fw.close().await;
        assert!(within(EVENT, "the flush after the close", full.flush_puts(EVENT)).await.unwrap());
        for _ in 0..N {
            let event = late_events.next().now_or_never().flatten().expect("each put told before the flush ended");
            assert!(matches!(event.error(), Some(Error::Closed)), "{event:?}");
        }
        assert_eq!(children(&checker, &path).await.len(), 1, "none of the late items");
        checker.delete(&path).recursive().await.unwrap();
        checker.close().await;
    })
    .await;
}

fn policies() -> QueueSharderPolicies {
    policies_counting_every(policies_check())
}

/// A leader adds a shard at every count while some shard is over the threshold (as Curator's
/// does), until the maximum: a sharder whose additions a test counts one by one leads with a
/// schedule that never comes during the test, and counts when told (`check_now`).
fn policies_counting_every(interval: Duration) -> QueueSharderPolicies {
    QueueSharderPolicies::default().new_queue_threshold(4).threshold_check(interval).max_queues(3)
}

/// Longer than any test: a schedule that never comes.
const NEVER: Duration = Duration::from_secs(3600);

async fn shards_become(sharder: &QueueSharder, n: usize) {
    eventually(EVENT, &format!("{n} shards"), || async {
        let count = sharder.shard_count();
        if count == n {
            Ok(())
        } else {
            Err(count.to_string())
        }
    })
    .await;
}

/// Two sharders on one queue: one shard to start with; past the threshold (items put in the
/// background, flushed) the leader adds one (Curator's `queue-<uuid>` names), both see it and
/// prefer it for puts; the leader's session expires, and the other, now leading, adds the
/// third; never more than the maximum.
#[tokio::test]
async fn the_leader_adds_shards_past_the_threshold_also_after_its_session_expired() {
    init_tracing();
    bounded(LIMIT, async {
        let faulty = FaultyServer::start().await;
        let path = unique_path("queue-extras", "sharder");
        let leader_path = format!("{path}-leader");
        let fw_a = framework(&faulty.proxied(), FAULT_SESSION).await;
        let fw_b = plain_framework(&faulty.direct(), SESSION).await;
        let a = QueueSharder::new(&fw_a, &path, &leader_path, policies_counting_every(NEVER)).unwrap();
        a.start().await.unwrap();
        eventually(EVENT, "a leads", || async {
            if a.is_leader() {
                Ok(())
            } else {
                Err(String::new())
            }
        })
        .await;
        let b = QueueSharder::new(&fw_b, &path, &leader_path, policies()).unwrap();
        b.start().await.unwrap();
        assert_eq!(a.queue_paths(), b.queue_paths(), "one shard, taken up by both");
        let first = a.queue_paths().remove(0);
        assert!(is_shard_name(node_name(&first)), "{first}");

        // In the background, flushed before the count.
        for i in 0..4 {
            b.queue().unwrap().put_in_background(&[format!("x{i}")]).unwrap();
        }
        assert!(matches!(b.flush_puts(Duration::ZERO).await, Err(Error::InvalidArgument { .. })));
        assert!(b.flush_puts(EVENT).await.unwrap(), "the background puts done");
        // One count of the leader: one shard added (a second count would add another, the
        // first shard still being full).
        a.check_now().await.unwrap();
        shards_become(&a, 2).await;
        shards_become(&b, 2).await;
        let second = a.queue_paths().into_iter().find(|p| *p != first).unwrap();
        // The full shard is no longer preferred once counted.
        eventually(EVENT, "puts go to the new shard", || async {
            let picks: HashSet<String> = (0..20).map(|_| b.queue().unwrap().path().to_owned()).collect();
            if picks == HashSet::from([second.clone()]) {
                Ok(())
            } else {
                Err(format!("{picks:?}"))
            }
        })
        .await;

        faulty.expire(&fw_a, EVENT).await;
        eventually(back_within(FAULT_SESSION), "b leads", || async {
            if b.is_leader() {
                Ok(())
            } else {
                Err(String::new())
            }
        })
        .await;
        for i in 0..4 {
            b.queue().unwrap().put(format!("y{i}").as_bytes()).await.unwrap();
        }
        shards_become(&b, 3).await;
        eventually(EVENT, "a takes up the third shard", || async {
            a.check_now().await.map_err(|e| e.to_string())?;
            match a.shard_count() {
                3 => Ok(()),
                n => Err(n.to_string()),
            }
        })
        .await;
        // Both full shards over the threshold, at the maximum: no fourth.
        for i in 0..4 {
            DistributedQueue::new(&fw_b, &second).unwrap().put(format!("z{i}").as_bytes()).await.unwrap();
        }
        b.check_now().await.unwrap();
        tokio::time::sleep(policies_check() * 3).await; // checks that must not add a shard
        assert_eq!(children(&fw_b, &path).await.len(), 3);
        a.close().await.unwrap();
        b.close().await.unwrap();
        fw_b.delete(&path).recursive().await.unwrap();
        fw_a.close().await;
        fw_b.close().await;
    })
    .await;
}

fn policies_check() -> Duration {
    Duration::from_millis(100)
}

/// A Rust sharder and Curator 5.4's `QueueSharder` on one queue: Curator takes up the shard
/// Rust made and sees the one Rust's leadership added; once Rust has left the election,
/// Curator's leadership adds a third past the threshold, which Rust takes up, named
/// `queue-<uuid>` as Rust names them.
#[tokio::test]
async fn rust_and_curator_sharders_share_the_shards() {
    use common::curator::CuratorPeer;
    use common::timing::{INTEROP_EVENT, INTEROP_SESSION, SLOW_LIMIT};
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = CuratorPeer::started(&connect, INTEROP_SESSION).await else { return };
        let path = unique_path("queue-extras", "sharder-interop");
        let leader_path = format!("{path}-leader");
        let fw = plain_framework(&connect, INTEROP_SESSION).await;
        let rust = QueueSharder::new(&fw, &path, &leader_path, policies_counting_every(NEVER)).unwrap();
        rust.start().await.unwrap();
        eventually(EVENT, "rust leads", || async {
            if rust.is_leader() {
                Ok(())
            } else {
                Err(String::new())
            }
        })
        .await;
        java.value_command(&format!("sharder J {path} {leader_path} 4 100 3"), INTEROP_EVENT).await.unwrap();
        let mut seen = java.value_command("sharder_paths J -", INTEROP_EVENT).await.unwrap();
        seen.sort();
        assert_eq!(seen, rust.queue_paths(), "Curator took up Rust's shard");

        for i in 0..4 {
            rust.queue().unwrap().put(format!("r{i}").as_bytes()).await.unwrap();
        }
        rust.check_now().await.unwrap();
        shards_become(&rust, 2).await;
        let expected = rust.queue_paths();
        let deadline = tokio::time::Instant::now() + INTEROP_EVENT;
        loop {
            let mut seen = java.value_command("sharder_paths J -", INTEROP_EVENT).await.unwrap();
            seen.sort();
            if seen == expected {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "Curator's sharder sees {seen:?}, not {expected:?}");
            tokio::time::sleep(policies_check()).await; // its next count
        }

        // Rust leaves the election: Curator leads, and adds a third shard past the threshold.
        rust.close().await.unwrap();
        for i in 0..8 {
            java.value_command(&format!("sharder_put J j{i}"), INTEROP_EVENT).await.unwrap();
        }
        let observer = QueueSharder::new(&fw, &path, &format!("{leader_path}-other"), policies()).unwrap();
        observer.start().await.unwrap();
        eventually(INTEROP_EVENT, "a third shard, made by Curator", || async {
            observer.check_now().await.map_err(|e| e.to_string())?;
            let n = observer.shard_count();
            if n == 3 {
                Ok(())
            } else {
                Err(n.to_string())
            }
        })
        .await;
        for shard in observer.queue_paths() {
            assert!(is_shard_name(node_name(&shard)), "{shard}");
        }
        observer.close().await.unwrap();
        fw.delete(&path).recursive().await.unwrap();
        fw.close().await;
        java.quit().await.unwrap();
    })
    .await;
}
