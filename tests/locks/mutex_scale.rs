//! `InterProcessMutex` at scale: no herd effect with 50 waiters, and 2,000 waiting tasks over
//! 20 sessions acquiring in turn, in sequence order.

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::fixtures::{
    bounded, children, children_count_becomes, classic_framework, eventually, framework_waiting, init_tracing, rss_kib,
    sequence_of, shared_connect, unique_path, waits, within, Exclusion,
};
use common::timing::{EVENT, LIMIT};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use zk_recipes::testing::four_letter_word;
use zk_recipes::{Framework, InterProcessMutex};

fn path(name: &str) -> String {
    unique_path("mutex-scale", name)
}

/// A four-letter word's answer from the shared server.
async fn flw(connect: &str, word: &str) -> String {
    four_letter_word(connect, word, Duration::from_secs(10)).await.unwrap_or_else(|e| panic!("`{word}`: {e}"))
}

/// `wchp` (data watches by path): path → the sessions watching it, for paths under `dir`
/// (and `dir` itself).
fn parse_wchp(text: &str, dir: &str) -> BTreeMap<String, BTreeSet<i64>> {
    let mut watches: BTreeMap<String, BTreeSet<i64>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(session) = line.strip_prefix('\t') {
            if let Some(path) = &current {
                let id = i64::from_str_radix(session.trim().trim_start_matches("0x"), 16)
                    .or_else(|_| u64::from_str_radix(session.trim().trim_start_matches("0x"), 16).map(|v| v as i64))
                    .unwrap_or_else(|_| panic!("session id in `wchp`: {line:?}"));
                watches.entry(path.clone()).or_default().insert(id);
            }
        } else {
            let path = line.trim();
            current = (path == dir || path.starts_with(&format!("{dir}/"))).then(|| path.to_owned());
        }
    }
    watches
}

/// `cons`: packets received from each session's connection (`recved=`), by session id.
fn parse_cons(text: &str) -> HashMap<i64, u64> {
    let mut received = HashMap::new();
    for line in text.lines() {
        let field =
            |name: &str| line.split(['(', ',', ')']).find_map(|f| f.trim().strip_prefix(name).map(|v| v.to_owned()));
        if let (Some(sid), Some(recved)) = (field("sid="), field("recved=")) {
            let sid = u64::from_str_radix(sid.trim_start_matches("0x"), 16).expect("sid") as i64;
            received.insert(sid, recved.parse().expect("recved"));
        }
    }
    received
}

/// The data watches of a queue waiting on its nodes ahead (`queue` in lock order, with each
/// node's owning session; its first node the holder's): each node is watched by the two
/// sessions behind it (the next waiter's, which takes the lock when it goes, and the one
/// after, which then lists the children while the new holder holds) and, but for the
/// holder's, by its own session (a waiter takes the lock on its predecessor's deletion only
/// while its own node's watch is quiet).
fn queue_watches(queue: &[(String, i64)]) -> BTreeMap<String, BTreeSet<i64>> {
    let mut watches: BTreeMap<String, BTreeSet<i64>> = BTreeMap::new();
    for (i, (node, owner)) in queue.iter().enumerate() {
        let watchers = watches.entry(node.clone()).or_default();
        if i > 0 {
            watchers.insert(*owner);
        }
        watchers.extend(queue.iter().skip(i + 1).take(2).map(|(_, behind)| *behind));
    }
    watches
}

