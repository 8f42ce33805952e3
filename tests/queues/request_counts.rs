//! Server requests per item of a `DistributedQueue` consumer, counted by a proxy that reads
//! the protocol's frames: a consumer lists the queue once, takes the listed items, and lists
//! again only when they are used up, never removing its children watch unfired.

use crate::common;

use common::fixtures::shared_connect as server;
use common::fixtures::*;
use common::timing::{COUNTING_SESSION as SESSION, LIMIT};
use zk_recipes::testing::{CountingProxy, RequestCounts};
use zk_recipes::{DistributedPriorityQueue, DistributedQueue, Framework, SimpleDistributedQueue};

const ITEMS: u64 = 200;

/// A producer's framework straight to the server and a consumer's through a counting proxy.
async fn frameworks() -> (Framework, CountingProxy, Framework) {
    let server = server().await;
    let producer = plain_framework(&server, SESSION).await;
    let proxy = CountingProxy::start(&server).await.expect("counting proxy");
    let consumer = plain_framework(&proxy.connect_string(), SESSION).await;
    (producer, proxy, consumer)
}

/// The consumer's requests by kind, without pings, round trips and the server's events.
fn requests(counts: &RequestCounts) -> Vec<(&'static str, u64)> {
    counts.iter().filter(|(kind, _)| !matches!(*kind, "ping" | "round-trip" | "watch-event")).collect()
}

/// A full queue: one listing for all its items, then a read and a delete per item.
#[tokio::test]
async fn a_full_queue_is_listed_once_for_all_its_items() {
    init_tracing();
    bounded(LIMIT, async {
        let (producer, proxy, consumer) = frameworks().await;
        let path = unique_path("qcounts", "full");
        let put = DistributedQueue::new(&producer, &path).unwrap();
        for i in 0..ITEMS {
            put.put(format!("item-{i}").as_bytes()).await.unwrap();
        }
        let queue = DistributedQueue::new(&consumer, &path).unwrap();
        let before = proxy.counts();
        for i in 0..ITEMS {
            assert_eq!(queue.take().await.unwrap(), [format!("item-{i}").into_bytes()]);
        }
        let counts = proxy.counts().since(&before);
        let expected = [("delete", ITEMS), ("getChildren+watch", 1), ("getData", ITEMS)];
        assert_eq!(requests(&counts), expected, "{}", counts.per_op(ITEMS as usize));
        producer.close().await;
        consumer.close().await;
    })
    .await;
}

/// A consumer keeping up with its producer: each item arrives after the last listing, so one
/// or two listings per item (each on a watch that fired), and never a removeWatches.
#[tokio::test]
async fn a_consumer_keeping_up_removes_no_watch() {
    init_tracing();
    bounded(LIMIT, async {
        let (producer, proxy, consumer) = frameworks().await;
        let path = unique_path("qcounts", "keeping-up");
        let put = DistributedQueue::new(&producer, &path).unwrap();
        let queue = DistributedQueue::new(&consumer, &path).unwrap();
        put.put(b"first").await.unwrap();
        assert_eq!(queue.take().await.unwrap(), [b"first".to_vec()]);
        let cycles = ITEMS / 4;
        let before = proxy.counts();
        for i in 0..cycles {
            let item = format!("item-{i}").into_bytes();
            let (taken, _) = tokio::join!(queue.take(), async { put.put(&item).await.unwrap() });
            assert_eq!(taken.unwrap(), [item]);
        }
        let counts = proxy.counts().since(&before);
        let summary = counts.per_op(cycles as usize);
        assert_eq!(counts.get("removeWatches"), 0, "{summary}");
        assert_eq!(counts.get("getData"), cycles, "{summary}");
        assert_eq!(counts.get("delete"), cycles, "{summary}");
        // The consumer's own delete fires the watch too, so a take that finds the queue empty
        // lists it twice: once then, once on the put.
        let listings = counts.get("getChildren+watch");
        assert!((cycles..=2 * cycles).contains(&listings), "{summary}");
        let kinds: Vec<_> = requests(&counts).into_iter().map(|(kind, _)| kind).collect();
        assert_eq!(kinds, ["delete", "getChildren+watch", "getData"], "{summary}");
        producer.close().await;
        consumer.close().await;
    })
    .await;
}

/// A producer running ahead of its consumer: no removeWatches, and far fewer listings than
/// items once the queue holds a backlog.
#[tokio::test]
async fn a_backlog_costs_far_fewer_listings_than_items() {
    init_tracing();
    bounded(LIMIT, async {
        let (producer, proxy, consumer) = frameworks().await;
        let path = unique_path("qcounts", "backlog");
        let put = DistributedQueue::new(&producer, &path).unwrap();
        let queue = DistributedQueue::new(&consumer, &path).unwrap();
        for i in 0..ITEMS / 2 {
            put.put(format!("item-{i}").as_bytes()).await.unwrap();
        }
        let before = proxy.counts();
        let produce = async {
            for i in ITEMS / 2..ITEMS {
                put.put(format!("item-{i}").as_bytes()).await.unwrap();
            }
        };
        let consume = async {
            for i in 0..ITEMS {
                assert_eq!(queue.take().await.unwrap(), [format!("item-{i}").into_bytes()]);
            }
        };
        tokio::join!(produce, consume);
        let counts = proxy.counts().since(&before);
        let summary = counts.per_op(ITEMS as usize);
        assert_eq!(counts.get("removeWatches"), 0, "{summary}");
        assert_eq!(counts.get("getData"), ITEMS, "{summary}");
        assert_eq!(counts.get("delete"), ITEMS, "{summary}");
        assert!(counts.get("getChildren+watch") <= ITEMS / 2, "{summary}");
        producer.close().await;
        consumer.close().await;
    })
    .await;
}

