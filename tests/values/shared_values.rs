//! `SharedCount` and `SharedValue` against real servers: Curator's node layout (4 big-endian
//! bytes, raw bytes), seeds that never overwrite, compare-and-set from two sessions adding up
//! exactly, listeners and streams that end on the node's current value after a connection cut
//! and after a new session, a node deleted and made again, and bad node contents refused typed.

use crate::common;

use std::sync::{Arc, Mutex};

use common::fixtures::*;
use common::timing::{EVENT, FAULT_SESSION, LIMIT, SESSION};
use futures::StreamExt;
use zk_recipes::{Error, SharedCount, SharedValue};

/// Increments `count` by one with a `try_set` loop; returns how many attempts it took.
async fn increment(count: &SharedCount) -> u32 {
    let mut attempts = 0;
    loop {
        attempts += 1;
        let seen = count.versioned_count().expect("a valid count");
        if count.try_set(&seen, seen.value() + 1).await.expect("try_set") {
            return attempts;
        }
    }
}

/// Waits until `value`'s local copy is `expected`.
async fn local_copy_becomes(value: &SharedValue, expected: &[u8]) {
    let mut rx = value.watch();
    within(EVENT, "the local copy catching up", rx.wait_for(|v| v.value() == expected)).await.expect("value open");
}

#[tokio::test]
async fn the_count_is_four_big_endian_bytes_and_the_seed_never_overwrites() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = format!("{}/nested/count", unique_path("shared", "layout"));
        let count = SharedCount::new(&fw, &path, 258).unwrap();
        assert_eq!(count.count().unwrap(), 258, "the seed before start");
        count.start().await.unwrap();
        let (data, stat) = fw.get_data(&path).await.unwrap();
        assert_eq!(data, [0, 0, 1, 2]);
        assert_eq!(stat.ephemeral_owner, 0, "persistent");
        let versioned = count.versioned_count().unwrap();
        assert_eq!((*versioned.value(), versioned.version(), versioned.zxid()), (258, 0, stat.mzxid));

        // A second count with another seed reads the existing value.
        let other = SharedCount::new(&fw, &path, 7).unwrap();
        other.start().await.unwrap();
        assert_eq!(other.count().unwrap(), 258);

        count.set(-2).await.unwrap();
        assert_eq!(fw.get_data(&path).await.unwrap().0, [0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(count.count().unwrap(), -2, "set updates the local copy at once");

        // A stale versioned value is refused without a write, and the copy is current after.
        assert!(!other.try_set(&versioned, 5).await.unwrap(), "a stale version");
        local_copy_becomes_count(&other, -2).await;
        let current = other.versioned_count().unwrap();
        assert!(other.try_set(&current, 5).await.unwrap());
        assert_eq!(fw.get_data(&path).await.unwrap().0, [0, 0, 0, 5]);
        fw.delete(&path).await.unwrap();
        fw.close().await;
    })
    .await;
}

async fn local_copy_becomes_count(count: &SharedCount, expected: i32) {
    let mut changes = count.changes();
    if count.count().ok() == Some(expected) {
        return;
    }
    within(EVENT, "the count catching up", async {
        while let Some(next) = changes.next().await {
            if next.map(|v| *v.value()).ok() == Some(expected) {
                return;
            }
        }
        panic!("the stream ended");
    })
    .await;
}