/// No herd: 50 waiters, each in its own session, queue behind a holder.
///
/// Two observable, falsifiable measures:
/// 1. The server's data-watch table (`wchp`): every node of the queue is watched by the
///    sessions of the two nodes right behind it and (but for the holder's) by its own, and
///    nobody holds a data watch on the directory (see [`queue_watches`]). An implementation
///    where waiters watch the holder (or anything further ahead) fails this; one that uses
///    child watches on the directory sets no data watches at all and fails it too.
/// 2. Wake-ups on a release, counted by the server (`cons`: packets received per session): a
///    woken waiter re-reads the children, so it sends at least one request. Right before the
///    release every session sends one request, so that no ping falls into the measurement
///    (the client pings only after 3/20 of the 60 s session timeout of silence). After the
///    holder releases and the next waiter reports the lock, plus a short quiet period for any
///    other woken waiter to show itself, the next waiter must have sent nothing (its watches
///    hand it the lock), the one behind it one listing, and the 48 others nothing.
#[tokio::test]
async fn one_release_wakes_only_the_next_two_waiters() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let session = Duration::from_secs(60);
        let path = path("no-herd");
        let holder_fw = classic_framework(&connect, session).await;
        let holder = InterProcessMutex::new(&holder_fw, &path).unwrap().acquire().await.unwrap();

        const WAITERS: usize = 50;
        let mut frameworks: Vec<Framework> = Vec::new();
        let (acquired_tx, mut acquired) = mpsc::unbounded_channel::<(i64, String)>();
        let mut releases: HashMap<i64, oneshot::Sender<()>> = HashMap::new();
        let mut tasks = Vec::new();
        for _ in 0..WAITERS {
            let fw = classic_framework(&connect, session).await;
            let sid = fw.snapshot().session_id;
            let (release_tx, release_rx) = oneshot::channel::<()>();
            releases.insert(sid, release_tx);
            let (mutex, acquired_tx) = (InterProcessMutex::new(&fw, &path).unwrap(), acquired_tx.clone());
            tasks.push(tokio::spawn(async move {
                let guard = mutex.acquire().await.unwrap();
                acquired_tx.send((sid, guard.lock_path().to_owned())).unwrap();
                let _ = release_rx.await;
                guard.release().await.unwrap();
            }));
            frameworks.push(fw);
        }
        let names = children_count_becomes(&holder_fw, &path, WAITERS + 1, EVENT).await;
        // The queue in lock order, with each node's owning session.
        let mut queue: Vec<(String, i64)> = Vec::new();
        for name in names {
            let node = format!("{path}/{name}");
            let owner = holder_fw.exists(&node).await.unwrap().expect("queued node").ephemeral_owner;
            queue.push((node, owner));
        }
        queue.sort_by_key(|(node, _)| sequence_of(node));
        assert_eq!(queue[0].0, holder.lock_path());

        // Measure 1: each node is watched by the two sessions behind it and its own only.
        eventually(EVENT, "each waiter watching only its own node and the two ahead of it", || async {
            let watches = parse_wchp(&flw(&connect, "wchp").await, &path);
            if watches == queue_watches(&queue) {
                Ok(())
            } else {
                Err(format!("{watches:?}"))
            }
        })
        .await;

        // Measure 2: one release, one listing.
        for fw in &frameworks {
            fw.exists("/").await.unwrap();
        }
        let before = parse_cons(&flw(&connect, "cons").await);
        holder.release().await.unwrap();
        let (first_sid, first_node) = within(EVENT, "the next waiter acquiring", acquired.recv()).await.unwrap();
        assert_eq!((first_sid, first_node.as_str()), (queue[1].1, queue[1].0.as_str()), "the next in line holds");
        tokio::time::sleep(Duration::from_millis(300)).await; // let any other woken waiter show itself
        let after = parse_cons(&flw(&connect, "cons").await);
        let woken: Vec<(usize, u64)> = queue[1..]
            .iter()
            .enumerate()
            .filter_map(|(i, (_, sid))| {
                let delta = after.get(sid).copied().unwrap_or(0).saturating_sub(before.get(sid).copied().unwrap_or(0));
                (delta > 0).then_some((i + 1, delta))
            })
            .collect();
        assert_eq!(woken, [(2, 1)], "only the waiter behind the next one lists again (queue index, packets)");
        assert!(acquired.try_recv().is_err(), "only one waiter holds");
        // The new holder keeps the watch on its own node until it releases (dropping it unfired
        // would cost a RemoveWatches request); the rest of the queue kept its watches.
        let mut kept = queue_watches(&queue[1..]);
        kept.entry(queue[1].0.clone()).or_default().insert(queue[1].1);
        let watches = parse_wchp(&flw(&connect, "wchp").await, &path);
        assert_eq!(watches, kept, "the new holder and the rest of the queue kept their watches");

        // Then everyone, in queue order.
        releases.remove(&first_sid).unwrap().send(()).unwrap();
        for (node, sid) in &queue[2..] {
            let (got_sid, got_node) = within(EVENT, "the next waiter", acquired.recv()).await.unwrap();
            assert_eq!((&got_node, got_sid), (node, *sid), "lock order");
            releases.remove(&got_sid).unwrap().send(()).unwrap();
        }
        for task in tasks {
            task.await.unwrap();
        }
        assert!(children(&holder_fw, &path).await.is_empty());
        holder_fw.close().await;
        for fw in frameworks {
            fw.close().await;
        }
    })
    .await;
}

