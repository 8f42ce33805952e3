//! `LeaderSelector` on a healthy server: Curator's `TestLeaderSelector` and
//! `TestLeaderSelectorParticipants` scenarios that need no server faults (interruption,
//! interruption with requeue, auto-requeue, rotating leadership, closing, participant ids),
//! kazoo's `Election` scenario, and the closure's life (dropped before the node is deleted,
//! panics).

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::fixtures::shared_framework as fw;
use common::fixtures::{bounded, children, children_count_becomes, eventually, unique_path, within};
use common::timing::{EVENT, LIMIT};
use tokio::sync::{mpsc, Mutex as AsyncMutex};
use zk_recipes::{LeaderSelector, Leadership};

fn path(name: &str) -> String {
    unique_path("leader-selector", name)
}

/// Sets a flag when dropped: tells a test that a closure's future is gone.
struct OnDrop(Arc<AtomicBool>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A closure that reports each term on `tx` (with its `Leadership`), then waits forever.
fn park_forever(
    tx: mpsc::UnboundedSender<Leadership>,
) -> impl Fn(Leadership) -> futures::future::BoxFuture<'static, ()> {
    move |leadership| {
        let tx = tx.clone();
        Box::pin(async move {
            let _ = tx.send(leadership);
            std::future::pending::<()>().await;
        })
    }
}

/// testInterruptLeadership / testInterruption: interrupt() drops the leader's future, ends the
/// term and deletes the node; without auto-requeue the selector then stays out.
#[tokio::test]
async fn interrupt_ends_leadership() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("interrupt");
        let dropped = Arc::new(AtomicBool::new(false));
        let (tx, mut terms) = mpsc::unbounded_channel();
        let flag = dropped.clone();
        let selector = LeaderSelector::new(&fw, &path, "leader", move |leadership| {
            let guard = OnDrop(flag.clone());
            let tx = tx.clone();
            async move {
                let _guard = guard;
                tx.send(leadership).unwrap();
                std::future::pending::<()>().await;
            }
        })
        .unwrap();
        assert!(!selector.interrupt(), "nothing to interrupt before leading");
        selector.start().unwrap();
        let leadership = within(EVENT, "leading", terms.recv()).await.unwrap();
        assert!(selector.is_leader() && leadership.is_leader());
        assert_eq!(selector.leadership().map(|l| l.fencing_token()), Some(leadership.fencing_token()));
        assert!(selector.interrupt());
        within(EVENT, "the interrupted term ending", leadership.lost()).await;
        assert!(dropped.load(Ordering::SeqCst), "the closure's future is dropped when its term ends");
        children_count_becomes(&fw, &path, 0, EVENT).await;
        assert!(!selector.is_leader());
        assert!(!selector.interrupt());
        // Not requeued: requeue() queues it again and it leads again.
        assert!(selector.requeue().unwrap());
        assert!(!selector.requeue().unwrap(), "already queued");
        let again = within(EVENT, "leading after requeue()", terms.recv()).await.unwrap();
        assert!(again.fencing_token() > leadership.fencing_token());
        selector.close().await.unwrap();
        assert!(children(&fw, &path).await.is_empty());
        fw.close().await;
    })
    .await;
}

/// testInterruptLeadershipWithRequeue: with auto-requeue, interrupting twice in a row still
/// ends with the (only) candidate leading again.
#[tokio::test]
async fn interrupt_with_auto_requeue_leads_again() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let (tx, mut terms) = mpsc::unbounded_channel();
        let selector =
            LeaderSelector::new(&fw, &path("interrupt-requeue"), "only", park_forever(tx)).unwrap().auto_requeue(true);
        selector.start().unwrap();
        let first = within(EVENT, "leading", terms.recv()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        selector.interrupt();
        tokio::time::sleep(Duration::from_millis(20)).await;
        selector.interrupt();
        let mut last = first;
        while let Ok(Some(term)) = tokio::time::timeout(Duration::from_millis(500), terms.recv()).await {
            assert!(term.fencing_token() > last.fencing_token());
            last = term;
        }
        assert!(last.is_leader(), "leading again after the interrupts");
        assert!(selector.is_leader());
        selector.close().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// testAutoRequeue: a closure that returns at once leads again and again with auto-requeue;
/// each term is a new node (a new fencing token).
#[tokio::test]
async fn auto_requeue_leads_again_after_returning() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let (tx, mut terms) = mpsc::unbounded_channel();
        let selector = LeaderSelector::new(&fw, &path("auto-requeue"), "again", move |leadership: Leadership| {
            let tx = tx.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                let _ = tx.send(leadership.fencing_token());
            }
        })
        .unwrap()
        .auto_requeue(true);
        selector.start().unwrap();
        let mut tokens = Vec::new();
        for _ in 0..3 {
            tokens.push(within(EVENT, "another term", terms.recv()).await.unwrap());
        }
        assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
        selector.close().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// testRotatingLeadership: five selectors, requeued after each round, each lead exactly once
