//! `SetPartitioner` against real servers: kazoo's layout, and a group of five members
//! dividing 100 items through joins, a leave, a session expiry and a cut connection, every
//! item owned by exactly one member (and locked by exactly one node) after each change.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::fixtures::*;
use common::timing::{back_within, EVENT, FAULT_SESSION, LIMIT, SESSION, SLOW_LIMIT};
use zk_recipes::{Error, Framework, PartitionState, SetPartitioner};

pub(super) const BOUNDARY: Duration = Duration::from_millis(300);
pub(super) const REACTION: Duration = Duration::from_millis(300);

pub(super) fn items(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("item-{i:03}")).collect()
}

/// One member: its framework, its partitioner, and a driver that calls `release_set` on
/// every `Release` (counted) until the partitioner ends.
pub(super) struct Member {
    pub(super) fw: Framework,
    pub(super) partitioner: Arc<SetPartitioner>,
    releases: Arc<AtomicUsize>,
    pub(super) driver: tokio::task::JoinHandle<()>,
}

pub(super) async fn join(fw: Framework, path: &str, id: &str, items: &[String]) -> Member {
    let partitioner = SetPartitioner::builder(&fw, path, items.iter().cloned())
        .identifier(id)
        .time_boundary(BOUNDARY)
        .max_reaction_time(REACTION)
        .start()
        .await
        .unwrap();
    let partitioner = Arc::new(partitioner);
    let releases = Arc::new(AtomicUsize::new(0));
    let driver = {
        let (p, releases) = (partitioner.clone(), releases.clone());
        tokio::spawn(async move {
            loop {
                let state = p.state();
                match state {
                    PartitionState::Release => {
                        p.release_set().await;
                        releases.fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                    PartitionState::Failure => return,
                    _ => {}
                }
                p.wait_while(state).await;
            }
        })
    };
    Member { fw, partitioner, releases, driver }
}

/// Waits until every member is `Acquired` and their partitions cover `items` exactly once,
/// and every item's lock directory holds exactly one node.
async fn every_item_owned_once(members: &[&Member], items: &[String], checker: &Framework, path: &str, what: &str) {
    let limit = back_within(FAULT_SESSION) + EVENT;
    eventually(limit, what, || async {
        let mut owned = Vec::new();
        for m in members {
            let state = m.partitioner.state();
            if state != PartitionState::Acquired {
                return Err(format!("{} is {state:?}", m.partitioner.identifier()));
            }
            owned.extend(m.partitioner.partition());
        }
        owned.sort();
        if owned != items {
            return Err(format!("{} items owned, {} distinct", owned.len(), {
                let mut d = owned.clone();
                d.dedup();
                d.len()
            }));
        }
        for item in items {
            let nodes = children(checker, &format!("{path}/locks/{item}")).await;
            if nodes.len() != 1 {
                return Err(format!("{item} has lock nodes {nodes:?}"));
            }
        }
        Ok(())
    })
    .await;
    // Each member's share is kazoo's division of the sorted items by the sorted members.
    let mut ids: Vec<&str> = members.iter().map(|m| m.partitioner.identifier()).collect();
    ids.sort_unstable();
    for m in members {
        let i = ids.iter().position(|id| *id == m.partitioner.identifier()).unwrap();
        let expected: Vec<String> = items.iter().skip(i).step_by(ids.len()).cloned().collect();
        assert_eq!(m.partitioner.partition(), expected, "{what}: {}'s share", ids[i]);
    }
}

#[tokio::test]
async fn members_divide_the_items_on_kazoos_layout() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("partition", "layout");
        let items = items(10);
        let checker = plain_framework(&connect, SESSION).await;
        let mut members = Vec::new();
        for id in ["b", "a", "c"] {
            members.push(join(plain_framework(&connect, SESSION).await, &path, id, &items).await);
        }
        let refs: Vec<&Member> = members.iter().collect();
        every_item_owned_once(&refs, &items, &checker, &path, "three members").await;
        let a = members.iter().find(|m| m.partitioner.identifier() == "a").unwrap();
        assert_eq!(a.partitioner.partition(), ["item-000", "item-003", "item-006", "item-009"]);
        let mut party = children(&checker, &format!("{path}/party")).await;
        party.sort_by_key(|name| name[33..].to_owned());
        for (name, id) in party.iter().zip(["a", "b", "c"]) {
            assert_eq!(name.len(), 34, "{name}");
            assert!(name[..32].bytes().all(|b| b.is_ascii_hexdigit()) && name[32..] == format!("-{id}"), "{name}");
            assert_eq!(checker.get_data(&format!("{path}/party/{name}")).await.unwrap().0, id.as_bytes());
        }
        let mut locks = children(&checker, &format!("{path}/locks")).await;
        locks.sort();
        assert_eq!(locks, items);
        let node = &children(&checker, &format!("{path}/locks/item-000")).await[0];
        assert!(zk_recipes::protocol::kazoo::lock_sequence(node).is_some(), "{node}");
        assert!(node.starts_with(|c: char| c.is_ascii_hexdigit()) && node[32..].starts_with("__lock__"), "{node}");

        // Bad input is refused before anything is written.
        let bad = unique_path("partition", "bad");
        for bad_items in [vec!["a/b".to_owned()], vec![String::new()], vec!["..".to_owned()]] {
            let started = SetPartitioner::builder(&checker, &bad, bad_items).start().await;
            assert!(matches!(started, Err(Error::InvalidArgument { name: "items", .. })), "{started:?}");
        }
        // The identifier ends the party node's name: refused before anything is written.
        for identifier in ["a/b", "", "a\u{1}b"] {
            let started = SetPartitioner::builder(&checker, &bad, ["x"]).identifier(identifier).start().await;
            assert!(
                matches!(started, Err(Error::InvalidArgument { name: "identifier", .. })),
                "{identifier:?}: {started:?}"
            );
        }
        assert!(checker.exists(&bad).await.unwrap().is_none());
        for reserved in ["/", "/zookeeper"] {
            let started = SetPartitioner::builder(&checker, reserved, ["x"]).start().await;
            assert!(matches!(started, Err(Error::InvalidPath { .. })), "{reserved}: {started:?}");
        }
        for never in ["/party", "/locks", "/zookeeper/party", "/zookeeper/locks"] {
            assert!(checker.exists(never).await.unwrap().is_none(), "{never} was written");
        }

        for m in members {
            let Member { fw, partitioner, driver, .. } = m;
            partitioner.finish().await;
            within(EVENT, "the driver", driver).await.unwrap();
            fw.close().await;
        }
        eventually(EVENT, "the party is empty", || async {
            let left = children(&checker, &format!("{path}/party")).await;
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!("{left:?}"))
            }
        })
        .await;
        checker.delete(&path).recursive().await.unwrap();
        checker.close().await;
    })
    .await;
}

