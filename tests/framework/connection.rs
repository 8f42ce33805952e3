//! Framework (connection manager) behaviour against real ZooKeeper servers.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::fixtures::{eventually, next_event as next, unique_path, wait_for_event as wait_for};
use common::timing::{EVENT, LIMIT};
use futures::StreamExt;
use tokio::time::{timeout, Instant};
use zk_recipes::testing::{expire_session, shared_server, FaultProxy, ProxyMode, TestingServer};
use zk_recipes::zk::{Acls, CreateMode};
use zk_recipes::{ConnectionState, Error, FixedAclProvider, Framework, InterProcessMutex};

#[tokio::test]
async fn connected_once_then_suspended_and_reconnected_on_cut_and_black_hole() {
    timeout(LIMIT, async {
        let server = shared_server().await.unwrap();
        let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        let session_timeout = Duration::from_secs(6);
        let fw = Framework::builder(&proxy.connect_string()).session_timeout(session_timeout).build().unwrap();
        let mut events = fw.state_changes();
        fw.start().await.unwrap();

        let first = next(&mut events, Duration::from_secs(5)).await;
        assert_eq!(first.state, ConnectionState::Connected);
        assert_eq!(first.epoch, 1);
        let session_id = first.session_id;
        assert_ne!(session_id, 0);

        // FIN: the client notices at once and gets back in on the same session.
        proxy.drop_connections();
        let suspended = next(&mut events, session_timeout).await;
        assert_eq!(suspended.state, ConnectionState::Suspended);
        let back = next(&mut events, session_timeout).await;
        assert_eq!((back.state, back.session_id, back.epoch), (ConnectionState::Reconnected, session_id, 1));

        // RST: the same.
        proxy.reset_connections();
        assert_eq!(next(&mut events, session_timeout).await.state, ConnectionState::Suspended);
        let back = next(&mut events, session_timeout).await;
        assert_eq!((back.state, back.session_id, back.epoch), (ConnectionState::Reconnected, session_id, 1));

        // Black hole shorter than the session timeout: silence, Suspended, then back on the session.
        proxy.set_mode(ProxyMode::BlackHole);
        let cut = Instant::now();
        assert_eq!(next(&mut events, session_timeout).await.state, ConnectionState::Suspended);
        assert!(cut.elapsed() < session_timeout, "suspended only after {:?}", cut.elapsed());
        proxy.set_mode(ProxyMode::Pass);
        proxy.drop_connections();
        let back = next(&mut events, session_timeout).await;
        assert_eq!((back.state, back.session_id, back.epoch), (ConnectionState::Reconnected, session_id, 1));

        // Operations work afterwards, and no second Connected ever came.
        fw.create(&unique_path("fw", "after-cut")).mode(CreateMode::Ephemeral).await.unwrap();
        fw.close().await;
        let rest: Vec<_> = events.collect().await;
        assert!(rest.iter().all(|e| e.state != ConnectionState::Connected), "{rest:?}");
    })
    .await
    .expect("test finished in time");
}

#[tokio::test]
async fn server_side_expiry_gives_lost_then_reconnected_with_new_session() {
    timeout(LIMIT, async {
        let server = shared_server().await.unwrap();
        let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        let fw = Framework::builder(&proxy.connect_string()).session_timeout(Duration::from_secs(6)).build().unwrap();
        let mut events = fw.state_changes();
        fw.start().await.unwrap();
        let first = next(&mut events, Duration::from_secs(5)).await;

        let info = fw.zk_client().unwrap().session().clone();
        expire_session(&proxy, &server.connect_string(), info).await.unwrap();

        let (lost, _) = wait_for(&mut events, ConnectionState::Lost, Duration::from_secs(20)).await;
        assert_eq!((lost.session_id, lost.epoch), (first.session_id, 1));
        let back = next(&mut events, Duration::from_secs(20)).await;
        assert_eq!(back.state, ConnectionState::Reconnected);
        assert_ne!(back.session_id, first.session_id);
        assert_eq!(back.epoch, 2);
        assert_eq!(fw.snapshot(), back);
        fw.create(&unique_path("fw", "new-session")).mode(CreateMode::Ephemeral).await.unwrap();
        fw.close().await;
    })
    .await
    .expect("test finished in time");
}

