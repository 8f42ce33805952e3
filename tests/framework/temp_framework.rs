//! `TempFramework`: a session opened on use and closed after an idle period, through a dead
//! server and a lost session.

use crate::common;

use std::time::Duration;

use common::fixtures::{
    bounded, eventually, framework, init_tracing, shared_connect, shared_framework, unique_path, within,
};
use common::timing::{back_within, EVENT, FAULT_SESSION, LIMIT, SESSION};
use zk_recipes::retry::RetryNTimes;
use zk_recipes::testing::{FaultProxy, ProxyMode, TestingServer};
use zk_recipes::{CreateMode, Error, Framework, OpResult};

#[tokio::test]
async fn the_session_opens_on_use_closes_when_idle_and_opens_again() {
    bounded(LIMIT, async {
        init_tracing();
        let connect = shared_connect().await;
        let observer = shared_framework().await;
        let base = unique_path("temp", "idle");
        let idle = Duration::from_millis(800);
        let temp = Framework::builder(&connect).session_timeout(SESSION).build_temp(idle).unwrap();
        assert!(!temp.is_open(), "no session before the first operation");

        // A transaction opens the session: an ephemeral node of it marks it on the server.
        let results = temp
            .transaction(|t| {
                t.create(&base, b"data", CreateMode::Persistent).create(
                    &format!("{base}/marker"),
                    b"",
                    CreateMode::Ephemeral,
                )
            })
            .await
            .unwrap();
        assert!(matches!(results[0], OpResult::Created { .. }));
        let first = temp.session_id().expect("a session is open");
        let (_, stat) = observer.get_data(&format!("{base}/marker")).await.unwrap();
        assert_eq!(stat.ephemeral_owner, first);

        // Used more often than the threshold, it stays open on the same session.
        for _ in 0..6 {
            tokio::time::sleep(idle / 3).await;
            assert_eq!(temp.get_data(&base).await.unwrap().0, b"data");
        }
        assert_eq!(temp.session_id(), Some(first), "kept open while in use");

        // Idle: closed, and the server ends the session (its ephemeral node goes).
        eventually(idle * 2 + EVENT, "the idle session closes", || async {
            if temp.is_open() {
                Err("still open".to_owned())
            } else {
                Ok(())
            }
        })
        .await;
        let marker = format!("{base}/marker");
        eventually(EVENT, "the session ends on the server (its ephemeral node goes)", || async {
            match observer.exists(&marker).await {
                Ok(None) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;

        // The next operation opens a new session.
        assert_eq!(temp.get_data(&base).await.unwrap().0, b"data");
        let second = temp.session_id().expect("open again");
        assert_ne!(second, first);

        temp.close().await;
        assert!(!temp.is_open());
        assert!(matches!(temp.get_data(&base).await, Err(Error::Closed)));
        assert!(Framework::builder(&connect).build_temp(Duration::ZERO).is_err());
        observer.delete(&base).recursive().await.unwrap();
    })
    .await;
}

/// A temp framework through a dead server, a lost session and a server restart: every
/// operation either works or fails with a typed error within its bounds, and the next one
/// after the fault works, on a new session where the old one ended.
#[tokio::test]
async fn a_dead_server_and_a_lost_session_fail_one_operation_and_the_next_one_works() {
    bounded(LIMIT, async {
        init_tracing();
        let mut server = TestingServer::start().await.unwrap();
        let direct = server.connect_string();
        let proxy = FaultProxy::start(&direct).await.unwrap();
        let connecting = Duration::from_secs(2);
        let temp = Framework::builder(&proxy.connect_string())
            .session_timeout(FAULT_SESSION)
            .connection_timeout(connecting)
            // Two quick retries: a read with the server down fails once the client gives the
            // connection up, not after the default policy's half a minute of retries.
            .retry_policy(RetryNTimes::new(2, Duration::from_millis(100)))
            .build_temp(Duration::from_secs(60))
            .unwrap();
        let base = unique_path("temp", "faults");
        let marker = format!("{base}/marker");

        // No server at the first use: a typed error once the connection timeout is spent, and no
        // session is left open.
        server.stop().await.unwrap();
        let refused = within(connecting * 4 + EVENT, "a first use with no server", temp.get_data(&base)).await;
        assert!(refused.is_err() && !matches!(refused, Err(Error::Closed)), "{refused:?}");
        assert!(!temp.is_open(), "a failed open leaves no session");

        // The server back: the next use opens the session.
        server.restart().await.unwrap();
        within(
            EVENT,
            "a transaction once the server is back",
            temp.transaction(|t| {
                t.create(&base, b"data", CreateMode::Persistent).create(&marker, b"", CreateMode::Ephemeral)
            }),
        )
        .await
        .unwrap();
        let first = temp.session_id().expect("a session is open");
        let observer = framework(&direct, SESSION).await;

        // The session lost (the client cut off past its timeout, the server ending it): the
        // temp framework's next operation runs on a new session, and the old session's
        // ephemeral node is gone.
        proxy.set_mode(ProxyMode::BlackHole);
        proxy.drop_connections();
        eventually(back_within(FAULT_SESSION), "the server ends the cut-off session", || async {
            match observer.exists(&marker).await {
                Ok(None) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        proxy.set_mode(ProxyMode::Pass);
        proxy.drop_connections();
        let (read, _) = eventually(back_within(FAULT_SESSION), "a read after the session was lost", || async {
            temp.get_data(&base).await.map_err(|e| format!("{e:?}"))
        })
        .await;
        assert_eq!(read, b"data");
        let second = temp.session_id().expect("a session is open again");
        assert_ne!(second, first, "the read ran on a new session");
        assert!(matches!(observer.exists(&marker).await, Ok(None)), "the old session's ephemeral stays gone");

        // The server stopped while the session is open: the read fails with a typed error once
        // the client gives the connection up, and a read after the restart works.
        server.stop().await.unwrap();
        let cut = within(back_within(FAULT_SESSION), "a read with the server down", temp.get_data(&base)).await;
        assert!(cut.is_err() && !matches!(cut, Err(Error::Closed)), "{cut:?}");
        server.restart().await.unwrap();
        let (read, _) = eventually(EVENT, "a read after the restart", || async {
            temp.get_data(&base).await.map_err(|e| format!("{e:?}"))
        })
        .await;
        assert_eq!(read, b"data");
        // The failed read outlasted the session timeout: the session was lost, and the read
        // after the restart ran on the framework's next one.
        assert!(temp.session_id().is_some_and(|id| id != second), "{:?}", temp.session_id());

        within(EVENT, "close", temp.close()).await;
        assert!(!temp.is_open());
        observer.delete(&base).recursive().await.unwrap();
        observer.close().await;
    })
    .await;
}
