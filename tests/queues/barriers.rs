//! `DistributedBarrier` and `DistributedDoubleBarrier` against real servers: Curator's nodes,
//! waits with and without timeouts, members from Rust and Curator 5.4 in one barrier, a member
//! whose session ends while the others wait (in `enter` and in `leave`), and bad input.

use crate::common;

use std::time::Duration;

use common::curator::CuratorPeer;
use common::fixtures::*;
use common::timing::{EVENT, FAULT_SESSION, INTEROP_SESSION, LIMIT, QUIET, SESSION, SLOW_LIMIT};
use zk_recipes::{DistributedBarrier, DistributedDoubleBarrier, Error};

#[tokio::test]
async fn a_barrier_holds_waiters_until_removed() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let other = plain_framework(&connect, SESSION).await;
        let path = format!("{}/gate", unique_path("barrier", "simple"));
        let barrier = DistributedBarrier::new(&fw, &path).unwrap();
        within(EVENT, "a wait on a barrier never set", barrier.wait()).await.unwrap();
        barrier.set().await.unwrap();
        barrier.set().await.unwrap(); // twice is fine
        let stat = fw.exists(&path).await.unwrap().expect("the barrier node");
        assert_eq!(stat.ephemeral_owner, 0, "persistent");
        assert!(!barrier.wait_timeout(QUIET).await.unwrap(), "still set");
        let waiter = {
            let barrier = DistributedBarrier::new(&other, &path).unwrap();
            tokio::spawn(async move { barrier.wait().await })
        };
        tokio::time::sleep(QUIET).await;
        assert!(!waiter.is_finished());
        barrier.remove().await.unwrap();
        within(EVENT, "the waiter", waiter).await.unwrap().unwrap();
        barrier.remove().await.unwrap(); // missing is fine
        assert!(!barrier.is_set().await.unwrap());
        assert!(matches!(barrier.wait_timeout(Duration::ZERO).await, Err(Error::InvalidArgument { .. })));
        // The longest timeout waits for ever (before, its deadline overflowed the clock and
        // the call panicked); the barrier is not set, so it returns at once.
        assert!(barrier.wait_timeout(Duration::MAX).await.unwrap());
        assert!(matches!(DistributedBarrier::new(&fw, "/"), Err(Error::InvalidPath { .. })));
        other.close().await;
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_double_barrier_lets_its_members_in_together_and_out_together() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("barrier", "double");
        let mut members = Vec::new();
        for _ in 0..3 {
            let (connect, path) = (connect.clone(), path.clone());
            members.push(tokio::spawn(async move {
                let fw = plain_framework(&connect, SESSION).await;
                let barrier = DistributedDoubleBarrier::new(&fw, &path, 3).unwrap();
                assert!(barrier.enter_timeout(LIMIT).await.unwrap());
                (fw, barrier)
            }));
        }
        let mut entered = Vec::new();
        for member in members {
            entered.push(member.await.unwrap());
        }
        let fw = &entered[0].0;
        let mut names = children(fw, &path).await;
        assert_eq!(names.len(), 4, "{names:?}");
        assert!(names.contains(&"ready".to_owned()));
        names.retain(|n| n != "ready");
        for (member_fw, barrier) in &entered {
            let name = node_name(barrier.member_path()).to_owned();
            assert!(names.contains(&name), "{name} in {names:?}");
            assert_eq!(uuid::Uuid::parse_str(&name).map(|u| u.get_version_num()), Ok(4), "a v4 UUID: {name}");
            let stat = member_fw.exists(barrier.member_path()).await.unwrap().unwrap();
            assert_eq!(stat.ephemeral_owner, member_fw.snapshot().session_id, "ephemeral");
        }
        let mut leaving = Vec::new();
        for (member_fw, barrier) in entered {
            leaving.push(tokio::spawn(async move {
                let left = barrier.leave_timeout(LIMIT).await.unwrap();
                member_fw.close().await;
                left
            }));
        }
        for member in leaving {
            assert!(member.await.unwrap());
        }
        let fw = plain_framework(&connect, SESSION).await;
        assert!(children(&fw, &path).await.is_empty(), "members and ready gone");
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_timed_out_enter_leaves_no_member_and_bad_input_is_refused() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("barrier", "timeout");
        for bad in [0, -1, i32::MIN] {
            let refused = DistributedDoubleBarrier::new(&fw, &path, bad);
            assert!(matches!(refused, Err(Error::InvalidArgument { name: "member_quantity", .. })), "{bad}");
        }
        let barrier = DistributedDoubleBarrier::new(&fw, &path, 2).unwrap();
        assert!(matches!(barrier.enter_timeout(Duration::ZERO).await, Err(Error::InvalidArgument { .. })));
        assert!(!barrier.enter_timeout(QUIET).await.unwrap());
        assert!(children(&fw, &path).await.is_empty(), "the member that gave up is not counted");
        // A cancelled enter leaves nothing either (its node is deleted in the background).
        let cancelled = tokio::time::timeout(QUIET, barrier.enter()).await;
        assert!(cancelled.is_err());
        children_count_becomes(&fw, &path, 0, EVENT).await;
        // Leaving a barrier never entered: nobody there, nothing to wait for.
        assert!(barrier.leave_timeout(QUIET).await.unwrap());
        // The longest timeout waits for ever (before, its deadline overflowed the clock and
        // the call panicked); a group of one is complete at once.
        let alone = DistributedDoubleBarrier::new(&fw, &format!("{path}-alone"), 1).unwrap();
        assert!(alone.enter_timeout(Duration::MAX).await.unwrap());
        assert!(alone.leave_timeout(Duration::MAX).await.unwrap());
        fw.close().await;
    })
    .await;
}

