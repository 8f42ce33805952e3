//! `DistributedIdQueue`, `DistributedPriorityQueue` and `DistributedDelayQueue` against real
//! servers: Curator's node names and item framing, the order of each variant (priority order,
//! no delayed item before it is due), removal by id, consumers as streams, bulk items, a
//! lock-safe consumer killed mid-item, bad input refused before anything is sent, the largest
//! item a server takes, and Curator 5.4 producers and consumers on the same queues.

use crate::common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::curator::CuratorPeer;
use common::fixtures::*;
use common::timing::{EVENT, FAULT_SESSION, INTEROP_EVENT, INTEROP_SESSION, LIMIT, QUIET, SESSION, SLOW_LIMIT};
use futures::StreamExt;
use zk_recipes::protocol::queue_names::{self, QueueOrder};
use zk_recipes::protocol::values::{decode_queue_items, encode_queue_items};
use zk_recipes::testing::{FaultProxy, ProxyMode};
use zk_recipes::{
    CreateMode, DistributedDelayQueue, DistributedIdQueue, DistributedPriorityQueue, DistributedQueue, Error,
    SimpleDistributedQueue,
};

/// How far in the future the delay tests put their items: several times the window a negative
/// check watches ([`QUIET`]), so "not yet due" is observable before the item is due.
const DELAY: Duration = Duration::from_millis(QUIET.as_millis() as u64 * 4);

fn items(texts: &[&str]) -> Vec<Vec<u8>> {
    texts.iter().map(|t| t.as_bytes().to_vec()).collect()
}

fn epoch_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

#[tokio::test]
async fn priority_items_are_taken_lowest_priority_first_in_curators_names() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("pqueue", "order");
        let queue = DistributedPriorityQueue::new(&fw, &path).unwrap();
        let five = queue.put(b"five", 5).await.unwrap();
        assert!(node_name(&five).starts_with("queue-100000005"), "{five}");
        assert_eq!(node_name(&five).len(), "queue-".len() + 9 + 10);
        assert_eq!(fw.get_data(&five).await.unwrap().0, encode_queue_items(&[b"five"]));
        queue.put(b"max", i32::MAX).await.unwrap();
        let negative = queue.put(b"minus-one", -1).await.unwrap();
        assert!(node_name(&negative).starts_with("queue-0FFFFFFFF"), "{negative}");
        queue.put(b"min", i32::MIN).await.unwrap();
        queue.put(b"five-again", 5).await.unwrap();
        let bulk = queue.put_multi(&[&b"z1"[..], b"z2"], 0).await.unwrap();
        assert_eq!(queue_names::priority_of(node_name(&bulk)), Some(0));
        // A foreign producer's name without a well-formed code still sorts by its name.
        fw.create(&format!("{path}/queue-2zzz"))
            .mode(CreateMode::PersistentSequential)
            .data(&encode_queue_items(&[b"foreign"]))
            .await
            .unwrap();

        let mut stream = queue.stream();
        let mut got = Vec::new();
        for _ in 0..7 {
            got.push(within(EVENT, "the next item", stream.next()).await.unwrap().unwrap());
        }
        let expected = [
            items(&["min"]),
            items(&["minus-one"]),
            items(&["z1", "z2"]),
            items(&["five"]),
            items(&["five-again"]),
            items(&["max"]),
            items(&["foreign"]),
        ];
        assert_eq!(got, expected);
        assert!(children(&fw, &path).await.is_empty());

        // An item put while the stream waits is taken by it.
        let waiting = tokio::spawn(async move { stream.next().await });
        DistributedPriorityQueue::new(&fw, &path).unwrap().put(b"late", 7).await.unwrap();
        assert_eq!(within(EVENT, "the late item", waiting).await.unwrap().unwrap().unwrap(), items(&["late"]));
        fw.delete(&path).await.unwrap();
        fw.close().await;
    })
    .await;
}

