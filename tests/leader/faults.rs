//! Leader election under server and network faults; each test owns its server (and a fault
//! proxy in front of the leader). Curator's connection-state scenarios of `TestLeaderLatch`
//! (testSessionErrorPolicy, testErrorPolicies, testLostConnection, testSessionInterruption-
//! DoNotCauseBrainSplit, testGetChildrenHitsNoNode) and `TestLeaderSelector` (testErrorPolicies,
//! testLeaderNodeDeleteOnInterrupt, testKillSessionThenCloseShouldElectNewLeader,
//! testKillServerThenCloseShouldElectNewLeader), the leader's connection cut for less and for
//! more than the session timeout, and a 3-server ensemble losing members. Every test that has
//! more than one candidate checks a shared leadership log: never two leaders that were not
//! told.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::election::{follow_latch, LeaderLog};
use common::fixtures::{
    bounded, children, children_count_becomes, framework, init_tracing, unique_path, wait_connected, wait_for_state,
    within, FaultyServer,
};
use common::timing::{EVENT, FAULT_SESSION as SESSION, SLOW_LIMIT as LIMIT};
use futures::StreamExt;
use tokio::time::Instant;
use zk_recipes::retry::RetryForever;
use zk_recipes::testing::{FaultProxy, ProxyMode, TestingCluster, TestingServer};
use zk_recipes::{
    ConnectionState, ConnectionStateErrorPolicy, Framework, LeaderLatch, LeaderSelector, Leadership, LeadershipEvent,
};

fn path(name: &str) -> String {
    unique_path("leader-faults", name)
}

/// A started framework with `policy` that retries connection loss forever.
async fn framework_with(connect: &str, policy: ConnectionStateErrorPolicy) -> Framework {
    Framework::builder(connect)
        .session_timeout(SESSION)
        .error_policy(policy)
        .retry_policy(RetryForever::new(Duration::from_millis(50)))
        .start()
        .await
        .expect("starting a framework")
}

/// Cuts every connection through `proxy` and keeps the network silent (black hole).
fn cut(proxy: &FaultProxy) {
    proxy.set_mode(ProxyMode::BlackHole);
    proxy.drop_connections();
}

/// Lets connections through again; the client reconnects at once.
fn restore(proxy: &FaultProxy) {
    proxy.set_mode(ProxyMode::Pass);
    proxy.drop_connections();
}

/// A latch that is started and logged as `who`.
async fn logged_latch(fw: &Framework, path: &str, who: &str, log: &Arc<LeaderLog>) -> Arc<LeaderLatch> {
    let latch = Arc::new(LeaderLatch::new(fw, path, who).unwrap());
    latch.start().unwrap();
    follow_latch(latch.clone(), log.clone(), who);
    latch
}

/// testSessionErrorPolicy (Standard) and the leader's connection cut for less than the session
/// timeout: leadership ends at `Suspended` (reported at once, while the node still exists and
/// no one else leads), and after `Reconnected` on the same session the latch checks the queue
/// and leads again on the same node: same fencing token, the queue unchanged.
#[tokio::test]
async fn short_cut_ends_leadership_and_the_same_node_leads_again() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let leader_fw = framework(&servers.proxied(), SESSION).await;
        let other_fw = framework(&servers.direct(), SESSION).await;
        let path = path("short-cut");
        let log = LeaderLog::new("short-cut");
        let leader = logged_latch(&leader_fw, &path, "L", &log).await;
        let mut events = leader.leadership_events();
        let first = within(EVENT, "L leading", leader.await_leadership()).await.unwrap();
        let waiter = logged_latch(&other_fw, &path, "W", &log).await;
        let queue = children_count_becomes(&other_fw, &path, 2, EVENT).await;
        assert!(matches!(events.next().await, Some(LeadershipEvent::Gained(_))));

        cut(&servers.proxy);
        wait_for_state(&leader_fw, EVENT, "L suspended", |s| s.state == ConnectionState::Suspended).await;
        assert!(!leader.is_leader() && !first.is_leader(), "no leadership while Suspended (Standard)");
        within(EVENT, "lost() at Suspended", first.lost()).await;
        assert!(matches!(within(EVENT, "the Lost event", events.next()).await, Some(LeadershipEvent::Lost)));
        assert!(other_fw.exists(first.node_path()).await.unwrap().is_some(), "the node outlives the suspension");
        assert!(!waiter.is_leader());

        restore(&servers.proxy);
        let again = within(EVENT, "L leading again after Reconnected", leader.await_leadership()).await.unwrap();
        assert_eq!(leader_fw.snapshot().epoch, 1, "the same session");
        assert_eq!(again.node_path(), first.node_path(), "the same node");
        assert_eq!(again.fencing_token(), first.fencing_token());
        assert!(!first.is_leader(), "an ended term stays ended");
        assert!(matches!(events.next().await, Some(LeadershipEvent::Gained(_))));
        assert_eq!(children(&other_fw, &path).await, queue, "the queue is unchanged");

        let (terms, current) = log.wait_until(EVENT, "L's second term logged", |t, _| t.len() == 2).await;
        assert_eq!((terms, current), (vec!["L".to_owned(), "L".to_owned()], Some("L".to_owned())));
        leader.close().await.unwrap();
        within(EVENT, "W leading after L closed", waiter.await_leadership()).await.unwrap();
        log.wait_until(EVENT, "W logged", |t, _| t.last().is_some_and(|w| w == "W")).await;
        waiter.close().await.unwrap();
        leader_fw.close().await;
        other_fw.close().await;
    })
    .await;
}