#[tokio::test]
async fn two_sessions_incrementing_with_try_set_add_up_exactly() {
    init_tracing();
    const N: i32 = 40;
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("shared", "contended");
        let mut tasks = Vec::new();
        for _ in 0..2 {
            let (connect, path) = (connect.clone(), path.clone());
            tasks.push(tokio::spawn(async move {
                let fw = plain_framework(&connect, SESSION).await;
                let count = SharedCount::new(&fw, &path, 0).unwrap();
                count.start().await.unwrap();
                let mut attempts = 0;
                for _ in 0..N {
                    attempts += increment(&count).await;
                }
                count.close();
                fw.close().await;
                attempts
            }));
        }
        let mut attempts = 0;
        for task in tasks {
            attempts += task.await.unwrap();
        }
        let fw = plain_framework(&connect, SESSION).await;
        let (data, stat) = fw.get_data(&path).await.unwrap();
        assert_eq!(data, (2 * N).to_be_bytes(), "exactly 2N after {attempts} attempts");
        assert_eq!(stat.version, 2 * N, "one write per increment");
        fw.delete(&path).await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_node_holding_three_or_nine_bytes_is_corrupt_data() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        for bad in [&[1u8, 2, 3][..], &[0, 0, 0, 1, 0, 0, 0, 0, 0]] {
            let path = unique_path("shared", "corrupt");
            fw.create(&path).data(bad).await.unwrap();
            let count = SharedCount::new(&fw, &path, 1).unwrap();
            let started = count.start().await;
            assert!(matches!(&started, Err(Error::CorruptData { path: p, .. }) if *p == path), "{started:?}");
            assert!(matches!(count.count(), Err(Error::CorruptData { .. })));
            assert!(matches!(count.versioned_count(), Err(Error::CorruptData { .. })));
            assert_eq!(fw.get_data(&path).await.unwrap().0, bad, "nothing written over it");
            // It is followed anyway: a valid count written later is read.
            let mut changes = count.changes();
            fw.set_data(&path, &9i32.to_be_bytes()).await.unwrap();
            let next = within(EVENT, "the repaired count", changes.next()).await.expect("stream open");
            assert_eq!(*next.unwrap().value(), 9);
            fw.delete(&path).await.unwrap();
        }
        fw.close().await;
    })
    .await;
}

/// Writes are refused before `start()` and after `close()`, as Curator's `checkState(STARTED)`
/// refuses them: before, a write before the start was sent (and failed with `NoNode`, or
/// wrote a node the value did not follow), and one after the close was applied.
#[tokio::test]
async fn writes_before_start_or_after_close_are_refused() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("shared", "unread");
        let value = SharedValue::new(&fw, &path, b"seed".to_vec()).unwrap();
        let before = value.versioned_value();
        assert_eq!((before.version(), before.zxid()), (-1, -1));
        let refused = value.try_set(&before, b"x").await;
        assert!(matches!(refused, Err(Error::NotStarted)), "{refused:?}");
        assert!(matches!(value.set(b"x").await, Err(Error::NotStarted)));
        assert!(fw.exists(&path).await.unwrap().is_none(), "nothing written");
        value.start().await.unwrap();
        value.set(b"started").await.unwrap();
        value.close();
        assert!(matches!(value.set(b"closed").await, Err(Error::NotStarted)));
        let after = value.versioned_value();
        assert!(matches!(value.try_set(&after, b"closed").await, Err(Error::NotStarted)));
        assert_eq!(fw.get_data(&path).await.unwrap().0, b"started");
        fw.delete(&path).await.unwrap();
        assert!(matches!(SharedValue::new(&fw, "/", vec![]), Err(Error::InvalidPath { .. })));
        assert!(matches!(SharedCount::new(&fw, "relative", 0), Err(Error::InvalidPath { .. })));
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn listeners_and_streams_see_other_sessions_writes_in_order() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let writer = plain_framework(&connect, SESSION).await;
        let path = unique_path("shared", "listen");
        let value = SharedValue::new(&fw, &path, b"a".to_vec()).unwrap();
        value.start().await.unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let handle = value.add_listener(move |v| log.lock().unwrap().push(v.into_value())).unwrap();
        let mut changes = value.changes();
        for next in [&b"b"[..], b"c", b""] {
            writer.set_data(&path, next).await.unwrap();
            let got = within(EVENT, "the change", changes.next()).await.expect("stream open");
            assert_eq!(got.value(), next);
        }
        eventually(EVENT, "the listener's last value", || async {
            let seen = seen.lock().unwrap().clone();
            if seen.last().map(Vec::as_slice) == Some(&b""[..]) {
                Ok(())
            } else {
                Err(format!("{seen:?}"))
            }
        })
        .await;
        drop(handle);
        // Deleted and made again: still followed.
        writer.delete(&path).await.unwrap();
        writer.create(&path).data(b"again").await.unwrap();
        local_copy_becomes(&value, b"again").await;
        assert!(value.try_set(&value.versioned_value(), b"mine").await.unwrap());
        assert_eq!(writer.get_data(&path).await.unwrap().0, b"mine");
        drop(value);
        // Values not read yet come first; then the stream ends.
        within(EVENT, "the stream's end", async { while changes.next().await.is_some() {} }).await;
        writer.delete(&path).await.unwrap();
        writer.close().await;
        fw.close().await;
    })
    .await;
}

