//! `SimpleDistributedQueue` against real servers: Curator's `qn-` nodes and raw bytes, FIFO
//! order, waiting takes, two consumers sharing one producer's items exactly once, foreign
//! children, a queue node that went away, an item over the server's size limit, Curator 5.4
//! producers and consumers on the same queue, and a take beside a cache of the queue; for
//! `DistributedQueue` also lost replies, lock-safe consumers whose session ends mid-item, and a
//! stream whose session expires.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::curator::CuratorPeer;
use common::fixtures::*;
use common::timing::{EVENT, FAULT_SESSION, INTEROP_SESSION, LIMIT, QUIET, SESSION, SLOW_LIMIT};
use zk_recipes::{CuratorCache, Error, SimpleDistributedQueue};

#[tokio::test]
async fn items_are_qn_nodes_taken_in_order() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = format!("{}/q", unique_path("queue", "order"));
        let queue = SimpleDistributedQueue::new(&fw, &path).unwrap();
        assert_eq!(queue.poll().await.unwrap(), None);
        assert_eq!(queue.peek().await.unwrap(), None);
        let first = queue.offer(b"a").await.unwrap();
        queue.offer(b"").await.unwrap();
        queue.offer(b"c").await.unwrap();
        let name = node_name(&first);
        assert!(name.starts_with("qn-") && name.len() == 13, "{name}");
        let (data, stat) = fw.get_data(&first).await.unwrap();
        assert_eq!((data.as_slice(), stat.ephemeral_owner), (&b"a"[..], 0));
        // A child that is no item is left alone, and so is a node with children of its own
        // under an item's name (no consumer can delete it; it sorts before every item).
        fw.create(&format!("{path}/foreign")).await.unwrap();
        fw.create(&format!("{path}/qn-0/child")).parents(zk_recipes::Parents::Persistent).await.unwrap();

        assert_eq!(queue.peek().await.unwrap().as_deref(), Some(&b"a"[..]));
        assert_eq!(queue.poll().await.unwrap().as_deref(), Some(&b"a"[..]));
        assert_eq!(queue.take().await.unwrap(), b"");
        assert_eq!(queue.take_timeout(QUIET).await.unwrap().as_deref(), Some(&b"c"[..]));
        assert_eq!(queue.take_timeout(QUIET).await.unwrap(), None);
        assert_eq!(children(&fw, &path).await, ["foreign", "qn-0"]);
        assert!(matches!(queue.take_timeout(Duration::ZERO).await, Err(Error::InvalidArgument { .. })));
        fw.delete(&path).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_take_waits_for_an_offer_and_a_queue_node_that_went_away_is_made_again() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let producer = plain_framework(&connect, SESSION).await;
        let path = unique_path("queue", "wait");
        let queue = SimpleDistributedQueue::new(&fw, &path).unwrap();
        let taker = {
            let queue = queue.clone();
            tokio::spawn(async move { queue.take().await })
        };
        children_count_becomes(&fw, &path, 0, EVENT).await; // the take made the queue node
        SimpleDistributedQueue::new(&producer, &path).unwrap().offer(b"late").await.unwrap();
        assert_eq!(within(EVENT, "the take", taker).await.unwrap().unwrap(), b"late");

        // The queue node goes: deleted here, unless the server reaped it first (an empty
        // container goes at the server's next container check, every 100 ms here).
        match fw.delete(&path).await {
            Ok(()) | Err(Error::ZooKeeper(zk_recipes::zk::Error::NoNode)) => {}
            Err(e) => panic!("deleting the queue node: {e}"),
        }
        assert_eq!(queue.take_timeout(QUIET).await.unwrap(), None);
        assert!(fw.exists(&path).await.unwrap().is_some(), "made again");
        producer.close().await;
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn two_consumers_get_every_item_exactly_once() {
    init_tracing();
    const N: usize = 60;
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("queue", "consumers");
        let mut consumers = Vec::new();
        for _ in 0..2 {
            let (connect, path) = (connect.clone(), path.clone());
            consumers.push(tokio::spawn(async move {
                let fw = plain_framework(&connect, SESSION).await;
                let queue = SimpleDistributedQueue::new(&fw, &path).unwrap();
                let mut got = Vec::new();
                while let Some(item) = queue.take_timeout(Duration::from_secs(2)).await.unwrap() {
                    got.push(String::from_utf8(item).unwrap());
                }
                fw.close().await;
                got
            }));
        }
        let fw = plain_framework(&connect, SESSION).await;
        let queue = SimpleDistributedQueue::new(&fw, &path).unwrap();
        for i in 0..N {
            queue.offer(format!("item-{i}").as_bytes()).await.unwrap();
        }
        let mut all = Vec::new();
        for consumer in consumers {
            let got = consumer.await.unwrap();
            // Each consumer sees the items in the order they were offered.
            let order: Vec<usize> = got.iter().map(|s| s[5..].parse().unwrap()).collect();
            assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
            all.extend(got);
        }
        let unique: BTreeSet<&String> = all.iter().collect();
        assert_eq!((all.len(), unique.len()), (N, N), "each item exactly once");
        assert!(children(&fw, &path).await.is_empty());
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn an_item_over_the_size_limit_is_refused_before_anything_is_sent() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("queue", "large");
        let queue = SimpleDistributedQueue::new(&fw, &path).unwrap();
        let refused = queue.offer(&vec![7u8; 1024 * 1024 + 1]).await;
        assert!(matches!(refused, Err(Error::TooLarge { name: "data", .. })), "{refused:?}");
        assert!(fw.exists(&path).await.unwrap().is_none(), "nothing created");
        assert!(fw.state().is_connected());
        assert!(matches!(SimpleDistributedQueue::new(&fw, "/zookeeper/q"), Err(Error::InvalidPath { .. })));
        fw.close().await;
    })
    .await;
}

