//! Interop with real Apache Curator 5.4 (`InterProcessReadWriteLock`, `makeRevocable` and
//! `Revoker` in a JVM, driven through `tests/common/curator.rs`): Rust and Java readers and
//! writers on one path respect each other (a shared log), list the same queue, and hand over in
//! queue order; a Rust downgrade and an imitated Curator 5.5+ downgrade keep queued writers of
//! both languages out, while a Curator 5.4 downgrade does not (CURATOR-621, documented); Rust's
//! `Revoker` reaches Curator's revocable holders and Curator's `Revoker` reaches ours.
//!
//! Skipped (with a message) when java/javac/Curator are missing, unless `ZKR_REQUIRE_CURATOR=1`.

use crate::common;

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::curator::{java_participants, peer};
use common::fixtures::{
    bounded, children_count_becomes, framework, framework_waiting, is_curator_node_name, node_name, sequence_of,
    shared_connect, unique_path, waits, within,
};
use common::timing::{INTEROP_EVENT as EVENT, INTEROP_SESSION as SESSION, SLOW_LIMIT as LIMIT};
use tokio::sync::oneshot;
use zk_recipes::testing::mirror_tasks_running;
use zk_recipes::zk::CreateMode;
use zk_recipes::{InterProcessMutex, InterProcessReadWriteLock, Revoker};

/// A wait that must *not* end: long enough for several round trips on loopback.
const QUIET: Duration = Duration::from_millis(500);

fn path(name: &str) -> String {
    unique_path("rw-interop", name)
}

/// A log file for the loops, removed by the test.
fn log_file(name: &str) -> std::path::PathBuf {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    std::env::temp_dir().join(format!("zkr-rw-interop-{name}-{}-{nanos}.log", std::process::id()))
}

/// What a shared log shows.
#[derive(Debug, Default)]
struct LogStats {
    rounds: HashMap<String, usize>,
    peak_readers: usize,
    /// Times readers of both languages held at once.
    mixed_readers: usize,
}

/// Replays `enter WHO ...`/`exit WHO` lines (WHO ends in `.read` or `.write`): a writer enters
/// only when nobody is inside, a reader only when no writer is; every exit matches an enter.
fn check_log(text: &str) -> LogStats {
    let mut inside: Vec<&str> = Vec::new();
    let mut stats = LogStats::default();
    for (i, line) in text.lines().enumerate() {
        let mut words = line.split_whitespace();
        let (kind, who) = (words.next(), words.next().unwrap_or_else(|| panic!("line {}: {line:?}", i + 1)));
        let writer = who.ends_with(".write");
        assert!(writer || who.ends_with(".read"), "line {}: {line:?}", i + 1);
        match kind {
            Some("enter") => {
                if writer {
                    assert!(inside.is_empty(), "line {}: writer {who} entered beside {inside:?}", i + 1);
                } else {
                    let writers: Vec<_> = inside.iter().filter(|w| w.ends_with(".write")).collect();
                    assert!(writers.is_empty(), "line {}: reader {who} entered beside {writers:?}", i + 1);
                }
                inside.push(who);
                *stats.rounds.entry(who.to_owned()).or_default() += 1;
                stats.peak_readers = stats.peak_readers.max(inside.iter().filter(|w| w.ends_with(".read")).count());
                let languages = |prefix: &str| inside.iter().any(|w| w.starts_with(prefix) && w.ends_with(".read"));
                if languages("java:") && languages("rust:") {
                    stats.mixed_readers += 1;
                }
            }
            Some("exit") => {
                let at = inside.iter().position(|w| *w == who);
                let at = at.unwrap_or_else(|| panic!("line {}: {who} exits without entering", i + 1));
                inside.remove(at);
            }
            _ => panic!("line {}: {line:?}", i + 1),
        }
    }
    assert!(inside.is_empty(), "still inside at the end: {inside:?}");
    stats
}