/// A write made while the connection is down, and one made while the session is being
/// expired, are both read once the framework is connected again: the copy never ends on a
/// stale value.
#[tokio::test]
async fn after_a_connection_cut_and_a_new_session_the_copy_is_current() {
    init_tracing();
    bounded(LIMIT, async {
        let faulty = FaultyServer::start().await;
        let fw = framework(&faulty.proxied(), FAULT_SESSION).await;
        let writer = plain_framework(&faulty.direct(), SESSION).await;
        let path = unique_path("shared", "reconnect");
        let value = SharedValue::new(&fw, &path, b"0".to_vec()).unwrap();
        value.start().await.unwrap();

        // The connection is cut; a write happens meanwhile; the connection comes back.
        let epoch = fw.snapshot().epoch;
        faulty.proxy.refuse_new(true);
        faulty.proxy.drop_connections();
        wait_for_state(&fw, EVENT, "suspended", |s| !s.state.is_connected()).await;
        writer.set_data(&path, b"1").await.unwrap();
        faulty.proxy.refuse_new(false);
        wait_connected(&fw, EVENT, epoch).await;
        local_copy_becomes(&value, b"1").await;

        // A new session: the old session's watch is gone with it.
        faulty.expire(&fw, EVENT).await;
        writer.set_data(&path, b"2").await.unwrap();
        local_copy_becomes(&value, b"2").await;
        let current = value.versioned_value();
        assert!(value.try_set(&current, b"3").await.unwrap());
        assert_eq!(writer.get_data(&path).await.unwrap().0, b"3");
        writer.close().await;
        fw.close().await;
    })
    .await;
}