/// per round.
#[tokio::test]
async fn rotating_leadership() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("rotating");
        let (tx, mut leaders) = mpsc::unbounded_channel();
        let selectors: Vec<LeaderSelector> = (0..5)
            .map(|i| {
                let tx = tx.clone();
                LeaderSelector::new(&fw, &path, &format!("s{i}"), move |_| {
                    let tx = tx.clone();
                    async move {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        tx.send(i).unwrap();
                    }
                })
                .unwrap()
            })
            .collect();
        for round in 0..3 {
            for selector in &selectors {
                if round == 0 {
                    selector.start().unwrap();
                } else {
                    assert!(selector.requeue().unwrap(), "requeue after the term ended");
                }
            }
            let mut seen = Vec::new();
            for _ in 0..selectors.len() {
                seen.push(within(EVENT, "the next leader of the round", leaders.recv()).await.unwrap());
            }
            seen.sort_unstable();
            assert_eq!(seen, [0, 1, 2, 3, 4], "round {round}: each selector leads once");
            eventually(EVENT, "the round's last node deleted", || async {
                let left = children(&fw, &path).await;
                if left.is_empty() {
                    Ok(())
                } else {
                    Err(format!("{left:?}"))
                }
            })
            .await;
        }
        for selector in &selectors {
            selector.close().await.unwrap();
        }
        fw.close().await;
    })
    .await;
}

/// testClosing: closing the waiting selector leaves the leader leading; closing the leader
/// ends its leadership.
#[tokio::test]
async fn closing_the_waiter_then_the_leader() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("closing");
        let (tx, mut terms) = mpsc::unbounded_channel();
        let a = LeaderSelector::new(&fw, &path, "a", park_forever(tx.clone())).unwrap();
        let b = LeaderSelector::new(&fw, &path, "b", park_forever(tx)).unwrap();
        a.start().unwrap();
        b.start().unwrap();
        let leadership = within(EVENT, "someone leading", terms.recv()).await.unwrap();
        children_count_becomes(&fw, &path, 2, EVENT).await;
        assert_ne!(a.is_leader(), b.is_leader());
        let (leader, waiter) = if a.is_leader() { (&a, &b) } else { (&b, &a) };
        waiter.close().await.unwrap();
        assert!(leader.is_leader() && !waiter.is_leader() && leadership.is_leader());
        assert_eq!(children(&fw, &path).await.len(), 1);
        leader.close().await.unwrap();
        assert!(!leader.is_leader() && !leadership.is_leader());
        assert!(children(&fw, &path).await.is_empty());
        assert!(terms.try_recv().is_err(), "no one else led");
        fw.close().await;
    })
    .await;
}

/// TestLeaderSelectorParticipants.testId/testBasic: participants list every selector's id in
/// queue order, the leader first; leader() names it.
#[tokio::test]
async fn participants_carry_ids() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("participants");
        let (tx, mut terms) = mpsc::unbounded_channel();
        let mut selectors = Vec::new();
        for (i, id) in ["id-a", "id-b", "id-c"].iter().enumerate() {
            let selector = LeaderSelector::new(&fw, &path, id, park_forever(tx.clone())).unwrap();
            selector.start().unwrap();
            children_count_becomes(&fw, &path, i + 1, EVENT).await;
            selectors.push(selector);
        }
        within(EVENT, "the first leading", terms.recv()).await.unwrap();
        let participants = selectors[2].participants().await.unwrap();
        let seen: Vec<(&str, bool)> = participants.iter().map(|p| (p.id.as_str(), p.is_leader)).collect();
        assert_eq!(seen, [("id-a", true), ("id-b", false), ("id-c", false)]);
        assert!(participants.iter().all(|p| p.node.contains("-lock-")), "a selector is a mutex: {participants:?}");
        assert_eq!(selectors[1].leader().await.unwrap().map(|p| p.id), Some("id-a".to_owned()));
        assert!(selectors[0].is_leader());
        for selector in &selectors {
            selector.close().await.unwrap();
        }
        fw.close().await;
    })
    .await;
}