/// Curator 5.4 offers and Rust takes, then the reverse, on one queue.
#[tokio::test]
async fn curator_and_rust_share_a_queue_both_ways() {
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = CuratorPeer::started(&connect, INTEROP_SESSION).await else { return };
        let fw = plain_framework(&connect, SESSION).await;
        let path = unique_path("queue", "interop");
        let queue = SimpleDistributedQueue::new(&fw, &path).unwrap();
        for item in ["j1", "j2"] {
            java.value_command(&format!("squeue_offer J {path} {item}"), LIMIT).await.unwrap();
        }
        assert_eq!(queue.take().await.unwrap(), b"j1");
        assert_eq!(queue.take().await.unwrap(), b"j2");
        java.send(&format!("squeue_take J {path} 30000")).await.unwrap();
        queue.offer(b"r1").await.unwrap();
        assert_eq!(java.value_reply("squeue_take J", EVENT).await.unwrap(), ["r1"]);
        queue.offer(b"r2").await.unwrap();
        assert_eq!(java.value_command(&format!("squeue_take J {path} 5000"), LIMIT).await.unwrap(), ["r2"]);
        assert_eq!(java.value_command(&format!("squeue_take J {path} 200"), LIMIT).await.unwrap(), ["none"]);
        fw.close().await;
        java.quit().await.unwrap();
    })
    .await;
}

mod distributed {
    use super::*;
    use futures::StreamExt;
    use zk_recipes::protocol::values::encode_queue_items;
    use zk_recipes::retry::RetryForever;
    use zk_recipes::testing::ProxyMode;
    use zk_recipes::{zk, ConnectionState, DistributedQueue, Framework, SessionFailurePolicy};

