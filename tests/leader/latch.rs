//! `LeaderLatch` on a healthy server: Curator's `TestLeaderLatch` scenarios that need no
//! server faults (basic order, waiting, correct watching, callbacks and close modes, a latch
//! started before its framework, create/close races, an uncreated path), participants and
//! leader ids, a foreign child in the latch directory, and bad input.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::fixtures::shared_framework as fw;
use common::fixtures::{bounded, children, children_count_becomes, init_tracing, shared_connect, unique_path, within};
use common::timing::{EVENT, LIMIT, SESSION};
use futures::StreamExt;
use zk_recipes::{CloseMode, Error, Framework, LeaderLatch, LeaderSelector, LeadershipEvent};

fn path(name: &str) -> String {
    unique_path("leader-latch", name)
}

/// Starts latches `ids` on `path` one after the other, each once the previous one's node is
/// in the queue, so that the queue order is the start order.
async fn start_in_order(fw: &Framework, path: &str, ids: &[&str]) -> Vec<LeaderLatch> {
    let mut latches = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let latch = LeaderLatch::new(fw, path, id).unwrap();
        latch.start().unwrap();
        children_count_becomes(fw, path, i + 1, EVENT).await;
        latches.push(latch);
    }
    latches
}

/// testBasic: leadership advances in start order as each leader closes; exactly one latch
/// leads at a time; participants and leader name the same candidate; a closed leader's term
/// is over.
#[tokio::test]
async fn leadership_advances_in_start_order() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("basic");
        let ids = ["c0", "c1", "c2", "c3", "c4"];
        let latches = start_in_order(&fw, &path, &ids).await;
        for (i, latch) in latches.iter().enumerate() {
            let leadership = within(EVENT, "the next latch leading", latch.await_leadership()).await.unwrap();
            let leaders: Vec<&str> = latches[i..].iter().filter(|l| l.is_leader()).map(LeaderLatch::id).collect();
            assert_eq!(leaders, [ids[i]], "exactly one leader, in start order");
            let participants = latch.participants().await.unwrap();
            let seen: Vec<(&str, bool)> = participants.iter().map(|p| (p.id.as_str(), p.is_leader)).collect();
            let expected: Vec<(&str, bool)> = ids[i..].iter().enumerate().map(|(j, id)| (*id, j == 0)).collect();
            assert_eq!(seen, expected);
            assert_eq!(participants[0].node, leadership.node_path());
            let leader = latch.leader().await.unwrap().expect("a leader");
            assert_eq!((leader.id.as_str(), leader.is_leader), (ids[i], true));
            assert!(leadership.node_path().starts_with(&format!("{path}/_c_")), "{}", leadership.node_path());
            assert!(leadership.node_path().contains("-latch-"), "{}", leadership.node_path());

            latch.close().await.unwrap();
            assert!(!latch.is_leader() && !leadership.is_leader());
            within(EVENT, "lost() of a closed leader's term", leadership.lost()).await;
        }
        assert!(children(&fw, &path).await.is_empty(), "every node deleted");
        fw.close().await;
    })
    .await;
}

/// testWaiting / testBasicAlt: ten candidates on two sessions start at once; each waits for
/// leadership, checks that no one else is inside, and closes. All of them lead, one at a time.
#[tokio::test]
async fn ten_candidates_lead_one_at_a_time() {
    bounded(LIMIT, async {
        let fws = [fw().await, fw().await];
        let path = path("waiting");
        let inside = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for i in 0..10 {
            let latch = LeaderLatch::new(&fws[i % 2], &path, &format!("w{i}")).unwrap();
            let inside = inside.clone();
            tasks.push(tokio::spawn(async move {
                latch.start().unwrap();
                let leadership = latch.await_leader(EVENT).await.unwrap().expect("leading within the bound");
                assert!(!inside.swap(true, Ordering::SeqCst), "two leaders at once");
                tokio::time::sleep(Duration::from_millis(i as u64 % 7)).await;
                assert!(leadership.is_leader());
                inside.store(false, Ordering::SeqCst);
                latch.close().await.unwrap();
            }));
        }
        for task in tasks {
            within(EVENT * 2, "every candidate leading once", task).await.unwrap();
        }
        assert!(children(&fws[0], &path).await.is_empty());
        for fw in fws {
            fw.close().await;
        }
    })
    .await;
}