/// Two Curator 5.4 processes and two Rust sessions increment one `SharedCount` N times each
/// with `try_set` loops: exactly 4N; and each side reads the other's count.
#[tokio::test]
async fn curator_and_rust_incrementing_one_shared_count_add_up_exactly() {
    use common::curator::CuratorPeer;
    use common::timing::INTEROP_SESSION;
    init_tracing();
    const N: i32 = 25;
    bounded(common::timing::SLOW_LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java_a) = CuratorPeer::started(&connect, INTEROP_SESSION).await else { return };
        let Some(mut java_b) = CuratorPeer::started(&connect, INTEROP_SESSION).await else { return };
        let path = unique_path("shared", "interop");
        java_a.send(&format!("count_incr A {path} {N}")).await.unwrap();
        java_b.send(&format!("count_incr B {path} {N}")).await.unwrap();
        let mut tasks = Vec::new();
        for _ in 0..2 {
            let (connect, path) = (connect.clone(), path.clone());
            tasks.push(tokio::spawn(async move {
                let fw = plain_framework(&connect, SESSION).await;
                let count = SharedCount::new(&fw, &path, 0).unwrap();
                count.start().await.unwrap();
                for _ in 0..N {
                    increment(&count).await;
                }
                count.close();
                fw.close().await;
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        java_a.value_reply("count_incr A", LIMIT).await.unwrap();
        java_b.value_reply("count_incr B", LIMIT).await.unwrap();
        let fw = plain_framework(&connect, SESSION).await;
        assert_eq!(fw.get_data(&path).await.unwrap().0, (4 * N).to_be_bytes());
        assert_eq!(java_a.value_command(&format!("count_get A {path}"), LIMIT).await.unwrap(), [(4 * N).to_string()]);
        // Curator's seed never overwrites ours either way.
        let count = SharedCount::new(&fw, &path, 1).unwrap();
        count.start().await.unwrap();
        count.set(-7).await.unwrap();
        assert_eq!(java_b.value_command(&format!("count_get B {path}"), LIMIT).await.unwrap(), ["-7"]);
        fw.delete(&path).await.unwrap();
        fw.close().await;
        java_a.quit().await.unwrap();
        java_b.quit().await.unwrap();
    })
    .await;
}

/// The connection breaks again and again while two sessions increment one `SharedCount` with
/// `try_set` loops: every increment reported applied is in the final count, none twice, and
/// the count exceeds them only by those reported as unknown.
#[tokio::test]
async fn try_set_increments_through_a_breaking_connection_are_applied_once_or_reported_unknown() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;
    init_tracing();
    bounded(LIMIT, async {
        const N: usize = 40;
        let faulty = Arc::new(FaultyServer::start().await);
        let path = unique_path("shared", "faults");
        // Both sessions are open and their counts started before the connection starts
        // breaking (a start that keeps being reset only times out).
        let mut counts = Vec::new();
        for _ in 0..2 {
            let fw = framework(&faulty.proxied(), SESSION).await;
            let count = SharedCount::new(&fw, &path, 0).unwrap();
            count.start().await.unwrap();
            counts.push((fw, count));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let breaker = {
            let (stop, faulty) = (stop.clone(), faulty.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(40)).await;
                    faulty.proxy.reset_connections();
                }
            })
        };
        let mut tasks = Vec::new();
        for (fw, count) in counts {
            tasks.push(tokio::spawn(async move {
                let (mut applied, mut unknown) = (0u64, 0u64);
                for _ in 0..N {
                    loop {
                        let seen = count.versioned_count().unwrap();
                        match count.try_set(&seen, seen.value() + 1).await {
                            Ok(true) => applied += 1,
                            Ok(false) => continue,
                            // Not retried: it may have been applied.
                            Err(Error::OutcomeUnknown { .. }) => unknown += 1,
                            Err(e) => panic!("try_set: {e}"),
                        }
                        break;
                    }
                }
                count.close();
                fw.close().await;
                (applied, unknown)
            }));
        }
        let (mut applied, mut unknown) = (0, 0);
        for task in tasks {
            let (a, u) = task.await.unwrap();
            applied += a;
            unknown += u;
        }
        stop.store(true, Ordering::Relaxed);
        breaker.await.unwrap();
        let fw = plain_framework(&faulty.direct(), SESSION).await;
        let total = i32::from_be_bytes(fw.get_data(&path).await.unwrap().0.try_into().unwrap()) as u64;
        eprintln!("applied {applied}, unknown {unknown}, final {total}");
        assert_eq!(applied + unknown, 2 * N as u64);
        assert!(total >= applied && total <= applied + unknown, "applied {applied}, unknown {unknown}, final {total}");
        fw.close().await;
    })
    .await;
}

/// A watched read of the value's node set before the value's own persistent watch, dropped
/// unfired: the client's `RemoveWatches` takes the persistent watch's data events with it on
/// ZooKeeper 3.6-3.8, and the value adds its watch again (the framework's watch table asks
/// for it) instead of keeping a copy that no longer changes.
#[tokio::test]
async fn a_one_shot_watch_dropped_beside_the_values_watch_does_not_silence_it() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let writer = plain_framework(&connect, SESSION).await;
        let path = unique_path("shared", "silenced");
        writer.create(&path).data(b"0").await.unwrap();
        let (_, _, one_shot) = fw.get_data(&path).watch().await.unwrap();
        let value = SharedValue::new(&fw, &path, b"seed".to_vec()).unwrap();
        value.start().await.unwrap();
        assert_eq!(value.value(), b"0");
        drop(one_shot);
        // A round trip after the RemoveWatches the drop sent.
        fw.exists(&path).await.unwrap();
        for next in [&b"1"[..], b"2"] {
            writer.set_data(&path, next).await.unwrap();
            local_copy_becomes(&value, next).await;
        }
        value.close();
        writer.delete(&path).await.unwrap();
        writer.close().await;
        fw.close().await;
    })
    .await;
}
