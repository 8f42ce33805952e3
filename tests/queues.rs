//! `SimpleDistributedQueue` against real servers: Curator's `qn-` nodes and raw bytes, FIFO
//! order, waiting takes, two consumers sharing one producer's items exactly once, foreign
//! children, a queue node that went away, an item over the server's size limit, and Curator
//! 5.4 producers and consumers on the same queue.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::curator::CuratorPeer;
use common::fixtures::*;
use common::timing::{EVENT, INTEROP_SESSION, LIMIT, QUIET, SESSION, SLOW_LIMIT};
use zk_recipes::{Error, SimpleDistributedQueue};

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
        // A child that is no item is left alone.
        fw.create(&format!("{path}/foreign")).await.unwrap();

        assert_eq!(queue.peek().await.unwrap().as_deref(), Some(&b"a"[..]));
        assert_eq!(queue.poll().await.unwrap().as_deref(), Some(&b"a"[..]));
        assert_eq!(queue.take().await.unwrap(), b"");
        assert_eq!(queue.take_timeout(QUIET).await.unwrap().as_deref(), Some(&b"c"[..]));
        assert_eq!(queue.take_timeout(QUIET).await.unwrap(), None);
        assert_eq!(children(&fw, &path).await, ["foreign"]);
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

        fw.delete(&path).await.unwrap();
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