/// 2,000 tasks over 20 sessions queue behind a gate holder; after the gate opens they all
/// acquire one at a time, in the order of their nodes' sequence numbers, with strictly
/// increasing fencing tokens.
#[tokio::test]
async fn two_thousand_waiters_acquire_in_sequence_order() {
    in_sequence_order(false).await;
}

/// The same with every session waiting on its mirror of the lock directory.
#[tokio::test]
async fn two_thousand_waiters_on_the_mirror_acquire_in_sequence_order() {
    in_sequence_order(true).await;
}

async fn in_sequence_order(mirror: bool) {
    init_tracing();
    bounded(LIMIT, async {
        const SESSIONS: usize = 20;
        const TASKS: usize = 2_000;
        let connect = shared_connect().await;
        let path = path(if mirror { "2000-mirror" } else { "2000" });
        let mut frameworks = Vec::new();
        for _ in 0..SESSIONS {
            let session = Duration::from_secs(30);
            let fw = framework_waiting(&connect, session, waits(mirror)).await;
            frameworks.push(fw);
        }
        let gate = InterProcessMutex::new(&frameworks[0], &path).unwrap().acquire().await.unwrap();
        let order: Arc<Mutex<Vec<(u64, i64)>>> = Arc::default();
        let exclusion = Exclusion::default();
        let started = Instant::now();
        let mut tasks = Vec::with_capacity(TASKS);
        for i in 0..TASKS {
            let mutex = InterProcessMutex::new(&frameworks[i % SESSIONS], &path).unwrap();
            let (order, exclusion) = (order.clone(), exclusion.clone());
            tasks.push(tokio::spawn(async move {
                let guard = mutex.acquire().await.unwrap();
                exclusion.enter(&format!("task {i}"));
                order.lock().unwrap().push((sequence_of(guard.lock_path()), guard.fencing_token()));
                exclusion.exit();
                guard.release().await.unwrap();
            }));
        }
        children_count_becomes(&frameworks[1], &path, TASKS + 1, Duration::from_secs(30)).await;
        let queued = started.elapsed();
        let gate_sequence = sequence_of(gate.lock_path());
        gate.release().await.unwrap();
        let opened = Instant::now();
        for task in tasks {
            within(Duration::from_secs(45), "every waiter acquiring", task).await.unwrap();
        }
        let drained = opened.elapsed();
        eprintln!("{TASKS} waiters over {SESSIONS} sessions: queued in {queued:?}, drained in {drained:?}");

        let order = std::mem::take(&mut *order.lock().unwrap());
        assert_eq!(order.len(), TASKS);
        assert_eq!(exclusion.entries(), TASKS);
        assert!(order[0].0 > gate_sequence);
        for pair in order.windows(2) {
            assert!(pair[1].0 > pair[0].0, "acquired out of sequence order: {pair:?}");
            assert!(pair[1].1 > pair[0].1, "fencing token did not increase: {pair:?}");
        }
        assert!(children(&frameworks[0], &path).await.is_empty());
        for fw in frameworks {
            fw.close().await;
        }
    })
    .await;
}

/// Packets received by the server from each of `sessions`, from `cons`.
async fn received(connect: &str, sessions: &[i64]) -> Vec<u64> {
    let cons = parse_cons(&flw(connect, "cons").await);
    sessions.iter().map(|sid| cons.get(sid).copied().unwrap_or(0)).collect()
}

