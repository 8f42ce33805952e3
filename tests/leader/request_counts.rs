//! Server requests per leadership term, counted by a proxy that reads the protocol's frames: a
//! regression in requests fails here, where a timing could not be asserted.

use crate::common;

use common::fixtures::*;
use common::timing::{COUNTING_SESSION as SESSION, LIMIT};
use zk_recipes::testing::mirror_tasks_running;
use zk_recipes::testing::{CountingProxy, RequestCounts};
use zk_recipes::{Framework, LeaderLatch, LeaderSelector};

const CYCLES: u64 = 10;

async fn counted() -> (CountingProxy, Framework) {
    let proxy = CountingProxy::start(&shared_connect().await).await.expect("counting proxy");
    let fw = plain_classic_framework(&proxy.connect_string(), SESSION).await;
    (proxy, fw)
}

fn kinds(counts: &RequestCounts) -> Vec<(&'static str, u64)> {
    counts.iter().filter(|(kind, _)| !matches!(*kind, "ping" | "round-trip")).collect()
}

/// An uncontended term: the create with the listing behind it, and the delete at close: three
/// requests, as Curator's latch (the latch sets no watch of its own on its node, and nothing is
/// left for a RemoveWatches).
#[tokio::test]
async fn uncontended_latch_term_costs_three_requests() {
    init_tracing();
    bounded(LIMIT, async {
        let (proxy, fw) = counted().await;
        let path = unique_path("leader-counts", "latch");
        let pinned = fw.create(&format!("{path}/~pin")).await.unwrap().path;
        let before = proxy.counts();
        for i in 0..CYCLES {
            let latch = LeaderLatch::new(&fw, &path, &format!("c{i}")).unwrap();
            latch.start().unwrap();
            latch.await_leadership().await.unwrap();
            latch.close().await.unwrap();
        }
        let counts = proxy.counts().since(&before);
        let want: Vec<(&str, u64)> =
            [("create2", 1), ("delete", 1), ("getChildren", 1)].map(|(k, n)| (k, n * CYCLES)).into();
        assert_eq!(kinds(&counts), want, "requests over {CYCLES} terms ({})", counts.per_op(CYCLES as usize));
        fw.delete(&pinned).await.unwrap();
        fw.close().await;
    })
    .await;
}

/// A selector term whose closure waits once: the create with the listing behind it, the
/// selector's watch on its own node (leadership lost when someone deletes it), and the delete
/// after the closure, which fires that watch: four requests, no RemoveWatches. A closure that
/// returns at once costs no watch: three requests.
#[tokio::test]
async fn selector_terms_cost_three_or_four_requests() {
    init_tracing();
    bounded(LIMIT, async {
        let (proxy, fw) = counted().await;
        let observer = plain_framework(&shared_connect().await, SESSION).await;
        for (waits, want) in [
            (true, vec![("create2", 1), ("delete", 1), ("getChildren", 1), ("getData+watch", 1), ("watch-event", 1)]),
            (false, vec![("create2", 1), ("delete", 1), ("getChildren", 1)]),
        ] {
            let path = unique_path("leader-counts", "selector");
            let pinned = fw.create(&format!("{path}/~pin")).await.unwrap().path;
            let (tx, mut terms) = tokio::sync::mpsc::unbounded_channel();
            let selector = LeaderSelector::new(&fw, &path, "s", move |_| {
                let tx = tx.clone();
                async move {
                    if waits {
                        tokio::task::yield_now().await;
                    }
                    tx.send(()).unwrap();
                }
            })
            .unwrap();
            let before = proxy.counts();
            selector.start().unwrap();
            for i in 0..CYCLES {
                within(LIMIT, "a term", terms.recv()).await.unwrap();
                if i + 1 < CYCLES {
                    eventually(LIMIT, "requeueing", || async {
                        if selector.requeue().unwrap() {
                            Ok(())
                        } else {
                            Err("still in its term".to_owned())
                        }
                    })
                    .await;
                }
            }
            // Observed on another session, so that the proxy counts only the selector's requests.
            children_become(&observer, &path, std::slice::from_ref(&pinned), LIMIT).await;
            selector.close().await.unwrap();
            let counts = proxy.counts().since(&before);
            let want: Vec<(&str, u64)> = want.into_iter().map(|(k, n)| (k, n * CYCLES)).collect();
            assert_eq!(
                kinds(&counts),
                want,
                "closure waits: {waits}; {CYCLES} terms ({})",
                counts.per_op(CYCLES as usize)
            );
            fw.delete(&pinned).await.unwrap();
        }
        fw.close().await;
        observer.close().await;
    })
    .await;
}

/// Latches made afresh for every term, on frameworks whose elections wait on the session's
/// mirror, two sessions taking turns: the mirror outlives each latch long enough for the next
/// to find it, so a term costs the create and the delete (the mirror's one `addWatch` and
/// listing come before the measured terms, and at most once again during them).
#[tokio::test]
async fn latches_made_per_term_share_the_sessions_mirror() {
    const TERMS: u64 = 40;
    init_tracing();
    bounded(LIMIT, async {
        let proxy = CountingProxy::start(&shared_connect().await).await.expect("counting proxy");
        let counted = mirror_framework(&proxy.connect_string(), SESSION).await;
        let other = mirror_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("leader-counts", "latch-mirror");
        // Keeps the directory (a container) from being reaped between terms.
        let pinned = counted.create(&format!("{path}/~pin")).await.unwrap().path;
        let terms = |fw: Framework, path: String, n: u64| {
            tokio::spawn(async move {
                for i in 0..n {
                    let latch = LeaderLatch::new(&fw, &path, &format!("c{i}")).unwrap();
                    latch.start().unwrap();
                    latch.await_leadership().await.unwrap();
                    tokio::task::yield_now().await;
                    latch.close().await.unwrap();
                }
            })
        };
        // Until each session's server is known and its mirror listed, terms cost more. A
        // session starts its mirror when one of its candidates must wait: contended terms
        // until both have.
        eventually(LIMIT, "both sessions mirror the election", || async {
            let (a, b) = (terms(counted.clone(), path.clone(), 3), terms(other.clone(), path.clone(), 3));
            a.await.unwrap();
            b.await.unwrap();
            match mirror_tasks_running(&path) {
                2 => Ok(()),
                n => Err(format!("{n} mirrors")),
            }
        })
        .await;
        let before = proxy.counts();
        let (a, b) = (terms(counted.clone(), path.clone(), TERMS), terms(other.clone(), path.clone(), TERMS));
        a.await.unwrap();
        b.await.unwrap();
        let counts = proxy.counts().since(&before);
        let what = counts.per_op(TERMS as usize);
        println!("latch per term on the mirror: {what}");
        assert_eq!((counts.get("create2"), counts.get("delete")), (TERMS, TERMS), "{what}");
        for kind in ["getData+watch", "exists+watch", "removeWatches"] {
            assert_eq!(counts.get(kind), 0, "no {kind} in the steady state ({what})");
        }
        // The mirror is let go 2 s after its last user: a loaded machine that keeps the other
        // session from its next term that long gives this one uncontended terms, which need no
        // mirror, and the next contended term starts it again (its `addWatch` and listing).
        // Once at most; a mirror per term would cost one each term.
        let restarts = counts.get("addWatch");
        assert!(restarts <= 1 && counts.get("getChildren") == restarts, "the mirror kept between terms ({what})");
        counted.delete(&pinned).await.unwrap();
        counted.close().await;
        other.close().await;
    })
    .await;
}