/// A priority queue built as Curator's `buildPriorityQueue(n)` lists again once it has taken
/// `n` items of its listing and the queue changed since: an urgent item put while it works
/// through a backlog's listing comes out after at most `n` more of the backlog, not after all
/// of it. The backlog follows in order.
#[tokio::test]
async fn an_urgent_item_overtakes_a_listed_backlog_after_min_items_before_refresh() {
    init_tracing();
    bounded(LIMIT, async {
        const BACKLOG: usize = 30;
        const MIN_ITEMS: usize = 3;
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("pqueue", "refresh");
        let producer = DistributedPriorityQueue::new(&fw, &path).unwrap();
        let backlog: Vec<String> = (0..BACKLOG).map(|i| format!("low-{i:02}")).collect();
        for item in &backlog {
            producer.put(item.as_bytes(), 10).await.unwrap();
        }
        let queue = DistributedPriorityQueue::new(&fw, &path).unwrap().with_min_items_before_refresh(MIN_ITEMS);
        let mut stream = queue.stream();
        // The first take lists the whole backlog.
        assert_eq!(within(EVENT, "the first item", stream.next()).await.unwrap().unwrap(), items(&["low-00"]));
        producer.put(b"urgent", -1).await.unwrap();
        let mut ahead = Vec::new();
        loop {
            let got = within(EVENT, "the next item", stream.next()).await.unwrap().unwrap();
            if got == items(&["urgent"]) {
                break;
            }
            ahead.push(String::from_utf8(got.concat()).unwrap());
        }
        assert!(ahead.len() <= MIN_ITEMS, "the urgent item came after {} more of the backlog: {ahead:?}", ahead.len());
        let mut rest = ahead;
        while rest.len() < BACKLOG - 1 {
            rest.push(
                String::from_utf8(within(EVENT, "the backlog", stream.next()).await.unwrap().unwrap().concat())
                    .unwrap(),
            );
        }
        assert_eq!(rest, backlog[1..], "the backlog in order");
        assert!(children(&fw, &path).await.is_empty());
        fw.delete(&path).await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_delayed_item_is_not_taken_before_it_is_due() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("delayq", "order");
        let queue = DistributedDelayQueue::new(&fw, &path).unwrap();
        let start = SystemTime::now();
        let later = start + DELAY * 2;
        let soon = start + DELAY;
        let a = queue.put(b"later", later).await.unwrap();
        assert_eq!(
            node_name(&a),
            format!("{}{}", queue_names::delay_name(epoch_ms(later)), &node_name(&a)[node_name(&a).len() - 10..])
        );
        assert_eq!(queue_names::delay_epoch_of(node_name(&a)), epoch_ms(later));
        queue.put_multi(&[&b"soon-1"[..], b"soon-2"], soon).await.unwrap();
        // A due time in the past is due at once, as with Curator.
        queue.put(b"overdue", start - Duration::from_secs(3600)).await.unwrap();

        assert_eq!(queue.take_timeout(QUIET).await.unwrap(), Some(items(&["overdue"])));
        // Nothing else is due yet: a take bounded before `soon` gets nothing, and leaves both.
        let short = Duration::from_millis(epoch_ms(soon).saturating_sub(epoch_ms(SystemTime::now())) / 2);
        if !short.is_zero() {
            assert_eq!(queue.take_timeout(short).await.unwrap(), None);
        }
        assert_eq!(children(&fw, &path).await.len(), 2);
        // A waiting take wakes when the first item comes due: no node changes meanwhile.
        let mut stream = queue.stream();
        let first = within(EVENT, "the item due soon", stream.next()).await.unwrap().unwrap();
        let at = SystemTime::now();
        assert_eq!(first, items(&["soon-1", "soon-2"]));
        assert!(at >= soon, "taken {:?} before it was due", soon.duration_since(at).unwrap_or_default());
        let second = within(EVENT, "the item due later", stream.next()).await.unwrap().unwrap();
        assert!(SystemTime::now() >= later);
        assert_eq!(second, items(&["later"]));
        assert!(children(&fw, &path).await.is_empty());
        fw.delete(&path).await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn id_queue_items_are_fifo_and_removed_by_id() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("idqueue", "remove");
        let queue = DistributedIdQueue::new(&fw, &path).unwrap();
        let first = queue.put(b"1", "zz").await.unwrap();
        assert!(node_name(&first).starts_with("queue-|zz|"), "{first}");
        assert_eq!(fw.get_data(&first).await.unwrap().0, encode_queue_items(&[b"1"]));
        queue.put(b"2", "b").await.unwrap();
        queue.put(b"3", "a").await.unwrap();
        queue.put(b"4", "b").await.unwrap();
        queue.put(b"5", "c").await.unwrap();
        assert_eq!(queue.ids().await.unwrap(), ["zz", "b", "a", "b", "c"], "FIFO whatever the ids");
        assert_eq!(queue.remove("b").await.unwrap(), 2);
        assert_eq!(queue.remove("b").await.unwrap(), 0);
        assert_eq!(queue.remove("nobody").await.unwrap(), 0);
        let mut got = Vec::new();
        while let Some(taken) = queue.take_timeout(QUIET).await.unwrap() {
            got.extend(taken);
        }
        assert_eq!(got, items(&["1", "3", "5"]));

        // Ids Curator refuses or rewrites, and a path with the separator: nothing is sent.
        for bad in ["", "a|b", "a/b"] {
            assert!(matches!(queue.put(b"x", bad).await, Err(Error::InvalidArgument { name: "id", .. })), "{bad:?}");
            assert!(matches!(queue.remove(bad).await, Err(Error::InvalidArgument { name: "id", .. })), "{bad:?}");
        }
        assert!(matches!(DistributedIdQueue::new(&fw, "/q|x"), Err(Error::InvalidPath { .. })));
        assert!(children(&fw, &path).await.is_empty());

        // Lock-safe: an item a consumer holds is not removed under it; a failed one keeps its id.
        let locks = format!("{path}-locks");
        let queue = DistributedIdQueue::lock_safe(&fw, &path, &locks).unwrap();
        queue.put(b"held", "h").await.unwrap();
        let (started_tx, started) = tokio::sync::oneshot::channel();
        let (release_tx, release) = tokio::sync::oneshot::channel::<()>();
        let holder = {
            let queue = queue.clone();
            tokio::spawn(async move {
                queue
                    .consume(|items| async move {
                        let _ = started_tx.send(items);
                        let _ = release.await;
                        Err::<(), _>("fail it")
                    })
                    .await
            })
        };
        assert_eq!(within(EVENT, "the held item", started).await.unwrap(), items(&["held"]));
        assert_eq!(queue.remove("h").await.unwrap(), 0, "locked by its consumer");
        release_tx.send(()).unwrap();
        assert_eq!(holder.await.unwrap().unwrap(), Err("fail it"));
        assert_eq!(queue.ids().await.unwrap(), ["h"], "requeued with its id");
        assert_eq!(queue.remove("h").await.unwrap(), 1);
        assert!(children(&fw, &path).await.is_empty());
        assert!(children(&fw, &locks).await.is_empty());
        fw.delete(&path).await.unwrap();
        fw.delete(&locks).await.unwrap();
        fw.close().await;
    })
    .await;
}