/// testCorrectWatching: closing a waiting candidate in the middle of the queue promotes no one;
/// its successor moves up and leads in turn.
#[tokio::test]
async fn closing_a_waiter_promotes_no_one() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("watching");
        let ids: Vec<String> = (0..10).map(|i| format!("p{i}")).collect();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let latches = start_in_order(&fw, &path, &refs).await;
        within(EVENT, "p0 leading", latches[0].await_leadership()).await.unwrap();

        latches[2].close().await.unwrap();
        let participants = latches[0].participants().await.unwrap();
        assert_eq!(participants.len(), 9);
        assert!(!participants.iter().any(|p| p.id == "p2"));
        assert!(latches[0].is_leader());
        assert!(!latches[1].is_leader() && !latches[3].is_leader());

        latches[0].close().await.unwrap();
        within(EVENT, "p1 leading after p0", latches[1].await_leadership()).await.unwrap();
        assert!(!latches[3].is_leader());
        latches[1].close().await.unwrap();
        within(EVENT, "p3 leading after p1 (p2 left)", latches[3].await_leadership()).await.unwrap();
        for latch in &latches {
            latch.close().await.unwrap();
        }
        fw.close().await;
    })
    .await;
}

/// Curator's await forms: before start and after close they fail with `NotInElection`
/// (also for a waiter blocked when the latch closes); a zero timeout is refused; a timed wait
/// while someone else leads returns `None`.
#[tokio::test]
async fn await_forms_and_their_errors() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("await");
        let leader = LeaderLatch::new(&fw, &path, "leader").unwrap();
        let waiter = Arc::new(LeaderLatch::new(&fw, &path, "waiter").unwrap());
        assert!(matches!(
            waiter.await_leader(Duration::from_secs(1)).await,
            Err(Error::NotInElection { reason: "not started", .. })
        ));
        assert!(matches!(
            waiter.await_leader(Duration::ZERO).await,
            Err(Error::InvalidArgument { name: "timeout", .. })
        ));

        leader.start().unwrap();
        within(EVENT, "the first latch leading", leader.await_leadership()).await.unwrap();
        waiter.start().unwrap();
        waiter.start().unwrap(); // a second start does nothing
        children_count_becomes(&fw, &path, 2, EVENT).await;
        assert!(waiter.await_leader(Duration::from_millis(200)).await.unwrap().is_none());
        assert!(waiter.leadership().is_none() && !waiter.is_leader());

        let blocked = {
            let waiter = waiter.clone();
            tokio::spawn(async move { waiter.await_leadership().await })
        };
        waiter.close().await.unwrap();
        let result = within(EVENT, "a blocked await ending on close", blocked).await.unwrap();
        assert!(matches!(result, Err(Error::NotInElection { reason: "closed", .. })), "{result:?}");
        assert!(matches!(waiter.start(), Err(Error::NotInElection { reason: "closed", .. })));
        waiter.close().await.unwrap(); // closing twice is fine
        assert!(leader.is_leader(), "closing a waiter leaves the leader alone");
        assert_eq!(children(&fw, &path).await.len(), 1);
        leader.close().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// testCallbackNotifyLeader / testCallbackDontNotify: events follow the close mode. A silent