/// Waits on one-shot watches (a barrier's, a lock waiter's) whose framework is closed while
/// its connection is down, with a raw client clone keeping the session's client from ending
/// by itself: the framework stops the client's task, which tells its watchers nothing. The
/// waits end with an error, as a close promises; they panicked inside the client's receiver.
#[tokio::test]
async fn waits_end_with_an_error_when_the_framework_closes_during_an_outage() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let counting = zk_recipes::testing::CountingProxy::start(&connect).await.unwrap();
        let proxy = zk_recipes::testing::FaultProxy::start(&counting.connect_string()).await.unwrap();
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let other = plain_framework(&connect, SESSION).await;
        let path = unique_path("barrier", "closed-in-outage");
        DistributedBarrier::new(&other, &format!("{path}/gate")).unwrap().set().await.unwrap();
        let held =
            zk_recipes::InterProcessMutex::new(&other, &format!("{path}/lock")).unwrap().acquire().await.unwrap();
        let barrier = DistributedBarrier::new(&fw, &format!("{path}/gate")).unwrap();
        let mutex = zk_recipes::InterProcessMutex::new(&fw, &format!("{path}/lock")).unwrap();
        let waits = tokio::spawn(async move {
            let (gate, lock) = tokio::join!(barrier.wait(), mutex.acquire());
            (gate, lock.map(drop))
        });
        eventually(EVENT, "both waits watching", || async {
            let counts = counting.counts();
            let watching = counts.get("exists+watch") >= 1 && counts.get("getData+watch") >= 1;
            if watching {
                Ok(())
            } else {
                Err(format!("{counts:?}"))
            }
        })
        .await;
        let raw = fw.zk_client().unwrap();
        proxy.set_mode(zk_recipes::testing::ProxyMode::BlackHole);
        fw.close().await;
        let ended = within(EVENT, "the waits", waits).await;
        let (gate, lock) = ended.expect("the waits ended without a panic");
        assert!(gate.is_err() && lock.is_err(), "{gate:?}, {lock:?}");
        drop(raw);
        held.release().await.unwrap();
        other.delete(&path).recursive().await.unwrap();
        other.close().await;
    })
    .await;
}

