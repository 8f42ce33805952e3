//! How a `SharedValue`'s copy follows its node: a persistent watch, no read for the value's
//! own writes (requests counted by a proxy), a read for every other writer's change (the
//! copy ends on the server's value even when another session writes right behind an own
//! write, and when sessions contend), and one-shot watches on a server without persistent
//! ones.

use crate::common;

use common::fixtures::*;
use common::timing::{COUNTING_SESSION as SESSION, LIMIT};
use zk_recipes::testing::{CountingProxy, RequestCounts};
use zk_recipes::{Framework, SharedValue, VersionedValue};

/// The requests by kind, without pings, round trips and the server's events.
fn requests(counts: &RequestCounts) -> Vec<(&'static str, u64)> {
    counts.iter().filter(|(kind, _)| !matches!(*kind, "ping" | "round-trip" | "watch-event")).collect()
}

async fn started(fw: &Framework, path: &str) -> SharedValue {
    let value = SharedValue::new(fw, path, b"0".to_vec()).unwrap();
    value.start().await.unwrap();
    value
}

/// Waits until `value`'s copy holds `expected`.
async fn copy_becomes(value: &SharedValue, expected: &[u8]) {
    let mut copy = value.watch();
    let found = within(LIMIT, "the copy to hold the server's value", copy.wait_for(|v| v.value() == expected)).await;
    found.expect("the value's copy is open");
}

/// `try_set(seen, seen + 1)` until it returns true, on decimal text.
async fn increment(value: &SharedValue) -> u64 {
    loop {
        let seen: VersionedValue<Vec<u8>> = value.versioned_value();
        let n: u64 = std::str::from_utf8(seen.value()).unwrap().parse().unwrap();
        if value.try_set(&seen, (n + 1).to_string().as_bytes()).await.unwrap() {
            return n + 1;
        }
    }
}

#[tokio::test]
async fn own_writes_cost_no_read() {
    init_tracing();
    bounded(LIMIT, async {
        let server = shared_connect().await;
        let proxy = CountingProxy::start(&server).await.expect("counting proxy");
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let path = unique_path("shared-follow", "own");
        let value = started(&fw, &path).await;
        let before = proxy.counts();
        const N: u64 = 50;
        for i in 0..N {
            assert_eq!(increment(&value).await, i + 1);
        }
        value.set(b"done").await.unwrap();
        fw.exists("/").await.unwrap();
        let counts = proxy.counts().since(&before);
        // One write each; no read (a one-shot watch would be armed again by a read per write).
        assert_eq!(requests(&counts), [("exists", 1), ("setData", N + 1)], "{counts:?}");
        assert_eq!(value.value(), b"done");
        value.close();
        fw.close().await;
    })
    .await;
}

/// Another session writes as soon as an own write has answered, so its event often reaches
/// the client before the own write's task has looked at the watch: it must still be read.
#[tokio::test]
async fn a_write_right_behind_an_own_write_reaches_the_copy() {
    init_tracing();
    bounded(LIMIT, async {
        let server = shared_connect().await;
        let fw = plain_framework(&server, SESSION).await;
        let other = plain_framework(&server, SESSION).await;
        let path = unique_path("shared-follow", "behind");
        let value = started(&fw, &path).await;
        for i in 0..50 {
            let seen = value.versioned_value();
            let (own, theirs) = (format!("own-{i}"), format!("theirs-{i}"));
            let (written, set) = tokio::join!(value.try_set(&seen, own.as_bytes()), async {
                // Sent on the other session once the own write is on its way.
                tokio::task::yield_now().await;
                other.set_data(&path, theirs.as_bytes()).await
            });
            written.unwrap();
            set.unwrap();
            let (server_value, _) = other.get_data(&path).await.unwrap();
            copy_becomes(&value, &server_value).await;
        }
        value.close();
        fw.close().await;
        other.close().await;
    })
    .await;
}

#[tokio::test]
async fn copies_of_contending_sessions_end_on_the_final_value() {
    init_tracing();
    const N: u64 = 40;
    const SESSIONS: usize = 3;
    bounded(LIMIT, async {
        let server = shared_connect().await;
        let path = unique_path("shared-follow", "contending");
        let mut handles = Vec::new();
        for _ in 0..SESSIONS {
            let fw = plain_framework(&server, SESSION).await;
            let value = started(&fw, &path).await;
            handles.push((fw, value));
        }
        let mut tasks = Vec::new();
        for (fw, value) in handles {
            tasks.push(tokio::spawn(async move {
                for _ in 0..N {
                    increment(&value).await;
                }
                (fw, value)
            }));
        }
        let mut handles = Vec::new();
        for task in tasks {
            handles.push(task.await.unwrap());
        }
        let total = (N * SESSIONS as u64).to_string();
        for (fw, value) in &handles {
            copy_becomes(value, total.as_bytes()).await;
            value.close();
            fw.close().await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_server_without_persistent_watches_is_followed_with_one_shot_watches() {
    init_tracing();
    bounded(LIMIT, async {
        let server = server_without_persistent_watches().await;
        let fw = plain_framework(&server.connect_string(), SESSION).await;
        let other = plain_framework(&server.connect_string(), SESSION).await;
        let path = unique_path("shared-follow", "one-shot");
        let value = started(&fw, &path).await;
        for i in 0..5 {
            assert_eq!(increment(&value).await, 1);
            let theirs = format!("{}", 100 + i);
            other.set_data(&path, theirs.as_bytes()).await.unwrap();
            copy_becomes(&value, theirs.as_bytes()).await;
            value.set(b"0").await.unwrap();
        }
        value.close();
        fw.close().await;
        other.close().await;
    })
    .await;
}