/// A `DistributedQueue` consumer as a stream: the items of each node in order, an item put
/// while it waits, and the end of the stream once the framework is closed.
#[tokio::test]
async fn a_queue_stream_takes_in_order_and_ends_when_the_framework_closes() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let producer = plain_framework(&connect, SESSION).await;
        let path = unique_path("dqueue", "stream");
        let queue = zk_recipes::DistributedQueue::new(&fw, &path).unwrap();
        let put = zk_recipes::DistributedQueue::new(&producer, &path).unwrap();
        put.put(b"a").await.unwrap();
        put.put_multi(&[&b"b1"[..], b"b2"]).await.unwrap();
        let mut stream = queue.stream();
        assert_eq!(within(EVENT, "a", stream.next()).await.unwrap().unwrap(), items(&["a"]));
        assert_eq!(within(EVENT, "b", stream.next()).await.unwrap().unwrap(), items(&["b1", "b2"]));
        let waiting = tokio::spawn(async move {
            let first = stream.next().await;
            (first, stream)
        });
        put.put(b"c").await.unwrap();
        let (first, mut stream) = within(EVENT, "c", waiting).await.unwrap();
        assert_eq!(first.unwrap().unwrap(), items(&["c"]));
        let ended = tokio::spawn(async move { stream.next().await.is_none() });
        fw.close().await;
        assert!(within(EVENT, "the end of the stream", ended).await.unwrap(), "a closed framework ends the stream");
        assert!(children(&producer, &path).await.is_empty());
        producer.delete(&path).await.unwrap();
        producer.close().await;
    })
    .await;
}

