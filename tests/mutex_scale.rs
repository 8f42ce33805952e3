//! `InterProcessMutex` at scale: no herd effect with 50 waiters, and 2,000 waiting tasks over
//! 20 sessions acquiring in turn, in sequence order.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::fixtures::{
    bounded, children, children_count_becomes, eventually, framework, init_tracing, sequence_of, shared_connect,
    unique_path, within, Exclusion,
};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use zk_recipes::testing::four_letter_word;
use zk_recipes::{Framework, InterProcessMutex};

const LIMIT: Duration = Duration::from_secs(90);
const EVENT: Duration = Duration::from_secs(15);

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

/// No herd: 50 waiters, each in its own session, queue behind a holder.
///
/// Two observable, falsifiable measures:
/// 1. The server's data-watch table (`wchp`): every node of the queue except the last is
///    watched by exactly one session, the session that owns the node right behind it, and
///    nobody holds a data watch on the directory. An implementation where waiters watch the
///    holder (or anything but their predecessor) fails this; one that uses child watches on
///    the directory sets no data watches at all and fails it too.
/// 2. Wake-ups on a release, counted by the server (`cons`: packets received per session): a
///    woken waiter re-reads the children and sets a new watch, so it sends at least one
///    request. Right before the release every session sends one request, so that no ping
///    falls into the measurement (the client pings only after 3/20 of the 60 s session
///    timeout of silence). After the holder releases and the next waiter reports the lock,
///    plus a short quiet period for any other woken waiter to show itself, the 49 other
///    waiters must have sent nothing.
#[tokio::test]
async fn one_release_wakes_only_the_next_waiter() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let session = Duration::from_secs(60);
        let path = path("no-herd");
        let holder_fw = framework(&connect, session).await;
        let holder = InterProcessMutex::new(&holder_fw, &path).unwrap().acquire().await.unwrap();

        const WAITERS: usize = 50;
        let mut frameworks: Vec<Framework> = Vec::new();
        let (acquired_tx, mut acquired) = mpsc::unbounded_channel::<(i64, String)>();
        let mut releases: HashMap<i64, oneshot::Sender<()>> = HashMap::new();
        let mut tasks = Vec::new();
        for _ in 0..WAITERS {
            let fw = framework(&connect, session).await;
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

        // Measure 1: each node is watched by its successor's session only. The first waiter
        // also watches its own node: it takes the lock when the holder's node goes, without
        // listing again, which is only safe because it would hear first of its own node's
        // deletion. Waiters further back set that watch once they are first.
        let expected = |queue: &[(String, i64)], first_watches_itself: bool| {
            let mut watches: BTreeMap<String, BTreeSet<i64>> =
                queue.windows(2).map(|w| (w[0].0.clone(), BTreeSet::from([w[1].1]))).collect();
            if first_watches_itself {
                watches.entry(queue[1].0.clone()).or_default().insert(queue[1].1);
            }
            watches
        };
        eventually(EVENT, "each waiter watching only its predecessor", || async {
            let watches = parse_wchp(&flw(&connect, "wchp").await, &path);
            if watches == expected(&queue, true) {
                Ok(())
            } else {
                Err(format!("{watches:?}"))
            }
        })
        .await;

        // Measure 2: one release, one wake-up.
        for fw in &frameworks {
            fw.exists("/").await.unwrap();
        }
        let before = parse_cons(&flw(&connect, "cons").await);
        holder.release().await.unwrap();
        let (first_sid, first_node) = within(EVENT, "the next waiter acquiring", acquired.recv()).await.unwrap();
        assert_eq!((first_sid, first_node.as_str()), (queue[1].1, queue[1].0.as_str()), "the next in line holds");
        tokio::time::sleep(Duration::from_millis(300)).await; // let any other woken waiter show itself
        let after = parse_cons(&flw(&connect, "cons").await);
        let woken: Vec<(usize, u64)> = queue[2..]
            .iter()
            .enumerate()
            .filter_map(|(i, (_, sid))| {
                let delta = after.get(sid).copied().unwrap_or(0).saturating_sub(before.get(sid).copied().unwrap_or(0));
                (delta > 0).then_some((i + 2, delta))
            })
            .collect();
        assert!(woken.is_empty(), "waiters other than the next one sent requests (queue index, packets): {woken:?}");
        assert!(acquired.try_recv().is_err(), "only one waiter holds");
        // The new holder keeps the watch on its own node until it releases (dropping it unfired
        // would cost a RemoveWatches request); the rest of the queue kept its watches.
        let mut kept = expected(&queue[1..], false);
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
    init_tracing();
    bounded(LIMIT, async {
        const SESSIONS: usize = 20;
        const TASKS: usize = 2_000;
        let connect = shared_connect().await;
        let path = path("2000");
        let mut frameworks = Vec::new();
        for _ in 0..SESSIONS {
            frameworks.push(framework(&connect, Duration::from_secs(30)).await);
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
