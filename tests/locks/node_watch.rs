//! The watch a guard keeps on its own node (for `lost()` and revocation): one per node
//! whatever the number of callers, and kept through a connection loss the retry policy gave
//! up on while the session lives.

use crate::common;

use std::time::Duration;

use common::fixtures::reaperless_connect as server;
use common::fixtures::{bounded, init_tracing, plain_classic_framework, unique_path, within};
use common::timing::{EVENT, LIMIT, SESSION};
use futures::future::join_all;
use futures::StreamExt;
use zk_recipes::retry::RetryNTimes;
use zk_recipes::testing::CountingProxy;
use zk_recipes::{ConnectionState, ConnectionStateErrorPolicy, Framework, InterProcessMutex, Revoker};

/// Callers of `lost()` on one guard.
const CALLERS: usize = 10;

/// A `SessionOnly` framework (so that neither `Suspended` nor `Reconnected` ends `lost()`)
/// whose retry policy gives up at once, behind a counting proxy.
async fn giving_up_at_once() -> (CountingProxy, Framework) {
    let proxy = CountingProxy::start(&server().await).await.expect("counting proxy");
    let fw = Framework::builder(&proxy.connect_string())
        .wait_strategy(zk_recipes::WaitStrategy::PerWaiterWatch)
        .session_timeout(SESSION)
        .error_policy(ConnectionStateErrorPolicy::SessionOnly)
        .retry_policy(RetryNTimes::new(0, Duration::from_millis(10)))
        .start()
        .await
        .expect("starting a framework");
    (proxy, fw)
}

/// Polls every future for `during`, then gives up on them (they are dropped unfinished).
async fn poll_for<F: std::future::Future<Output = ()>>(during: Duration, futures: Vec<F>) {
    let all = join_all(futures);
    assert!(tokio::time::timeout(during, all).await.is_err(), "lost() completed while the lock was held");
}