/// Bad input is refused with a typed error before anything is sent: due times Curator
/// refuses, items over the server's request limit, empty bulk puts. The largest item the
/// limit allows goes through and comes back.
#[tokio::test]
async fn bad_input_is_refused_and_the_largest_item_goes_through() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("qvariants", "bad");
        let delay = DistributedDelayQueue::new(&fw, &path).unwrap();
        let priority = DistributedPriorityQueue::new(&fw, &path).unwrap();
        let id = DistributedIdQueue::new(&fw, &path).unwrap();
        for until in [UNIX_EPOCH, UNIX_EPOCH - Duration::from_secs(1)]
            .into_iter()
            .chain(UNIX_EPOCH.checked_add(Duration::from_millis(i64::MAX as u64 + 1)))
        {
            let refused = delay.put(b"x", until).await;
            assert!(matches!(refused, Err(Error::InvalidArgument { name: "until", .. })), "{until:?}: {refused:?}");
        }
        let huge = vec![7u8; 1024 * 1024];
        let refused = priority.put(&huge, 1).await;
        let Err(Error::TooLarge { name: "data", limit, .. }) = refused else { panic!("{refused:?}") };
        assert!(matches!(delay.put(&huge, SystemTime::now()).await, Err(Error::TooLarge { .. })));
        assert!(matches!(id.put(&huge, "big").await, Err(Error::TooLarge { .. })));
        assert!(matches!(
            priority.put_multi(&[&huge[..512 * 1024], &huge[..512 * 1024]], 0).await,
            Err(Error::TooLarge { .. })
        ));
        assert!(matches!(priority.put_multi::<&[u8]>(&[], 0).await, Err(Error::InvalidArgument { .. })));
        assert!(matches!(delay.put_multi::<&[u8]>(&[], SystemTime::now()).await, Err(Error::InvalidArgument { .. })));
        assert!(fw.exists(&path).await.unwrap().is_none(), "nothing was sent");
        assert!(fw.state().is_connected());

        // The limit is for the whole node: the framing takes 10 bytes of it (version word,
        // item opcode and length, end opcode).
        let largest = limit - 10;
        assert!(matches!(priority.put(&huge[..largest + 1], 1).await, Err(Error::TooLarge { .. })));
        priority.put(&huge[..largest], 1).await.unwrap();
        let back = priority.take().await.unwrap();
        assert_eq!((back.len(), back[0].len()), (1, largest));
        eprintln!("largest queue item the server took: {largest} bytes (node data limit {limit})");
        fw.delete(&path).await.unwrap();
        fw.close().await;
    })
    .await;
}

/// `Duration::MAX` waits for ever on every queue's timed take and put (before, the deadline
/// overflowed the clock and the call panicked); a zero timeout is refused by each of them.
#[tokio::test]
async fn the_longest_timeout_waits_and_a_zero_one_is_refused() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let base = unique_path("qvariants", "timeouts");
        let simple = SimpleDistributedQueue::new(&fw, &format!("{base}/simple")).unwrap();
        let fifo = DistributedQueue::new(&fw, &format!("{base}/fifo")).unwrap().with_max_items(5).unwrap();
        let priority = DistributedPriorityQueue::new(&fw, &format!("{base}/priority")).unwrap();
        let delay = DistributedDelayQueue::new(&fw, &format!("{base}/delay")).unwrap();
        let id = DistributedIdQueue::new(&fw, &format!("{base}/id")).unwrap();
        simple.offer(b"s").await.unwrap();
        assert!(fifo.put_timeout(b"f", Duration::MAX).await.unwrap().is_some(), "room: put at once");
        priority.put(b"p", 1).await.unwrap();
        delay.put(b"d", UNIX_EPOCH + Duration::from_secs(1)).await.unwrap();
        id.put(b"i", "one").await.unwrap();
        assert_eq!(simple.take_timeout(Duration::MAX).await.unwrap().as_deref(), Some(&b"s"[..]));
        assert_eq!(fifo.take_timeout(Duration::MAX).await.unwrap(), Some(items(&["f"])));
        assert_eq!(priority.take_timeout(Duration::MAX).await.unwrap(), Some(items(&["p"])));
        assert_eq!(delay.take_timeout(Duration::MAX).await.unwrap(), Some(items(&["d"])));
        assert_eq!(id.take_timeout(Duration::MAX).await.unwrap(), Some(items(&["i"])));

        let zero = Duration::ZERO;
        assert!(matches!(fifo.put_timeout(b"f", zero).await, Err(Error::InvalidArgument { name: "timeout", .. })));
        assert!(matches!(fifo.take_timeout(zero).await, Err(Error::InvalidArgument { name: "timeout", .. })));
        assert!(matches!(priority.take_timeout(zero).await, Err(Error::InvalidArgument { name: "timeout", .. })));
        assert!(matches!(delay.take_timeout(zero).await, Err(Error::InvalidArgument { name: "timeout", .. })));
        assert!(matches!(id.take_timeout(zero).await, Err(Error::InvalidArgument { name: "timeout", .. })));
        fw.delete(&base).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// A lock-safe consumer whose process dies mid-item (its connection black-holed for good, so