#[tokio::test]
async fn all_servers_down_longer_than_session_timeout_gives_lost_after_one_timeout() {
    timeout(LIMIT, async {
        let mut server = TestingServer::start().await.unwrap();
        let fw = Framework::builder(&server.connect_string()).session_timeout(Duration::from_secs(2)).build().unwrap();
        let mut events = fw.state_changes();
        fw.start().await.unwrap();
        assert_eq!(next(&mut events, Duration::from_secs(5)).await.state, ConnectionState::Connected);
        let negotiated = fw.negotiated_session_timeout().unwrap();

        server.stop().await.unwrap();
        let suspended = next(&mut events, negotiated * 2).await;
        assert_eq!(suspended.state, ConnectionState::Suspended);
        let suspended_at = Instant::now();
        let lost = next(&mut events, negotiated * 3).await;
        let after = suspended_at.elapsed();
        assert_eq!(lost.state, ConnectionState::Lost);
        // Curator's simulated expiry: one negotiated session timeout after Suspended.
        assert!(after >= negotiated.mul_f32(0.8), "Lost too early: {after:?} (timeout {negotiated:?})");
        assert!(after <= negotiated + Duration::from_secs(1), "Lost too late: {after:?} (timeout {negotiated:?})");

        server.restart().await.unwrap();
        let back = next(&mut events, Duration::from_secs(20)).await;
        assert_eq!(back.state, ConnectionState::Reconnected);
        assert_eq!(back.epoch, 2);
        assert_ne!(back.session_id, lost.session_id);
        fw.close().await;
    })
    .await
    .expect("test finished in time");
}

#[tokio::test]
async fn closed_framework_and_bad_input_give_typed_errors() {
    timeout(LIMIT, async {
        for bad in ["", "   ", "host:notaport", "a:1,,b:2", "a:1/chroot/"] {
            assert!(matches!(Framework::connect(bad).await, Err(Error::InvalidConnectString { .. })), "{bad:?}");
        }
        for ns in ["/", "app/", "a//b", "/a/./b", "a\0b"] {
            let built = Framework::builder("127.0.0.1:2181").namespace(ns).build();
            assert!(matches!(built, Err(Error::InvalidPath { .. })), "{ns:?}");
        }
        let zero = Framework::builder("127.0.0.1:2181").session_timeout(Duration::ZERO).build();
        assert!(matches!(zero, Err(Error::InvalidArgument { .. })));
        let absurd = Framework::builder("127.0.0.1:2181").connection_timeout(Duration::from_secs(10 * 86_400)).build();
        assert!(matches!(absurd, Err(Error::InvalidArgument { .. })));

        // Nothing listens: a typed timeout within the connection timeout, not a hang.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let started = Instant::now();
        let refused = Framework::builder(&format!("127.0.0.1:{port}"))
            .connection_timeout(Duration::from_millis(800))
            .start()
            .await;
        assert!(matches!(refused, Err(Error::ConnectionTimeout(_))), "{refused:?}");
        assert!(started.elapsed() < Duration::from_secs(5));

        // A server that answers the handshake and then nothing: the client gives up at its
        // own limit (its session timeout), before the connection timeout, and the error says
        // how long it waited (it used to name the connection timeout).
        let server = shared_server().await.unwrap();
        let stale = FaultProxy::start(&server.connect_string()).await.unwrap();
        stale.set_mode(ProxyMode::HandshakeThenRefuse);
        let started = Instant::now();
        let gave_up = Framework::builder(&stale.connect_string())
            .session_timeout(Duration::from_secs(2))
            .connection_timeout(Duration::from_secs(20))
            .start()
            .await;
        let took = started.elapsed();
        match gave_up {
            Err(Error::ConnectionTimeout(waited)) => {
                assert!(waited <= took && waited < Duration::from_secs(20), "{waited:?} after {took:?}");
            }
            other => panic!("{other:?}"),
        }

        // Use before start and after close.
        let fw = Framework::builder(&server.connect_string()).build().unwrap();
        assert!(matches!(fw.get_data("/").await, Err(Error::NotStarted)));
        fw.start().await.unwrap();
        assert!(matches!(fw.get_data("relative").await, Err(Error::InvalidPath { .. })));
        assert!(matches!(fw.wait_until_connected(Duration::ZERO).await, Err(Error::InvalidArgument { .. })));
        assert!(fw.wait_until_connected(Duration::from_secs(1)).await.unwrap());
        fw.close().await;
        assert!(fw.is_closed());
        assert!(matches!(fw.get_data("/").await, Err(Error::Closed)));
        assert!(matches!(fw.start().await, Err(Error::Closed)));
        let mutex = InterProcessMutex::new(&fw, "/fw-closed").unwrap();
        assert!(matches!(mutex.acquire().await, Err(Error::Closed)));
        assert!(matches!(fw.on_state_change(|_| async {}), Err(Error::Closed)));
        fw.close().await; // twice is fine
    })
    .await
    .expect("test finished in time");
}