/// Two Curator loops and two Rust loops (two sessions) on one read-write lock, 80 % reads,
/// each writing whole `enter`/`exit` lines to one log opened with O_APPEND: writers are always
/// alone, readers never beside a writer, every round of both languages completes, and readers
/// of both languages do share the lock.
#[tokio::test]
async fn readers_and_writers_of_both_languages_share_one_log() {
    shared_log(false).await;
}

/// The same with the Rust sessions waiting on their mirror of the lock directory
/// (`WaitStrategy::Mirror`): Curator's readers and writers, with their per-waiter watches, and
/// ours, deciding from one recursive watch per session, still exclude each other.
#[tokio::test]
async fn readers_and_writers_of_both_languages_share_one_log_with_mirror_sessions() {
    shared_log(true).await;
}

/// Two Curator and two Rust sessions (each on its mirror when `mirror`) take the read or the
/// write half of one lock in turns, 20% writes, and log their entries and exits to one file.
async fn shared_log(mirror: bool) {
    bounded(LIMIT, async {
        const ROUNDS: usize = 40;
        const HOLD: Duration = Duration::from_millis(3);
        let connect = shared_connect().await;
        let Some(mut java) = peer(&connect).await else { return };
        let path = path("log");
        let log = log_file("log");
        let log_arg = log.display().to_string();
        for id in ["J1", "J2"] {
            assert_eq!(java.command(&format!("rwlock {id} {path}")).await.unwrap(), "ok");
        }
        let mut rust = Vec::new();
        let mut frameworks = Vec::new();
        let mirrored = Arc::new(AtomicBool::new(false));
        for (i, id) in ["R1", "R2"].into_iter().enumerate() {
            let fw = framework_waiting(&connect, SESSION, waits(mirror)).await;
            let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
            let log = log.clone();
            let (mirrored, path) = (mirrored.clone(), path.clone());
            rust.push(tokio::spawn(async move {
                let append = |line: String| {
                    let mut file = std::fs::OpenOptions::new().append(true).create(true).open(&log).unwrap();
                    file.write_all(line.as_bytes()).unwrap(); // one write(2) per whole line
                };
                let mut state: u64 = 0x2545_f491 + i as u64;
                for _ in 0..ROUNDS {
                    state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    let write = (state >> 33) % 100 < 20;
                    let who = format!("rust:{id}.{}", if write { "write" } else { "read" });
                    let (read_guard, write_guard) = if write {
                        (None, Some(lock.write_lock().acquire().await.unwrap()))
                    } else {
                        (Some(lock.read_lock().acquire().await.unwrap()), None)
                    };
                    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
                    append(format!("enter {who} {nanos}\n"));
                    tokio::time::sleep(HOLD).await;
                    append(format!("exit {who}\n"));
                    if let Some(guard) = read_guard {
                        guard.release().await.unwrap();
                    }
                    if let Some(guard) = write_guard {
                        guard.release().await.unwrap();
                    }
                }
                if mirror_tasks_running(&path) > 0 {
                    mirrored.store(true, Ordering::SeqCst);
                }
            }));
            frameworks.push(fw);
        }
        for (seed, id) in ["J1", "J2"].into_iter().enumerate() {
            let line = format!("rwloop {id} {ROUNDS} {log_arg} {} 20 {seed}", HOLD.as_millis());
            assert_eq!(java.command(&line).await.unwrap(), format!("loop-started {id}"));
        }
        for task in rust {
            within(EVENT, "the Rust loops", task).await.unwrap();
        }
        assert_eq!(mirrored.load(Ordering::SeqCst), mirror, "the Rust sessions' mirrors of the lock directory");
        for id in ["J1", "J2"] {
            let done = java.wait_for(&format!("loop-done {id}"), EVENT).await.unwrap();
            assert_eq!(done, format!("loop-done {id} {ROUNDS}"));
        }

        let text = std::fs::read_to_string(&log).unwrap();
        let _ = std::fs::remove_file(&log);
        let stats = check_log(&text);
        for who in ["java:J1", "java:J2", "rust:R1", "rust:R2"] {
            let rounds: usize =
                stats.rounds.iter().filter(|(w, _)| w.starts_with(&format!("{who}."))).map(|(_, n)| n).sum();
            assert_eq!(rounds, ROUNDS, "{who}: {:?}", stats.rounds);
        }
        for half in ["read", "write"] {
            for language in ["java:", "rust:"] {
                let n: usize = stats
                    .rounds
                    .iter()
                    .filter(|(w, _)| w.starts_with(language) && w.ends_with(&format!(".{half}")))
                    .map(|(_, n)| n)
                    .sum();
                assert!(n > 0, "no {language} {half} rounds: {:?}", stats.rounds);
            }
        }
        assert!(stats.peak_readers > 1, "readers never shared the lock: {stats:?}");
        assert!(stats.mixed_readers > 0, "Rust and Java readers never held together: {stats:?}");
        java.quit().await.unwrap();
        for fw in frameworks {
            fw.close().await;
        }
    })
    .await;
}

