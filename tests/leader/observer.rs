//! `LeaderObserver`: a process that is no candidate follows who leads a latch or a selector
//! election: handovers in queue order, an empty election, a directory made later, and the
//! observer's own connection black-holed (a handover during the outage is seen after it)
//! and its session expired, an observer beside a waiting candidate on one framework, and a
//! server without persistent watches.

use crate::common;

use std::time::Duration;

use common::fixtures::*;
use common::timing::{back_within, EVENT, FAULT_SESSION, LIMIT, SESSION};
use futures::StreamExt;
use zk_recipes::testing::ProxyMode;
use zk_recipes::{ElectionKind, Framework, LeaderLatch, LeaderObserver, LeaderSelector};

async fn latch(fw: &Framework, path: &str, id: &str) -> LeaderLatch {
    let latch = LeaderLatch::new(fw, path, id).unwrap();
    latch.start().unwrap();
    latch
}

/// Waits until `latch`'s election has `n` candidates.
async fn candidates(latch: &LeaderLatch, n: usize) {
    eventually(EVENT, &format!("{n} candidates"), || async {
        match latch.participants().await.map_err(|e| e.to_string())?.len() {
            m if m == n => Ok(()),
            m => Err(m.to_string()),
        }
    })
    .await;
}

async fn leads(observer: &LeaderObserver, id: &str, limit: Duration) {
    let found = observer.wait_for_leader(id, limit).await.unwrap();
    assert!(found.is_some(), "{id} never observed as the leader; last seen {:?}", observer.leader());
}

#[tokio::test]
async fn an_observer_follows_latch_handovers_in_queue_order() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("observer", "latch");
        let observing = plain_framework(&connect, SESSION).await;
        let observer = LeaderObserver::start(&observing, &path, ElectionKind::Latch).unwrap();
        assert_eq!(observer.current().await.unwrap(), None, "no directory, no leader");
        let mut changes = observer.changes();
        assert_eq!(within(EVENT, "the first item", changes.next()).await, Some(None));

        let fw = plain_framework(&connect, SESSION).await;
        let a = latch(&fw, &path, "a").await;
        let seen = within(EVENT, "a leads", changes.next()).await.unwrap().unwrap();
        assert_eq!(seen.id, "a");
        assert!(seen.node.starts_with(&format!("{path}/_c_")) && seen.node.contains("-latch-"), "{}", seen.node);
        let b = latch(&fw, &path, "b").await;
        let c = latch(&fw, &path, "c").await;
        candidates(&a, 3).await;
        let zero = observer.wait_for_leader("a", Duration::ZERO).await;
        assert!(matches!(zero, Err(zk_recipes::Error::InvalidArgument { name: "timeout", .. })), "{zero:?}");
        a.close().await.unwrap();
        leads(&observer, "b", EVENT).await;
        // The longest timeout waits for ever (and b leads already).
        assert_eq!(observer.wait_for_leader("b", Duration::MAX).await.unwrap().map(|p| p.id), Some("b".to_owned()));
        c.close().await.unwrap(); // a waiter leaving changes nothing
        b.close().await.unwrap();
        eventually(EVENT, "no leader", || async { observer.leader().map_or(Ok(()), |p| Err(p.id)) }).await;
        let mut seen = Vec::new();
        while let Ok(Some(next)) = tokio::time::timeout(common::timing::QUIET, changes.next()).await {
            seen.push(next.map(|p| p.id));
        }
        assert_eq!(seen.last(), Some(&None), "no leader once all left: {seen:?}");
        assert!(!seen.contains(&Some("c".to_owned())), "c never led: {seen:?}");
        drop(observer);
        fw.delete(&path).await.ok();
        fw.close().await;
        observing.close().await;
    })
    .await;
}

#[tokio::test]
async fn an_observer_follows_a_selector_election() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("observer", "selector");
        let fw = plain_framework(&connect, SESSION).await;
        let (tx, mut terms) = tokio::sync::mpsc::unbounded_channel();
        let selector = LeaderSelector::new(&fw, &path, "selected", move |leadership| {
            let tx = tx.clone();
            async move {
                tx.send(()).unwrap();
                leadership.lost().await;
            }
        })
        .unwrap();
        selector.start().unwrap();
        within(EVENT, "leading", terms.recv()).await.unwrap();
        let observer = LeaderObserver::start(&fw, &path, ElectionKind::Selector).unwrap();
        assert_eq!(observer.current().await.unwrap().map(|p| p.id).as_deref(), Some("selected"));
        selector.close().await.unwrap();
        eventually(EVENT, "no leader", || async { observer.leader().map_or(Ok(()), |p| Err(p.id)) }).await;
        fw.close().await;
    })
    .await;
}

