//! The framework's life: a `close()` during `start()` wins, `close()` ends the session even
//! while a clone of the raw client is alive, and a session whose client task is gone reads
//! `Lost` instead of a frozen state.

use crate::common;

use std::time::Duration;

use common::fixtures::{bounded, framework, init_tracing, plain_framework, shared_connect, unique_path, within};
use common::timing::{LIMIT, SESSION};
use zk_recipes::zk::CreateMode;
use zk_recipes::{ConnectionState, ConnectionStateErrorPolicy, Error, Framework, InterProcessMutex};

/// `close()` called while `start()` is opening the session: the close wins. `start()` returns
/// `Closed`, the framework stays closed (no session, state `Lost`), and starting again fails.
#[tokio::test]
async fn close_during_start_wins() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = Framework::builder(&connect).session_timeout(SESSION).build().unwrap();
        // `start()` is polled first: it marks the framework starting and waits for the
        // server; `close()` then runs to its end before the session is open.
        let (started, ()) = tokio::join!(fw.start(), fw.close());
        assert!(matches!(started, Err(Error::Closed)), "start() after a concurrent close(): {started:?}");
        assert!(fw.is_closed(), "a closed framework came back");
        assert_eq!(fw.state(), ConnectionState::Lost);
        assert!(matches!(fw.zk_client(), Err(Error::Closed)), "a session outlived close()");
        assert!(matches!(fw.start().await, Err(Error::Closed)));
        // Nothing was left running that could publish a connected state later.
        let mut states = fw.state_watch();
        let connected = tokio::time::timeout(Duration::from_millis(500), states.wait_for(|s| s.state.is_connected()));
        assert!(connected.await.is_err(), "a closed framework reported a connection");
    })
    .await;
}

/// A clone of the raw client kept alive does not keep the session: `close()` ends it at once
/// (ephemeral nodes are gone right after it returns) and the clone stops working.
#[tokio::test]
async fn close_ends_the_session_while_a_raw_client_clone_lives() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let observer = plain_framework(&connect, SESSION).await;
        let path = unique_path("lifecycle", "ephemeral");
        fw.ensure_path(&path).await.unwrap();
        let node = format!("{path}/mine");
        fw.create(&node).data(b"").mode(CreateMode::Ephemeral).await.unwrap();
        let raw = fw.zk_client().unwrap();
        let full = fw.full_path(&node).unwrap();
        assert!(raw.check_stat(&full).await.unwrap().is_some());

        let started = std::time::Instant::now();
        fw.close().await;
        let took = started.elapsed();
        let exists = observer.exists(&node).await.unwrap();
        eprintln!(
            "close() with a raw client clone alive took {took:?}; the ephemeral node exists after it: {}",
            exists.is_some()
        );
        assert!(exists.is_none(), "the session's ephemeral node outlived close()");
        assert!(took < SESSION / 4, "close() took {took:?}");
        let after = within(Duration::from_secs(5), "a request on the kept clone", raw.get_data("/")).await;
        assert!(after.is_err(), "the kept clone still worked after close(): {after:?}");
        drop(raw);
        observer.close().await;
    })
    .await;
}

/// A framework whose client task is gone (here: the runtime it was started on shut down while
/// the handle and a guard live on elsewhere) must not keep saying what it said last: its state
/// reads `Lost` and a `SessionOnly` guard is no longer held, at once.
#[tokio::test]
async fn a_gone_session_task_reads_lost() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let session = Duration::from_secs(4);
        let path = unique_path("lifecycle", "gone-task");
        let (fw, guard) = {
            let (connect, path) = (connect.clone(), path.clone());
            tokio::task::spawn_blocking(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                let held = runtime.block_on(async move {
                    let fw = Framework::builder(&connect)
                        .session_timeout(session)
                        .error_policy(ConnectionStateErrorPolicy::SessionOnly)
                        .start()
                        .await
                        .expect("starting the framework");
                    let guard = InterProcessMutex::new(&fw, &path).unwrap().acquire().await.unwrap();
                    (fw, guard)
                });
                drop(runtime); // the client's session task goes with it
                held
            })
            .await
            .unwrap()
        };
        assert_eq!(fw.state(), ConnectionState::Lost, "state after the client's task is gone");
        assert!(!guard.is_held(), "a guard of a session whose client task is gone said held");
        assert!(futures::FutureExt::now_or_never(guard.lost()).is_some(), "lost() was not ready at once");
        // The session itself is closed by the server once it expires; another client gets the
        // lock then.
        let other = framework(&connect, session).await;
        let mutex = InterProcessMutex::new(&other, &path).unwrap();
        let stolen = within(session * 4, "another client acquiring", mutex.acquire()).await.unwrap();
        drop(guard);
        stolen.release().await.unwrap();
        other.close().await;
    })
    .await;
}
