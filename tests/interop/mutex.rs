//! Interop with real Apache Curator 5.4 (`InterProcessMutex` in a JVM, driven through
//! `tests/common/curator.rs`): Rust and Java contenders on one path exclude each other in both
//! directions, see each other's nodes as participants, and take turns in one queue.
//!
//! Skipped (with a message) when java/javac/Curator are missing, unless `ZKR_REQUIRE_CURATOR=1`.

use crate::common;

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::curator::{java_participants, peer};
use common::fixtures::{
    bounded, children_count_becomes, framework, holders_in, is_curator_lock_name, node_name, shared_connect,
    unique_path, within,
};
use common::timing::{INTEROP_EVENT as EVENT, INTEROP_SESSION as SESSION, SLOW_LIMIT as LIMIT};
use zk_recipes::{Framework, InterProcessMutex};

fn path(name: &str) -> String {
    unique_path("mutex-interop", name)
}

/// Java holds, Rust waits; Rust holds, Java waits. Each side sees the other's node in its
/// participant list (the same list, in the same order), and our node names are Curator's.
#[tokio::test]
async fn rust_and_curator_exclude_each_other_both_ways() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = peer(&connect).await else { return };
        let fw = framework(&connect, SESSION).await;
        let path = path("both-ways");
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        assert_eq!(java.command(&format!("mutex J {path}")).await.unwrap(), "ok");

        // Curator holds; we cannot get it, then wait for it.
        assert_eq!(java.command("acquire J").await.unwrap(), "acquired J");
        let java_node = java.lock_paths("J").await.unwrap().remove(0);
        assert!(mutex.try_acquire().await.unwrap().is_none(), "try_acquire while Curator holds");
        assert!(mutex.acquire_timeout(Duration::from_millis(300)).await.unwrap().is_none());
        // Read on our session, so after our timed-out node's delete: only Curator's node.
        assert_eq!(mutex.participant_nodes().await.unwrap(), vec![java_node.clone()]);
        let waiting = {
            let mutex = mutex.clone();
            tokio::spawn(async move { mutex.acquire().await.unwrap() })
        };
        let theirs = java_participants(&mut java, "J", 2).await;
        assert_eq!(theirs[0], java_node, "Curator's holder first");
        assert_eq!(mutex.participant_nodes().await.unwrap(), theirs, "both sides list the same queue");
        assert!(is_curator_lock_name(node_name(&theirs[1])), "our node as Curator sees it: {}", theirs[1]);
        assert!(!mutex.is_acquired_in_this_process());
        assert_eq!(java.command("release J").await.unwrap(), "released J");
        let guard = within(EVENT, "acquiring after Curator released", waiting).await.unwrap();
        assert_eq!(guard.lock_path(), theirs[1]);

        // We hold; Curator cannot get it, then waits for it.
        assert_eq!(java.command("acquire J 300").await.unwrap(), "timeout J");
        assert_eq!(java.command("is_acquired J").await.unwrap(), "is_acquired J false");
        java.send("acquire J").await.unwrap();
        children_count_becomes(&fw, &path, 2, EVENT).await;
        let ours = mutex.participant_nodes().await.unwrap();
        assert_eq!(ours[0], guard.lock_path());
        assert_eq!(java.participants("J").await.unwrap(), ours);
        assert!(java.take_buffered("acquired J").is_none(), "Curator acquired while we hold");
        guard.release().await.unwrap();
        assert_eq!(java.wait_for("acquired J", EVENT).await.unwrap(), "acquired J");
        assert_eq!(java.lock_paths("J").await.unwrap(), vec![ours[1].clone()]);
        assert_eq!(java.command("release J").await.unwrap(), "released J");
        java.quit().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// One queue, mixed: Java J holds, then Rust R1, Java K, Rust R2 queue up. Releases hand the
