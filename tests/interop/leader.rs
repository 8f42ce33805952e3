//! Interop with real Apache Curator 5.4 leader recipes (`LeaderLatch`, `LeaderSelector` in a
//! JVM, driven through `tests/common/curator.rs`): Rust and Java candidates in one election,
//! on one latch path and on one selector path. Both sides list the same participants (ids
//! read from each other's nodes) and the same leader, leadership passes down the queue in
//! order across the language boundary both ways, loops of both languages share one leadership
//! log with never two leaders at once, and a killed Curator leader hands over to Rust.
//!
//! Skipped (with a message) when java/javac/Curator are missing, unless `ZKR_REQUIRE_CURATOR=1`.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::curator::CuratorPeer;
use common::election::{follow_latch, handed_over, LeaderLog};
use common::fixtures::{bounded, children, eventually, framework, init_tracing, shared_connect, unique_path, within};
use common::timing::{INTEROP_EVENT as EVENT, INTEROP_SESSION as SESSION, SLOW_LIMIT as LIMIT};
use zk_recipes::path::is_protected;
use zk_recipes::{Framework, LeaderLatch, LeaderSelector, Participant};

fn path(name: &str) -> String {
    unique_path("leader-interop", name)
}

async fn peer(connect: &str, session: Duration) -> Option<CuratorPeer> {
    init_tracing();
    CuratorPeer::started(connect, session).await
}

fn pairs(participants: &[Participant]) -> Vec<(String, bool)> {
    participants.iter().map(|p| (p.id.clone(), p.is_leader)).collect()
}

/// Polls our participants until there are `n`; returns them.
async fn rust_participants(latch: &LeaderLatch, n: usize) -> Vec<Participant> {
    common::fixtures::eventually(EVENT, &format!("{n} participants"), || async {
        let participants = latch.participants().await.map_err(|e| e.to_string())?;
        if participants.len() == n {
            Ok(participants)
        } else {
            Err(format!("{:?}", pairs(&participants)))
        }
    })
    .await
}

/// One latch path, queue J1 (Java), R1 (Rust), J2 (Java), R2 (Rust): both sides list the same
/// ids in the same order with the same leader, our nodes are Curator latch nodes, and closing
/// each leader hands leadership to the next in the queue, across the language boundary each
/// time; the shared log shows exactly that order.
#[tokio::test]
async fn latch_queue_hands_over_in_order_across_languages() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = peer(&connect, SESSION).await else { return };
        let fws = [framework(&connect, SESSION).await, framework(&connect, SESSION).await];
        let path = path("latch-queue");
        let log = LeaderLog::new("latch-queue");
        let log_arg = log.path_arg();

        java.election_ok(&format!("latch J1 {path} java-1 notify {log_arg}")).await.unwrap();
        java.election_ok("latch_start J1").await.unwrap();
        java.wait_for("latch-event J1 leader", EVENT).await.unwrap();
        let r1 = Arc::new(LeaderLatch::new(&fws[0], &path, "rust-1").unwrap());
        r1.start().unwrap();
        follow_latch(r1.clone(), log.clone(), "rust:R1");
        rust_participants(&r1, 2).await;
        java.election_ok(&format!("latch J2 {path} java-2 notify {log_arg}")).await.unwrap();
        java.election_ok("latch_start J2").await.unwrap();
        rust_participants(&r1, 3).await;
        let r2 = Arc::new(LeaderLatch::new(&fws[1], &path, "rust-2").unwrap());
        r2.start().unwrap();
        follow_latch(r2.clone(), log.clone(), "rust:R2");
        let ours = rust_participants(&r1, 4).await;

        let expected: Vec<(String, bool)> = [("java-1", true), ("rust-1", false), ("java-2", false), ("rust-2", false)]
            .map(|(id, l)| (id.to_owned(), l))
            .into();
        assert_eq!(pairs(&ours), expected, "our view of the queue");
        assert_eq!(java.election_participants("latch_participants", "J2").await.unwrap(), expected, "Curator's view");
        assert_eq!(r2.leader().await.unwrap().map(|p| p.id), Some("java-1".to_owned()));
        assert_eq!(java.election_leader("latch_leader", "J1").await.unwrap(), ("java-1".to_owned(), true));
        for p in &ours {
            let name = common::fixtures::node_name(&p.node);
            assert!(is_protected(name) && name.contains("-latch-"), "a Curator latch node: {}", p.node);
        }
        let java_path = java.election("latch_path J1").await.unwrap().remove(0);
        assert_eq!(java_path, ours[0].node, "Curator's own path is the first in our list");

        java.election_ok("latch_close J1").await.unwrap();
        within(EVENT, "R1 leading after J1", r1.await_leadership()).await.unwrap();
        assert!(!java.election_has_leadership("latch_has", "J2").await.unwrap());
        assert_eq!(java.election_leader("latch_leader", "J2").await.unwrap(), ("rust-1".to_owned(), true));
        r1.close().await.unwrap();
        java.wait_for("latch-event J2 leader", EVENT).await.unwrap();
        assert!(!r2.is_leader());
        assert_eq!(r2.leader().await.unwrap().map(|p| p.id), Some("java-2".to_owned()));
        java.election_ok("latch_close J2").await.unwrap();
        within(EVENT, "R2 leading after J2", r2.await_leadership()).await.unwrap();
        let (terms, current) = log.wait_until(EVENT, "four terms", |t, _| t.len() == 4).await;
        assert_eq!(terms, ["java:J1", "rust:R1", "java:J2", "rust:R2"]);
        assert_eq!(current.as_deref(), Some("rust:R2"));
        r2.close().await.unwrap();
        java.quit().await.unwrap();
        for fw in fws {
            fw.close().await;
        }
    })
    .await;
}

