//! `zkr counter`, `zkr barrier`, `zkr queue` and `zkr get` against a real server: counters,
//! barriers, queues and compressed JSON made with the library (and, when Curator is installed,
//! with Curator 5.4), checked field by field in `--json` and in the table.

#[path = "../../tests/common/mod.rs"]
mod common;
mod support;

use std::time::Duration;

use common::curator::CuratorPeer;
use common::fixtures::{bounded, children_count_becomes, plain_framework, shared_connect, unique_path, within};
use common::timing::{EVENT, SESSION, SLOW_LIMIT as LIMIT};
use serde_json::Value;
use support::zkr;
use zk_recipes::{
    DistributedAtomicLong, DistributedBarrier, DistributedDoubleBarrier, DistributedQueue, Framework, SharedCount,
    SimpleDistributedQueue,
};

fn session_of(framework: &Framework) -> String {
    format!("{:#x}", framework.snapshot().session_id)
}

fn strings<'a>(values: &'a Value, field: &str) -> Vec<&'a str> {
    values.as_array().expect("an array").iter().map(|v| v[field].as_str().unwrap_or("null")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn counter_shows_an_atomic_long_and_a_shared_count_with_their_versions() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let retry = zk_recipes::retry::RetryNTimes::new(3, Duration::from_millis(10));

        let long_path = unique_path("zkr-counter", "long");
        let long = DistributedAtomicLong::new(&fw, &long_path, retry.clone()).unwrap();
        for _ in 0..3 {
            assert!(long.increment().await.unwrap().succeeded());
        }
        long.add(39).await.unwrap();
        let (_, stat) = fw.get_data(&long_path).await.unwrap();
        let json = zkr(&connect, &["counter", &long_path, "--json"]).await.json();
        assert_eq!(json["path"], long_path.as_str());
        assert_eq!(json["layouts"], serde_json::json!(["atomic-long"]));
        assert_eq!(json["bytes"], 8);
        assert_eq!(json["value"], 42);
        assert_eq!(json["version"], stat.version);
        assert_eq!(json["data_hex"], "000000000000002a");
        assert_eq!(json["mtime_ms"], stat.mtime);
        assert!(json["description"].as_str().unwrap().contains("DistributedAtomicLong"), "{json}");
        let out = zkr(&connect, &["counter", &long_path]).await;
        let lines = out.table();
        assert!(lines[0].starts_with(&format!("{long_path}: counter, DistributedAtomicLong")), "{lines:?}");
        assert_eq!(lines[2], "LAYOUT   atomic-long");
        assert_eq!(lines[3], "VALUE    42");
        assert_eq!(lines[4], format!("VERSION  {}", stat.version));

        let count_path = unique_path("zkr-counter", "count");
        let count = SharedCount::new(&fw, &count_path, 5).unwrap();
        count.start().await.unwrap();
        count.set(-7).await.unwrap();
        let versioned = count.versioned_count().unwrap();
        let json = zkr(&connect, &["counter", &count_path, "--json"]).await.json();
        assert_eq!(json["layouts"], serde_json::json!(["shared-count", "atomic-integer"]));
        assert_eq!(json["bytes"], 4);
        assert_eq!(json["value"], -7);
        assert_eq!(json["version"], versioned.version());
        assert_eq!(json["data_hex"], "fffffff9");
        // The version zkr shows is the one a compare-and-set must name.
        assert!(count.try_set(&versioned, 8).await.unwrap());
        let json = zkr(&connect, &["counter", &count_path, "--json"]).await.json();
        assert_eq!((json["value"].as_i64(), json["version"].as_i64()), (Some(8), Some(versioned.version() as i64 + 1)));
        count.close();

        // An empty node reads as an atomic's 0; a 3-byte node is no counter; a layout asked for
        // must fit; a missing node exits 4.
        let empty = unique_path("zkr-counter", "empty");
        fw.create(&empty).await.unwrap();
        let json = zkr(&connect, &["counter", &empty, "--json"]).await.json();
        assert_eq!((json["value"].as_i64(), json["layouts"][0].as_str()), (Some(0), Some("atomic-long")));
        // An empty node with children is a directory, not a counter at 0.
        fw.create(&format!("{empty}/child")).await.unwrap();
        let run = zkr(&connect, &["counter", &empty]).await;
        assert_eq!(run.code, 6, "{run:?}");
        assert!(run.stderr.contains("has children (1): a directory"), "{run:?}");
        let bad = unique_path("zkr-counter", "three");
        fw.create(&bad).data(&[1, 2, 3]).await.unwrap();
        let run = zkr(&connect, &["counter", &bad]).await;
        assert_eq!(run.code, 6, "{run:?}");
        assert!(run.stderr.contains("3 bytes"), "{run:?}");
        let run = zkr(&connect, &["counter", &count_path, "--layout", "atomic-long"]).await;
        assert_eq!(run.code, 6, "{run:?}");
        assert!(run.stderr.contains("4 bytes"), "{run:?}");
        let json = zkr(&connect, &["counter", &bad, "--layout", "shared-value", "--json"]).await.json();
        assert_eq!((json["value"].is_null(), json["data_hex"].as_str()), (true, Some("010203")));
        let run = zkr(&connect, &["counter", &unique_path("zkr-counter", "missing")]).await;
        assert_eq!(run.code, 4, "{run:?}");
        let run = zkr(&connect, &["counter", &long_path, "--layout", "long"]).await;
        assert_eq!(run.code, 2, "{run:?}");
        fw.close().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn barrier_shows_set_and_not_set_and_a_double_barriers_members_and_ready() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let path = unique_path("zkr-barrier", "single");
        let barrier = DistributedBarrier::new(&fw, &path).unwrap();
        let json = zkr(&connect, &["barrier", &path, "--json"]).await.json();
        assert_eq!(
            (json["kind"].as_str(), json["exists"].as_bool(), json["set"].as_bool()),
            (Some("barrier"), Some(false), Some(false))
        );
        barrier.set().await.unwrap();
        let json = zkr(&connect, &["barrier", &path, "--json"]).await.json();
        assert_eq!((json["exists"].as_bool(), json["set"].as_bool()), (Some(true), Some(true)));
        let (_, stat) = fw.get_data(&path).await.unwrap();
        assert_eq!(json["ctime_ms"], stat.ctime);
        assert!(json.get("members").is_none(), "{json}");
        let lines = zkr(&connect, &["barrier", &path]).await.stdout;
        assert!(lines.lines().nth(2).unwrap().starts_with("BARRIER  set ("), "{lines}");
        barrier.remove().await.unwrap();
        let lines = zkr(&connect, &["barrier", &path]).await.stdout;
        assert!(lines.contains("BARRIER  not set"), "{lines}");

        // A double barrier for three: two members in and waiting, then the third lets all in.
        let path = unique_path("zkr-barrier", "double");
        let members = [
            plain_framework(&connect, SESSION).await,
            plain_framework(&connect, SESSION).await,
            plain_framework(&connect, SESSION).await,
        ];
        let mut entering = Vec::new();
        for member in &members[..2] {
            let barrier = DistributedDoubleBarrier::new(member, &path, 3).unwrap();
            entering.push(tokio::spawn(async move { (barrier.enter_timeout(LIMIT).await, barrier) }));
        }
        children_count_becomes(&fw, &path, 2, EVENT).await;
        let json = zkr(&connect, &["barrier", &path, "--json"]).await.json();
        assert_eq!(json["kind"], "double-barrier");
        assert_eq!((json["ready"].as_bool(), json["member_count"].as_u64()), (Some(false), Some(2)));
        let mut sessions = strings(&json["members"], "owner_session");
        sessions.sort_unstable();
        let mut expected = [session_of(&members[0]), session_of(&members[1])];
        expected.sort_unstable();
        assert_eq!(sessions, expected);
        let names = strings(&json["members"], "name");
        assert!(names.windows(2).all(|w| w[0] < w[1]), "members in name order: {names:?}");
        assert!(json.get("set").is_none(), "{json}");

        let third = DistributedDoubleBarrier::new(&members[2], &path, 3).unwrap();
        assert!(third.enter_timeout(EVENT).await.unwrap());
        let mut entered = Vec::new();
        for task in entering {
            let (result, barrier) = within(EVENT, "the members entering", task).await.unwrap();
            assert!(result.unwrap());
            entered.push(barrier);
        }
        let json = zkr(&connect, &["barrier", &path, "--json"]).await.json();
        assert_eq!((json["ready"].as_bool(), json["member_count"].as_u64()), (Some(true), Some(3)));
        assert!(json["members"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == third.member_path().rsplit('/').next().unwrap()));
        let out = zkr(&connect, &["barrier", &path]).await;
        let lines = out.table();
        assert!(lines[2].starts_with("READY    yes"), "{lines:?}");
        assert_eq!(lines[3], "MEMBERS  3");
        assert_eq!(lines[5].split_whitespace().collect::<Vec<_>>(), ["SESSION", "AGE", "MEMBER"]);
        assert_eq!(lines.len(), 9, "{lines:?}");

        // Children of another recipe are no barrier.
        let lock = unique_path("zkr-barrier", "lock");
        fw.create(&format!("{lock}/_c_a-lock-0000000001")).await.unwrap();
        let run = zkr(&connect, &["barrier", &lock]).await;
        assert_eq!(run.code, 6, "{run:?}");
        for member in &members {
            member.close().await;
        }
        fw.close().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn queue_shows_items_in_order_with_their_kind_count_and_oldest() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;

        let path = unique_path("zkr-queue", "distributed");
        let queue = DistributedQueue::new(&fw, &path).unwrap();
        let first = queue.put(b"first").await.unwrap();
        let multi = queue.put_multi(&[&b"a"[..], &b""[..], &[0xffu8, 0x00][..]]).await.unwrap();
        // A node in the queue's name that is not Curator's framing, and one that is not an item.
        fw.create(&format!("{path}/queue-9999999999")).data(b"junk").await.unwrap();
        fw.create(&format!("{path}/notes")).await.unwrap();
        let json = zkr(&connect, &["queue", &path, "--json"]).await.json();
        assert_eq!(json["recipe"], "distributed-queue");
        assert_eq!((json["count"].as_u64(), json["items"].as_u64()), (Some(3), Some(4)));
        let first_name = first.rsplit('/').next().unwrap();
        assert_eq!(json["next"], first_name);
        assert_eq!(json["oldest"], first_name);
        let nodes = &json["nodes"];
        assert_eq!(strings(nodes, "kind"), ["foreign", "framed", "framed", "corrupt"]);
        assert_eq!(strings(nodes, "name")[1..], [first_name, multi.rsplit('/').next().unwrap(), "queue-9999999999"]);
        assert_eq!(nodes[1]["payloads"], serde_json::json!([{ "data": "first", "data_format": "text" }]));
        assert_eq!(
            nodes[2]["payloads"],
            serde_json::json!([
                { "data": "a", "data_format": "text" },
                { "data": "", "data_format": "text" },
                { "data": "ff00", "data_format": "hex" }
            ])
        );
        assert!(nodes[3]["error"].as_str().unwrap().contains("Curator's item framing"), "{json}");
        assert_eq!(nodes[3]["raw"], serde_json::json!({ "data": "junk", "data_format": "text" }));
        assert_eq!(nodes[3]["payloads"], serde_json::json!([]));
        assert_eq!(nodes[0]["payloads"], serde_json::json!([]));
        assert_eq!(nodes[1]["sequence"], 0);
        assert_eq!(nodes[1]["position"], 2);
        let (_, stat) = fw.get_data(&first).await.unwrap();
        assert_eq!(nodes[1]["ctime_ms"], stat.ctime);
        let out = zkr(&connect, &["queue", &path]).await;
        let lines = out.table();
        assert!(
            lines[1].starts_with(&format!("3 nodes, 4 items; next {first_name}; oldest {first_name} (")),
            "{lines:?}"
        );
        assert_eq!(
            lines[3].split_whitespace().collect::<Vec<_>>(),
            ["#", "KIND", "ITEMS", "SEQ", "AGE", "NODE", "DATA"]
        );
        let cells = |line: &str| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(cells(lines[4])[..4], ["1", "foreign", "-", "-"], "{lines:?}");
        let second = cells(lines[5]);
        assert_eq!([&second[..4], &second[5..]].concat(), ["2", "framed", "1", "0", first_name, "first"], "{lines:?}");
        assert!(lines[6].ends_with("a | \"\" | 0xff00"), "{lines:?}");
        assert_eq!(cells(lines[7])[..4], ["4", "corrupt", "-", "9999999999"], "{lines:?}");
        assert!(lines[7].ends_with("junk"), "{lines:?}");

        // What a consumer takes leaves zkr's view, and the next is the one after it.
        assert_eq!(queue.take().await.unwrap(), [b"first".to_vec()]);
        let json = zkr(&connect, &["queue", &path, "--json"]).await.json();
        assert_eq!((json["count"].as_u64(), json["next"].as_str()), (Some(2), multi.rsplit('/').next()));

        let path = unique_path("zkr-queue", "simple");
        let simple = SimpleDistributedQueue::new(&fw, &path).unwrap();
        let a = simple.offer(b"job-1").await.unwrap();
        simple.offer(b"job-2").await.unwrap();
        let json = zkr(&connect, &["queue", &path, "--json"]).await.json();
        assert_eq!(json["recipe"], "simple-queue");
        assert_eq!((json["count"].as_u64(), json["items"].as_u64()), (Some(2), Some(2)));
        assert_eq!(strings(&json["nodes"], "kind"), ["simple", "simple"]);
        assert_eq!(json["nodes"][0]["payloads"][0]["data"], "job-1");
        assert_eq!(json["next"], a.rsplit('/').next().unwrap());

        let empty = unique_path("zkr-queue", "empty");
        fw.create(&empty).await.unwrap();
        let json = zkr(&connect, &["queue", &empty, "--json"]).await.json();
        assert_eq!(
            (json["recipe"].as_str(), json["count"].as_u64(), json["next"].is_null()),
            (Some("empty"), Some(0), true)
        );
        let lock = unique_path("zkr-queue", "lock");
        fw.create(&format!("{lock}/_c_a-lock-0000000001")).await.unwrap();
        let run = zkr(&connect, &["queue", &lock]).await;
        assert_eq!(run.code, 6, "{run:?}");
        assert!(run.stderr.contains("not a queue"), "{run:?}");
        assert_eq!(zkr(&connect, &["queue", &unique_path("zkr-queue", "missing")]).await.code, 4);
        fw.close().await;
    })
    .await;
}