    #[tokio::test]
    async fn items_are_framed_queue_nodes_taken_in_order() {
        init_tracing();
        bounded(LIMIT, async {
            let fw = plain_framework(&shared_connect().await, SESSION).await;
            let path = unique_path("dqueue", "order");
            let queue = DistributedQueue::new(&fw, &path).unwrap();
            let first = queue.put(b"ab").await.unwrap();
            let name = node_name(&first);
            assert!(name.starts_with("queue-") && name.len() == 16, "{name}");
            let (data, stat) = fw.get_data(&first).await.unwrap();
            assert_eq!(data, [0, 1, 0, 1, 1, 0, 0, 0, 2, 0x61, 0x62, 2]);
            assert_eq!(data, encode_queue_items(&[b"ab"]));
            assert_eq!(stat.ephemeral_owner, 0);
            queue.put_multi(&[&b"x"[..], b"", b"y"]).await.unwrap();
            assert_eq!(children(&fw, &path).await.len(), 2, "a multi-item put is one node");
            assert_eq!(queue.take().await.unwrap(), [b"ab".to_vec()]);
            assert_eq!(queue.take().await.unwrap(), [b"x".to_vec(), vec![], b"y".to_vec()]);
            assert_eq!(queue.take_timeout(QUIET).await.unwrap(), None);
            assert!(matches!(queue.put_multi::<&[u8]>(&[]).await, Err(Error::InvalidArgument { .. })));
            assert!(matches!(queue.put(&vec![0u8; 1024 * 1024]).await, Err(Error::TooLarge { .. })));
            assert!(children(&fw, &path).await.is_empty(), "nothing left, nothing added");

            // A node not in the item framing: typed, and deleted (Curator counts it processed).
            let prefix = format!("{path}/queue-");
            let bad = fw.create(&prefix).mode(zk_recipes::CreateMode::PersistentSequential);
            bad.data(b"\x00\x01\x00\x02").await.unwrap();
            assert!(matches!(queue.take().await, Err(Error::CorruptData { .. })));
            assert!(children(&fw, &path).await.is_empty());
            fw.delete(&path).await.unwrap();
            fw.close().await;
        })
        .await;
    }

    /// A node under an item's name with a child of its own (made by hand, or a sharder's
    /// shard) cannot be deleted, so it is no item: consumers in both modes pass over it, take
    /// the items behind it, and leave it where it is.
    #[tokio::test]
    async fn a_node_with_children_under_an_items_name_is_passed_over() {
        init_tracing();
        bounded(LIMIT, async {
            let fw = plain_framework(&shared_connect().await, SESSION).await;
            for lock_safe in [false, true] {
                let path = unique_path("dqueue", "not-an-item");
                let locks = format!("{path}-locks");
                let queue = if lock_safe {
                    DistributedQueue::lock_safe(&fw, &path, &locks).unwrap()
                } else {
                    DistributedQueue::new(&fw, &path).unwrap()
                };
                // Sorted before every item: `queue-` and a sequence of all zeros.
                let blocker = format!("{path}/queue-0000000000");
                fw.create(&format!("{blocker}/child")).parents(zk_recipes::Parents::Persistent).await.unwrap();
                // Written since its create: a delete at version 0 fails with `BadVersion`
                // before the server looks at its children.
                fw.set_data(&blocker, b"written").await.unwrap();
                queue.put(b"one").await.unwrap();
                queue.put(b"two").await.unwrap();
                let take = || async {
                    if lock_safe {
                        queue.consume(|items| async move { Ok::<_, ()>(items) }).await.unwrap().unwrap()
                    } else {
                        queue.take().await.unwrap()
                    }
                };
                assert_eq!(take().await, [b"one".to_vec()], "lock-safe: {lock_safe}");
                assert_eq!(take().await, [b"two".to_vec()], "lock-safe: {lock_safe}");
                assert_eq!(queue.take_timeout(QUIET).await.unwrap(), None, "lock-safe: {lock_safe}");
                assert_eq!(children(&fw, &path).await, ["queue-0000000000"], "left where it is");
                if lock_safe {
                    assert!(children(&fw, &locks).await.is_empty(), "no lock node left");
                    fw.delete(&locks).await.unwrap();
                }
                fw.delete(&path).recursive().await.unwrap();
            }
            fw.close().await;
        })
        .await;
    }