/// Five members and 100 items, through a proxy: every item owned by exactly one member after
/// each of five joins, a leave, a join, a member's session expiry, its rejoin, and a cut of
/// every connection.
#[tokio::test]
async fn five_members_own_every_item_once_through_joins_leaves_expiry_and_a_cut() {
    init_tracing();
    bounded(SLOW_LIMIT * 2, async {
        let faulty = FaultyServer::start().await;
        let path = unique_path("partition", "faults");
        let items = items(100);
        let checker = plain_framework(&faulty.direct(), SESSION).await;
        let ids = ["m0", "m1", "m2", "m3", "m4"];
        let mut members: Vec<Option<Member>> = Vec::new();
        for (n, id) in ids.iter().enumerate() {
            let fw = framework(&faulty.proxied(), FAULT_SESSION).await;
            members.push(Some(join(fw, &path, id, &items).await));
            let live: Vec<&Member> = members.iter().flatten().collect();
            every_item_owned_once(&live, &items, &checker, &path, &format!("after join {}", n + 1)).await;
        }

        // m4 leaves.
        let Member { fw, partitioner, driver, .. } = members[4].take().unwrap();
        partitioner.finish().await;
        assert_eq!(partitioner.state(), PartitionState::Failure);
        within(EVENT, "m4's driver", driver).await.unwrap();
        fw.close().await;
        let live: Vec<&Member> = members.iter().flatten().collect();
        every_item_owned_once(&live, &items, &checker, &path, "after m4 left").await;

        // m4 joins again.
        let fw = framework(&faulty.proxied(), FAULT_SESSION).await;
        members[4] = Some(join(fw, &path, "m4", &items).await);
        let live: Vec<&Member> = members.iter().flatten().collect();
        every_item_owned_once(&live, &items, &checker, &path, "after m4 joined again").await;

        // m2's session expires: its partitioner fails, the others divide the items.
        let m2 = members[2].take().unwrap();
        faulty.expire(&m2.fw, EVENT).await;
        within(EVENT, "m2 failing", m2.driver).await.unwrap();
        assert_eq!(m2.partitioner.state(), PartitionState::Failure);
        assert!(m2.partitioner.partition().is_empty());
        let live: Vec<&Member> = members.iter().flatten().collect();
        every_item_owned_once(&live, &items, &checker, &path, "after m2's session expired").await;
        drop(m2.partitioner);
        members[2] = Some(join(m2.fw, &path, "m2", &items).await);
        let live: Vec<&Member> = members.iter().flatten().collect();
        every_item_owned_once(&live, &items, &checker, &path, "after m2 rejoined").await;

        // Every connection is cut: each member releases and allocates again.
        let before: Vec<usize> = members.iter().flatten().map(|m| m.releases.load(Ordering::SeqCst)).collect();
        faulty.proxy.reset_connections();
        eventually(back_within(FAULT_SESSION), "every member released after the cut", || async {
            let now: Vec<usize> = members.iter().flatten().map(|m| m.releases.load(Ordering::SeqCst)).collect();
            if now.iter().zip(&before).all(|(n, b)| n > b) {
                Ok(())
            } else {
                Err(format!("{before:?} -> {now:?}"))
            }
        })
        .await;
        let live: Vec<&Member> = members.iter().flatten().collect();
        every_item_owned_once(&live, &items, &checker, &path, "after the cut").await;

        for m in members.into_iter().flatten() {
            let Member { fw, partitioner, driver, .. } = m;
            partitioner.finish().await;
            within(EVENT, "the driver", driver).await.unwrap();
            fw.close().await;
        }
        checker.delete(&path).recursive().await.unwrap();
        checker.close().await;
    })
    .await;
}

/// The items are a set, as kazoo's are: an item given twice is owned once (before, the member
/// waited on its own second lock of it for ever). A reaction time too long for the clock
/// waits for ever instead of ending the member's task.
#[tokio::test]
async fn an_item_given_twice_is_taken_once_and_the_longest_reaction_time_is_no_panic() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("partition", "repeats");
        let fw = plain_framework(&connect, SESSION).await;
        let partitioner = SetPartitioner::builder(&fw, &path, ["b", "a", "b", "a", "c"])
            .time_boundary(BOUNDARY)
            .max_reaction_time(Duration::MAX)
            .start()
            .await
            .unwrap();
        assert!(
            partitioner.wait_for_acquire(EVENT).await,
            "state {:?}, error {:?}",
            partitioner.state(),
            partitioner.error()
        );
        assert_eq!(partitioner.partition(), ["a", "b", "c"]);
        let mut locks = children(&fw, &format!("{path}/locks")).await;
        locks.sort();
        assert_eq!(locks, ["a", "b", "c"]);
        for item in ["a", "b", "c"] {
            assert_eq!(children(&fw, &format!("{path}/locks/{item}")).await.len(), 1, "one lock node of {item}");
        }
        partitioner.finish().await;
        fw.delete(&path).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}