/// testSessionErrorPolicy (SessionOnly iteration): a short cut changes nothing; the latch
/// leads through `Suspended` and `Reconnected`, without events.
#[tokio::test]
async fn session_only_policy_keeps_leadership_through_a_short_cut() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let fw = framework_with(&servers.proxied(), ConnectionStateErrorPolicy::SessionOnly).await;
        let latch = LeaderLatch::new(&fw, &path("session-only"), "S").unwrap();
        let mut events = latch.leadership_events();
        latch.start().unwrap();
        let leadership = within(EVENT, "leading", latch.await_leadership()).await.unwrap();
        assert!(matches!(events.next().await, Some(LeadershipEvent::Gained(_))));

        cut(&servers.proxy);
        wait_for_state(&fw, EVENT, "suspended", |s| s.state == ConnectionState::Suspended).await;
        assert!(latch.is_leader() && leadership.is_leader(), "SessionOnly: still leading while Suspended");
        restore(&servers.proxy);
        wait_connected(&fw, EVENT, 1).await;
        assert_eq!(fw.snapshot().epoch, 1);
        assert!(latch.is_leader() && leadership.is_leader());
        latch.close_with(zk_recipes::CloseMode::NotifyLeader).await.unwrap();
        let rest: Vec<LeadershipEvent> = events.collect().await;
        assert!(matches!(rest.as_slice(), [LeadershipEvent::Lost]), "only the close's Lost: {rest:?}");
        fw.close().await;
    })
    .await;
}

/// The leader's connection cut for longer than the session timeout (testErrorPolicies,
/// testSessionInterruptionDoNotCauseBrainSplit): the leader is told at `Suspended`; the other
/// candidate leads only after the server expired the leader's session; the old leader gets a
/// new session, never leads from its old node, and queues again at the end with a new node.
#[tokio::test]
async fn long_cut_hands_over_only_after_the_leader_was_told() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let leader_fw = framework(&servers.proxied(), SESSION).await;
        let other_fw = framework(&servers.direct(), SESSION).await;
        let path = path("long-cut");
        let log = LeaderLog::new("long-cut");
        let leader = logged_latch(&leader_fw, &path, "L", &log).await;
        let old = within(EVENT, "L leading", leader.await_leadership()).await.unwrap();
        let waiter = logged_latch(&other_fw, &path, "W", &log).await;
        children_count_becomes(&other_fw, &path, 2, EVENT).await;

        let cut_at = Instant::now();
        cut(&servers.proxy);
        within(EVENT, "L told", old.lost()).await;
        let told_after = cut_at.elapsed();
        let next = within(EVENT, "W leading after L's session expired", waiter.await_leadership()).await.unwrap();
        let handed_after = cut_at.elapsed();
        assert!(told_after < handed_after, "told {told_after:?}, handed over {handed_after:?}");
        assert!(next.fencing_token() > old.fencing_token());
        wait_for_state(&leader_fw, EVENT, "L's framework losing its session", |s| s.state == ConnectionState::Lost)
            .await;
        restore(&servers.proxy);
        wait_connected(&leader_fw, EVENT, 2).await;
        assert!(!leader.is_leader() && !old.is_leader(), "a new session never inherits leadership");

        let participants = children_count_becomes(&other_fw, &path, 2, EVENT).await;
        let ids: Vec<String> = waiter.participants().await.unwrap().into_iter().map(|p| p.id).collect();
        assert_eq!(ids, ["W", "L"], "L queued again at the end: {participants:?}");
        waiter.close().await.unwrap();
        let back = within(EVENT, "L leading in its new session", leader.await_leadership()).await.unwrap();
        assert!(back.fencing_token() > next.fencing_token());
        let (terms, _) = log.wait_until(EVENT, "three terms logged", |t, _| t.len() == 3).await;
        assert_eq!(terms, ["L", "W", "L"]);
        leader.close().await.unwrap();
        leader_fw.close().await;
        other_fw.close().await;
    })
    .await;
}