/// Waits until a candidate is in the election at `path`: the Curator loops start first and
/// the Rust ones join once one of them has, since a side that ran alone could finish all its
/// rounds (a few milliseconds each) before the other side's first node, and no term would
/// pass between the languages.
async fn curator_joined(fw: &Framework, path: &str) {
    eventually(EVENT, "a Curator candidate in the election", || async {
        let nodes = children(fw, path).await;
        if nodes.is_empty() {
            Err("no node yet".to_owned())
        } else {
            Ok(())
        }
    })
    .await
}

/// The shared log of two Java loops (J1, J2) and two Rust loops (R1, R2): one leader at a time
/// (checked by the log), no one leading at the end, `rounds` terms each, and leadership passed
/// from Rust to Java and from Java to Rust.
fn assert_loops_took_turns(log: &LeaderLog, rounds: usize) {
    let (terms, current) = log.check();
    assert_eq!(current, None);
    for who in ["java:J1", "java:J2", "rust:R1", "rust:R2"] {
        assert_eq!(terms.iter().filter(|t| *t == who).count(), rounds, "{who}'s rounds in {terms:?}");
    }
    assert!(handed_over(&terms, "rust:", "java:"), "never Rust to Java: {terms:?}");
    assert!(handed_over(&terms, "java:", "rust:"), "never Java to Rust: {terms:?}");
}

