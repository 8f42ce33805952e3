//! `zkr queue` on Curator's `DistributedQueue` variants against a real server: priority, delay
//! and id queues filled with the library (and, when Curator is installed, with Curator 5.4),
//! each node's priority, due time or id checked field by field in `--json` and in the table,
//! and the order checked against the order the library's consumer takes the items in.

#[path = "../../tests/common/mod.rs"]
mod common;
mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::curator::CuratorPeer;
use common::fixtures::{bounded, node_name, plain_framework, shared_connect, unique_path};
use common::timing::{INTEROP_SESSION, SESSION, SLOW_LIMIT as LIMIT};
use serde_json::Value;
use support::zkr;
use zk_recipes::{DistributedDelayQueue, DistributedIdQueue, DistributedPriorityQueue, DistributedQueue};

fn nodes(json: &Value) -> &Vec<Value> {
    json["nodes"].as_array().expect("nodes")
}

fn names(json: &Value) -> Vec<&str> {
    nodes(json).iter().map(|n| n["name"].as_str().unwrap()).collect()
}

/// Each node's items, as text.
fn payloads(json: &Value) -> Vec<Vec<Vec<u8>>> {
    nodes(json)
        .iter()
        .map(|n| {
            n["payloads"].as_array().unwrap().iter().map(|p| p["data"].as_str().unwrap().as_bytes().to_vec()).collect()
        })
        .collect()
}

fn items(texts: &[&str]) -> Vec<Vec<u8>> {
    texts.iter().map(|t| t.as_bytes().to_vec()).collect()
}

fn epoch_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

