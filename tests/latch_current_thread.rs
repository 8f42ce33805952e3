//! A `LeaderLatch` on a `current_thread` runtime whose one thread other tasks keep blocking:
//! while the framework's task is late, the latch must wait for it, not spin (a spin would
//! never let that task run, and the runtime would hang).

mod common;

use std::time::Duration;

use common::fixtures::{framework, init_tracing, shared_connect, unique_path};
use zk_recipes::LeaderLatch;

/// How long the whole run may take before the runtime counts as hung.
const HUNG: Duration = Duration::from_secs(90);

/// Blocks the runtime's thread again and again, each time for longer than the framework's
/// stall limit (3/10 of the session timeout) and with pauses of varying length between, so
/// the latch keeps finding the framework's state not vouched for at every point of its loop;
/// then stops and expects the latch to lead and close normally.
#[test]
fn latch_on_a_blocked_current_thread_runtime_waits_instead_of_spinning() {
    init_tracing();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let runner = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let outcome = runtime.block_on(async {
            let session = Duration::from_secs(2);
            let fw = framework(&shared_connect().await, session).await;
            let negotiated = fw.negotiated_session_timeout().unwrap();
            let path = unique_path("latch-current-thread", "blocked");
            let latch = LeaderLatch::new(&fw, &path, "blocked").unwrap();
            latch.start().unwrap();
            let pauses = [0u64, 1, 5, 20, 50, 120, 250];
            for (round, pause) in pauses.iter().cycle().take(21).enumerate() {
                // Longer than the stall limit, shorter than the session timeout.
                let block = negotiated * (4 + (round as u32 % 3)) / 10;
                std::thread::sleep(block);
                if *pause == 0 {
                    tokio::task::yield_now().await;
                } else {
                    tokio::time::sleep(Duration::from_millis(*pause)).await;
                }
            }
            let led = latch.await_leader(negotiated * 10).await.map_err(|e| e.to_string())?;
            let led = led.ok_or_else(|| "the latch did not lead once the runtime ran freely".to_owned())?;
            assert!(led.is_leader());
            latch.close().await.map_err(|e| e.to_string())?;
            fw.close().await;
            Ok(())
        });
        let _ = done_tx.send(outcome);
    });
    match done_rx.recv_timeout(HUNG) {
        Ok(Ok(())) => runner.join().expect("runtime thread"),
        Ok(Err(error)) => panic!("{error}"),
        Err(_) => panic!("the current_thread runtime hung (a task spun without yielding)"),
    }
}