/// `CALLERS` concurrent calls of `lost()` on one guard, and as many again later, cost one
/// watch request in all; deleting the node ends every call.
#[tokio::test]
async fn many_lost_callers_share_one_watch() {
    init_tracing();
    bounded(LIMIT, async {
        let proxy = CountingProxy::start(&server().await).await.expect("counting proxy");
        let fw = plain_classic_framework(&proxy.connect_string(), SESSION).await;
        let other = plain_classic_framework(&server().await, SESSION).await;
        let path = unique_path("node-watch", "shared");
        let guard = InterProcessMutex::new(&fw, &path).unwrap().acquire().await.unwrap();

        let before = proxy.counts();
        poll_for(Duration::from_millis(300), (0..CALLERS).map(|_| guard.lost()).collect()).await;
        poll_for(Duration::from_millis(300), (0..CALLERS).map(|_| guard.lost()).collect()).await;
        let ending = join_all((0..CALLERS).map(|_| guard.lost()));
        let deleted = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            other.delete(guard.lock_path()).await.unwrap();
        };
        within(EVENT, "every lost() after the node was deleted", futures::future::join(ending, deleted)).await;
        let sent = proxy.counts().since(&before);
        let watches = sent.get("getData+watch") + sent.get("exists+watch") + sent.get("getData") + sent.get("exists");
        eprintln!("{} calls of lost() on one guard sent: {sent:?}", 3 * CALLERS);
        assert!(watches <= 1, "{} calls of lost() cost {watches} reads of the node: {sent:?}", 3 * CALLERS);
        drop(guard);
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// The reply to the watch request of `lost()` is lost (the connection drops) and the retry
/// policy gives up at once, while the session lives on. The watch must be set again once the
/// framework is connected: a deletion of the node by another client afterwards still ends
/// `lost()`.
#[tokio::test]
async fn lost_watches_again_after_the_retry_policy_gave_up() {
    init_tracing();
    bounded(LIMIT, async {
        let (proxy, fw) = giving_up_at_once().await;
        let other = plain_classic_framework(&server().await, SESSION).await;
        let path = unique_path("node-watch", "rearm");
        let guard = InterProcessMutex::new(&fw, &path).unwrap().acquire().await.unwrap();
        let epoch = fw.snapshot().epoch;

        let mut events = fw.state_changes();
        proxy.lose_reply_to("getData+watch");
        let lost = guard.lost();
        tokio::pin!(lost);
        // The watch request goes out, its reply is lost, the client reconnects (same session).
        let reconnected =
            async { while events.next().await.expect("state events").state != ConnectionState::Reconnected {} };
        tokio::select! {
            () = &mut lost => panic!("lost() completed while the lock was held"),
            () = within(EVENT, "the reconnect after the lost reply", reconnected) => {}
        }
        assert_eq!(fw.snapshot().epoch, epoch, "the session lived on");
        assert!(guard.is_held());
        // Give the watch time to be set again, then delete the node from elsewhere.
        tokio::select! {
            () = &mut lost => panic!("lost() completed while the lock was held"),
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        other.delete(guard.lock_path()).await.unwrap();
        within(EVENT, "lost() after another client deleted the node", lost).await;
        assert!(!guard.is_held(), "is_held() after the node was deleted");
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// The same for a revocable node, whose data watch also carries revocation requests: another
/// client changes the node's data, the reply to the re-read is lost and the retry policy gives
/// up at once. A revocation request afterwards must still be heard, and a deletion still end
/// `lost()`.
#[tokio::test]
async fn revocation_watches_again_after_the_retry_policy_gave_up() {
    init_tracing();
    bounded(LIMIT, async {
        let (proxy, fw) = giving_up_at_once().await;
        let other = plain_classic_framework(&server().await, SESSION).await;
        let path = unique_path("node-watch", "revocable");
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let guard = mutex.revocable().acquire().await.unwrap();
        let epoch = fw.snapshot().epoch;
        // Let the revocation watch's first read complete before arming the loss.
        tokio::time::sleep(Duration::from_millis(300)).await;

        let mut events = fw.state_changes();
        proxy.lose_reply_to("getData+watch");
        other.set_data(guard.lock_path(), b"not a revoke message").await.unwrap();
        let reconnected =
            async { while events.next().await.expect("state events").state != ConnectionState::Reconnected {} };
        within(EVENT, "the reconnect after the lost reply", reconnected).await;
        assert_eq!(fw.snapshot().epoch, epoch, "the session lived on");

        let requested = guard.revocation_requested();
        tokio::pin!(requested);
        tokio::select! {
            heard = &mut requested => panic!("revocation_requested() returned {heard} before any request was made"),
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        Revoker::attempt_revoke(&other, guard.lock_path()).await.unwrap();
        let heard = within(EVENT, "the revocation request", requested).await;
        assert!(heard, "the revocation request after the lost reply was not heard");
        other.delete(guard.lock_path()).await.unwrap();
        within(EVENT, "lost() after another client deleted the node", guard.lost()).await;
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// A held node that can no longer be watched (another identity set its ACL so that we may
/// not read it): `lost()` completes and `is_held()` says so too (it stayed true, and a
/// latch's term never ended on it); the release still deletes the node.
#[tokio::test]
async fn a_held_node_we_may_no_longer_read_is_no_longer_held() {
    init_tracing();
    bounded(LIMIT, async {
        use zk_recipes::zk::{Acl, AuthId, Permission};
        let connect = server().await;
        let fw = plain_classic_framework(&connect, SESSION).await;
        let admin = Framework::builder(&connect)
            .session_timeout(SESSION)
            .auth("digest", b"node-watch-admin:secret")
            .start()
            .await
            .expect("the admin's framework");
        let path = unique_path("node-watch", "unreadable");
        let guard = InterProcessMutex::new(&fw, &path).unwrap().acquire().await.unwrap();
        assert!(guard.is_held());
        let node = guard.lock_path().to_owned();
        // Only the admin's identity may read (or do anything else with) the node now.
        admin.set_acl(&node, &[Acl::new(Permission::ALL, AuthId::new("auth", ""))], -1).await.unwrap();
        within(EVENT, "lost() on a node we may not read", guard.lost()).await;
        assert!(!guard.is_held(), "not held once it cannot be watched");
        guard.release().await.unwrap();
        assert!(admin.exists(&node).await.unwrap().is_none(), "the release deleted it");
        fw.close().await;
        admin.close().await;
    })
    .await;
}