#[tokio::test]
async fn listeners_survive_panics_stop_when_dropped_and_streams_resync_after_lag() {
    timeout(LIMIT, async {
        let server = shared_server().await.unwrap();
        let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        let fw = Framework::builder(&proxy.connect_string())
            .session_timeout(Duration::from_secs(6))
            .event_capacity(1)
            .start()
            .await
            .unwrap();

        let panicking = Arc::new(AtomicUsize::new(0));
        let p = panicking.clone();
        let _panics = fw
            .on_state_change(move |_| {
                let p = p.clone();
                async move {
                    p.fetch_add(1, Ordering::SeqCst);
                    panic!("listener panic (expected in this test)");
                }
            })
            .unwrap();
        let removed = Arc::new(AtomicUsize::new(0));
        let r = removed.clone();
        let handle = fw
            .on_state_change(move |_| {
                let r = r.clone();
                async move {
                    r.fetch_add(1, Ordering::SeqCst);
                }
            })
            .unwrap();
        drop(handle);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let _sentinel = fw
            .on_state_change(move |s| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(s.state);
                }
            })
            .unwrap();
        let mut lagging = fw.state_changes();

        for _ in 0..2 {
            proxy.drop_connections();
            assert_eq!(timeout(Duration::from_secs(10), rx.recv()).await.unwrap(), Some(ConnectionState::Suspended));
            assert_eq!(timeout(Duration::from_secs(10), rx.recv()).await.unwrap(), Some(ConnectionState::Reconnected));
        }
        // The panicking listener got all four transitions despite panicking on each.
        let deadline = Instant::now() + Duration::from_secs(5);
        while panicking.load(Ordering::SeqCst) < 4 && Instant::now() < deadline {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(panicking.load(Ordering::SeqCst), 4);
        assert_eq!(removed.load(Ordering::SeqCst), 0, "a dropped handle's listener was called");

        // The stream fell behind (capacity 1, four events): it resyncs to the current state and
        // keeps going.
        let resync = next(&mut lagging, Duration::from_secs(2)).await;
        assert_eq!(resync.state, ConnectionState::Reconnected);
        proxy.drop_connections();
        let (_, _) = wait_for(&mut lagging, ConnectionState::Suspended, Duration::from_secs(10)).await;
        let (_, _) = wait_for(&mut lagging, ConnectionState::Reconnected, Duration::from_secs(10)).await;
        fw.close().await;
    })
    .await
    .expect("test finished in time");
}