fn cells(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn queue_shows_a_priority_queue_lowest_priority_first_with_each_priority() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let path = unique_path("zkr-pqueue", "order");
        let queue = DistributedPriorityQueue::new(&fw, &path).unwrap();
        let five = queue.put(b"five", 5).await.unwrap();
        let minus = queue.put(b"minus-one", -1).await.unwrap();
        let zero = queue.put_multi(&[&b"z1"[..], b"z2"], 0).await.unwrap();
        let min = queue.put(b"min", i32::MIN).await.unwrap();

        let json = zkr(&connect, &["queue", &path, "--json"]).await.json();
        assert_eq!(json["recipe"], "distributed-queue");
        assert_eq!((json["variant"].as_str(), json["variant_source"].as_str()), (Some("priority"), Some("detected")));
        assert_eq!((json["count"].as_u64(), json["items"].as_u64()), (Some(4), Some(5)));
        assert_eq!(names(&json), [&min, &minus, &zero, &five].map(|p| node_name(p)));
        assert_eq!(json["next"], node_name(&min));
        let priorities: Vec<Option<i64>> = nodes(&json).iter().map(|n| n["priority"].as_i64()).collect();
        assert_eq!(priorities, [Some(i32::MIN as i64), Some(-1), Some(0), Some(5)]);
        let sequences: Vec<Option<i64>> = nodes(&json).iter().map(|n| n["sequence"].as_i64()).collect();
        assert_eq!(sequences, [Some(3), Some(1), Some(2), Some(0)]);
        assert!(nodes(&json)
            .iter()
            .all(|n| n["kind"] == "framed" && n.get("id").is_none() && n.get("due_ms").is_none()));
        let shown = payloads(&json);
        assert_eq!(shown, [items(&["min"]), items(&["minus-one"]), items(&["z1", "z2"]), items(&["five"])]);

        let out = zkr(&connect, &["queue", &path]).await;
        let lines = out.table();
        assert!(lines[1].ends_with("; priority order (detected)"), "{lines:?}");
        assert_eq!(cells(lines[3]), ["#", "KIND", "ITEMS", "SEQ", "AGE", "PRIORITY", "NODE", "DATA"]);
        let first = cells(lines[4]);
        assert_eq!(
            [&first[..4], &first[5..]].concat(),
            ["1", "framed", "1", "3", "-2147483648", node_name(&min), "min"]
        );
        assert_eq!(cells(lines[6])[5..], ["0", node_name(&zero), "z1", "|", "z2"]);

        // The library's consumer takes them in zkr's order.
        let mut taken = Vec::new();
        for _ in 0..4 {
            taken.push(queue.take().await.unwrap());
        }
        assert_eq!(taken, shown);

        // A plain DistributedQueue reads as FIFO and shows no priority.
        let fifo = unique_path("zkr-pqueue", "fifo");
        DistributedQueue::new(&fw, &fifo).unwrap().put(b"only").await.unwrap();
        let json = zkr(&connect, &["queue", &fifo, "--json"]).await.json();
        assert_eq!(json["variant"], "fifo");
        assert!(nodes(&json)[0].get("priority").is_none(), "{json}");
        let lines = zkr(&connect, &["queue", &fifo]).await.stdout;
        assert!(!lines.contains("PRIORITY"), "{lines}");
        fw.close().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn queue_shows_a_delay_queue_by_due_time_with_each_due_time() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let path = unique_path("zkr-delayq", "order");
        let queue = DistributedDelayQueue::new(&fw, &path).unwrap();
        let now = SystemTime::now();
        let hour = Duration::from_secs(3600);
        let later = queue.put(b"later", now + hour).await.unwrap();
        let overdue = queue.put(b"overdue", now - hour).await.unwrap();
        let soon = queue.put_multi(&[&b"s1"[..], b"s2"], now + hour / 2).await.unwrap();
        // Eight hex digits: after every eleven-digit epoch in name order, first by its epoch.
        let ancient_due = UNIX_EPOCH + Duration::from_millis(0xF000_0000);
        let ancient = queue.put(b"ancient", ancient_due).await.unwrap();
        assert!(node_name(&ancient).starts_with("queue-|F0000000|"), "{ancient}");

        let json = zkr(&connect, &["queue", &path, "--json"]).await.json();
        assert_eq!((json["variant"].as_str(), json["variant_source"].as_str()), (Some("delay"), Some("detected")));
        assert_eq!(names(&json), [&ancient, &overdue, &soon, &later].map(|p| node_name(p)));
        let due: Vec<Option<u64>> = nodes(&json).iter().map(|n| n["due_ms"].as_u64()).collect();
        let expected = [ancient_due, now - hour, now + hour / 2, now + hour].map(|t| Some(epoch_ms(t)));
        assert_eq!(due, expected);
        for (node, due) in nodes(&json).iter().zip(expected) {
            // Measured from zkr's clock a moment after `now`.
            let due_in = node["due_in_ms"].as_i64().unwrap();
            let from_now = due.unwrap() as i64 - epoch_ms(now) as i64;
            assert!(due_in <= from_now && due_in > from_now - 60_000, "{due_in} for {from_now}: {node}");
        }
        assert!(nodes(&json).iter().all(|n| n.get("priority").is_none() && n.get("id").is_none()));
        let shown = payloads(&json);
        assert_eq!(shown, [items(&["ancient"]), items(&["overdue"]), items(&["s1", "s2"]), items(&["later"])]);

        let out = zkr(&connect, &["queue", &path]).await;
        let lines = out.table();
        assert!(lines[1].ends_with("; delay order (detected)"), "{lines:?}");
        assert_eq!(cells(lines[3]), ["#", "KIND", "ITEMS", "SEQ", "AGE", "DUE", "NODE", "DATA"]);
        assert!(lines[4].contains(" 1970-02-16T14:28:51.840Z (overdue by "), "{lines:?}");
        assert_eq!(cells(lines[4])[9..], [node_name(&ancient), "ancient"], "{lines:?}");
        assert!(lines[5].contains(" (overdue by 1h00m)") || lines[5].contains(" (overdue by 59m"), "{lines:?}");
        assert!(lines[6].contains(" (in 29m") || lines[6].contains(" (in 30m"), "{lines:?}");
        assert!(lines[7].contains(" (in 59m") || lines[7].contains(" (in 1h00m"), "{lines:?}");

        // The library's consumer takes the due ones in zkr's order.
        assert_eq!(queue.take().await.unwrap(), shown[0]);
        assert_eq!(queue.take().await.unwrap(), shown[1]);
        fw.close().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn queue_shows_an_id_queue_in_put_order_with_each_id() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let path = unique_path("zkr-idqueue", "order");
        let queue = DistributedIdQueue::new(&fw, &path).unwrap();
        let mut put = Vec::new();
        for (text, id) in [("first", "zz"), ("second", "a"), ("third", "b-c"), ("fourth", "m")] {
            put.push(queue.put(text.as_bytes(), id).await.unwrap());
        }
        let json = zkr(&connect, &["queue", &path, "--json"]).await.json();
        assert_eq!((json["variant"].as_str(), json["variant_source"].as_str()), (Some("id"), Some("detected")));
        assert_eq!(names(&json), put.iter().map(|p| node_name(p)).collect::<Vec<_>>());
        let ids: Vec<Option<&str>> = nodes(&json).iter().map(|n| n["id"].as_str()).collect();
        assert_eq!(ids, [Some("zz"), Some("a"), Some("b-c"), Some("m")]);
        let sequences: Vec<Option<i64>> = nodes(&json).iter().map(|n| n["sequence"].as_i64()).collect();
        assert_eq!(sequences, [Some(0), Some(1), Some(2), Some(3)]);
        let shown = payloads(&json);
        assert_eq!(shown, [items(&["first"]), items(&["second"]), items(&["third"]), items(&["fourth"])]);
        let lines = zkr(&connect, &["queue", &path]).await;
        let lines = lines.table();
        assert_eq!(cells(lines[3]), ["#", "KIND", "ITEMS", "SEQ", "AGE", "ID", "NODE", "DATA"]);
        assert_eq!(cells(lines[6])[5..], ["b-c", node_name(&put[2]), "third"]);
        assert_eq!(queue.take().await.unwrap(), shown[0]);

        // Ids that look like epochs read as a delay queue unless told.
        let path = unique_path("zkr-idqueue", "hex-ids");
        let queue = DistributedIdQueue::new(&fw, &path).unwrap();
        let b = queue.put(b"b", "BBBBBBBB").await.unwrap();
        let a = queue.put(b"a", "AAAAAAAA").await.unwrap();
        let json = zkr(&connect, &["queue", &path, "--json"]).await.json();
        assert_eq!((json["variant"].as_str(), names(&json)), (Some("delay"), vec![node_name(&a), node_name(&b)]));
        let json = zkr(&connect, &["queue", &path, "--json", "--variant", "id"]).await.json();
        assert_eq!((json["variant"].as_str(), json["variant_source"].as_str()), (Some("id"), Some("given")));
        assert_eq!(names(&json), [node_name(&b), node_name(&a)]);
        assert_eq!(nodes(&json)[0]["id"], "BBBBBBBB");
        assert_eq!(queue.take().await.unwrap(), items(&["b"]));
        let run = zkr(&connect, &["queue", &path, "--variant", "lifo"]).await;
        assert_eq!(run.code, 2, "{run:?}");
        assert!(run.stderr.contains("lifo"), "{run:?}");
        fw.close().await;
    })
    .await;
}