/// The ordering guarantee of a kept listing: a higher-priority item put after a listing is
/// taken once that listing's items are used up (as Curator's priority consumer built with
/// `Integer.MAX_VALUE` items before a refresh takes it).
#[tokio::test]
async fn a_higher_priority_item_is_seen_at_the_next_listing() {
    init_tracing();
    bounded(LIMIT, async {
        let (producer, _proxy, consumer) = frameworks().await;
        let path = unique_path("qcounts", "priority");
        let put = DistributedPriorityQueue::new(&producer, &path).unwrap();
        let queue = DistributedPriorityQueue::new(&consumer, &path).unwrap();
        for text in ["a", "b", "c"] {
            put.put(text.as_bytes(), 5).await.unwrap();
        }
        assert_eq!(queue.take().await.unwrap(), [b"a".to_vec()]);
        put.put(b"urgent", -1).await.unwrap();
        assert_eq!(queue.take().await.unwrap(), [b"b".to_vec()]);
        assert_eq!(queue.take().await.unwrap(), [b"c".to_vec()]);
        assert_eq!(queue.take().await.unwrap(), [b"urgent".to_vec()]);
        // A fresh listing orders everything again.
        put.put(b"later", 5).await.unwrap();
        put.put(b"sooner", 1).await.unwrap();
        assert_eq!(queue.take().await.unwrap(), [b"sooner".to_vec()]);
        assert_eq!(queue.take().await.unwrap(), [b"later".to_vec()]);
        producer.close().await;
        consumer.close().await;
    })
    .await;
}

/// A priority queue built as Curator's `buildPriorityQueue(n)`: its own deletes fire its
/// children watch, so through a full queue it lists again after every `n` items (as Curator's
/// consumer, which its documentation warns hears of a change after every item), and never
/// removes a watch.
#[tokio::test]
async fn a_refreshing_priority_queue_lists_once_per_min_items() {
    init_tracing();
    bounded(LIMIT, async {
        const MIN_ITEMS: u64 = 20;
        let (producer, proxy, consumer) = frameworks().await;
        let path = unique_path("qcounts", "priority-refresh");
        let put = DistributedPriorityQueue::new(&producer, &path).unwrap();
        for i in 0..ITEMS {
            put.put(format!("item-{i:03}").as_bytes(), 5).await.unwrap();
        }
        let queue =
            DistributedPriorityQueue::new(&consumer, &path).unwrap().with_min_items_before_refresh(MIN_ITEMS as usize);
        let before = proxy.counts();
        for i in 0..ITEMS {
            assert_eq!(queue.take().await.unwrap(), [format!("item-{i:03}").into_bytes()]);
        }
        let counts = proxy.counts().since(&before);
        let expected = [("delete", ITEMS), ("getChildren+watch", ITEMS / MIN_ITEMS), ("getData", ITEMS)];
        assert_eq!(requests(&counts), expected, "{}", counts.per_op(ITEMS as usize));
        producer.close().await;
        consumer.close().await;
    })
    .await;
}

/// `SimpleDistributedQueue` lists per take, as Curator's does, but watches only when a listing
/// found nothing: a take of a waiting item removes no watch.
#[tokio::test]
async fn a_simple_queue_take_of_a_waiting_item_sets_no_watch() {
    init_tracing();
    bounded(LIMIT, async {
        let (producer, proxy, consumer) = frameworks().await;
        let path = unique_path("qcounts", "simple");
        let put = SimpleDistributedQueue::new(&producer, &path).unwrap();
        let cycles = ITEMS / 4;
        for i in 0..cycles {
            put.offer(format!("item-{i}").as_bytes()).await.unwrap();
        }
        let queue = SimpleDistributedQueue::new(&consumer, &path).unwrap();
        let before = proxy.counts();
        for i in 0..cycles {
            assert_eq!(queue.take().await.unwrap(), format!("item-{i}").into_bytes());
        }
        let counts = proxy.counts().since(&before);
        let expected = [("delete", cycles), ("getChildren", cycles), ("getData", cycles)];
        assert_eq!(requests(&counts), expected, "{}", counts.per_op(cycles as usize));
        // An empty queue: a listing without, then one with a watch, and the wait.
        let (taken, _) = tokio::join!(queue.take(), async { put.offer(b"late").await.unwrap() });
        assert_eq!(taken.unwrap(), b"late");
        producer.close().await;
        consumer.close().await;
    })
    .await;
}