    /// A lock-safe take cancelled while its lock node's create is in flight (its link held
    /// back by a proxy, the create sent) leaves no lock node once the create lands: the item
    /// goes to the next consumer at once, not after the session's end.
    #[tokio::test]
    async fn a_take_cancelled_during_its_lock_create_leaves_no_lock_node() {
        init_tracing();
        bounded(LIMIT, async {
            let connect = shared_connect().await;
            let proxy = zk_recipes::testing::FaultProxy::start(&connect).await.unwrap();
            let fw = plain_framework(&proxy.connect_string(), SESSION).await;
            let other = plain_framework(&connect, SESSION).await;
            let path = unique_path("dqueue", "cancelled-lock");
            let locks = format!("{path}-locks");
            let queue = DistributedQueue::lock_safe(&fw, &path, &locks).unwrap();
            queue.put(b"one").await.unwrap();
            queue.put(b"two").await.unwrap();
            // The first take lists both items; the second goes through that listing, so its
            // first request is its lock's create.
            assert_eq!(queue.take().await.unwrap(), [b"one".to_vec()]);
            proxy.set_mode(zk_recipes::testing::ProxyMode::Hold);
            let taking = {
                let queue = queue.clone();
                tokio::spawn(async move { queue.take().await })
            };
            request_held_back(&proxy, "the lock's create sent").await;
            taking.abort();
            assert!(taking.await.unwrap_err().is_cancelled());
            proxy.set_mode(zk_recipes::testing::ProxyMode::Pass);
            children_count_becomes(&other, &locks, 0, EVENT).await;
            let next = DistributedQueue::lock_safe(&other, &path, &locks).unwrap();
            let got = within(EVENT, "the item for the next consumer", next.take()).await.unwrap();
            assert_eq!(got, [b"two".to_vec()]);
            fw.close().await;
            other.delete(&locks).await.unwrap();
            other.delete(&path).await.unwrap();
            other.close().await;
        })
        .await;
    }

    /// A take reads an item and deletes it at version 0 in one go (an item is never written
    /// after its create): an item written since is still taken, once, with the bytes read.
    #[tokio::test]
    async fn an_item_written_after_its_put_is_taken_once_with_its_new_bytes() {
        init_tracing();
        bounded(LIMIT, async {
            let fw = plain_framework(&shared_connect().await, SESSION).await;
            let path = unique_path("dqueue", "rewritten");
            let queue = DistributedQueue::new(&fw, &path).unwrap();
            let item = queue.put(b"old").await.unwrap();
            queue.put(b"next").await.unwrap();
            fw.set_data(&item, &encode_queue_items(&[b"new"])).await.unwrap();
            assert_eq!(queue.take().await.unwrap(), [b"new".to_vec()]);
            assert_eq!(queue.take().await.unwrap(), [b"next".to_vec()]);
            assert_eq!(queue.take_timeout(QUIET).await.unwrap(), None);
            assert!(children(&fw, &path).await.is_empty());
            fw.delete(&path).await.unwrap();
            fw.close().await;
        })
        .await;
    }

    /// Lock-safe mode: a consumer that fails puts the item back at the end; a consumer
    /// stopped mid-item (its task aborted) leaves it for the next; one that returns has it
    /// deleted, and no lock node is left.
    #[tokio::test]
    async fn lock_safe_items_are_delivered_again_until_consumed() {
        init_tracing();
        bounded(LIMIT, async {
            let fw = plain_framework(&shared_connect().await, SESSION).await;
            let path = unique_path("dqueue", "locksafe");
            let locks = format!("{path}-locks");
            let queue = DistributedQueue::lock_safe(&fw, &path, &locks).unwrap();
            queue.put(b"one").await.unwrap();
            queue.put(b"two").await.unwrap();

            let failed = queue.consume(|items| async move { Err::<(), _>(items) }).await.unwrap();
            assert_eq!(failed, Err(vec![b"one".to_vec()]));
            let names = children(&fw, &path).await;
            assert_eq!(names.len(), 2, "requeued: {names:?}");

            // Stopped mid-item: the lock goes, the item stays.
            let (started_tx, started) = tokio::sync::oneshot::channel();
            let stuck = {
                let queue = queue.clone();
                tokio::spawn(async move {
                    let _ = queue
                        .consume(|items| async move {
                            let _ = started_tx.send(items);
                            std::future::pending::<Result<(), ()>>().await
                        })
                        .await;
                })
            };
            assert_eq!(within(EVENT, "the stuck consumer", started).await.unwrap(), [b"two".to_vec()]);
            assert_eq!(children(&fw, &locks).await.len(), 1, "locked while consumed");
            stuck.abort();
            let _ = stuck.await;
            children_count_becomes(&fw, &locks, 0, EVENT).await;

            let mut got = Vec::new();
            for _ in 0..2 {
                let items = queue.consume(|items| async move { Ok::<_, ()>(items) }).await.unwrap().unwrap();
                got.extend(items);
            }
            assert_eq!(got, [b"two".to_vec(), b"one".to_vec()], "the failed item went to the end");
            assert!(children(&fw, &path).await.is_empty());
            assert!(children(&fw, &locks).await.is_empty());
            fw.delete(&path).await.unwrap();
            fw.close().await;
        })
        .await;
    }