/// A member whose time runs out just as the group completes counting it: its delete reaches
/// the server after another member made `ready` (the link of the late member stalls, held by
/// a proxy, from before its deadline until `ready` is there). It is in the group after all:
/// its enter says so, its node is there again, and both leave together.
#[tokio::test]
async fn a_member_counted_just_before_its_time_ran_out_is_in_the_group() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let proxy = zk_recipes::testing::FaultProxy::start(&connect).await.unwrap();
        let late = plain_framework(&proxy.connect_string(), SESSION).await;
        let other = plain_framework(&connect, SESSION).await;
        let path = unique_path("barrier", "counted");
        let barrier = DistributedDoubleBarrier::new(&late, &path, 2).unwrap();
        let member = barrier.member_path().to_owned();
        // Long enough for the test to stall the link before it runs out.
        let patience = Duration::from_secs(2);
        let entering =
            tokio::spawn(async move { barrier.enter_timeout(patience).await.map(|entered| (entered, barrier)) });
        children_count_becomes(&other, &path, 1, EVENT).await;
        // The late member waits now (its listing came before its node showed). Stall its link.
        proxy.set_mode(zk_recipes::testing::ProxyMode::Hold);
        let second = DistributedDoubleBarrier::new(&other, &path, 2).unwrap();
        assert!(second.enter_timeout(EVENT).await.unwrap(), "the group is complete, counting the late member");
        // Its time runs out: its delete waits in the proxy (more than a ping's 12 bytes).
        request_held_back(&proxy, "the late member's delete sent").await;
        proxy.set_mode(zk_recipes::testing::ProxyMode::Pass);
        let (entered, barrier) = within(EVENT, "the late member's enter", entering).await.unwrap().unwrap();
        assert!(entered, "counted before its delete: in the group");
        assert!(other.exists(&member).await.unwrap().is_some(), "its node is there again");
        let (left, second_left) = tokio::join!(barrier.leave_timeout(EVENT), second.leave_timeout(EVENT));
        assert!(left.unwrap() && second_left.unwrap());
        assert!(children(&other, &path).await.is_empty());
        late.close().await;
        other.close().await;
    })
    .await;
}

/// A member whose session ends while it waits in `enter` loses its node: its enter fails
/// typed, it no longer counts, and the group completes with a member that arrives later.
#[tokio::test]
async fn a_member_whose_session_ends_no_longer_counts() {
    init_tracing();
    bounded(LIMIT, async {
        let faulty = FaultyServer::start().await;
        let path = unique_path("barrier", "dies");
        let a_fw = plain_framework(&faulty.direct(), SESSION).await;
        let a = DistributedDoubleBarrier::new(&a_fw, &path, 3).unwrap();
        let a_enter = tokio::spawn(async move { a.enter_timeout(LIMIT).await.map(|ok| (ok, a)) });
        children_count_becomes(&a_fw, &path, 1, EVENT).await;

        let b_fw = framework(&faulty.proxied(), FAULT_SESSION).await;
        let b = std::sync::Arc::new(DistributedDoubleBarrier::new(&b_fw, &path, 3).unwrap());
        let b_enter = {
            let b = b.clone();
            tokio::spawn(async move { b.enter_timeout(LIMIT).await })
        };
        children_count_becomes(&a_fw, &path, 2, EVENT).await;
        faulty.expire(&b_fw, EVENT).await;
        let b_result = within(EVENT, "the dead member's enter", b_enter).await.unwrap();
        assert!(matches!(&b_result, Err(Error::LockLost { path: p }) if p == b.member_path()), "{b_result:?}");
        children_count_becomes(&a_fw, &path, 1, EVENT).await;
        assert!(!a_enter.is_finished(), "two of three, one of them dead, is not a group");

        let c_fw = plain_framework(&faulty.direct(), SESSION).await;
        let d_fw = plain_framework(&faulty.direct(), SESSION).await;
        let c = DistributedDoubleBarrier::new(&c_fw, &path, 3).unwrap();
        let d = DistributedDoubleBarrier::new(&d_fw, &path, 3).unwrap();
        let (c_in, d_in) = tokio::join!(c.enter_timeout(LIMIT), d.enter_timeout(LIMIT));
        assert!(c_in.unwrap() && d_in.unwrap());
        let (a_in, a) = within(EVENT, "the first member", a_enter).await.unwrap().unwrap();
        assert!(a_in);
        let (a_out, c_out, d_out) = tokio::join!(a.leave(), c.leave(), d.leave());
        a_out.unwrap();
        c_out.unwrap();
        d_out.unwrap();
        assert!(children(&a_fw, &path).await.is_empty());
        for fw in [a_fw, b_fw, c_fw, d_fw] {
            fw.close().await;
        }
    })
    .await;
}