/// Both sides list the same queue per half, in the same order, with Curator's names; the lock
/// passes down a mixed queue (readers of both languages, then a Rust writer, then a Java
/// writer) in order.
#[tokio::test]
async fn one_queue_across_languages() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = peer(&connect).await else { return };
        let (fw1, fw2) = (framework(&connect, SESSION).await, framework(&connect, SESSION).await);
        let path = path("queue");
        let lock1 = InterProcessReadWriteLock::new(&fw1, &path).unwrap();
        let lock2 = InterProcessReadWriteLock::new(&fw2, &path).unwrap();
        assert_eq!(java.command(&format!("rwlock JR {path}")).await.unwrap(), "ok");
        assert_eq!(java.command(&format!("rwlock JW {path}")).await.unwrap(), "ok");

        assert_eq!(java.command("acquire JR.read").await.unwrap(), "acquired JR.read");
        let ours = lock1.read_lock().try_acquire().await.unwrap().expect("readers share across languages");
        let (acquired_tx, mut acquired) = oneshot::channel();
        let (release_tx, release_rx) = oneshot::channel::<()>();
        let writer = tokio::spawn(async move {
            let guard = lock2.write_lock().acquire().await.unwrap();
            acquired_tx.send(guard.lock_path().to_owned()).unwrap();
            release_rx.await.unwrap();
            guard.release().await.unwrap();
        });
        children_count_becomes(&fw1, &path, 3, EVENT).await;
        java.send("acquire JW.write").await.unwrap();
        let java_writers = java_participants(&mut java, "JW.write", 2).await;
        let java_readers = java.participants("JR.read").await.unwrap();
        assert_eq!(lock1.write_lock().participant_nodes().await.unwrap(), java_writers);
        assert_eq!(lock1.read_lock().participant_nodes().await.unwrap(), java_readers);
        assert_eq!(java_readers.len(), 2);
        assert!(java_readers.iter().all(|p| is_curator_node_name(node_name(p), "__READ__")), "{java_readers:?}");
        assert!(java_writers.iter().all(|p| is_curator_node_name(node_name(p), "__WRIT__")), "{java_writers:?}");
        assert!(java_readers.contains(&ours.lock_path().to_owned()));
        assert!(sequence_of(&java_writers[0]) < sequence_of(&java_writers[1]), "Rust's writer first");

        // A later Java reader waits behind the queued writers.
        assert_eq!(java.command(&format!("rwlock JL {path}")).await.unwrap(), "ok");
        assert_eq!(java.command("acquire JL.read 300").await.unwrap(), "timeout JL.read");

        ours.release().await.unwrap();
        tokio::time::sleep(QUIET).await;
        assert!(acquired.try_recv().is_err(), "the Rust writer got in beside Curator's reader");
        assert_eq!(java.command("release JR.read").await.unwrap(), "released JR.read");
        let node = within(EVENT, "the Rust writer after both readers", &mut acquired).await.unwrap();
        assert_eq!(node, java_writers[0]);
        assert!(java.take_buffered("acquired JW.write").is_none(), "Curator's writer beside ours");
        release_tx.send(()).unwrap();
        assert_eq!(java.wait_for("acquired JW.write", EVENT).await.unwrap(), "acquired JW.write");
        assert_eq!(java.lock_paths("JW.write").await.unwrap(), vec![java_writers[1].clone()]);
        assert!(lock1.read_lock().try_acquire().await.unwrap().is_none(), "a Rust reader beside Curator's writer");
        assert_eq!(java.command("release JW.write").await.unwrap(), "released JW.write");
        writer.await.unwrap();
        java.quit().await.unwrap();
        fw1.close().await;
        fw2.close().await;
    })
    .await;
}