/// testErrorPolicies (SessionOnly half): a long cut ends leadership only at `Lost`.
#[tokio::test]
async fn session_only_policy_ends_leadership_at_lost() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let fw = framework_with(&servers.proxied(), ConnectionStateErrorPolicy::SessionOnly).await;
        let latch = LeaderLatch::new(&fw, &path("session-only-lost"), "S").unwrap();
        latch.start().unwrap();
        let leadership = within(EVENT, "leading", latch.await_leadership()).await.unwrap();
        cut(&servers.proxy);
        wait_for_state(&fw, EVENT, "suspended", |s| s.state == ConnectionState::Suspended).await;
        assert!(leadership.is_leader());
        let mut lost = std::pin::pin!(leadership.lost());
        assert!(futures::poll!(&mut lost).is_pending());
        within(EVENT, "lost() at Lost", &mut lost).await;
        assert!(matches!(fw.state(), ConnectionState::Lost) || fw.snapshot().epoch > 1);
        restore(&servers.proxy);
        let again = within(EVENT, "leading in the new session", latch.await_leadership()).await.unwrap();
        assert!(again.fencing_token() > leadership.fencing_token(), "a new node");
        latch.close().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// testLostConnection: ten latches on one framework; the server stops until the session is
/// lost: no one leads; after the restart exactly one does.
#[tokio::test]
async fn lost_connection_then_exactly_one_leader() {
    init_tracing();
    bounded(LIMIT, async {
        let mut server = TestingServer::start().await.unwrap();
        let fw = framework(&server.connect_string(), SESSION).await;
        let path = path("lost-connection");
        let latches: Vec<LeaderLatch> =
            (0..10).map(|i| LeaderLatch::new(&fw, &path, &format!("n{i}")).unwrap()).collect();
        for latch in &latches {
            latch.start().unwrap();
        }
        children_count_becomes(&fw, &path, 10, EVENT).await;
        let leaders = || latches.iter().filter(|l| l.is_leader()).count();
        common::fixtures::eventually(EVENT, "one leader", || async {
            if leaders() == 1 {
                Ok(())
            } else {
                Err(format!("{} leaders", leaders()))
            }
        })
        .await;

        server.stop().await.unwrap();
        wait_for_state(&fw, EVENT, "the session lost", |s| s.state == ConnectionState::Lost).await;
        assert_eq!(leaders(), 0);
        server.restart().await.unwrap();
        wait_connected(&fw, EVENT, 2).await;
        let leadership = within(EVENT, "someone leading after the restart", async {
            futures::future::select_all(latches.iter().map(|l| Box::pin(l.await_leadership()))).await.0
        })
        .await
        .unwrap();
        children_count_becomes(&fw, &path, 10, EVENT).await;
        assert_eq!(leaders(), 1, "exactly one leader");
        assert!(leadership.is_leader());
        for latch in &latches {
            latch.close().await.unwrap();
        }
        fw.close().await;
    })
    .await;
}