/// its session expires on the server): the item is delivered again to another consumer, never
/// lost, and the dead consumer's lock node goes with its session.
#[tokio::test]
async fn a_lock_safe_consumer_killed_mid_item_leaves_it_to_the_next() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let proxy = FaultProxy::start(&connect).await.unwrap();
        let doomed = plain_framework(&proxy.connect_string(), FAULT_SESSION).await;
        let fw = plain_framework(&connect, SESSION).await;
        let path = unique_path("pqueue", "killed");
        let locks = format!("{path}-locks");
        let survivor = DistributedPriorityQueue::lock_safe(&fw, &path, &locks).unwrap();
        survivor.put(b"second", 2).await.unwrap();
        survivor.put(b"first", 1).await.unwrap();

        let (started_tx, started) = tokio::sync::oneshot::channel();
        let dying = {
            let queue = DistributedPriorityQueue::lock_safe(&doomed, &path, &locks).unwrap();
            tokio::spawn(async move {
                let _ = queue
                    .consume(|items| async move {
                        let _ = started_tx.send(items);
                        std::future::pending::<Result<(), ()>>().await
                    })
                    .await;
            })
        };
        assert_eq!(within(EVENT, "the doomed consumer's item", started).await.unwrap(), items(&["first"]));
        assert_eq!(children(&fw, &locks).await.len(), 1);
        proxy.set_mode(ProxyMode::BlackHole);
        proxy.drop_connections();
        // The survivor gets the other item at once, and the dead consumer's once its session is
        // gone (the server expires it after its timeout).
        let next = survivor.consume(|items| async move { Ok::<_, ()>(items) }).await.unwrap().unwrap();
        assert_eq!(next, items(&["second"]));
        let again = within(
            FAULT_SESSION * 4,
            "the item after the consumer's death",
            survivor.consume(|items| async move { Ok::<_, ()>(items) }),
        )
        .await;
        assert_eq!(again.unwrap().unwrap(), items(&["first"]));
        assert!(children(&fw, &path).await.is_empty());
        assert!(children(&fw, &locks).await.is_empty());
        dying.abort();
        let _ = dying.await;
        drop(doomed);
        fw.delete(&path).await.unwrap();
        fw.delete(&locks).await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Curator 5.4 producers (put and putMulti at several priorities) and a Rust consumer, then