/// Two Curator latch loops and two Rust latch loops (own sessions) on one path, each round a
/// new latch that leads, logs, and closes: the shared log shows one leader at a time, every
/// loop completes its rounds, and leadership passes Rust to Java and Java to Rust.
#[tokio::test]
async fn latch_loops_share_one_log() {
    bounded(LIMIT, async {
        const ROUNDS: usize = 15;
        let connect = shared_connect().await;
        let Some(mut java) = peer(&connect, SESSION).await else { return };
        let path = path("latch-loops");
        let log = LeaderLog::new("latch-loops");
        let mut frameworks = Vec::new();
        let mut rust = Vec::new();
        for id in ["J1", "J2"] {
            let reply = java.election(&format!("latch_loop {id} {path} java-{id} {ROUNDS} {} 2", log.path_arg())).await;
            assert_eq!(reply.unwrap(), ["started"]);
        }
        for id in ["R1", "R2"] {
            let fw = framework(&connect, SESSION).await;
            curator_joined(&fw, &path).await;
            let (fw2, path, log) = (fw.clone(), path.clone(), log.clone());
            rust.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let latch = LeaderLatch::new(&fw2, &path, &format!("rust-{id}")).unwrap();
                    latch.start().unwrap();
                    let leadership = latch.await_leadership().await.unwrap();
                    log.enter(&format!("rust:{id}"));
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    assert!(leadership.is_leader());
                    log.exit(&format!("rust:{id}"));
                    latch.close().await.unwrap();
                }
            }));
            frameworks.push(fw);
        }
        for task in rust {
            within(EVENT * 2, "the Rust loops", task).await.unwrap();
        }
        for id in ["J1", "J2"] {
            let done = java.wait_for(&format!("latch-loop-done {id}"), EVENT * 2).await.unwrap();
            assert_eq!(done, format!("latch-loop-done {id} {ROUNDS}"));
        }
        assert_loops_took_turns(&log, ROUNDS);
        java.quit().await.unwrap();
        for fw in frameworks {
            fw.close().await;
        }
    })
    .await;
}

/// A Rust selector that reports each term (its id) on a channel and leads until told to
/// return through the returned sender.
fn rust_selector(
    fw: &Framework,
    path: &str,
    id: &str,
    led: tokio::sync::mpsc::UnboundedSender<String>,
) -> (LeaderSelector, tokio::sync::mpsc::UnboundedSender<()>) {
    let (resign_tx, resign_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let resign_rx = Arc::new(tokio::sync::Mutex::new(resign_rx));
    let name = id.to_owned();
    let selector = LeaderSelector::new(fw, path, id, move |_| {
        let (led, resign_rx, name) = (led.clone(), resign_rx.clone(), name.clone());
        async move {
            led.send(name).unwrap();
            resign_rx.lock().await.recv().await;
        }
    })
    .unwrap();
    (selector, resign_tx)
}

/// One selector path, queue S1 (Java), RS1 (Rust), S2 (Java), RS2 (Rust): both sides list the
/// same ids in the same order (ours are Curator mutex nodes carrying the id), and each leader
/// resigning hands over to the next in the queue across the language boundary.
#[tokio::test]
async fn selector_queue_hands_over_in_order_across_languages() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = peer(&connect, SESSION).await else { return };
        let fws = [framework(&connect, SESSION).await, framework(&connect, SESSION).await];
        let path = path("selector-queue");
        let (led_tx, mut led) = tokio::sync::mpsc::unbounded_channel();

        java.election_ok(&format!("selector S1 {path} java-1")).await.unwrap();
        java.election_ok("selector_start S1").await.unwrap();
        java.wait_for("selector-leader S1", EVENT).await.unwrap();
        let (rs1, resign_rs1) = rust_selector(&fws[0], &path, "rust-1", led_tx.clone());
        rs1.start().unwrap();
        let count = |n: usize| {
            let rs1 = &rs1;
            async move {
                common::fixtures::eventually(EVENT, &format!("{n} participants"), || async {
                    let p = rs1.participants().await.map_err(|e| e.to_string())?;
                    if p.len() == n {
                        Ok(p)
                    } else {
                        Err(format!("{:?}", pairs(&p)))
                    }
                })
                .await
            }
        };
        count(2).await;
        java.election_ok(&format!("selector S2 {path} java-2")).await.unwrap();
        java.election_ok("selector_start S2").await.unwrap();
        count(3).await;
        let (rs2, resign_rs2) = rust_selector(&fws[1], &path, "rust-2", led_tx);
        rs2.start().unwrap();
        let ours = count(4).await;

        let expected: Vec<(String, bool)> = [("java-1", true), ("rust-1", false), ("java-2", false), ("rust-2", false)]
            .map(|(id, l)| (id.to_owned(), l))
            .into();
        assert_eq!(pairs(&ours), expected, "our view of the queue");
        assert_eq!(
            java.election_participants("selector_participants", "S1").await.unwrap(),
            expected,
            "Curator's view"
        );
        assert_eq!(java.election_leader("selector_leader", "S2").await.unwrap(), ("java-1".to_owned(), true));
        assert_eq!(rs2.leader().await.unwrap().map(|p| p.id), Some("java-1".to_owned()));
        assert!(ours.iter().all(|p| common::fixtures::is_curator_lock_name(common::fixtures::node_name(&p.node))));

        java.election_ok("selector_resign S1").await.unwrap();
        java.wait_for("selector-done S1 returned", EVENT).await.unwrap();
        assert_eq!(within(EVENT, "RS1 leading after S1", led.recv()).await.unwrap(), "rust-1");
        assert!(rs1.is_leader());
        assert!(!java.election_has_leadership("selector_has", "S2").await.unwrap());
        resign_rs1.send(()).unwrap();
        java.wait_for("selector-leader S2", EVENT).await.unwrap();
        assert!(!rs1.is_leader() && !rs2.is_leader());
        assert_eq!(rs2.leader().await.unwrap().map(|p| p.id), Some("java-2".to_owned()));
        java.election_ok("selector_resign S2").await.unwrap();
        assert_eq!(within(EVENT, "RS2 leading after S2", led.recv()).await.unwrap(), "rust-2");
        resign_rs2.send(()).unwrap();
        for s in [rs1, rs2] {
            s.close().await.unwrap();
        }
        java.election_ok("selector_close S1").await.unwrap();
        java.election_ok("selector_close S2").await.unwrap();
        java.quit().await.unwrap();
        for fw in fws {
            fw.close().await;
        }
    })
    .await;
}