/// testGetChildrenHitsNoNode (CURATOR-724): the ensemble is replaced by an empty one on the
/// same address (the latch path and every session are gone); both candidates get new sessions
/// and join again; exactly one leads.
#[tokio::test]
async fn election_recovers_when_the_ensemble_is_recreated() {
    init_tracing();
    bounded(LIMIT, async {
        let mut server = TestingServer::start().await.unwrap();
        let port = server.port();
        let fws =
            [framework(&server.connect_string(), SESSION).await, framework(&server.connect_string(), SESSION).await];
        let path = path("recreated");
        let log = LeaderLog::new("recreated");
        let a = logged_latch(&fws[0], &path, "A", &log).await;
        within(EVENT, "A leading", a.await_leadership()).await.unwrap();
        let b = logged_latch(&fws[1], &path, "B", &log).await;
        children_count_becomes(&fws[1], &path, 2, EVENT).await;

        server.stop().await.unwrap();
        drop(server);
        let server = TestingServer::builder().port(port).start().await.unwrap();
        for fw in &fws {
            wait_connected(fw, EVENT * 2, 2).await;
        }
        children_count_becomes(&fws[0], &path, 2, EVENT).await;
        common::fixtures::eventually(EVENT, "one leader", || async {
            match (a.is_leader(), b.is_leader()) {
                (true, false) | (false, true) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        log.wait_until(EVENT, "a leader logged", |_, current| current.is_some()).await;
        for latch in [a, b] {
            latch.close().await.unwrap();
        }
        for fw in fws {
            fw.close().await;
        }
        drop(server);
    })
    .await;
}

/// Selector counterpart of the long cut (testErrorPolicies, Standard): the leader's closure is
/// dropped at `Suspended`; the other selector's closure starts only after the leader's
/// session expired. Closures log `enter` when they start and `exit` when they end or are
/// dropped.
#[tokio::test]
async fn selector_closure_ends_before_another_starts() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let leader_fw = framework(&servers.proxied(), SESSION).await;
        let other_fw = framework(&servers.direct(), SESSION).await;
        let path = path("selector-cut");
        let log = LeaderLog::new("selector-cut");
        let (tx, mut terms) = tokio::sync::mpsc::unbounded_channel::<(String, Leadership)>();
        let selector = |fw: &Framework, who: &str| {
            let (log, tx, name) = (log.clone(), tx.clone(), who.to_owned());
            LeaderSelector::new(fw, &path, who, move |leadership| {
                let who = &name;
                let (log, tx, who) = (log.clone(), tx.clone(), who.clone());
                async move {
                    log.enter(&who);
                    let _exit = LogExit(log, who.clone());
                    let _ = tx.send((who, leadership));
                    std::future::pending::<()>().await;
                }
            })
            .unwrap()
        };
        let leader = selector(&leader_fw, "L");
        let waiter = selector(&other_fw, "W");
        leader.start().unwrap();
        let (who, old) = within(EVENT, "L leading", terms.recv()).await.unwrap();
        assert_eq!(who, "L");
        waiter.start().unwrap();
        children_count_becomes(&other_fw, &path, 2, EVENT).await;

        cut(&servers.proxy);
        within(EVENT, "L's term ending at Suspended", old.lost()).await;
        let (who, next) = within(EVENT, "W leading after L's session expired", terms.recv()).await.unwrap();
        assert_eq!(who, "W");
        assert!(next.fencing_token() > old.fencing_token());
        let (log_terms, current) = log.check();
        assert_eq!((log_terms, current.as_deref()), (vec!["L".to_owned(), "W".to_owned()], Some("W")));
        restore(&servers.proxy);
        wait_connected(&leader_fw, EVENT, 2).await;
        assert!(!leader.is_leader());
        assert!(leader.requeue().unwrap(), "without auto-requeue the old leader is out until requeue()");
        waiter.close().await.unwrap();
        let (who, _) = within(EVENT, "L leading again", terms.recv()).await.unwrap();
        assert_eq!(who, "L");
        leader.close().await.unwrap();
        let (log_terms, current) = log.check();
        assert_eq!((log_terms.len(), current), (3, None));
        leader_fw.close().await;
        other_fw.close().await;
    })
    .await;
}

/// Logs `exit` when dropped (a closure's future ending or dropped).
struct LogExit(Arc<LeaderLog>, String);

impl Drop for LogExit {
    fn drop(&mut self) {
        self.0.exit(&self.1);
    }
}