/// A member whose session ends while it waits in `enter`, after the group completed counting
/// it but before it heard so (its link black-holed): `ready` is there when it wakes on the
/// session's end, but its node went with the session, so its enter fails typed instead of
/// letting it in without a node (the others' leave would not wait for it).
#[tokio::test]
async fn a_member_whose_session_ended_is_not_let_in_by_ready() {
    init_tracing();
    bounded(LIMIT, async {
        let faulty = FaultyServer::start().await;
        let path = unique_path("barrier", "expired-ready");
        let a_fw = framework(&faulty.proxied(), FAULT_SESSION).await;
        let other = plain_framework(&faulty.direct(), SESSION).await;
        let a = std::sync::Arc::new(DistributedDoubleBarrier::new(&a_fw, &path, 2).unwrap());
        let a_enter = {
            let a = a.clone();
            tokio::spawn(async move { a.enter_timeout(LIMIT).await })
        };
        children_count_becomes(&other, &path, 1, EVENT).await;
        // The member waits now (its listing follows its create at once). Cut it off.
        faulty.proxy.set_mode(zk_recipes::testing::ProxyMode::BlackHole);
        let b = DistributedDoubleBarrier::new(&other, &path, 2).unwrap();
        assert!(b.enter_timeout(EVENT).await.unwrap(), "the group is complete, counting the cut-off member");
        faulty.expire(&a_fw, EVENT).await;
        let a_result = within(EVENT, "the cut-off member's enter", a_enter).await.unwrap();
        assert!(matches!(&a_result, Err(Error::LockLost { path: p }) if p == a.member_path()), "{a_result:?}");
        assert!(other.exists(a.member_path()).await.unwrap().is_none(), "no member node of its own");
        assert!(b.leave_timeout(EVENT).await.unwrap(), "the member left with its session");
        assert!(children(&other, &path).await.is_empty());
        a_fw.close().await;
        other.close().await;
    })
    .await;
}