    /// A take whose read and delete both lose their replies (the proxy cuts the connection
    /// where the read's reply comes, after the server applied both): its delete may have
    /// removed the item, so the take reports `OutcomeUnknown`; it does not find the item gone
    /// and go on to the next one, which would lose the first without a word.
    #[tokio::test]
    async fn a_take_whose_read_and_delete_lost_their_replies_has_an_unknown_outcome() {
        init_tracing();
        bounded(LIMIT, async {
            let proxy = zk_recipes::testing::CountingProxy::start(&shared_connect().await).await.unwrap();
            let fw = plain_framework(&proxy.connect_string(), SESSION).await;
            let path = unique_path("dqueue", "lost-read");
            let queue = DistributedQueue::new(&fw, &path).unwrap();
            let first = queue.put(b"one").await.unwrap();
            queue.put(b"two").await.unwrap();
            proxy.lose_reply_to("getData");
            let taken = queue.take().await;
            assert!(matches!(&taken, Err(Error::OutcomeUnknown { path: p, .. }) if *p == first), "{taken:?}");
            assert!(fw.exists(&first).await.unwrap().is_none(), "the server applied the delete");
            assert_eq!(queue.take().await.unwrap(), [b"two".to_vec()]);
            assert!(children(&fw, &path).await.is_empty());
            fw.delete(&path).await.unwrap();
            fw.close().await;
        })
        .await;
    }

    /// A lock-safe delete of an item whose reply is lost, found gone when sent again: while
    /// the session that created the item's lock node lasts, no other consumer can have taken
    /// the item, so the delete was this one's. `consume` returns the consumer's result and
    /// `take` the item.
    #[tokio::test]
    async fn a_lock_safe_delete_found_done_after_a_lost_reply_was_ours() {
        init_tracing();
        bounded(LIMIT, async {
            let proxy = zk_recipes::testing::CountingProxy::start(&shared_connect().await).await.unwrap();
            let fw = plain_framework(&proxy.connect_string(), SESSION).await;
            let path = unique_path("dqueue", "lost-delete");
            let locks = format!("{path}-locks");
            let queue = DistributedQueue::lock_safe(&fw, &path, &locks).unwrap();
            queue.put(b"one").await.unwrap();
            queue.put(b"two").await.unwrap();
            // Armed while the consumer runs: the next delete is the item's.
            let consumed = queue
                .consume(|items| {
                    proxy.lose_reply_to("delete");
                    async move { Ok::<_, ()>(items) }
                })
                .await;
            assert_eq!(consumed.unwrap(), Ok(vec![b"one".to_vec()]));
            // A take locks and reads first: again its first delete is the item's.
            proxy.lose_reply_to("delete");
            assert_eq!(queue.take().await.unwrap(), [b"two".to_vec()]);
            assert!(children(&fw, &path).await.is_empty());
            children_count_becomes(&fw, &locks, 0, EVENT).await;
            fw.delete(&locks).await.unwrap();
            fw.delete(&path).await.unwrap();
            fw.close().await;
        })
        .await;
    }