/// leader's close emits nothing; a `NotifyLeader` close of a leader emits `Lost`; closing a
/// latch that does not lead emits nothing in either mode; every stream ends at close.
#[tokio::test]
async fn events_follow_the_close_mode() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("events");
        let silent = LeaderLatch::new(&fw, &path, "silent").unwrap();
        let notifying = LeaderLatch::new(&fw, &path, "notifying").unwrap().close_mode(CloseMode::NotifyLeader);
        let overridden = LeaderLatch::new(&fw, &path, "overridden").unwrap();
        let mut silent_events = silent.leadership_events();
        let mut notifying_events = notifying.leadership_events();
        let mut overridden_events = overridden.leadership_events();
        let latches = [&silent, &notifying, &overridden];
        for (i, latch) in latches.iter().enumerate() {
            latch.start().unwrap();
            children_count_becomes(&fw, &path, i + 1, EVENT).await;
        }

        // silent leads, then closes: no Lost event, the stream ends.
        match within(EVENT, "silent's first event", silent_events.next()).await {
            Some(LeadershipEvent::Gained(leadership)) => {
                assert_eq!(Some(leadership.fencing_token()), silent.leadership().map(|l| l.fencing_token()));
            }
            other => panic!("expected Gained, got {other:?}"),
        }
        let watch = notifying.leadership_watch();
        assert!(watch.borrow().is_none());
        silent.close().await.unwrap();
        assert!(within(EVENT, "silent's stream", silent_events.next()).await.is_none(), "no event, then the end");

        // notifying leads; closing the (waiting) overridden latch in NotifyLeader mode emits nothing.
        assert!(matches!(
            within(EVENT, "notifying's event", notifying_events.next()).await,
            Some(LeadershipEvent::Gained(_))
        ));
        assert!(watch.borrow().as_ref().is_some_and(|l| l.is_leader()));
        overridden.close_with(CloseMode::NotifyLeader).await.unwrap();
        assert!(within(EVENT, "overridden's stream", overridden_events.next()).await.is_none());

        // notifying closes while leading: Lost, then the end.
        notifying.close().await.unwrap();
        assert!(matches!(
            within(EVENT, "notifying's Lost", notifying_events.next()).await,
            Some(LeadershipEvent::Lost)
        ));
        assert!(within(EVENT, "notifying's stream", notifying_events.next()).await.is_none());
        assert!(watch.borrow().is_none());
        // A stream taken after close is already over.
        assert!(notifying.leadership_events().next().await.is_none());
        fw.close().await;
    })
    .await;
}

/// testUncreatedPathGetLeader (CURATOR-436): participants and leader of a path that does not
/// exist are empty, not an error; they work without start().
#[tokio::test]
async fn uncreated_path_has_no_participants() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let latch = LeaderLatch::new(&fw, &path("uncreated"), "nobody").unwrap();
        assert_eq!(latch.leader().await.unwrap(), None);
        assert!(latch.participants().await.unwrap().is_empty());
        fw.close().await;
    })
    .await;
}

/// testNoServerAtStart: a latch started before its framework waits for the first connection,
/// then leads once.
#[tokio::test]
async fn a_latch_started_before_its_framework_leads_once_connected() {
    bounded(LIMIT, async {
        init_tracing();
        let fw = Framework::builder(&shared_connect().await).session_timeout(SESSION).build().unwrap();
        let path = path("no-server");
        let latch = LeaderLatch::new(&fw, &path, "early").unwrap();
        let mut events = latch.leadership_events();
        latch.start().unwrap();
        tokio::task::yield_now().await;
        assert!(!latch.is_leader());
        fw.start().await.unwrap();
        within(EVENT, "leading after the framework started", latch.await_leadership()).await.unwrap();
        assert!(matches!(events.next().await, Some(LeadershipEvent::Gained(_))));
        latch.close().await.unwrap();
        assert!(events.next().await.is_none(), "elected exactly once");
        fw.close().await;
    })
    .await;
}

/// testCreateDeleteRace / testProperCloseWithoutConnectionEstablished / testResetRace: a
/// latch closed at any point of its start leaves no node behind, and a latch never has two.
#[tokio::test]
async fn close_during_start_leaves_no_node() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("create-delete");
        fw.ensure_path(&path).await.unwrap();
        for i in 0..20 {
            let latch = LeaderLatch::new(&fw, &path, &format!("r{i}")).unwrap();
            latch.start().unwrap();
            for _ in 0..(i % 5) {
                tokio::task::yield_now().await;
            }
            latch.close().await.unwrap();
        }
        children_count_becomes(&fw, &path, 0, EVENT).await;

        let latch = LeaderLatch::new(&fw, &path, "single").unwrap();
        latch.start().unwrap();
        latch.start().unwrap();
        within(EVENT, "leading", latch.await_leadership()).await.unwrap();
        assert_eq!(children(&fw, &path).await.len(), 1, "one node per latch");
        latch.close().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Dropping a leading latch ends its term and deletes its node: the next candidate leads.
