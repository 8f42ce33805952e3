//! `InterProcessMutex` under server and network faults: each test owns its server (and a fault
//! proxy where it cuts connections). Curator's testWaitingProcessKilledServer and
//! testKilledSession, kazoo's test_lock_reconnect, `lost()` at `Suspended`/`Lost` per error
//! policy, and fencing tokens across sessions.

use crate::common;

use std::time::Duration;

use common::fixtures::{
    bounded, children_count_becomes, framework, init_tracing, unique_path, wait_connected, wait_for_state, within,
    FaultyServer,
};
use common::timing::{EVENT, FAULT_SESSION as SESSION, LIMIT};
use tokio::sync::oneshot;
use tokio::time::Instant;
use zk_recipes::retry::RetryForever;
use zk_recipes::testing::{FaultProxy, ProxyMode, TestingServer};
use zk_recipes::{ConnectionState, ConnectionStateErrorPolicy, Error, Framework, InterProcessMutex};

fn path(name: &str) -> String {
    unique_path("mutex-faults", name)
}

/// testWaitingProcessKilledServer: task A holds, task B (same framework) waits; the server
/// stops until the framework leaves the connected state, then restarts. Both tasks finish
/// their acquire and release (a release after the session expired counts as released).
#[tokio::test]
async fn waiting_task_survives_a_server_restart() {
    init_tracing();
    bounded(LIMIT, async {
        let mut server = TestingServer::start().await.unwrap();
        let fw = framework(&server.connect_string(), SESSION).await;
        let path = path("restart");
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();

        let (release_a, release_a_rx) = oneshot::channel::<()>();
        let (a_holds, a_holds_rx) = oneshot::channel::<()>();
        let a = {
            let mutex = mutex.clone();
            tokio::spawn(async move {
                let guard = mutex.acquire().await.unwrap();
                a_holds.send(()).unwrap();
                release_a_rx.await.unwrap();
                guard.release().await
            })
        };
        within(EVENT, "A acquiring", a_holds_rx).await.unwrap();
        let b = {
            let mutex = mutex.clone();
            tokio::spawn(async move {
                let guard = mutex.acquire().await.unwrap();
                assert!(mutex.is_owned_by_current_task());
                guard.release().await
            })
        };
        children_count_becomes(&fw, &path, 2, EVENT).await;

        server.stop().await.unwrap();
        wait_for_state(&fw, EVENT, "leaving the connected state", |s| !s.state.is_connected()).await;
        server.restart().await.unwrap();
        wait_connected(&fw, EVENT, 1).await;

        release_a.send(()).unwrap();
        within(EVENT, "A releasing", a).await.unwrap().expect("A's release after the restart");
        within(EVENT, "B acquiring and releasing", b).await.unwrap().expect("B's release");
        assert!(!mutex.is_acquired_in_this_process());
        fw.close().await;
    })
    .await;
}