/// An observer on the framework of a waiting candidate: the candidate's wait watches the
/// election's directory on its session's mirror, and the observer shares that watch, whether
/// it starts after the candidate waits or before; it follows the handover to that candidate.
#[tokio::test]
async fn an_observer_beside_a_waiting_candidate_on_its_framework_follows_the_handover() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        for observer_first in [false, true] {
            let path = unique_path("observer", "beside");
            let leading = plain_framework(&connect, SESSION).await;
            let shared = mirror_framework(&connect, SESSION).await;
            // The mirror waits only on a server known to have persistent watches.
            assert!(shared.server_info().await.unwrap().persistent_watches);
            let early = observer_first.then(|| LeaderObserver::start(&shared, &path, ElectionKind::Latch).unwrap());
            let a = latch(&leading, &path, "a").await;
            let _term = within(EVENT, "a leads", a.await_leadership()).await.unwrap();
            let b = latch(&shared, &path, "b").await;
            candidates(&a, 2).await;
            let observer = match early {
                Some(observer) => observer,
                None => LeaderObserver::start(&shared, &path, ElectionKind::Latch).unwrap(),
            };
            leads(&observer, "a", EVENT).await;
            a.close().await.unwrap();
            let _term = within(EVENT, "b leads", b.await_leadership()).await.unwrap();
            leads(&observer, "b", EVENT).await;
            b.close().await.unwrap();
            eventually(EVENT, "no leader", || async { observer.leader().map_or(Ok(()), |p| Err(p.id)) }).await;
            drop(observer);
            shared.delete(&path).await.ok();
            shared.close().await;
            leading.close().await;
        }
    })
    .await;
}

/// On a server without persistent watches (ZooKeeper 3.5's answer to `addWatch`), the
/// observer follows the election on one-shot watches.
#[tokio::test]
async fn an_observer_follows_a_handover_on_a_server_without_persistent_watches() {
    init_tracing();
    bounded(LIMIT, async {
        let server = server_without_persistent_watches().await;
        let path = unique_path("observer", "oneshot");
        let observing = plain_framework(&server.connect_string(), SESSION).await;
        let fw = plain_framework(&server.connect_string(), SESSION).await;
        let observer = LeaderObserver::start(&observing, &path, ElectionKind::Latch).unwrap();
        assert_eq!(observer.current().await.unwrap(), None, "no directory, no leader");
        let a = latch(&fw, &path, "a").await;
        leads(&observer, "a", EVENT).await;
        assert!(!observing.server_info().await.unwrap().persistent_watches, "the server refused addWatch");
        let b = latch(&fw, &path, "b").await;
        candidates(&a, 2).await;
        a.close().await.unwrap();
        leads(&observer, "b", EVENT).await;
        b.close().await.unwrap();
        eventually(EVENT, "no leader", || async { observer.leader().map_or(Ok(()), |p| Err(p.id)) }).await;
        drop(observer);
        fw.close().await;
        observing.close().await;
    })
    .await;
}

/// The observer's own connection is black-holed while the leader hands over; once it is back
/// (on the same session, or after the session expired) the observer names the new leader.
#[tokio::test]
async fn an_observer_converges_after_a_black_hole_and_its_session_expiring() {
    init_tracing();
    bounded(LIMIT, async {
        let faulty = FaultyServer::start().await;
        let path = unique_path("observer", "faults");
        let candidates = plain_framework(&faulty.direct(), SESSION).await;
        let observing = framework(&faulty.proxied(), FAULT_SESSION).await;
        let observer = LeaderObserver::start(&observing, &path, ElectionKind::Latch).unwrap();
        let a = latch(&candidates, &path, "a").await;
        let b = latch(&candidates, &path, "b").await;
        leads(&observer, "a", EVENT).await;

        // A handover while the observer hears nothing, shorter than its session.
        faulty.proxy.set_mode(ProxyMode::BlackHole);
        a.close().await.unwrap();
        b.await_leader(EVENT).await.unwrap().expect("b leads");
        tokio::time::sleep(FAULT_SESSION / 4).await; // the outage lasts (no event to await)
        assert_eq!(observer.leader().map(|p| p.id).as_deref(), Some("a"), "nothing heard during the outage");
        faulty.proxy.set_mode(ProxyMode::Pass);
        leads(&observer, "b", back_within(FAULT_SESSION)).await;

        // The observer's session expires; a handover meanwhile is seen on the new session.
        let c = latch(&candidates, &path, "c").await;
        faulty.expire(&observing, EVENT).await;
        b.close().await.unwrap();
        leads(&observer, "c", back_within(FAULT_SESSION)).await;
        c.close().await.unwrap();
        eventually(EVENT, "no leader", || async { observer.leader().map_or(Ok(()), |p| Err(p.id)) }).await;
        drop(observer);
        observing.close().await;
        candidates.close().await;
    })
    .await;
}