/// lock down the queue in exactly that order, across the language boundary each time.
#[tokio::test]
async fn mixed_queue_hands_over_in_order() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = peer(&connect).await else { return };
        let fw1 = framework(&connect, SESSION).await;
        let fw2 = framework(&connect, SESSION).await;
        let path = path("mixed-queue");
        assert_eq!(java.command(&format!("mutex J {path}")).await.unwrap(), "ok");
        assert_eq!(java.command(&format!("mutex K {path}")).await.unwrap(), "ok");

        let (acquired_tx, mut acquired) = tokio::sync::mpsc::unbounded_channel();
        let rust_waiter = |fw: &Framework, name: &'static str| {
            let mutex = InterProcessMutex::new(fw, &path).unwrap();
            let acquired_tx = acquired_tx.clone();
            let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
            let task = tokio::spawn(async move {
                let guard = mutex.acquire().await.unwrap();
                acquired_tx.send((name, guard.lock_path().to_owned())).unwrap();
                release_rx.await.unwrap();
                guard.release().await.unwrap();
            });
            (task, release_tx)
        };

        assert_eq!(java.command("acquire J").await.unwrap(), "acquired J");
        let (r1, release_r1) = rust_waiter(&fw1, "R1");
        java_participants(&mut java, "J", 2).await;
        java.send("acquire K").await.unwrap();
        java_participants(&mut java, "J", 3).await;
        let (r2, release_r2) = rust_waiter(&fw2, "R2");
        let queue = java_participants(&mut java, "J", 4).await;
        assert_eq!(InterProcessMutex::new(&fw1, &path).unwrap().participant_nodes().await.unwrap(), queue);

        assert_eq!(java.command("release J").await.unwrap(), "released J");
        let (who, node) = within(EVENT, "R1 acquiring after J", acquired.recv()).await.unwrap();
        assert_eq!((who, node.as_str()), ("R1", queue[1].as_str()));
        assert!(java.take_buffered("acquired K").is_none());

        release_r1.send(()).unwrap();
        assert_eq!(java.wait_for("acquired K", EVENT).await.unwrap(), "acquired K");
        assert_eq!(java.lock_paths("K").await.unwrap(), vec![queue[2].clone()]);
        assert!(acquired.try_recv().is_err(), "R2 acquired while K holds");

        assert_eq!(java.command("release K").await.unwrap(), "released K");
        let (who, node) = within(EVENT, "R2 acquiring after K", acquired.recv()).await.unwrap();
        assert_eq!((who, node.as_str()), ("R2", queue[3].as_str()));
        release_r2.send(()).unwrap();
        r1.await.unwrap();
        r2.await.unwrap();
        java.quit().await.unwrap();
        fw1.close().await;
        fw2.close().await;
    })
    .await;
}

/// Two Curator loops and two Rust loops (two sessions) on one lock, each writing whole
/// `enter ...`/`exit ...` lines to one log opened with O_APPEND: the log must show strictly
/// alternating enter/exit pairs of the same holder, both languages must complete all their
/// rounds, and the lock must pass from Rust to Java and from Java to Rust.
#[tokio::test]
async fn loops_alternate_in_a_shared_log() {
    bounded(LIMIT, async {
        const ROUNDS: usize = 20;
        const HOLD: Duration = Duration::from_millis(2);
        let connect = shared_connect().await;
        let Some(mut java) = peer(&connect).await else { return };
        let path = path("log");
        let log = std::env::temp_dir().join(format!(
            "zkr-mutex-interop-{}-{}.log",
            std::process::id(),
            SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
        ));
        let log_arg = log.display().to_string();

        for id in ["L1", "L2"] {
            assert_eq!(java.command(&format!("mutex {id} {path}")).await.unwrap(), "ok");
        }
        let mut rust = Vec::new();
        let mut frameworks = Vec::new();
        for id in ["R1", "R2"] {
            let fw = framework(&connect, SESSION).await;
            let mutex = InterProcessMutex::new(&fw, &path).unwrap();
            let log = log.clone();
            rust.push(tokio::spawn(async move {
                let append = |line: String| {
                    let mut file = std::fs::OpenOptions::new().append(true).create(true).open(&log).unwrap();
                    file.write_all(line.as_bytes()).unwrap(); // one write(2) per whole line
                };
                for _ in 0..ROUNDS {
                    let guard = mutex.acquire().await.unwrap();
                    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
                    append(format!("enter rust:{id} {nanos}\n"));
                    tokio::time::sleep(HOLD).await;
                    append(format!("exit rust:{id}\n"));
                    guard.release().await.unwrap();
                }
            }));
            frameworks.push(fw);
        }
        for id in ["L1", "L2"] {
            let reply = java.command(&format!("loop {id} {ROUNDS} {log_arg} {}", HOLD.as_millis())).await.unwrap();
            assert_eq!(reply, format!("loop-started {id}"));
        }
        for task in rust {
            within(EVENT, "the Rust loops", task).await.unwrap();
        }
        for id in ["L1", "L2"] {
            let done = java.wait_for(&format!("loop-done {id}"), EVENT).await.unwrap();
            assert_eq!(done, format!("loop-done {id} {ROUNDS}"));
        }

        let holders = holders_in(&log);
        assert_eq!(holders.len(), 4 * ROUNDS, "{holders:?}");
        for who in ["java:L1", "java:L2", "rust:R1", "rust:R2"] {
            assert_eq!(holders.iter().filter(|h| *h == who).count(), ROUNDS, "{who} rounds");
        }
        let handoffs = |from: &str, to: &str| {
            holders.windows(2).filter(|w| w[0].starts_with(from) && w[1].starts_with(to)).count()
        };
        assert!(handoffs("rust:", "java:") > 0, "the lock never passed from Rust to Java: {holders:?}");
        assert!(handoffs("java:", "rust:") > 0, "the lock never passed from Java to Rust: {holders:?}");
        java.quit().await.unwrap();
        for fw in frameworks {
            fw.close().await;
        }
    })
    .await;
}