/// A Rust downgrade while a Curator writer is queued: the Java writer stays out after the
/// write release, until the read lock is released too. Curator sees our tied read node.
#[tokio::test]
async fn a_rust_downgrade_keeps_a_queued_curator_writer_out() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = peer(&connect).await else { return };
        let fw = framework(&connect, SESSION).await;
        let path = path("rust-downgrade");
        let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        assert_eq!(java.command(&format!("rwlock J {path}")).await.unwrap(), "ok");
        let write = lock.write_lock().acquire().await.unwrap();
        java.send("acquire J.write").await.unwrap();
        java_participants(&mut java, "J.write", 2).await;

        let read = lock.read_lock().acquire().await.unwrap();
        assert_eq!(sequence_of(read.lock_path()), sequence_of(write.lock_path()));
        assert_eq!(java.participants("J.read").await.unwrap(), vec![read.lock_path().to_owned()]);
        write.release().await.unwrap();
        tokio::time::sleep(QUIET).await; // the Java writer's watch fired: room for a wrong handoff
        assert!(java.take_buffered("acquired J.write").is_none(), "Curator's writer beside our downgraded reader");
        assert_eq!(java.command("is_acquired J.write").await.unwrap(), "is_acquired J.write false");
        read.release().await.unwrap();
        assert_eq!(java.wait_for("acquired J.write", EVENT).await.unwrap(), "acquired J.write");
        assert!(lock.read_lock().try_acquire().await.unwrap().is_none());
        assert_eq!(java.command("release J.write").await.unwrap(), "released J.write");
        java.quit().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// A Curator 5.5+ downgrade, imitated with a raw client (Debian ships 5.4): a plain ephemeral