/// Two Curator auto-requeue selector loops and two Rust auto-requeue selectors (own sessions)
/// on one path, every leader logging enter/exit around a short hold: one leader at a time in
/// the shared log, all rounds done, handovers both ways.
#[tokio::test]
async fn selector_loops_share_one_log() {
    bounded(LIMIT, async {
        const ROUNDS: usize = 15;
        let connect = shared_connect().await;
        let Some(mut java) = peer(&connect, SESSION).await else { return };
        let path = path("selector-loops");
        let log = LeaderLog::new("selector-loops");
        let mut frameworks = Vec::new();
        let mut selectors = Vec::new();
        let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel::<&'static str>();
        for id in ["R1", "R2"] {
            let fw = framework(&connect, SESSION).await;
            let (log, done_tx) = (log.clone(), done_tx.clone());
            let rounds = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let selector = LeaderSelector::new(&fw, &path, &format!("rust-{id}"), move |leadership| {
                let (log, done_tx, rounds) = (log.clone(), done_tx.clone(), rounds.clone());
                async move {
                    if rounds.load(std::sync::atomic::Ordering::SeqCst) >= ROUNDS {
                        return std::future::pending().await; // done: lead no more rounds, hold nothing up
                    }
                    log.enter(&format!("rust:{id}"));
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    log.exit(&format!("rust:{id}"));
                    debug_assert!(leadership.is_leader());
                    if rounds.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == ROUNDS {
                        done_tx.send(id).unwrap();
                    }
                }
            })
            .unwrap()
            .auto_requeue(true);
            selectors.push(selector);
            frameworks.push(fw);
        }
        for id in ["J1", "J2"] {
            let reply =
                java.election(&format!("selector_loop {id} {path} java-{id} {ROUNDS} {} 2", log.path_arg())).await;
            assert_eq!(reply.unwrap(), ["started"]);
        }
        curator_joined(&frameworks[0], &path).await;
        for s in &selectors {
            s.start().unwrap();
        }
        let mut finished = Vec::new();
        for _ in 0..2 {
            finished.push(within(EVENT * 2, "the Rust selectors' rounds", done.recv()).await.unwrap());
            // A Rust selector that has done its rounds parks in its closure while leading:
            // close it so the others go on.
            let i = if *finished.last().unwrap() == "R1" { 0 } else { 1 };
            selectors[i].close().await.unwrap();
        }
        for id in ["J1", "J2"] {
            let reply = java.wait_for(&format!("selector-loop-done {id}"), EVENT * 2).await.unwrap();
            assert_eq!(reply, format!("selector-loop-done {id} {ROUNDS}"));
        }
        assert_loops_took_turns(&log, ROUNDS);
        java.quit().await.unwrap();
        for fw in frameworks {
            fw.close().await;
        }
    })
    .await;
}