    /// A lock-safe consumer whose session ends while it works on an item loses its lock node
    /// with that session, and another consumer locks the item: the first one, finishing,
    /// leaves the other's lock node alone (the node at its lock's name is no longer its own).
    #[tokio::test]
    async fn a_consumer_whose_session_ended_leaves_the_next_consumers_lock_alone() {
        init_tracing();
        bounded(LIMIT, async {
            let faulty = FaultyServer::start().await;
            let fw = framework(&faulty.proxied(), FAULT_SESSION).await;
            let other = plain_framework(&faulty.direct(), SESSION).await;
            let path = unique_path("dqueue", "expired-lock");
            let locks = format!("{path}-locks");
            let queue = DistributedQueue::lock_safe(&fw, &path, &locks).unwrap();
            let item = queue.put(b"one").await.unwrap();
            let lock = format!("{locks}/{}", node_name(&item));
            let (started_tx, started) = tokio::sync::oneshot::channel();
            let (finish_tx, finish) = tokio::sync::oneshot::channel::<()>();
            let first = tokio::spawn(async move {
                queue
                    .consume(|items| async move {
                        let _ = started_tx.send(());
                        let _ = finish.await;
                        Ok::<_, ()>(items)
                    })
                    .await
            });
            within(EVENT, "the first consumer", started).await.unwrap();
            faulty.expire(&fw, EVENT).await;

            let next = DistributedQueue::lock_safe(&other, &path, &locks).unwrap();
            let (next_started_tx, next_started) = tokio::sync::oneshot::channel();
            let (next_finish_tx, next_finish) = tokio::sync::oneshot::channel::<()>();
            let second = tokio::spawn(async move {
                next.consume(|items| async move {
                    let _ = next_started_tx.send(());
                    let _ = next_finish.await;
                    Ok::<_, ()>(items)
                })
                .await
            });
            within(EVENT, "the next consumer", next_started).await.unwrap();
            let owner = other.exists(&lock).await.unwrap().expect("the next consumer's lock node").ephemeral_owner;
            assert_eq!(owner, other.snapshot().session_id);

            finish_tx.send(()).unwrap();
            let first = within(EVENT, "the first consumer's end", first).await.unwrap();
            assert_eq!(first.unwrap(), Ok(vec![b"one".to_vec()]));
            let stat = other.exists(&lock).await.unwrap();
            assert_eq!(stat.map(|s| s.ephemeral_owner), Some(owner), "the next consumer's lock node is left");

            next_finish_tx.send(()).unwrap();
            let second = within(EVENT, "the next consumer's end", second).await.unwrap();
            assert_eq!(second.unwrap(), Ok(vec![b"one".to_vec()]), "delivered again: at least once");
            assert!(children(&other, &path).await.is_empty());
            children_count_becomes(&other, &locks, 0, EVENT).await;
            fw.close().await;
            other.close().await;
        })
        .await;
    }

    /// Expires `fw`'s session (`fw` connects through `faulty`'s proxy) and keeps the framework
    /// from opening its next one until the proxy is set back to `Pass`: the old client hears
    /// that its session expired on its next connection, and the proxy refuses every connection
    /// after that one. The expired session stays in the framework's slot meanwhile.
    async fn expire_and_hold_back_the_next_session(faulty: &FaultyServer, fw: &Framework) {
        let session = fw.zk_client().expect("a session").session().clone();
        faulty.proxy.set_mode(ProxyMode::BlackHole);
        faulty.proxy.drop_connections();
        // The session closed by a second client, as `testing::expire_session` closes it (which
        // then lets every client through again, the framework's next session with them).
        let direct = faulty.direct();
        let attach = zk::Client::connector().with_session(session).with_fail_eagerly().connect(&direct);
        let closer = within(EVENT, "attaching to the session", attach).await.expect("attaching to the session");
        let mut state = closer.state_watcher();
        drop(closer); // sends CloseSession
        within(EVENT, "the session closed", async { while !state.changed().await.is_terminated() {} }).await;
        faulty.proxy.set_mode(ProxyMode::HandshakeThenRefuse);
        wait_for_state(fw, EVENT, "the session lost", |s| s.state == ConnectionState::Lost).await;
    }