/// testErrorPolicies for the selector, SessionOnly: the closure keeps running through
/// `Suspended` and is dropped at `Lost`.
#[tokio::test]
async fn selector_session_only_policy_ends_the_closure_at_lost() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let fw = framework_with(&servers.proxied(), ConnectionStateErrorPolicy::SessionOnly).await;
        let running = Arc::new(AtomicUsize::new(0));
        let (tx, mut terms) = tokio::sync::mpsc::unbounded_channel::<Leadership>();
        let counter = running.clone();
        let selector = LeaderSelector::new(&fw, &path("selector-session-only"), "S", move |leadership| {
            let (counter, tx) = (counter.clone(), tx.clone());
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                let _done = Decrement(counter);
                let _ = tx.send(leadership);
                std::future::pending::<()>().await;
            }
        })
        .unwrap();
        selector.start().unwrap();
        let leadership = within(EVENT, "leading", terms.recv()).await.unwrap();
        cut(&servers.proxy);
        wait_for_state(&fw, EVENT, "suspended", |s| s.state == ConnectionState::Suspended).await;
        assert_eq!(running.load(Ordering::SeqCst), 1, "still running while Suspended");
        within(EVENT, "the term ending at Lost", leadership.lost()).await;
        common::fixtures::eventually(EVENT, "the closure dropped", || async {
            match running.load(Ordering::SeqCst) {
                0 => Ok(()),
                n => Err(format!("{n} running")),
            }
        })
        .await;
        restore(&servers.proxy);
        selector.close().await.unwrap();
        fw.close().await;
    })
    .await;
}

struct Decrement(Arc<AtomicUsize>);

impl Drop for Decrement {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// testLeaderNodeDeleteOnInterrupt: the server stops while a selector leads; its closure is
/// dropped (Standard: at `Suspended`) and, once the server is back, the node is gone.
#[tokio::test]
async fn selector_node_is_deleted_after_an_outage() {
    init_tracing();
    bounded(LIMIT, async {
        let mut server = TestingServer::start().await.unwrap();
        let fw = framework(&server.connect_string(), SESSION).await;
        let path = path("selector-outage");
        let (tx, mut terms) = tokio::sync::mpsc::unbounded_channel::<Leadership>();
        let selector = LeaderSelector::new(&fw, &path, "S", move |leadership| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(leadership);
                std::future::pending::<()>().await;
            }
        })
        .unwrap();
        selector.start().unwrap();
        let leadership = within(EVENT, "leading", terms.recv()).await.unwrap();
        server.stop().await.unwrap();
        within(EVENT, "the term ending", leadership.lost()).await;
        assert!(!selector.interrupt(), "nothing left to interrupt");
        server.restart().await.unwrap();
        wait_connected(&fw, EVENT, 1).await;
        children_count_becomes(&fw, &path, 0, EVENT).await;
        selector.close().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Two selectors `k0`, `k1` whose closures report their term (index, leadership) and wait
/// forever; the returned counter is the most closures that ever ran at once.
fn parked_selectors(
    fw: &Framework,
    path: &str,
    auto_requeue: bool,
) -> (Vec<LeaderSelector>, Arc<AtomicUsize>, tokio::sync::mpsc::UnboundedReceiver<(usize, Leadership)>) {
    let running = Arc::new(AtomicUsize::new(0));
    let max_running = Arc::new(AtomicUsize::new(0));
    let (tx, terms) = tokio::sync::mpsc::unbounded_channel::<(usize, Leadership)>();
    let selectors = (0..2)
        .map(|i| {
            let (running, max_running, tx) = (running.clone(), max_running.clone(), tx.clone());
            LeaderSelector::new(fw, path, &format!("k{i}"), move |leadership| {
                let (running, max_running, tx) = (running.clone(), max_running.clone(), tx.clone());
                async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    max_running.fetch_max(now, Ordering::SeqCst);
                    let _done = Decrement(running);
                    let _ = tx.send((i, leadership));
                    std::future::pending::<()>().await;
                }
            })
            .unwrap()
            .auto_requeue(auto_requeue)
        })
        .collect();
    (selectors, max_running, terms)
}

/// testKillSessionThenCloseShouldElectNewLeader: two selectors on one framework; the session is
/// expired: the leader's closure is dropped; the waiting selector keeps its place in the
/// election (queued again in the new session) and leads; the old leader is requeued; closing
/// the leader hands over. Never more than one closure at a time.
#[tokio::test]
async fn selector_kill_session_then_close_elects_a_new_leader() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let fw = framework(&servers.proxied(), SESSION).await;
        let path = path("selector-kill-session");
        let (selectors, max_running, mut terms) = parked_selectors(&fw, &path, false);
        for s in &selectors {
            s.start().unwrap();
        }
        let (first, old) = within(EVENT, "a leader", terms.recv()).await.unwrap();
        children_count_becomes(&fw, &path, 2, EVENT).await;
        servers.expire(&fw, EVENT).await;
        within(EVENT, "the old term ending", old.lost()).await;
        let (second, _) = within(EVENT, "the waiting selector leading", terms.recv()).await.unwrap();
        assert_ne!(first, second, "the waiter leads in the new session");
        // The old leader is out of the election once its task has cleaned up its term.
        common::fixtures::eventually(EVENT, "requeueing the old leader", || async {
            if selectors[first].requeue().unwrap() {
                Ok(())
            } else {
                Err("still queued".to_owned())
            }
        })
        .await;
        assert!(!selectors[second].requeue().unwrap(), "the leader is in the election");
        children_count_becomes(&fw, &path, 2, EVENT).await;
        selectors[second].close().await.unwrap();
        let (third, _) = within(EVENT, "the requeued selector leading", terms.recv()).await.unwrap();
        assert_eq!(third, first);
        selectors[first].close().await.unwrap();
        assert_eq!(max_running.load(Ordering::SeqCst), 1, "never two closures at once");
        fw.close().await;
    })
    .await;
}