/// testKilledSession, across frameworks: the holder's session is expired on the server; the
/// waiter in another framework acquires at once. The old holder's guard reports the loss and
/// releases cleanly; fencing tokens keep increasing across the sessions.
#[tokio::test]
async fn killed_holder_session_lets_the_waiter_in() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let holder_fw = framework(&servers.proxied(), SESSION).await;
        let waiter_fw = framework(&servers.direct(), SESSION).await;
        let path = path("killed-session");
        let holder_mutex = InterProcessMutex::new(&holder_fw, &path).unwrap();
        let stale = holder_mutex.acquire().await.unwrap();
        let waiter = {
            let mutex = InterProcessMutex::new(&waiter_fw, &path).unwrap();
            tokio::spawn(async move { mutex.acquire().await.unwrap() })
        };
        children_count_becomes(&waiter_fw, &path, 2, EVENT).await;

        let expired_at = Instant::now();
        let renewed = servers.expire(&holder_fw, EVENT).await;
        assert_eq!(renewed.epoch, 2, "a new session after the expiry");
        // The server deleted the holder's node when it closed the session; the waiter's watch
        // fires on that, well within one session timeout.
        let guard = within(SESSION, "the waiter acquiring after the expiry", waiter).await.unwrap();
        let waited = expired_at.elapsed();
        assert!(guard.fencing_token() > stale.fencing_token(), "fencing token increased across sessions");

        assert!(!stale.is_held(), "the expired session's guard is not held");
        within(EVENT, "lost() of the expired session's guard", stale.lost()).await;
        // The old holder's owner cannot re-enter a hold its session lost while the waiter holds
        // the lock: that would be a second holder.
        assert!(holder_mutex.is_owned_by_current_task());
        match holder_mutex.acquire_timeout(EVENT).await {
            Err(Error::LockLost { path: lost }) => assert_eq!(lost, stale.lock_path()),
            Ok(Some(nested)) => panic!("re-entered a lost hold while another holds the lock: {}", nested.lock_path()),
            other => panic!("re-entering a lost hold: expected LockLost, got {other:?}"),
        }
        assert!(holder_mutex.try_acquire().await.is_err(), "try_acquire refuses to re-enter too");
        stale.release().await.expect("releasing a lock whose session is gone is not an error");
        assert!(!holder_mutex.is_acquired_in_this_process());

        // The old holder contends again from its new session; tokens keep increasing.
        let again = {
            let holder_mutex = holder_mutex.clone();
            tokio::spawn(async move { holder_mutex.acquire().await.unwrap() })
        };
        children_count_becomes(&waiter_fw, &path, 2, EVENT).await;
        let token = guard.fencing_token();
        guard.release().await.unwrap();
        let again = within(EVENT, "the old holder acquiring in its new session", again).await.unwrap();
        assert!(again.fencing_token() > token);
        assert!(again.is_held());
        again.release().await.unwrap();
        eprintln!("waiter acquired {waited:?} after the expiry started");
        holder_fw.close().await;
        waiter_fw.close().await;
    })
    .await;
}

/// testKilledSession on one framework / kazoo test_lock_reconnect: task A holds, task B waits
/// on the same framework; the session is expired. B's node went with the session, so B starts
/// a fresh attempt in the new session and gets the lock; A's guard is lost.
#[tokio::test]
async fn contender_gets_the_lock_after_its_own_session_expired() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let fw = framework(&servers.proxied(), SESSION).await;
        let path = path("reconnect");
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let (a_holds, a_holds_rx) = oneshot::channel();
        let (release_a, release_a_rx) = oneshot::channel::<()>();
        let a = {
            let mutex = mutex.clone();
            tokio::spawn(async move {
                let guard = mutex.acquire().await.unwrap();
                a_holds.send((guard.lock_path().to_owned(), guard.fencing_token())).unwrap();
                release_a_rx.await.unwrap();
                let (held, lost_now) = (guard.is_held(), futures::FutureExt::now_or_never(guard.lost()).is_some());
                guard.release().await.unwrap();
                (held, lost_now)
            })
        };
        let (a_node, a_token) = within(EVENT, "A acquiring", a_holds_rx).await.unwrap();
        let b = {
            let mutex = mutex.clone();
            tokio::spawn(async move { mutex.acquire().await.unwrap() })
        };
        let nodes = children_count_becomes(&fw, &path, 2, EVENT).await;
        let b_first_node = nodes.into_iter().map(|n| format!("{path}/{n}")).find(|n| *n != a_node).unwrap();

        servers.expire(&fw, EVENT).await;
        let b_guard = within(EVENT, "B acquiring in the new session", b).await.unwrap();
        assert_ne!(b_guard.lock_path(), b_first_node, "B queued a new node in the new session");
        assert!(b_guard.fencing_token() > a_token);
        assert!(b_guard.is_held());
        assert_eq!(fw.snapshot().epoch, 2);

        release_a.send(()).unwrap();
        let (a_held, a_lost) = a.await.unwrap();
        assert!(!a_held && a_lost, "A's guard from the expired session reports the loss");
        assert!(mutex.is_acquired_in_this_process(), "B still holds");
        b_guard.release().await.unwrap();
        assert!(!mutex.is_acquired_in_this_process());
        fw.close().await;
    })
    .await;
}