/// `waiters` tasks over `sessions` sessions queue on one mutex behind a gate holder, then all
/// acquire in turn. Measured and checked:
/// - the data-watch table (`wchp`) with the whole queue waiting: each node watched by its own
///   session and the two sessions behind it only (no herd is armed; see [`queue_watches`]);
/// - `CONTROLLED` single handoffs, each released by the test: the server receives packets only
///   from the releasing session, the next holder's and the one behind it (which lists while
///   the next one holds), and a handful of them (no herd is woken);
/// - then the free drain: packets per handoff over all sessions stay a small constant
///   (independent of the queue's length), the handoff rate, and the client's memory (RSS) at
///   the full queue, printed as a JSON line.
async fn waiters_acquire_in_turn(waiters: usize, sessions: usize, limit: Duration) {
    const CONTROLLED: usize = 10;
    /// A handoff sends a delete (the releaser) and a few reads and watches (the next holder).
    const PACKETS_PER_HANDOFF: u64 = 6;
    init_tracing();
    bounded(limit, async {
        let connect = shared_connect().await;
        let path = path(&format!("scale-{waiters}"));
        let rss_start = rss_kib();
        let mut frameworks = Vec::new();
        for _ in 0..sessions {
            frameworks.push(classic_framework(&connect, Duration::from_secs(60)).await);
        }
        let sids: Vec<i64> = frameworks.iter().map(|fw| fw.snapshot().session_id).collect();
        let gate = InterProcessMutex::new(&frameworks[0], &path).unwrap().acquire().await.unwrap();
        let gate_sid = sids[0];
        let controlled = Arc::new(std::sync::atomic::AtomicUsize::new(CONTROLLED));
        let permits = Arc::new(tokio::sync::Semaphore::new(0));
        let (acquired_tx, mut acquired) = mpsc::unbounded_channel::<(i64, bool)>();
        let exclusion = Exclusion::default();
        let queued_from = Instant::now();
        let mut tasks = Vec::with_capacity(waiters);
        for i in 0..waiters {
            let mutex = InterProcessMutex::new(&frameworks[i % sessions], &path).unwrap();
            let sid = sids[i % sessions];
            let (controlled, permits, acquired_tx, exclusion) =
                (controlled.clone(), permits.clone(), acquired_tx.clone(), exclusion.clone());
            tasks.push(tokio::spawn(async move {
                let guard = mutex.acquire().await.unwrap();
                exclusion.enter(&format!("task {i}"));
                let is_controlled = controlled
                    .fetch_update(std::sync::atomic::Ordering::SeqCst, std::sync::atomic::Ordering::SeqCst, |n| {
                        n.checked_sub(1)
                    })
                    .is_ok();
                acquired_tx.send((sid, is_controlled)).unwrap();
                if is_controlled {
                    permits.acquire().await.unwrap().forget();
                }
                exclusion.exit();
                guard.release().await.unwrap();
            }));
        }
        let names = children_count_becomes(&frameworks[0], &path, waiters + 1, limit).await;
        let queued = queued_from.elapsed();
        let rss_full = rss_kib();

        // No herd armed: each node is watched by its own session and the two behind it only.
        let mut queue: Vec<(String, i64)> = Vec::with_capacity(names.len());
        for chunk in names.chunks(500) {
            let owners = futures::future::join_all(chunk.iter().map(|name| {
                let node = format!("{path}/{name}");
                let fw = &frameworks[0];
                async move {
                    let owner = fw.exists(&node).await.unwrap().expect("queued node").ephemeral_owner;
                    (node, owner)
                }
            }))
            .await;
            queue.extend(owners);
        }
        queue.sort_by_key(|(node, _)| sequence_of(node));
        let expected = queue_watches(&queue);
        eventually(EVENT, "each waiter watching only its own node and the two ahead of it", || async {
            let watches = parse_wchp(&flw(&connect, "wchp").await, &path);
            if watches == expected {
                return Ok(());
            }
            let wrong: Vec<_> = expected
                .iter()
                .filter(|(node, want)| watches.get(*node) != Some(want))
                .map(|(node, want)| (node.clone(), want.clone(), watches.get(node).cloned()))
                .take(5)
                .collect();
            let extra: Vec<_> = watches.keys().filter(|node| !expected.contains_key(*node)).take(5).collect();
            Err(format!("wrong (node, expected, seen): {wrong:?}; unexpected watched nodes: {extra:?}"))
        })
        .await;

        // Single handoffs: only the releaser's, the next holder's and the one behind it speak.
        let mut releaser = gate_sid;
        let mut gate = Some(gate);
        let mut handoff_packets = Vec::new();
        for handoff in 0..CONTROLLED {
            for fw in &frameworks {
                fw.exists("/").await.unwrap(); // nobody pings inside the window
            }
            let before = received(&connect, &sids).await;
            match gate.take() {
                Some(gate) => gate.release().await.unwrap(),
                None => permits.add_permits(1),
            }
            let (next, is_controlled) = within(EVENT, "the next waiter acquiring", acquired.recv()).await.unwrap();
            assert!(is_controlled);
            tokio::time::sleep(Duration::from_millis(300)).await; // let any other woken waiter show itself
            let after = received(&connect, &sids).await;
            let spoke: BTreeMap<i64, u64> = sids
                .iter()
                .zip(before.iter().zip(&after))
                .filter(|(_, (b, a))| a > b)
                .map(|(sid, (b, a))| (*sid, a - b))
                .collect();
            let allowed = BTreeSet::from([releaser, next, queue[handoff + 2].1]);
            assert!(
                spoke.keys().all(|sid| allowed.contains(sid)),
                "a handoff from {releaser:#x} to {next:#x} made sessions other than theirs and the one behind speak: {spoke:x?}"
            );
            let packets: u64 = spoke.values().sum();
            assert!(packets <= PACKETS_PER_HANDOFF, "one handoff cost {packets} packets: {spoke:x?}");
            handoff_packets.push(packets);
            releaser = next;
        }

        // The free drain.
        let remaining = waiters - CONTROLLED;
        let before: u64 = received(&connect, &sids).await.iter().sum();
        let drain_from = Instant::now();
        permits.add_permits(1);
        for task in tasks {
            within(limit, "every waiter acquiring", task).await.unwrap();
        }
        let drained = drain_from.elapsed();
        let after: u64 = received(&connect, &sids).await.iter().sum();
        let per_handoff = (after - before) as f64 / remaining as f64;
        let rate = remaining as f64 / drained.as_secs_f64();
        println!(
            "{{\"test\":\"mutex_scale\",\"waiters\":{waiters},\"sessions\":{sessions},\"queued_s\":{:.1},\
             \"drain_s\":{:.1},\"handoffs_per_s\":{rate:.0},\"packets_per_handoff\":{per_handoff:.2},\
             \"controlled_handoff_packets\":{handoff_packets:?},\"rss_start_kib\":{},\"rss_full_queue_kib\":{},\"rss_after_kib\":{}}}",
            queued.as_secs_f64(),
            drained.as_secs_f64(),
            rss_start.unwrap_or(0),
            rss_full.unwrap_or(0),
            rss_kib().unwrap_or(0),
        );
        assert_eq!(exclusion.entries(), waiters);
        assert!(
            per_handoff <= PACKETS_PER_HANDOFF as f64,
            "{per_handoff:.2} packets per handoff over {remaining} handoffs: a release woke more than the next waiter"
        );
        assert!(children(&frameworks[0], &path).await.is_empty());
        for fw in frameworks {
            fw.close().await;
        }
    })
    .await;
}