    /// A stream with items listed whose session expires: its takes ride through to the next
    /// session as the framework's own operations do. Under the default session failure policy
    /// (with a retry policy that outlasts the outage) it yields no error; under
    /// `SessionFailurePolicy::Fail` one `SessionExpired`, after which it waits for the next
    /// session rather than fail the take of every item it had listed. Every item comes out
    /// once, in order.
    #[tokio::test]
    async fn a_stream_rides_through_its_session_expiring() {
        init_tracing();
        bounded(LIMIT, async {
            const ITEMS: usize = 10;
            let faulty = FaultyServer::start().await;
            let producer = plain_framework(&faulty.direct(), SESSION).await;
            for policy in [SessionFailurePolicy::Retry, SessionFailurePolicy::Fail] {
                let fw = Framework::builder(&faulty.proxied())
                    .session_timeout(FAULT_SESSION)
                    .retry_policy(RetryForever::new(Duration::from_millis(50)))
                    .session_failure_policy(policy)
                    .start()
                    .await
                    .unwrap();
                let path = unique_path("dqueue", "stream-expiry");
                let put = DistributedQueue::new(&producer, &path).unwrap();
                let expected: Vec<Vec<Vec<u8>>> = (0..ITEMS).map(|i| vec![format!("item-{i}").into_bytes()]).collect();
                for item in &expected {
                    put.put(&item[0]).await.unwrap();
                }
                let mut stream = DistributedQueue::new(&fw, &path).unwrap().stream();
                // The first take lists every item.
                let mut taken = vec![within(EVENT, "the first item", stream.next()).await.unwrap().unwrap()];
                expire_and_hold_back_the_next_session(&faulty, &fw).await;
                if policy == SessionFailurePolicy::Fail {
                    let failed = within(EVENT, "the take refused a new session", stream.next()).await.unwrap();
                    assert!(matches!(failed, Err(Error::ZooKeeper(zk::Error::SessionExpired))), "{failed:?}");
                }
                let mut next = stream.next();
                let early = tokio::time::timeout(QUIET, &mut next).await;
                assert!(early.is_err(), "{policy:?}: the stream waits for the next session: {early:?}");
                faulty.proxy.set_mode(ProxyMode::Pass);
                let mut errors = Vec::new();
                let mut outcome = within(EVENT, "the item after the new session", next).await.unwrap();
                loop {
                    match outcome {
                        Ok(items) => taken.push(items),
                        Err(e) => errors.push(e),
                    }
                    if taken.len() == ITEMS {
                        break;
                    }
                    outcome = within(EVENT, "the next item", stream.next()).await.unwrap();
                }
                assert!(errors.is_empty(), "{policy:?}: {errors:?}");
                assert_eq!(taken, expected, "{policy:?}");
                assert!(children(&producer, &path).await.is_empty());
                producer.delete(&path).await.unwrap();
                fw.close().await;
            }
            producer.close().await;
        })
        .await;
    }