/// Priority, delay and id queues that Curator 5.4 filled, read by zkr.
#[tokio::test(flavor = "multi_thread")]
async fn curators_priority_delay_and_id_queues() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut peer) = CuratorPeer::started(&connect, INTEROP_SESSION).await else { return };
        let limit = Duration::from_secs(30);
        let path = unique_path("zkr-curator", "pqueue");
        for (priority, texts) in [("5", "five"), ("-1", "minus-one"), ("0", "z1 z2")] {
            peer.value_command(&format!("pqueue_put P {path} {priority} {texts}"), limit).await.unwrap();
        }
        let json = zkr(&connect, &["queue", &path, "--json"]).await.json();
        assert_eq!(json["variant"], "priority");
        let priorities: Vec<Option<i64>> = nodes(&json).iter().map(|n| n["priority"].as_i64()).collect();
        assert_eq!(priorities, [Some(-1), Some(0), Some(5)]);
        assert_eq!(payloads(&json), [items(&["minus-one"]), items(&["z1", "z2"]), items(&["five"])]);

        let path = unique_path("zkr-curator", "delayq");
        let now = SystemTime::now();
        let (later, earlier) = (now + Duration::from_secs(3600), now - Duration::from_secs(60));
        peer.value_command(&format!("delayq_put D {path} {} later", epoch_ms(later)), limit).await.unwrap();
        peer.value_command(&format!("delayq_put D {path} {} earlier", epoch_ms(earlier)), limit).await.unwrap();
        let json = zkr(&connect, &["queue", &path, "--json"]).await.json();
        assert_eq!(json["variant"], "delay");
        let due: Vec<Option<u64>> = nodes(&json).iter().map(|n| n["due_ms"].as_u64()).collect();
        assert_eq!(due, [Some(epoch_ms(earlier)), Some(epoch_ms(later))]);
        assert!(nodes(&json)[0]["due_in_ms"].as_i64().unwrap() < 0, "{json}");
        assert!(nodes(&json)[1]["due_in_ms"].as_i64().unwrap() > 0, "{json}");
        assert_eq!(payloads(&json), [items(&["earlier"]), items(&["later"])]);

        let path = unique_path("zkr-curator", "idqueue");
        for (id, text) in [("zz", "a"), ("a/b", "b")] {
            peer.value_command(&format!("idqueue_put I {path} {id} {text}"), limit).await.unwrap();
        }
        let json = zkr(&connect, &["queue", &path, "--json"]).await.json();
        assert_eq!(json["variant"], "id");
        let ids: Vec<Option<&str>> = nodes(&json).iter().map(|n| n["id"].as_str()).collect();
        assert_eq!(ids, [Some("zz"), Some("a_b")]);
        assert_eq!(payloads(&json), [items(&["a"]), items(&["b"])]);
        peer.quit().await.unwrap();
    })
    .await;
}