/// `_c_<uuid>-__READ__<the holder's write sequence>`. Queued Rust and Curator writers stay out
/// after the write holder releases, until that node goes; then they enter in queue order.
#[tokio::test]
async fn an_imitated_newer_curator_downgrade_keeps_writers_of_both_languages_out() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = peer(&connect).await else { return };
        let (fw1, fw2, raw) = (
            framework(&connect, SESSION).await,
            framework(&connect, SESSION).await,
            framework(&connect, SESSION).await,
        );
        let path = path("imitated");
        let holder = InterProcessReadWriteLock::new(&fw1, &path).unwrap().write_lock().acquire().await.unwrap();
        let tie = format!(
            "{path}/_c_{}-__READ__{:010}",
            "3f1c2b9e-8d6a-4e1f-9b0a-1c2d3e4f5a6b",
            sequence_of(holder.lock_path())
        );
        raw.create(&tie).mode(CreateMode::Ephemeral).await.unwrap();

        let lock2 = InterProcessReadWriteLock::new(&fw2, &path).unwrap();
        let (acquired_tx, mut acquired) = oneshot::channel();
        let (release_tx, release_rx) = oneshot::channel::<()>();
        let rust_writer = tokio::spawn(async move {
            let guard = lock2.write_lock().acquire().await.unwrap();
            acquired_tx.send(()).unwrap();
            release_rx.await.unwrap();
            guard.release().await.unwrap();
        });
        children_count_becomes(&fw1, &path, 3, EVENT).await;
        assert_eq!(java.command(&format!("rwlock J {path}")).await.unwrap(), "ok");
        java.send("acquire J.write").await.unwrap();
        java_participants(&mut java, "J.write", 3).await;

        holder.release().await.unwrap();
        tokio::time::sleep(QUIET).await;
        assert!(acquired.try_recv().is_err(), "the Rust writer got in beside the downgraded reader");
        assert!(java.take_buffered("acquired J.write").is_none(), "Curator's writer got in beside it");

        raw.delete(&tie).await.unwrap(); // the downgraded reader releases
        within(EVENT, "the Rust writer (queued first)", &mut acquired).await.unwrap();
        assert!(java.take_buffered("acquired J.write").is_none());
        release_tx.send(()).unwrap();
        assert_eq!(java.wait_for("acquired J.write", EVENT).await.unwrap(), "acquired J.write");
        assert_eq!(java.command("release J.write").await.unwrap(), "released J.write");
        rust_writer.await.unwrap();
        java.quit().await.unwrap();
        for fw in [fw1, fw2, raw] {
            fw.close().await;
        }
    })
    .await;
}

/// Known bug CURATOR-621, kept visible: a Curator **5.4** downgrade creates an ordinary
/// sequential read node, which sorts behind a writer already queued, so a queued Rust writer
/// takes the write lock while the Java thread still holds read. This is why the crate's docs
/// warn against 5.4 downgrades in mixed fleets; Rust cannot tell that node from a later reader.
#[tokio::test]
async fn a_curator_54_downgrade_lets_a_queued_writer_in() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = peer(&connect).await else { return };
        let fw = framework(&connect, SESSION).await;
        let path = path("curator-54-downgrade");
        let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        assert_eq!(java.command(&format!("rwlock J {path}")).await.unwrap(), "ok");
        assert_eq!(java.command("acquire J.write").await.unwrap(), "acquired J.write");
        let writer = {
            let write = lock.write_lock();
            tokio::spawn(async move { write.acquire().await.unwrap() })
        };
        children_count_becomes(&fw, &path, 2, EVENT).await;
        assert_eq!(java.command("acquire J.read").await.unwrap(), "acquired J.read");
        let java_read = java.lock_paths("J.read").await.unwrap().remove(0);
        let java_write = java.lock_paths("J.write").await.unwrap().remove(0);
        assert!(sequence_of(&java_read) > sequence_of(&java_write) + 1, "5.4: a fresh sequence, behind our writer");
        assert_eq!(java.command("release J.write").await.unwrap(), "released J.write");
        let guard = within(EVENT, "the Rust writer entering (CURATOR-621)", writer).await.unwrap();
        assert_eq!(java.command("is_acquired J.read").await.unwrap(), "is_acquired J.read true");
        guard.release().await.unwrap();
        assert_eq!(java.command("release J.read").await.unwrap(), "released J.read");
        java.quit().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Rust's `Revoker` reaches Curator's revocable holders (a mutex and both read-write halves)