#[tokio::test]
async fn namespace_puts_nodes_under_a_container() {
    timeout(LIMIT, async {
        let server = shared_server().await.unwrap();
        let ns = unique_path("fw", "ns").trim_start_matches('/').to_owned();
        let fw = Framework::builder(&server.connect_string()).namespace(&ns).start().await.unwrap();
        let raw = Framework::connect(&server.connect_string()).await.unwrap();

        let created = fw.create("/a/b").data(b"data").await.unwrap().path;
        assert_eq!(created, "/a/b", "returned paths have the namespace stripped");
        let (data, _) = raw.get_data(&format!("/{ns}/a/b")).await.unwrap();
        assert_eq!(data, b"data");
        assert_eq!(fw.get_children("/a").await.unwrap(), ["b"]);

        let mutex = InterProcessMutex::new(&fw, "/locks/x").unwrap();
        let guard = mutex.acquire().await.unwrap();
        assert!(guard.lock_path().starts_with("/locks/x/_c_"), "{}", guard.lock_path());
        assert_eq!(raw.get_children(&format!("/{ns}/locks/x")).await.unwrap().len(), 1);
        guard.release().await.unwrap();

        // The namespace node is a container: once emptied, the server reaps it.
        fw.delete("/a/b").await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while raw.exists(&format!("/{ns}")).await.unwrap().is_some() {
            assert!(Instant::now() < deadline, "namespace node was not reaped: not a container?");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // ... and is made again on demand.
        fw.create("/again").mode(CreateMode::Ephemeral).await.unwrap();
        fw.close().await;
        raw.close().await;
    })
    .await
    .expect("test finished in time");
}

#[tokio::test]
async fn digest_auth_and_acl_provider_protect_nodes_and_survive_a_new_session() {
    timeout(LIMIT, async {
        let server = shared_server().await.unwrap();
        let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        let creator_only = || FixedAclProvider::new(Acls::creator_all().to_vec());
        let alice = Framework::builder(&proxy.connect_string())
            .session_timeout(Duration::from_secs(6))
            .auth("digest", b"alice:secret")
            .acl_provider(creator_only())
            .build()
            .unwrap();
        let mut events = alice.state_changes();
        alice.start().await.unwrap();
        let base = unique_path("fw", "acl");
        alice.create(&format!("{base}/node")).data(b"x").await.unwrap();

        let anonymous = Framework::connect(&server.connect_string()).await.unwrap();
        let refused = anonymous.get_data(&format!("{base}/node")).await;
        assert!(matches!(refused, Err(Error::ZooKeeper(zk_recipes::zk::Error::NoAuth))), "{refused:?}");
        let alice2 =
            Framework::builder(&server.connect_string()).auth("digest", b"alice:secret").start().await.unwrap();
        assert_eq!(alice2.get_data(&format!("{base}/node")).await.unwrap().0, b"x");

        // A lock taken under the creator-only ACL works for alice and not for strangers.
        let mutex = InterProcessMutex::new(&alice, &format!("{base}/lock")).unwrap();
        mutex.acquire().await.unwrap().release().await.unwrap();
        let stranger = InterProcessMutex::new(&anonymous, &format!("{base}/lock")).unwrap();
        let refused = stranger.try_acquire().await;
        assert!(matches!(refused, Err(Error::ZooKeeper(zk_recipes::zk::Error::NoAuth))), "{refused:?}");

        // New session after expiry: the credentials go with it.
        let info = alice.zk_client().unwrap().session().clone();
        expire_session(&proxy, &server.connect_string(), info).await.unwrap();
        let (back, _) = wait_for(&mut events, ConnectionState::Reconnected, Duration::from_secs(20)).await;
        assert_eq!(back.epoch, 2);
        assert_eq!(alice.get_data(&format!("{base}/node")).await.unwrap().0, b"x");
        alice.create(&format!("{base}/second")).await.unwrap();
        assert!(anonymous.get_data(&format!("{base}/second")).await.is_err());

        for fw in [alice, alice2, anonymous] {
            fw.close().await;
        }
    })
    .await
    .expect("test finished in time");
}

#[tokio::test]
async fn reaper_deletes_after_reconnect_and_gives_up_when_the_session_is_gone() {
    timeout(LIMIT, async {
        let server = shared_server().await.unwrap();
        let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        let fw = Framework::builder(&proxy.connect_string()).session_timeout(Duration::from_secs(8)).build().unwrap();
        let mut events = fw.state_changes();
        fw.start().await.unwrap();
        let observer = Framework::connect(&server.connect_string()).await.unwrap();
        let path = unique_path("fw", "reaper");
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();

        // 1. Dropped while disconnected: the delete waits and happens after the reconnect.
        let guard = mutex.acquire().await.unwrap();
        proxy.set_mode(ProxyMode::BlackHole);
        let (_, _) = wait_for(&mut events, ConnectionState::Suspended, Duration::from_secs(10)).await;
        drop(guard);
        assert_eq!(fw.pending_deletes(), 1);
        assert_eq!(observer.get_children(&path).await.unwrap().len(), 1, "deleted while cut off?");
        proxy.set_mode(ProxyMode::Pass);
        proxy.drop_connections();
        let (back, _) = wait_for(&mut events, ConnectionState::Reconnected, Duration::from_secs(10)).await;
        assert_eq!(back.epoch, 1);
        let deadline = Instant::now() + Duration::from_secs(10);
        while observer.get_children(&path).await.is_ok_and(|c| !c.is_empty()) || fw.pending_deletes() > 0 {
            assert!(Instant::now() < deadline, "background delete did not happen after reconnect");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        // 2. Dropped while cut off, then the session dies: the reaper gives up (nothing to
        //    delete: the server removed the node with the session) instead of retrying forever.
        let guard = mutex.acquire().await.unwrap();
        proxy.set_mode(ProxyMode::BlackHole);
        let (_, _) = wait_for(&mut events, ConnectionState::Suspended, Duration::from_secs(10)).await;
        drop(guard);
        assert_eq!(fw.pending_deletes(), 1);
        let info = fw.zk_client().unwrap().session().clone();
        expire_session(&proxy, &server.connect_string(), info).await.unwrap();
        let (_, _) = wait_for(&mut events, ConnectionState::Reconnected, Duration::from_secs(20)).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while fw.pending_deletes() > 0 {
            assert!(Instant::now() < deadline, "reaper kept retrying a delete of a dead session");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The node went with the session (and its container parent may be reaped already).
        match observer.get_children(&path).await {
            Ok(children) => assert!(children.is_empty(), "{children:?}"),
            Err(e) => assert!(matches!(e.zk(), Some(zk_recipes::zk::Error::NoNode)), "{e}"),
        }
        fw.close().await;
        observer.close().await;
    })
    .await
    .expect("test finished in time");
}

#[tokio::test]
async fn close_wakes_waiters_with_closed_and_fires_lost() {
    timeout(LIMIT, async {
        let server = shared_server().await.unwrap();
        let holder_fw = Framework::connect(&server.connect_string()).await.unwrap();
        let fw = Framework::connect(&server.connect_string()).await.unwrap();
        let path = unique_path("fw", "close-wakes");
        let held = InterProcessMutex::new(&holder_fw, &path).unwrap().acquire().await.unwrap();

        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let waiter = tokio::spawn(async move { mutex.acquire().await.map(drop) });
        let semaphore = zk_recipes::InterProcessSemaphore::new(&fw, &format!("{path}-sem"), 1).unwrap();
        let lease = semaphore.acquire().await.unwrap();
        let sem_waiter = tokio::spawn(async move { semaphore.acquire().await.map(drop) });
        let deadline = Instant::now() + Duration::from_secs(10);
        while holder_fw.get_children(&path).await.unwrap().len() < 2 {
            assert!(Instant::now() < deadline, "waiter never queued");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }

        fw.close().await;
        // The lease's lock can no longer be trusted, and both waiters fail with Closed.
        timeout(Duration::from_secs(5), lease.lost()).await.expect("lost() fired on close");
        assert!(!lease.is_held());
        let waited = timeout(Duration::from_secs(5), waiter).await.expect("waiter woke").unwrap();
        assert!(matches!(waited, Err(Error::Closed)), "{waited:?}");
        let waited = timeout(Duration::from_secs(5), sem_waiter).await.expect("semaphore waiter woke").unwrap();
        assert!(matches!(waited, Err(Error::Closed)), "{waited:?}");
        assert_eq!(fw.state(), ConnectionState::Lost);
        drop(lease);

        // The closed session's nodes are gone: only the holder remains.
        let deadline = Instant::now() + Duration::from_secs(10);
        while holder_fw.get_children(&path).await.unwrap().len() != 1 {
            assert!(Instant::now() < deadline, "closed session's waiter node remained");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        held.release().await.unwrap();
        holder_fw.close().await;
    })
    .await
    .expect("test finished in time");
}

/// A `close()` during an outage ends a `wait_until_connected` with `Closed` at once, not at
/// its timeout.
#[tokio::test]
async fn a_close_ends_a_wait_for_the_connection() {
    timeout(LIMIT, async {
        let server = shared_server().await.unwrap();
        let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        let fw =
            Framework::builder(&proxy.connect_string()).session_timeout(Duration::from_secs(4)).start().await.unwrap();
        let mut states = fw.state_watch();
        proxy.set_mode(ProxyMode::BlackHole);
        proxy.reset_connections();
        states.wait_for(|s| !s.state.is_connected()).await.unwrap();
        let waiting = tokio::spawn({
            let fw = fw.clone();
            async move { fw.wait_until_connected(Duration::from_secs(600)).await }
        });
        tokio::task::yield_now().await;
        fw.close().await;
        let waited = timeout(Duration::from_secs(10), waiting).await.expect("the wait ends with the close").unwrap();
        assert!(matches!(waited, Err(Error::Closed)), "{waited:?}");
    })
    .await
    .expect("test finished in time");
}

/// Requests in flight when the framework closes end with `Closed`: a read and a create sent
/// into a black-holed connection, then `close()` (the session's client is ended under them).
#[tokio::test]
async fn requests_in_flight_at_close_end_with_closed() {
    timeout(LIMIT, async {
        let server = shared_server().await.unwrap();
        let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        let fw =
            Framework::builder(&proxy.connect_string()).session_timeout(Duration::from_secs(4)).start().await.unwrap();
        let path = unique_path("fw", "in-flight-at-close");
        proxy.set_mode(ProxyMode::Hold);
        let read = tokio::spawn({
            let (fw, path) = (fw.clone(), path.clone());
            async move { fw.get_data(&path).await.map(drop) }
        });
        let create = tokio::spawn({
            let (fw, path) = (fw.clone(), path.clone());
            async move { fw.create(&path).await.map(drop) }
        });
        // Both sent (held back by the proxy), before the close.
        common::fixtures::request_held_back(&proxy, "the read and the create sent").await;
        eventually(EVENT, "both requests held", || async {
            match proxy.held_from_clients() {
                n if n > 120 => Ok(()),
                n => Err(format!("{n} bytes held")),
            }
        })
        .await;
        fw.close().await;
        for (what, task) in [("read", read), ("create", create)] {
            let ended = timeout(Duration::from_secs(10), task).await.expect("the request ends with the close").unwrap();
            assert!(matches!(ended, Err(Error::Closed)), "{what}: {ended:?}");
        }
    })
    .await
    .expect("test finished in time");
}

/// A framework whose every handle is dropped (without `close()`) while it looks for a new
/// session stops looking: no session is opened for nobody once the ensemble is back.
#[tokio::test]
async fn a_framework_dropped_during_an_outage_opens_no_session_afterwards() {
    timeout(LIMIT, async {
        let server = shared_server().await.unwrap();
        let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        let fw = Framework::builder(&proxy.connect_string())
            .session_timeout(Duration::from_secs(2))
            .connection_timeout(Duration::from_millis(500))
            .retry_policy(zk_recipes::retry::RetryForever::new(Duration::from_millis(100)))
            .start()
            .await
            .unwrap();
        let mut states = fw.state_watch();
        proxy.set_mode(ProxyMode::BlackHole);
        proxy.reset_connections();
        timeout(Duration::from_secs(20), states.wait_for(|s| s.state == zk_recipes::ConnectionState::Lost))
            .await
            .expect("Lost")
            .unwrap();
        drop(states);
        drop(fw);
        // The try under way gives up on the black hole; no other follows.
        let deadline = Instant::now() + Duration::from_secs(10);
        while proxy.connection_count() > 0 {
            assert!(Instant::now() < deadline, "a connection attempt still open");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        proxy.set_mode(ProxyMode::Pass);
        // Ten of the retry policy's pauses: a search still running would have connected.
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(proxy.connection_count(), 0, "a session opened for a framework nobody holds");
        }
    })
    .await
    .expect("test finished in time");
}