/// The CI-sized run of [`waiters_acquire_in_turn`]: 1,000 waiters over 10 sessions.
#[tokio::test]
async fn a_thousand_waiters_over_ten_sessions_wake_one_at_a_time() {
    waiters_acquire_in_turn(1_000, 10, Duration::from_secs(240)).await;
}

/// 10,000 waiters over 10 sessions: over a minute in a release build (after queueing, every
/// handoff but the shortcut ones lists the rest of the queue, as Curator's waiters do), so not
/// run by default. Run it with
/// `cargo test --release --features testing --test locks -- --ignored --nocapture ten_thousand_waiters_over_ten_sessions`.
#[tokio::test]
#[ignore = "slow: 10,000 waiters (run with --ignored)"]
async fn ten_thousand_waiters_over_ten_sessions_wake_one_at_a_time() {
    waiters_acquire_in_turn(10_000, 10, Duration::from_secs(1800)).await;
}

/// Handoffs per second while `waiters` tasks over `sessions` sessions (on their mirror of the
/// lock directory when `mirror`) drain a queue they formed behind a gate holder, and the
/// client's RSS with the whole queue waiting (KiB).
async fn drain_rate(waiters: usize, sessions: usize, mirror: bool) -> (f64, u64) {
    let connect = shared_connect().await;
    let path = path(&format!("drain-{waiters}-{}", if mirror { "mirror" } else { "classic" }));
    let mut frameworks = Vec::new();
    for _ in 0..sessions {
        let session = Duration::from_secs(60);
        let fw = framework_waiting(&connect, session, waits(mirror)).await;
        frameworks.push(fw);
    }
    // Each session's mirror (or fast path) warmed up before the queue forms.
    for fw in &frameworks {
        let mutex = InterProcessMutex::new(fw, &path).unwrap();
        for _ in 0..3 {
            mutex.acquire().await.unwrap().release().await.unwrap();
        }
    }
    let gate = InterProcessMutex::new(&frameworks[0], &path).unwrap().acquire().await.unwrap();
    let exclusion = Exclusion::default();
    let mut tasks = Vec::with_capacity(waiters);
    for i in 0..waiters {
        let mutex = InterProcessMutex::new(&frameworks[i % sessions], &path).unwrap();
        let exclusion = exclusion.clone();
        tasks.push(tokio::spawn(async move {
            let guard = mutex.acquire().await.unwrap();
            exclusion.enter(&format!("task {i}"));
            exclusion.exit();
            guard.release().await.unwrap();
        }));
    }
    children_count_becomes(&frameworks[1], &path, waiters + 1, Duration::from_secs(600)).await;
    let rss = rss_kib().unwrap_or(0);
    let opened = Instant::now();
    gate.release().await.unwrap();
    for task in tasks {
        within(Duration::from_secs(900), "every waiter acquiring", task).await.unwrap();
    }
    let rate = waiters as f64 / opened.elapsed().as_secs_f64();
    assert_eq!(exclusion.entries(), waiters);
    for fw in frameworks {
        fw.close().await;
    }
    (rate, rss)
}