/// A counter, a barrier and a queue that Curator 5.4 made, read by zkr.
#[tokio::test(flavor = "multi_thread")]
async fn curators_counter_barrier_and_queue() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut peer) = CuratorPeer::started(&connect, SESSION).await else { return };
        let limit = Duration::from_secs(30);
        let count = unique_path("zkr-curator", "count");
        peer.value_command(&format!("count_set V1 {count} 12"), limit).await.unwrap();
        let json = zkr(&connect, &["counter", &count, "--json"]).await.json();
        assert_eq!((json["value"].as_i64(), json["bytes"].as_u64()), (Some(12), Some(4)));
        assert_eq!(json["layouts"][0], "shared-count");

        let long = unique_path("zkr-curator", "long");
        peer.value_command(&format!("atomic_incr V2 {long} 5"), limit).await.unwrap();
        let json = zkr(&connect, &["counter", &long, "--json"]).await.json();
        assert_eq!((json["value"].as_i64(), json["bytes"].as_u64()), (Some(5), Some(8)));

        let barrier = unique_path("zkr-curator", "barrier");
        peer.value_command(&format!("barrier_set V3 {barrier}"), limit).await.unwrap();
        let json = zkr(&connect, &["barrier", &barrier, "--json"]).await.json();
        assert_eq!((json["kind"].as_str(), json["set"].as_bool()), (Some("barrier"), Some(true)));
        // Curator writes the setter's address as the barrier's data.
        assert_eq!(json["data_format"], "text");

        let queue = unique_path("zkr-curator", "queue");
        peer.value_command(&format!("dqueue_put V4 {queue} one"), limit).await.unwrap();
        peer.value_command(&format!("dqueue_put V4 {queue} two three"), limit).await.unwrap();
        let json = zkr(&connect, &["queue", &queue, "--json"]).await.json();
        assert_eq!((json["count"].as_u64(), json["items"].as_u64()), (Some(2), Some(3)));
        assert_eq!(strings(&json["nodes"], "kind"), ["framed", "framed"]);
        let payloads: Vec<Vec<&str>> =
            json["nodes"].as_array().unwrap().iter().map(|n| strings(&n["payloads"], "data")).collect();
        assert_eq!(payloads, [vec!["one"], vec!["two", "three"]]);
        peer.quit().await.unwrap();
    })
    .await;
}