#[tokio::test]
async fn dropping_a_leader_hands_over() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("drop");
        let mut latches = start_in_order(&fw, &path, &["first", "second"]).await;
        let second = latches.pop().unwrap();
        let first = latches.pop().unwrap();
        let leadership = within(EVENT, "first leading", first.await_leadership()).await.unwrap();
        drop(first);
        within(EVENT, "the dropped leader's term ending", leadership.lost()).await;
        let next = within(EVENT, "second leading after the drop", second.await_leadership()).await.unwrap();
        assert!(next.fencing_token() > leadership.fencing_token(), "fencing tokens grow");
        second.close().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// A foreign child in the latch directory is a candidate, as Curator counts it (so Rust and
/// Curator agree on who leads): a child that sorts first blocks the election and is reported
/// as the leader until it goes; one that sorts last changes nothing.
#[tokio::test]
async fn a_foreign_child_counts_as_a_candidate() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("foreign");
        fw.create(&format!("{path}/zzz-not-a-latch")).data(b"junk").await.unwrap();
        let latch = LeaderLatch::new(&fw, &path, "ours").unwrap();
        latch.start().unwrap();
        within(EVENT, "leading ahead of a child that sorts last", latch.await_leadership()).await.unwrap();
        let ids: Vec<(String, bool)> =
            latch.participants().await.unwrap().into_iter().map(|p| (p.id, p.is_leader)).collect();
        assert_eq!(ids, [("ours".to_owned(), true), ("junk".to_owned(), false)]);
        latch.close().await.unwrap();

        let blocker = format!("{path}/0");
        fw.create(&blocker).data(b"intruder").await.unwrap();
        let latch = LeaderLatch::new(&fw, &path, "ours").unwrap();
        latch.start().unwrap();
        children_count_becomes(&fw, &path, 3, EVENT).await;
        assert!(latch.await_leader(Duration::from_millis(500)).await.unwrap().is_none(), "a child sorting first leads");
        let leader = latch.leader().await.unwrap().unwrap();
        assert_eq!((leader.id.as_str(), leader.node.as_str()), ("intruder", blocker.as_str()));
        let participants = latch.participants().await.unwrap();
        assert_eq!(participants.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["intruder", "ours", "junk"]);
        fw.delete(&blocker).await.unwrap();
        within(EVENT, "leading once the foreign child is gone", latch.await_leadership()).await.unwrap();
        latch.close().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Bad ids and paths are refused with typed errors, by both recipes, before any I/O.
#[tokio::test]
async fn bad_input_is_refused() {
    let fw = Framework::builder("127.0.0.1:1").build().unwrap();
    let selector = |path: &str, id: &str| LeaderSelector::new(&fw, path, id, |_| async {}).map(drop);
    let latch = |path: &str, id: &str| LeaderLatch::new(&fw, path, id).map(drop);
    for make in [&latch as &dyn Fn(&str, &str) -> zk_recipes::Result<()>, &selector] {
        for id in ["", "line\nbreak", "nul\0", "\u{7}bell"] {
            assert!(matches!(make("/election", id), Err(Error::InvalidArgument { name: "id", .. })), "id {id:?}");
        }
        for path in ["", "relative", "/trailing/", "/", "/a//b", "/a/./b", "/zookeeper", "/zookeeper/x", "/bad\0"] {
            assert!(matches!(make(path, "id"), Err(Error::InvalidPath { .. })), "path {path:?}");
        }
        let huge = "x".repeat(2 << 20);
        assert!(matches!(make("/election", &huge), Err(Error::TooLarge { name: "id", .. })));
        assert!(make("/election", "ünïcode id").is_ok());
    }
    let latch = LeaderLatch::new(&fw, "/election", "early").unwrap();
    assert!(matches!(latch.close().await, Ok(())), "closing an unstarted latch");
    let selector = LeaderSelector::new(&fw, "/election", "early", |_| async {}).unwrap();
    assert!(matches!(selector.requeue(), Err(Error::NotInElection { reason: "not started", .. })));
}