/// The drain rate by queue length, classic and mirror, as JSON lines (a measurement, not a
/// check: run it by hand, in a release build, on a quiet machine):
/// `cargo test --release --features testing --test locks drain_rates -- --ignored --nocapture`
/// (`ZKR_DRAIN_SIZES=100,2000` and `ZKR_DRAIN_STRATEGIES=mirror` choose).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: 100, 2,000 and 10,000 queued waiters, both wait strategies"]
async fn drain_rates_by_queue_length() {
    init_tracing();
    let sizes: Vec<usize> = std::env::var("ZKR_DRAIN_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 2_000, 10_000]);
    let strategies = std::env::var("ZKR_DRAIN_STRATEGIES").unwrap_or_else(|_| "per-waiter-watch,mirror".into());
    for mirror in [false, true] {
        if !strategies.split(',').any(|s| s.trim() == if mirror { "mirror" } else { "per-waiter-watch" }) {
            continue;
        }
        for &waiters in &sizes {
            let (rate, rss) = drain_rate(waiters, 10, mirror).await;
            println!(
                "{{\"test\":\"drain_rate\",\"strategy\":\"{}\",\"waiters\":{waiters},\"sessions\":10,\"handoffs_per_s\":{rate:.0},\"rss_full_queue_kib\":{rss}}}",
                if mirror { "mirror" } else { "per-waiter-watch" }
            );
        }
    }
}