/// `lost()` follows the error policy when the holder's network goes silent (black hole):
/// with `Standard` it fires at `Suspended`, before the server can expire the session (the
/// node still exists then); with `SessionOnly` it stays pending through `Suspended` and
/// fires at `Lost`.
#[tokio::test]
async fn lost_follows_the_error_policy_when_black_holed() {
    init_tracing();
    bounded(LIMIT, async {
        let server = TestingServer::start().await.unwrap();
        let standard_proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        let session_only_proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        let standard = framework(&standard_proxy.connect_string(), SESSION).await;
        let session_only = Framework::builder(&session_only_proxy.connect_string())
            .session_timeout(SESSION)
            .error_policy(ConnectionStateErrorPolicy::SessionOnly)
            .retry_policy(RetryForever::new(Duration::from_millis(50)))
            .start()
            .await
            .unwrap();
        let observer = framework(&server.connect_string(), SESSION).await;
        let negotiated = standard.negotiated_session_timeout().unwrap();
        assert_eq!(negotiated, session_only.negotiated_session_timeout().unwrap());

        let g_standard = InterProcessMutex::new(&standard, &path("lost-standard")).unwrap().acquire().await.unwrap();
        let g_session = InterProcessMutex::new(&session_only, &path("lost-session")).unwrap().acquire().await.unwrap();
        {
            let mut lost_standard = std::pin::pin!(g_standard.lost());
            let mut lost_session = std::pin::pin!(g_session.lost());
            assert!(futures::poll!(&mut lost_standard).is_pending());
            assert!(futures::poll!(&mut lost_session).is_pending());

            let cut = Instant::now();
            standard_proxy.set_mode(ProxyMode::BlackHole);
            session_only_proxy.set_mode(ProxyMode::BlackHole);

            // Standard: lost at Suspended (after about 2/5 of the session timeout of silence).
            within(negotiated, "lost() under the Standard policy", &mut lost_standard).await;
            let lost_after = cut.elapsed();
            assert!(lost_after < negotiated, "lost() fired {lost_after:?} after the cut, not before {negotiated:?}");
            assert_eq!(standard.state(), ConnectionState::Suspended);
            assert!(!g_standard.is_held(), "not held while Suspended");
            // The server still has the node: the session has not expired yet.
            let stat = observer.exists(g_standard.lock_path()).await.unwrap();
            assert!(stat.is_some(), "lost() fired before the server could expire the session");

            // SessionOnly: still trusted while merely Suspended...
            wait_for_state(&session_only, negotiated, "SessionOnly framework suspended", |s| {
                s.state == ConnectionState::Suspended
            })
            .await;
            assert!(futures::poll!(&mut lost_session).is_pending(), "SessionOnly: lost() at Suspended");
            assert!(g_session.is_held(), "SessionOnly: held while Suspended");
            // ...and lost once the session is given up (about one session timeout after Suspended).
            within(negotiated * 3, "lost() under the SessionOnly policy", &mut lost_session).await;
            let lost_after = cut.elapsed();
            assert!(lost_after >= negotiated / 2, "SessionOnly lost() fired early: {lost_after:?}");
            assert!(!g_session.is_held());
        }
        standard_proxy.set_mode(ProxyMode::Pass);
        session_only_proxy.set_mode(ProxyMode::Pass);
        standard_proxy.drop_connections();
        session_only_proxy.drop_connections();
        wait_connected(&session_only, EVENT, 2).await;
        assert!(!g_session.is_held(), "a guard of an earlier session stays lost");
        g_session.release().await.unwrap();
        wait_connected(&standard, EVENT, 1).await;
        g_standard.release().await.unwrap();
        for fw in [standard, session_only, observer] {
            fw.close().await;
        }
    })
    .await;
}