/// testKillServerThenCloseShouldElectNewLeader: the same with auto-requeue and a server that
/// stops until the session is lost.
#[tokio::test]
async fn selector_kill_server_then_close_elects_a_new_leader() {
    init_tracing();
    bounded(LIMIT, async {
        let mut server = TestingServer::start().await.unwrap();
        let fw = framework(&server.connect_string(), SESSION).await;
        let path = path("selector-kill-server");
        let (selectors, max_running, mut terms) = parked_selectors(&fw, &path, true);
        for s in &selectors {
            s.start().unwrap();
        }
        let (_, old) = within(EVENT, "a leader", terms.recv()).await.unwrap();
        server.stop().await.unwrap();
        within(EVENT, "the term ending", old.lost()).await;
        wait_for_state(&fw, EVENT, "the session lost", |s| s.state == ConnectionState::Lost).await;
        server.restart().await.unwrap();
        let (leader, _) = within(EVENT, "a leader after the restart", terms.recv()).await.unwrap();
        children_count_becomes(&fw, &path, 2, EVENT).await;
        selectors[leader].close().await.unwrap();
        let (next, _) = within(EVENT, "the other selector leading", terms.recv()).await.unwrap();
        assert_ne!(next, leader);
        selectors[next].close().await.unwrap();
        assert_eq!(max_running.load(Ordering::SeqCst), 1, "never two closures at once");
        fw.close().await;
    })
    .await;
}

/// A 3-server ensemble loses one member at a time (each in turn, so whichever member the
/// leader is connected to goes once): clients move to another member within their session,
/// and the log never shows two leaders that were not told; after each loss exactly one
/// candidate leads.
#[tokio::test]
async fn ensemble_members_lost_in_turn_keep_one_leader() {
    init_tracing();
    bounded(Duration::from_secs(240), async {
        let session = Duration::from_secs(8);
        let mut cluster = TestingCluster::builder().size(3).start().await.unwrap();
        cluster.settle(Duration::from_secs(60)).await.unwrap();
        let connect = cluster.connect_string();
        let mut fws = Vec::new();
        for _ in 0..3 {
            fws.push(framework(&connect, session).await);
        }
        let path = path("ensemble");
        let log = LeaderLog::new("ensemble");
        let mut latches = Vec::new();
        for (i, fw) in fws.iter().enumerate() {
            latches.push(logged_latch(fw, &path, &format!("C{i}"), &log).await);
        }
        let one_leader = |latches: &[Arc<LeaderLatch>]| latches.iter().filter(|l| l.is_leader()).count() == 1;
        common::fixtures::eventually(EVENT, "one leader", || async {
            if one_leader(&latches) {
                Ok(())
            } else {
                Err("not one".to_owned())
            }
        })
        .await;
        for member in 0..cluster.len() {
            cluster.kill(member).await.unwrap();
            for fw in &fws {
                wait_connected(fw, session * 4, 1).await;
            }
            common::fixtures::eventually(session * 4, "one leader after losing a member", || async {
                if one_leader(&latches) {
                    Ok(())
                } else {
                    Err(format!("leaders: {:?}", latches.iter().map(|l| l.is_leader()).collect::<Vec<_>>()))
                }
            })
            .await;
            cluster.restart(member).await.unwrap();
            cluster.settle(Duration::from_secs(60)).await.unwrap();
        }
        let (terms, current) = log.check();
        assert!(current.is_some(), "someone leads at the end: {terms:?}");
        for latch in &latches {
            latch.close().await.unwrap();
        }
        for fw in fws {
            fw.close().await;
        }
    })
    .await;
}