/// start() needs a Tokio runtime (the task is spawned there) and says so.
#[test]
fn start_outside_a_runtime_is_refused() {
    let fw = Framework::builder("127.0.0.1:1").build().unwrap();
    let latch = LeaderLatch::new(&fw, "/election", "no-runtime").unwrap();
    assert!(matches!(latch.start(), Err(Error::InvalidArgument { name: "start", .. })));
    let selector = LeaderSelector::new(&fw, "/election", "no-runtime", |_| async {}).unwrap();
    assert!(matches!(selector.start(), Err(Error::InvalidArgument { name: "start", .. })));
    // A failed start leaves the handle startable.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async { latch.start().unwrap() });
}

/// Closing the framework ends leadership for good: the term's `lost()` completes, the stream
/// reports `Lost` and ends, and waiting fails with `Closed`. A selector's closure is dropped.
#[tokio::test]
async fn framework_close_ends_leadership() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let latch = LeaderLatch::new(&fw, &path("framework-close"), "leader").unwrap();
        let mut events = latch.leadership_events();
        latch.start().unwrap();
        let leadership = within(EVENT, "leading", latch.await_leadership()).await.unwrap();
        assert!(matches!(events.next().await, Some(LeadershipEvent::Gained(_))));
        let dropped = Arc::new(AtomicBool::new(false));
        let (tx, mut started) = tokio::sync::mpsc::unbounded_channel();
        let flag = dropped.clone();
        let selector = LeaderSelector::new(&fw, &path("framework-close-selector"), "s", move |_| {
            let (flag, tx) = (flag.clone(), tx.clone());
            async move {
                let _guard = SetOnDrop(flag);
                tx.send(()).unwrap();
                std::future::pending::<()>().await;
            }
        })
        .unwrap();
        selector.start().unwrap();
        within(EVENT, "the selector leading", started.recv()).await.unwrap();

        fw.close().await;
        within(EVENT, "lost() after the framework closed", leadership.lost()).await;
        assert!(!latch.is_leader());
        assert!(matches!(within(EVENT, "Lost", events.next()).await, Some(LeadershipEvent::Lost)));
        assert!(within(EVENT, "the end of the stream", events.next()).await.is_none());
        assert!(matches!(latch.await_leadership().await, Err(Error::Closed)));
        common::fixtures::eventually(EVENT, "the selector's closure dropped", || async {
            if dropped.load(Ordering::SeqCst) {
                Ok(())
            } else {
                Err("running".to_owned())
            }
        })
        .await;
        assert!(!selector.is_leader());
        latch.close().await.unwrap();
        selector.close().await.unwrap();
    })
    .await;
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A deletion of the leader's node by another client ends the term when a `lost()` is awaited
/// (it watches the node, as a lock guard's does); the latch then joins the queue again with a
/// new node and leads again.
#[tokio::test]
async fn a_deleted_leader_node_ends_the_term_and_the_latch_rejoins() {
    bounded(LIMIT, async {
        let (fw, other) = (fw().await, fw().await);
        let path = path("deleted-node");
        let latch = LeaderLatch::new(&fw, &path, "leader").unwrap();
        let mut events = latch.leadership_events();
        latch.start().unwrap();
        let first = within(EVENT, "leading", latch.await_leadership()).await.unwrap();
        assert!(matches!(events.next().await, Some(LeadershipEvent::Gained(_))));
        let mut lost = std::pin::pin!(first.lost());
        assert!(futures::poll!(&mut lost).is_pending());
        other.delete(first.node_path()).await.unwrap();
        within(EVENT, "lost() after the node was deleted", &mut lost).await;
        assert!(!first.is_leader());
        assert!(matches!(within(EVENT, "Lost", events.next()).await, Some(LeadershipEvent::Lost)));
        let again = within(EVENT, "leading again on a new node", latch.await_leadership()).await.unwrap();
        assert_ne!(again.node_path(), first.node_path());
        assert!(again.fencing_token() > first.fencing_token());
        assert_eq!(children(&other, &path).await.len(), 1);
        latch.close().await.unwrap();
        fw.close().await;
        other.close().await;
    })
    .await;
}