/// and a revocable Curator waiter; Curator's revocable nodes carry no data, like ours.
#[tokio::test]
async fn rust_revoker_reaches_curator_revocable_holders() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = peer(&connect).await else { return };
        let fw = framework(&connect, SESSION).await;
        let (mutex_path, rw_path) = (path("revoke-java-mutex"), path("revoke-java-rw"));
        assert_eq!(java.command(&format!("mutex M {mutex_path}")).await.unwrap(), "ok");
        assert_eq!(java.command(&format!("rwlock J {rw_path}")).await.unwrap(), "ok");
        assert_eq!(java.command(&format!("rwlock K {rw_path}")).await.unwrap(), "ok");
        for id in ["M", "J.write"] {
            assert_eq!(java.command(&format!("revocable {id}")).await.unwrap(), "ok");
            assert_eq!(java.command(&format!("acquire {id}")).await.unwrap(), format!("acquired {id}"));
            let node = java.lock_paths(id).await.unwrap().remove(0);
            assert!(fw.get_data(&node).await.unwrap().0.is_empty(), "Curator's revocable node data");
            Revoker::attempt_revoke(&fw, &node).await.unwrap();
            java.wait_for(&format!("revoke-requested {id}"), EVENT).await.unwrap();
        }
        // A waiting Curator reader (behind J's writer) is revocable too.
        assert_eq!(java.command("revocable K.read").await.unwrap(), "ok");
        java.send("acquire K.read").await.unwrap();
        let waiting = java_participants(&mut java, "K.read", 1).await.remove(0);
        Revoker::attempt_revoke(&fw, &waiting).await.unwrap();
        java.wait_for("revoke-requested K.read", EVENT).await.unwrap();
        assert!(java.take_buffered("acquired K.read").is_none());

        for id in ["M", "J.write"] {
            assert_eq!(java.command(&format!("release {id}")).await.unwrap(), format!("released {id}"));
        }
        assert_eq!(java.wait_for("acquired K.read", EVENT).await.unwrap(), "acquired K.read");
        assert_eq!(java.command("release K.read").await.unwrap(), "released K.read");
        // The node is gone now: revoking it is no error.
        Revoker::attempt_revoke(&fw, &waiting).await.unwrap();
        java.quit().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Curator's `Revoker.attemptRevoke` reaches our revocable holders (a mutex, a writer, a
/// downgraded reader) and the handle of a revocable Rust waiter.
#[tokio::test]
async fn curator_revoker_reaches_rust_revocable_holders() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = peer(&connect).await else { return };
        let fw = framework(&connect, SESSION).await;
        let mutex = InterProcessMutex::new(&fw, &path("revoke-rust-mutex")).unwrap();
        let lock = InterProcessReadWriteLock::new(&fw, &path("revoke-rust-rw")).unwrap();
        let guard = mutex.revocable().acquire().await.unwrap();
        let write = lock.write_lock().revocable().acquire().await.unwrap();
        let read = lock.read_lock().revocable().acquire().await.unwrap();
        assert_eq!(java.command(&format!("revoke {}", guard.lock_path())).await.unwrap(), "ok");
        assert!(within(EVENT, "the mutex request from Curator", guard.revocation_requested()).await);
        assert_eq!(java.command(&format!("revoke {}", write.lock_path())).await.unwrap(), "ok");
        assert!(within(EVENT, "the write request from Curator", write.revocation_requested()).await);
        assert_eq!(java.command(&format!("revoke {}", read.lock_path())).await.unwrap(), "ok");
        assert!(within(EVENT, "the read request from Curator", read.revocation_requested()).await);
        write.release().await.unwrap();

        // A revocable Rust writer waiting behind the downgraded reader.
        let other = InterProcessReadWriteLock::new(&fw, lock.write_lock().path()).unwrap();
        let revocable = other.write_lock().revocable();
        let requested = revocable.revocation_requested();
        let waiting = tokio::spawn(async move { revocable.acquire().await.map(drop) });
        let queued = loop {
            let nodes = other.write_lock().participant_nodes().await.unwrap();
            if let Some(node) = nodes.into_iter().next() {
                break node;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(java.command(&format!("revoke {queued}")).await.unwrap(), "ok");
        within(EVENT, "the waiting writer's handle hearing Curator", requested).await;
        waiting.abort(); // it gives up
        guard.release().await.unwrap();
        read.release().await.unwrap();
        java.quit().await.unwrap();
        fw.close().await;
    })
    .await;
}