/// A member that has deleted its node in `leave` waits for the lowest member's node to go.
/// Woken by its session's end while the lowest is still in, it finds that node alone under
/// the barrier: it keeps waiting (and leaves `ready` alone) until the lowest has left too.
#[tokio::test]
async fn a_member_that_left_waits_for_the_lowest_after_its_session_ended() {
    init_tracing();
    bounded(LIMIT, async {
        let faulty = FaultyServer::start().await;
        let path = unique_path("barrier", "leave-wake");
        let low_fw = plain_framework(&faulty.direct(), SESSION).await;
        let high_fw = framework(&faulty.proxied(), FAULT_SESSION).await;
        let low = DistributedDoubleBarrier::new(&low_fw, &path, 2).unwrap();
        // Member names are random: one named after the lowest's.
        let high = loop {
            let high = DistributedDoubleBarrier::new(&high_fw, &path, 2).unwrap();
            if node_name(high.member_path()) > node_name(low.member_path()) {
                break high;
            }
        };
        let (low_in, high_in) = tokio::join!(low.enter_timeout(EVENT), high.enter_timeout(EVENT));
        assert!(low_in.unwrap() && high_in.unwrap());
        let high_member = high.member_path().to_owned();
        let mut high_leave = tokio::spawn(async move { high.leave_timeout(LIMIT).await });
        // Its node goes after its watch on the lowest's node is set.
        children_count_becomes(&low_fw, &path, 2, EVENT).await;
        assert!(low_fw.exists(&high_member).await.unwrap().is_none());
        faulty.expire(&high_fw, EVENT).await;
        let early = tokio::time::timeout(QUIET, &mut high_leave).await;
        assert!(early.is_err(), "left while the lowest member is still in: {early:?}");
        assert!(low_fw.exists(&format!("{path}/ready")).await.unwrap().is_some(), "ready is left");
        assert!(low.leave_timeout(EVENT).await.unwrap());
        assert!(within(EVENT, "the other member's leave", high_leave).await.unwrap().unwrap());
        assert!(children(&low_fw, &path).await.is_empty());
        low_fw.close().await;
        high_fw.close().await;
    })
    .await;
}

/// Curator 5.4 and Rust share both barriers: Curator sets a barrier Rust waits on and Rust
/// removes it; a double barrier of two Rust members and one Curator member enters and leaves.
#[tokio::test]
async fn barriers_with_members_from_curator_and_rust() {
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = CuratorPeer::started(&connect, INTEROP_SESSION).await else { return };
        let fw = plain_framework(&connect, SESSION).await;
        let gate = unique_path("barrier", "interop-gate");
        java.value_command(&format!("barrier_set J {gate}"), LIMIT).await.unwrap();
        let barrier = DistributedBarrier::new(&fw, &gate).unwrap();
        assert!(barrier.is_set().await.unwrap());
        assert!(!barrier.wait_timeout(QUIET).await.unwrap());
        java.send(&format!("barrier_wait J {gate} 30000")).await.unwrap();
        barrier.remove().await.unwrap();
        assert_eq!(java.value_reply("barrier_wait J", EVENT).await.unwrap(), ["true"]);
        barrier.set().await.unwrap();
        assert_eq!(java.value_command(&format!("barrier_wait J {gate} 300"), LIMIT).await.unwrap(), ["false"]);
        java.value_command(&format!("barrier_remove J {gate}"), LIMIT).await.unwrap();
        within(EVENT, "the Rust wait", barrier.wait()).await.unwrap();

        let path = unique_path("barrier", "interop-double");
        java.value_command(&format!("dbarrier D {path} 3"), LIMIT).await.unwrap();
        java.send("dbarrier_enter D 30000").await.unwrap();
        let other = plain_framework(&connect, SESSION).await;
        let r1 = DistributedDoubleBarrier::new(&fw, &path, 3).unwrap();
        let r2 = DistributedDoubleBarrier::new(&other, &path, 3).unwrap();
        let (in1, in2) = tokio::join!(r1.enter_timeout(LIMIT), r2.enter_timeout(LIMIT));
        assert!(in1.unwrap() && in2.unwrap());
        assert_eq!(java.value_reply("dbarrier_enter D", EVENT).await.unwrap(), ["true"]);
        java.send("dbarrier_leave D 30000").await.unwrap();
        let (out1, out2) = tokio::join!(r1.leave_timeout(LIMIT), r2.leave_timeout(LIMIT));
        assert!(out1.unwrap() && out2.unwrap());
        assert_eq!(java.value_reply("dbarrier_leave D", EVENT).await.unwrap(), ["true"]);
        assert!(children(&fw, &path).await.is_empty());
        other.close().await;
        fw.close().await;
        java.quit().await.unwrap();
    })
    .await;
}