/// `zkr get`: gzip as this library's and Curator 5.4's `compressed()` write it, shown
/// decompressed and said to be gzip, JSON indented in the table with its tokens as written;
/// text, damaged gzip and a missing node.
#[tokio::test(flavor = "multi_thread")]
async fn get_shows_gzip_decompressed_and_json_indented() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        // What a compressed ModelSpec stores for a record (Jackson's notation for 1.0E7).
        let json = r#"{"id":42,"item":"tea","price":1.0E7,"tags":["a"]}"#;
        let zipped = unique_path("zkr-get", "gzip");
        fw.create(&zipped).compressed().data(json.as_bytes()).await.unwrap();
        let stored = fw.get_data(&zipped).await.unwrap().0;
        assert_eq!(stored[..2], [0x1f, 0x8b]);
        let report = zkr(&connect, &["get", &zipped, "--json"]).await.json();
        assert_eq!((report["compression"].as_str(), report["data_format"].as_str()), (Some("gzip"), Some("json")));
        assert_eq!(report["data"], json);
        assert_eq!(
            (report["bytes"].as_u64(), report["stored_bytes"].as_u64()),
            (Some(json.len() as u64), Some(stored.len() as u64))
        );
        assert_eq!((report["version"].as_i64(), report["num_children"].as_i64()), (Some(0), Some(0)));
        let out = zkr(&connect, &["get", &zipped]).await;
        let lines = out.table();
        assert_eq!(
            lines[0],
            format!("{zipped}: JSON, gzip-compressed, {} bytes ({} stored)", json.len(), stored.len())
        );
        assert_eq!(lines[2], "VERSION   0");
        let data = [
            "{",
            "  \"id\": 42,",
            "  \"item\": \"tea\",",
            "  \"price\": 1.0E7,",
            "  \"tags\": [",
            "    \"a\"",
            "  ]",
            "}",
        ];
        assert_eq!(lines[6..], data, "{}", out.stdout);

        let text = unique_path("zkr-get", "text");
        fw.create(&text).data(b"hello").await.unwrap();
        let report = zkr(&connect, &["get", &text, "--json"]).await.json();
        assert_eq!(
            (report["compression"].is_null(), report["data_format"].as_str(), report["data"].as_str()),
            (true, Some("text"), Some("hello"))
        );
        let damaged = unique_path("zkr-get", "damaged");
        fw.create(&damaged).data(&[0x1f, 0x8b, 0xff]).await.unwrap();
        let report = zkr(&connect, &["get", &damaged, "--json"]).await.json();
        assert_eq!((report["data_format"].as_str(), report["data"].as_str()), (Some("hex"), Some("1f8bff")));
        assert!(report["compression"].is_null() && report["gzip_error"].is_string(), "{report}");
        assert_eq!(zkr(&connect, &["get", &unique_path("zkr-get", "missing")]).await.code, 4);

        // Curator 5.4's GzipCompressionProvider (create().compressed()).
        if let Some(mut peer) = CuratorPeer::started(&connect, SESSION).await {
            let by_curator = unique_path("zkr-get", "curator");
            let hex: String = json.bytes().map(|b| format!("{b:02x}")).collect();
            let reply = peer.command(&format!("gzip_create {by_curator} {hex}")).await.unwrap();
            assert_eq!(reply, format!("gzip_create {by_curator} ok"));
            let report = zkr(&connect, &["get", &by_curator, "--json"]).await.json();
            assert_eq!((report["compression"].as_str(), report["data"].as_str()), (Some("gzip"), Some(json)));
            peer.quit().await.unwrap();
        }
        fw.close().await;
    })
    .await;
}

/// A reader that goes before zkr is done writing (`zkr get <path> | head -c 10`) ends zkr as it
/// ends any Unix tool (SIGPIPE), not with a panic.
#[tokio::test(flavor = "multi_thread")]
async fn a_reader_that_goes_ends_zkr_quietly() {
    use std::os::unix::process::ExitStatusExt;
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let path = unique_path("zkr-get", "pipe");
        fw.create(&path).data(&vec![b'x'; 500_000]).await.unwrap();
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_zkr"))
            .args(["--connect", &connect, "get", &path])
            .env_remove("ZK_CONNECT")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("running zkr");
        // The reader goes at once.
        drop(child.stdout.take());
        let output = within(EVENT, "zkr to end", child.wait_with_output()).await.unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_eq!(output.status.signal(), Some(13), "ended by SIGPIPE: {:?} {stderr}", output.status);
        fw.delete(&path).await.unwrap();
        fw.close().await;
    })
    .await;
}
