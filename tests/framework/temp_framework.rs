//! `TempFramework`: a session opened on use and closed after an idle period.

use crate::common;

use std::time::Duration;

use common::fixtures::{bounded, eventually, init_tracing, shared_connect, shared_framework, unique_path};
use common::timing::{EVENT, LIMIT, SESSION};
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