/// Rust producers and a lock-safe Curator consumer: both take lowest priority first.
#[tokio::test]
async fn curator_and_rust_share_a_priority_queue_both_ways() {
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = CuratorPeer::started(&connect, INTEROP_SESSION).await else { return };
        let fw = plain_framework(&connect, SESSION).await;
        let path = unique_path("pqueue", "interop");
        for (priority, texts) in [("5", "five"), ("-1", "minus-one"), ("0", "z1 z2"), ("-2147483648", "min")] {
            java.value_command(&format!("pqueue_put P {path} {priority} {texts}"), LIMIT).await.unwrap();
        }
        let mut names = children(&fw, &path).await;
        QueueOrder::Priority.sort(&mut names);
        let priorities: Vec<_> = names.iter().map(|n| queue_names::priority_of(n)).collect();
        assert_eq!(priorities, [Some(i32::MIN), Some(-1), Some(0), Some(5)], "{names:?}");
        let queue = DistributedPriorityQueue::new(&fw, &path).unwrap();
        let mut got = Vec::new();
        while let Some(taken) = queue.take_timeout(QUIET).await.unwrap() {
            got.push(taken);
        }
        assert_eq!(got, [items(&["min"]), items(&["minus-one"]), items(&["z1", "z2"]), items(&["five"])]);

        let locks = format!("{path}-locks");
        queue.put(b"seven", 7).await.unwrap();
        queue.put_multi(&[&b"m1"[..], b"m2"], -3).await.unwrap();
        queue.put(b"max", i32::MAX).await.unwrap();
        queue.put(b"zero", 0).await.unwrap();
        java.value_command(&format!("pqueue_consume C {path} {locks}"), LIMIT).await.unwrap();
        for expected in ["m1", "m2", "zero", "seven", "max"] {
            let line = java.wait_for("pqueue-item C", INTEROP_EVENT).await.unwrap();
            assert_eq!(line, format!("pqueue-item C {expected}"));
        }
        children_count_becomes(&fw, &path, 0, EVENT).await;
        children_count_becomes(&fw, &locks, 0, EVENT).await;
        java.kill().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// A Curator 5.4 delayed put taken by Rust no earlier than it is due, and the reverse: a
/// Curator delay-queue consumer gets Rust's delayed item (and bulk item) no earlier.
#[tokio::test]
async fn curator_and_rust_share_a_delay_queue_both_ways() {
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = CuratorPeer::started(&connect, INTEROP_SESSION).await else { return };
        let fw = plain_framework(&connect, SESSION).await;
        let path = unique_path("delayq", "interop");
        let queue = DistributedDelayQueue::new(&fw, &path).unwrap();

        let due = SystemTime::now() + DELAY;
        java.value_command(&format!("delayq_put P {path} {} from-java", epoch_ms(due)), LIMIT).await.unwrap();
        let names = children(&fw, &path).await;
        assert_eq!(names.len(), 1);
        assert_eq!(queue_names::delay_epoch_of(&names[0]), epoch_ms(due), "{names:?}");
        assert!(names[0].starts_with(&queue_names::delay_name(epoch_ms(due))), "{names:?}");
        let (data, _) = fw.get_data(&format!("{path}/{}", names[0])).await.unwrap();
        assert_eq!(decode_queue_items(&data).unwrap(), items(&["from-java"]));
        let taken = within(EVENT, "Curator's delayed item", queue.take()).await.unwrap();
        assert!(SystemTime::now() >= due, "taken before it was due");
        assert_eq!(taken, items(&["from-java"]));

        let due = SystemTime::now() + DELAY;
        queue.put(b"from-rust", due).await.unwrap();
        queue.put_multi(&[&b"b1"[..], b"b2"], due + DELAY).await.unwrap();
        queue.put(b"overdue", due - Duration::from_secs(3600)).await.unwrap();
        java.value_command(&format!("delayq_consume C {path} -"), LIMIT).await.unwrap();
        for (expected, not_before) in
            [("overdue", 0), ("from-rust", epoch_ms(due)), ("b1", epoch_ms(due + DELAY)), ("b2", epoch_ms(due + DELAY))]
        {
            let line = java.wait_for("delayq-item C", INTEROP_EVENT).await.unwrap();
            let words: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(words[3], expected, "{line}");
            let at: u64 = words[2].parse().unwrap();
            assert!(at >= not_before, "{expected} consumed by Curator {} ms before it was due", not_before - at);
        }
        children_count_becomes(&fw, &path, 0, EVENT).await;
        java.kill().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Curator 5.4's id queue and Rust's on one queue: ids written by either are read and removed
/// by the other.
#[tokio::test]
async fn curator_and_rust_share_an_id_queue_both_ways() {
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = CuratorPeer::started(&connect, INTEROP_SESSION).await else { return };
        let fw = plain_framework(&connect, SESSION).await;
        let path = unique_path("idqueue", "interop");
        for (id, text) in [("job-1", "a"), ("job-2", "b"), ("job-1", "c")] {
            java.value_command(&format!("idqueue_put P {path} {id} {text}"), LIMIT).await.unwrap();
        }
        let queue = DistributedIdQueue::new(&fw, &path).unwrap();
        assert_eq!(queue.ids().await.unwrap(), ["job-1", "job-2", "job-1"]);
        assert_eq!(queue.remove("job-1").await.unwrap(), 2);
        assert_eq!(queue.take_timeout(QUIET).await.unwrap(), Some(items(&["b"])));

        queue.put(b"x", "r-1").await.unwrap();
        queue.put(b"y", "r-2").await.unwrap();
        assert_eq!(java.value_command(&format!("idqueue_remove R {path} r-1"), LIMIT).await.unwrap(), ["1"]);
        assert_eq!(queue.take_timeout(QUIET).await.unwrap(), Some(items(&["y"])));
        assert!(children(&fw, &path).await.is_empty());
        java.kill().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// How long a queue can grow before its listing no longer fits a reply: every consumer lists
/// the queue's children; each child costs its name plus a 4-byte length, so `queue-<seq>` names
/// (16 bytes) pass the default `jute.maxbuffer` (1 MiB) at about 52,400 items. Lists and takes
/// from a Rust consumer and lists from a Curator 5.4 client at sizes around and past that, on a
/// server of its own: `cargo test --features testing --test queues -- --ignored
/// --nocapture queue_length`.
#[tokio::test]
#[ignore = "creates about 100,000 nodes: a measurement, run by hand"]
async fn queue_length_limit_of_a_listing() {
    init_tracing();
    bounded(Duration::from_secs(900), async {
        let server = zk_recipes::testing::TestingServer::start().await.unwrap();
        let fw = plain_framework(&server.connect_string(), SESSION).await;
        let path = "/measure/q";
        let queue = zk_recipes::DistributedQueue::new(&fw, path).unwrap();
        let prefix = format!("{path}/queue-");
        let mut java = CuratorPeer::started(&server.connect_string(), INTEROP_SESSION).await;
        let mut created = 0usize;
        for target in [50_000usize, 52_000, 53_000, 100_000] {
            let more = target - created;
            futures::stream::iter(0..more)
                .map(|_| async {
                    let create = fw.create(&prefix).mode(CreateMode::PersistentSequential);
                    create.parents(zk_recipes::Parents::Persistent).data(&encode_queue_items(&[b"x"])).await
                })
                .buffer_unordered(256)
                .for_each(|r| async move {
                    r.unwrap();
                })
                .await;
            created = target;
            let started = std::time::Instant::now();
            let listed = match tokio::time::timeout(EVENT, fw.get_children(path)).await {
                Ok(Ok(names)) => format!("listed {} children", names.len()),
                Ok(Err(e)) => format!("listing failed: {e}"),
                Err(_) => format!("listing did not answer within {EVENT:?}"),
            };
            let listed_in = started.elapsed();
            let started = std::time::Instant::now();
            let taken = tokio::time::timeout(EVENT, queue.take()).await;
            let taken = format!(
                "a take {} in {:?}",
                if matches!(taken, Ok(Ok(_))) { "succeeded" } else { "failed" },
                started.elapsed()
            );
            created -= 1;
            // Curator's SimpleDistributedQueue lists every child too (its `qn-` filter comes after).
            let curator = match java.as_mut() {
                Some(java) => java
                    .value_command(&format!("squeue_take J {path} 1000"), INTEROP_EVENT)
                    .await
                    .map_or_else(|e| format!("Curator's listing failed: {e}"), |r| format!("Curator's listing: {r:?}")),
                None => "no Curator".to_owned(),
            };
            eprintln!(
                "{target} items ({} bytes of names): Rust {listed} in {listed_in:?}, {taken}; {curator}",
                target * 20
            );
        }
        if let Some(mut java) = java {
            java.kill().await.unwrap();
        }
        drop(fw);
        drop(server);
    })
    .await;
}