/// The closure's future is dropped before the node is deleted, so two closures never overlap
/// (in this process: a shared flag); a closure that panics ends its term like one that
/// returns, and the next candidate leads. (A failed check inside a closure would be caught
/// with its panic, so the closures count problems and the test asserts the counts.)
#[tokio::test]
async fn closures_never_overlap_and_panics_end_the_term() {
    bounded(LIMIT, async {
        let fws = [fw().await, fw().await];
        let path = path("overlap");
        let inside = Arc::new(AtomicBool::new(false));
        let terms = Arc::new(AtomicUsize::new(0));
        let problems = Arc::new(AtomicUsize::new(0));
        let selectors: Vec<LeaderSelector> = (0..4)
            .map(|i| {
                let (inside, terms, problems) = (inside.clone(), terms.clone(), problems.clone());
                LeaderSelector::new(&fws[i % 2], &path, &format!("o{i}"), move |leadership: Leadership| {
                    let (inside, terms, problems) = (inside.clone(), terms.clone(), problems.clone());
                    async move {
                        if inside.swap(true, Ordering::SeqCst) {
                            problems.fetch_add(1, Ordering::SeqCst); // two closures at once
                        }
                        let _out = OnDropClear(inside);
                        let n = terms.fetch_add(1, Ordering::SeqCst);
                        if !leadership.is_leader() {
                            problems.fetch_add(1, Ordering::SeqCst);
                        }
                        match n % 3 {
                            2 => panic!("a leader closure that panics (term {n})"),
                            1 => tokio::time::sleep(Duration::from_millis(5)).await,
                            _ => {}
                        }
                    }
                })
                .unwrap()
                .auto_requeue(true)
            })
            .collect();
        for selector in &selectors {
            selector.start().unwrap();
        }
        eventually(EVENT * 2, "20 terms", || async {
            let n = terms.load(Ordering::SeqCst);
            if n >= 20 {
                Ok(())
            } else {
                Err(format!("{n} terms"))
            }
        })
        .await;
        for selector in &selectors {
            selector.close().await.unwrap();
        }
        assert_eq!(problems.load(Ordering::SeqCst), 0, "overlapping closures or a term that was not leading");
        assert!(!inside.load(Ordering::SeqCst));
        for fw in fws {
            fw.close().await;
        }
    })
    .await;
}

/// Clears a flag when dropped (a closure's future ending or being dropped).
struct OnDropClear(Arc<AtomicBool>);

impl Drop for OnDropClear {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// kazoo's test_election: three contenders; the participants' order names the leader; the
/// second cancels (closes) while waiting and never leads; the leader exits and the third
/// leads; the first re-enters the race; the third's closure fails (panics) and the first
/// leads again.
#[tokio::test]
async fn kazoo_election_scenario() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("kazoo");
        // Each closure announces its id and waits for its exit signal.
        let (led_tx, mut led) = mpsc::unbounded_channel::<String>();
        let exit = Arc::new(AsyncMutex::new(None::<tokio::sync::oneshot::Sender<bool>>));
        let contender = |id: &str| {
            let (led_tx, exit, name) = (led_tx.clone(), exit.clone(), id.to_owned());
            LeaderSelector::new(&fw, &path, id, move |_| {
                let (led_tx, exit, name) = (led_tx.clone(), exit.clone(), name.clone());
                async move {
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    *exit.lock().await = Some(tx);
                    led_tx.send(name).unwrap();
                    if rx.await.unwrap_or(false) {
                        panic!("the leader function fails");
                    }
                }
            })
            .unwrap()
        };
        let ids = ["c-first", "c-second", "c-third"];
        let contenders: Vec<LeaderSelector> = ids.iter().map(|id| contender(id)).collect();
        for (i, c) in contenders.iter().enumerate() {
            c.start().unwrap();
            children_count_becomes(&fw, &path, i + 1, EVENT).await;
        }
        let first_leader = within(EVENT, "a leader", led.recv()).await.unwrap();
        let order: Vec<String> = contenders[0].participants().await.unwrap().into_iter().map(|p| p.id).collect();
        assert_eq!(order, ids);
        assert_eq!(first_leader, order[0]);

        contenders[1].close().await.unwrap(); // cancel: never elected
        exit.lock().await.take().unwrap().send(false).unwrap();
        assert_eq!(within(EVENT, "the third leading", led.recv()).await.unwrap(), "c-third");

        assert!(contenders[0].requeue().unwrap(), "the first re-enters the race");
        children_count_becomes(&fw, &path, 2, EVENT).await;
        let order: Vec<String> = contenders[2].participants().await.unwrap().into_iter().map(|p| p.id).collect();
        assert_eq!(order, ["c-third", "c-first"]);

        exit.lock().await.take().unwrap().send(true).unwrap(); // the third's closure panics
        assert_eq!(within(EVENT, "the first leading again", led.recv()).await.unwrap(), "c-first");
        exit.lock().await.take().unwrap().send(false).unwrap();
        children_count_becomes(&fw, &path, 0, EVENT).await;
        assert!(led.try_recv().is_err(), "the second never led");
        for c in &contenders {
            c.close().await.unwrap();
        }
        fw.close().await;
    })
    .await;
}