/// A `QueueSharder`'s root: its `queue-<uuid>` children are shards, each read as a queue (not
/// as items of one queue, which their names also begin like).
#[tokio::test(flavor = "multi_thread")]
async fn queue_shows_a_sharders_shards_each_as_a_queue() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let root = unique_path("zkr-queue", "sharder");
        let full = format!("{root}/queue-3f1c2b9e-8d6a-4e1f-9b0a-1c2d3e4f5a6b");
        let empty = format!("{root}/queue-0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d");
        let queue = DistributedQueue::new(&fw, &full).unwrap();
        queue.put(b"one").await.unwrap();
        queue.put(b"two").await.unwrap();
        fw.create(&empty).await.unwrap();

        let json = zkr(&connect, &["queue", &root, "--json"]).await.json();
        assert_eq!(json["recipe"], "queue-sharder", "{json}");
        assert_eq!((json["count"].as_u64(), json["items"].as_u64()), (Some(2), Some(2)));
        assert!(nodes(&json).is_empty(), "{json}");
        let shards = json["shards"].as_array().expect("shards");
        let mut paths: Vec<&str> = shards.iter().map(|s| s["path"].as_str().unwrap()).collect();
        paths.sort();
        let mut expected = [full.as_str(), empty.as_str()];
        expected.sort();
        assert_eq!(paths, expected);
        let with_items = shards.iter().find(|s| s["path"] == full.as_str()).unwrap();
        assert_eq!(with_items["recipe"], "distributed-queue");
        assert_eq!(payloads(with_items), [items(&["one"]), items(&["two"])]);
        assert!(
            shards.iter().flat_map(|s| nodes(s).iter()).all(|n| n["kind"] == "framed"),
            "no shard or item read as corrupt: {json}"
        );

        let table = zkr(&connect, &["queue", &root]).await.stdout;
        assert!(table.contains("2 shards"), "{table}");
        assert!(!table.contains("corrupt"), "{table}");
        fw.delete(&root).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}