    /// Curator 5.4 producers (put and putMulti) and a Rust consumer, then a Rust producer and a
    /// lock-safe Curator consumer started after the Rust lock-safe takes (on the lock path they
    /// used); finally a Curator consumer killed mid-item: the Rust lock-safe consumer gets the
    /// item once the dead consumer's session is gone.
    #[tokio::test]
    async fn curator_and_rust_share_a_distributed_queue() {
        init_tracing();
        bounded(SLOW_LIMIT, async {
            let connect = shared_connect().await;
            let Some(mut java) = CuratorPeer::started(&connect, INTEROP_SESSION).await else { return };
            let fw = plain_framework(&connect, SESSION).await;
            let path = unique_path("dqueue", "interop");
            let locks = format!("{path}-locks");
            java.value_command(&format!("dqueue_put P {path} hello"), LIMIT).await.unwrap();
            java.value_command(&format!("dqueue_put P {path} a b c"), LIMIT).await.unwrap();
            let queue = DistributedQueue::lock_safe(&fw, &path, &locks).unwrap();
            assert_eq!(queue.take().await.unwrap(), [b"hello".to_vec()]);
            assert_eq!(queue.take().await.unwrap(), [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
            // The lock path is persistent, as Curator's `start()` makes it: a container would
            // be reaped once empty, under the Curator consumer below, which creates its lock
            // nodes without parents and reads a missing lock path as "taken by another" (it
            // would never take an item again). A probe container emptied after the takes is
            // reaped by a later sweep of the server's container manager; the lock path must
            // have survived it.
            let probe = format!("{path}-probe");
            fw.create(&format!("{probe}/x")).await.unwrap();
            fw.delete(&format!("{probe}/x")).await.unwrap();
            if let (Some(_), reaped) = fw.exists(&probe).watch().await.unwrap() {
                within(EVENT, "the probe container's removal", reaped.changed()).await.unwrap();
            }
            assert!(fw.exists(&locks).await.unwrap().is_some(), "the lock path survived the container sweep");

            java.value_command(&format!("dqueue_consume C {path} {locks}"), LIMIT).await.unwrap();
            queue.put(b"from-rust").await.unwrap();
            queue.put_multi(&[&b"m1"[..], b"m2"]).await.unwrap();
            for expected in ["from-rust", "m1", "m2"] {
                let line = java.wait_for("dqueue-item C", EVENT).await.unwrap();
                assert_eq!(line, format!("dqueue-item C {expected}"));
            }
            children_count_becomes(&fw, &path, 0, EVENT).await;
            // Curator deletes an item before its lock node: a kill right after the last item's
            // delete would leave that lock until the dead session expires.
            children_count_becomes(&fw, &locks, 0, EVENT).await;
            // Killed rather than quit: its queue's background cache would log the client's close.
            java.kill().await.unwrap();

            // A Curator consumer that never returns, then dies.
            let Some(mut holder) = CuratorPeer::started(&connect, INTEROP_SESSION).await else { return };
            holder.value_command(&format!("dqueue_consume H {path} {locks} hold"), LIMIT).await.unwrap();
            let held = queue.put(b"held").await.unwrap();
            let line = holder.wait_for("dqueue-item H", EVENT).await.unwrap();
            assert_eq!(line, "dqueue-item H held");
            // By name, not by count: the killed consumer may have left a lock node of its own.
            // Curator's consumer loop can list an item it has already taken (its children
            // cache lags its deletes), create that item's lock node, find the item gone and
            // delete the lock; a kill between the two leaves the lock of an item that no
            // longer exists until the dead session expires.
            let held_name = held.rsplit('/').next().unwrap().to_owned();
            let lock_names = children(&fw, &locks).await;
            assert!(lock_names.contains(&held_name), "Curator's lock node for {held_name}: {lock_names:?}");
            assert_eq!(queue.take_timeout(QUIET).await.unwrap(), None, "locked by the holder");
            holder.kill().await.unwrap();
            let redelivered = within(
                INTEROP_SESSION * 3,
                "the item after the holder's death",
                queue.consume(|items| async move { Ok::<_, ()>(items) }),
            )
            .await;
            assert_eq!(redelivered.unwrap().unwrap(), [b"held".to_vec()]);
            assert!(children(&fw, &path).await.is_empty());
            fw.close().await;
        })
        .await;
    }
}

/// A consumer whose framework also caches the queue's node (a dashboard of the queue in the
/// same process): its wait for an item shares the cache's watch and wakes on the next offer.
#[tokio::test]
async fn a_take_beside_a_cache_of_the_queue_wakes_on_the_next_offer() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&shared_connect().await, SESSION).await;
        let producer = framework(&shared_connect().await, SESSION).await;
        let path = unique_path("simple-queue", "cached");
        let queue = SimpleDistributedQueue::new(&fw, &path).unwrap();
        fw.create(&path).data(b"").await.unwrap();
        let cache = CuratorCache::builder(&fw, &path).build().unwrap();
        cache.start().await.unwrap();
        within(EVENT, "the cache's load", cache.initialized()).await.unwrap();
        let taking = tokio::spawn(async move { queue.take().await });
        let offered = SimpleDistributedQueue::new(&producer, &path).unwrap();
        // Either way the item must reach the consumer; the pause makes its wait (on the shared
        // watch) the likely way rather than its first listing.
        tokio::time::sleep(QUIET).await;
        offered.offer(b"item").await.unwrap();
        assert_eq!(within(EVENT, "the take", taking).await.unwrap().unwrap(), b"item");
        cache.close().await;
        fw.close().await;
        producer.close().await;
    })
    .await;
}