/// A Curator latch leader is killed (its JVM, with its session still open on the server): the
/// Rust candidate behind it leads once the server expires the dead session, not before.
#[tokio::test]
async fn killed_curator_leader_hands_over_to_rust() {
    bounded(LIMIT, async {
        let session = Duration::from_secs(4);
        let connect = shared_connect().await;
        let Some(mut java) = peer(&connect, session).await else { return };
        let fw = framework(&connect, session).await;
        let path = path("killed");
        let log = LeaderLog::new("killed");
        java.election_ok(&format!("latch K {path} java-k silent {}", log.path_arg())).await.unwrap();
        java.election_ok("latch_start K").await.unwrap();
        java.wait_for("latch-event K leader", EVENT).await.unwrap();
        let rust = Arc::new(LeaderLatch::new(&fw, &path, "rust-r").unwrap());
        rust.start().unwrap();
        follow_latch(rust.clone(), log.clone(), "rust:R");
        rust_participants(&rust, 2).await;

        java.kill().await.unwrap();
        let killed = tokio::time::Instant::now();
        log.exit("java:K"); // a dead leader has stopped leading
        assert_eq!(rust.leader().await.unwrap().map(|p| p.id), Some("java-k".to_owned()), "its node outlives it");
        within(EVENT, "Rust leading after the dead session expired", rust.await_leadership()).await.unwrap();
        let waited = killed.elapsed();
        assert!(waited >= session / 2, "handed over {waited:?} after the kill, before the session could expire");
        let (terms, current) = log.wait_until(EVENT, "Rust's term logged", |t, _| t.len() == 2).await;
        assert_eq!((terms, current.as_deref()), (vec!["java:K".to_owned(), "rust:R".to_owned()], Some("rust:R")));
        rust.close().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// A `LeaderObserver` (no candidate) follows an election of a Curator `LeaderLatch` and a
/// Rust latch: it names the Java leader, then the Rust candidate once Curator's latch closes.
#[tokio::test]
async fn an_observer_follows_a_curator_latch() {
    use zk_recipes::{ElectionKind, LeaderObserver};
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = peer(&connect, SESSION).await else { return };
        let path = path("observer");
        let fw = framework(&connect, SESSION).await;
        let observer = LeaderObserver::start(&fw, &path, ElectionKind::Latch).unwrap();
        java.election_ok(&format!("latch J1 {path} java-1")).await.unwrap();
        java.election_ok("latch_start J1").await.unwrap();
        let leader = observer.wait_for_leader("java-1", EVENT).await.unwrap().expect("Curator's latch observed");
        // Curator learns its node's name in the create's callback, which may run after the
        // observer has seen the node: ask until it has.
        let deadline = tokio::time::Instant::now() + EVENT;
        let ours = loop {
            let ours = java.election("latch_path J1").await.unwrap().remove(0);
            if ours != "none" || tokio::time::Instant::now() >= deadline {
                break ours;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        assert_eq!(ours, leader.node, "Curator's own node");
        let rust = LeaderLatch::new(&fw, &path, "rust-1").unwrap();
        rust.start().unwrap();
        eventually(EVENT, "two candidates", || async {
            let n = rust.participants().await.map_err(|e| e.to_string())?.len();
            if n == 2 {
                Ok(())
            } else {
                Err(n.to_string())
            }
        })
        .await;
        assert_eq!(observer.leader().map(|p| p.id).as_deref(), Some("java-1"), "the Rust candidate waits");
        java.election_ok("latch_close J1").await.unwrap();
        observer.wait_for_leader("rust-1", EVENT).await.unwrap().expect("the Rust latch observed");
        rust.close().await.unwrap();
        drop(observer);
        fw.close().await;
        java.quit().await.unwrap();
    })
    .await;
}
