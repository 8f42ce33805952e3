//! A `LeaderLatch` on a `current_thread` runtime while the framework's task is late: the
//! latch must wait for that task, not go round its loop without waiting (on a Tokio whose
//! `watch` receivers do not yield by themselves, older than 1.41, such a loop never lets a
//! task of its own runtime run again).

use crate::common;

use std::time::Duration;

use common::fixtures::{children_count_becomes, framework, init_tracing, shared_connect, unique_path};
use zk_recipes::LeaderLatch;

/// How long the whole run may take before the runtime counts as hung.
const HUNG: Duration = Duration::from_secs(90);

/// CPU time used so far by the thread whose `/proc` task directory is `task` (Linux).
fn cpu_time(task: &std::path::Path) -> Duration {
    let stat = std::fs::read_to_string(task.join("stat")).expect("reading the thread's stat");
    // Fields after the command name (which is in parentheses): utime and stime are the 12th
    // and 13th, in clock ticks (100 per second on Linux).
    let after = &stat[stat.rfind(')').expect("stat format") + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// The framework runs on runtime R1 (its task and the client's task), latch `b` on a
/// `current_thread` runtime R2, behind latch `a` of another framework. When `a` closes, the
/// deletion wakes, in one dispatch of R1's client task, a blocker on R1, the test task on R2
/// and `b` (which takes the lock on that event alone). The test task blocks R2 for longer than
/// the stall limit and the blocker blocks R1 for longer still, so `b` starts leading while the
/// framework's task is late and cannot run. `b` must then wait (a few wake-ups per second),
/// not spin: R2's CPU time while R1 is blocked stays small. Then `b` leads and closes normally.
/// Two rounds, with the watches set in two orders (`b`'s last, then first).
#[test]
fn latch_waits_instead_of_spinning_while_the_framework_task_is_late() {
    init_tracing();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    // R1: the framework's runtime, driven by its own thread until the test ends.
    let r1 = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let r1_handle = r1.handle().clone();
    let (stop_r1, r1_stopped) = tokio::sync::oneshot::channel::<()>();
    let r1_thread = std::thread::spawn(move || {
        r1.block_on(async move {
            let _ = r1_stopped.await;
        })
    });
    let runner = std::thread::spawn(move || {
        let task_dir = std::path::Path::new("/proc")
            .join(std::fs::read_link("/proc/thread-self").expect("this thread's /proc directory"));
        let r2 = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let outcome = r2.block_on(async move {
            let session = Duration::from_secs(4);
            let connect = shared_connect().await;
            let fw = {
                let connect = connect.clone();
                r1_handle.spawn(async move { framework(&connect, session).await }).await.unwrap()
            };
            let other = framework(&connect, session).await;
            let negotiated = fw.negotiated_session_timeout().unwrap();
            let raw = fw.zk_client().unwrap();
            let mut report = Vec::new();
            for round in 0..2 {
                let path = unique_path("latch-current-thread", &format!("late-{round}"));
                let a = LeaderLatch::new(&other, &path, "a").unwrap();
                a.start().unwrap();
                let a_term = a.await_leader(negotiated * 5).await.map_err(|e| e.to_string())?;
                let a_node = other.full_path(a_term.ok_or("a did not lead")?.node_path()).unwrap();
                let b = LeaderLatch::new(&fw, &path, "b").unwrap();
                if round == 1 {
                    b.start().unwrap();
                    children_count_becomes(&fw, &path, 2, negotiated * 5).await;
                    tokio::time::sleep(negotiated / 10).await;
                }
                // The blocker on R1, then the test task's watch on R2.
                let (r1_watching_tx, r1_watching) = tokio::sync::oneshot::channel::<()>();
                let blocker = {
                    let (raw, a_node) = (raw.clone(), a_node.clone());
                    r1_handle.spawn(async move {
                        let (_, _, watcher) = raw.get_and_watch_data(&a_node).await.unwrap();
                        let _ = r1_watching_tx.send(());
                        watcher.changed().await;
                        std::thread::sleep(negotiated * 8 / 10);
                    })
                };
                r1_watching.await.unwrap();
                let (_, _, watcher) = raw.get_and_watch_data(&a_node).await.map_err(|e| e.to_string())?;
                if round == 0 {
                    b.start().unwrap();
                    children_count_becomes(&fw, &path, 2, negotiated * 5).await;
                    tokio::time::sleep(negotiated / 10).await;
                }
                tokio::spawn(async move { a.close().await });
                watcher.changed().await;
                // Longer than the stall limit (3/10 of the session timeout); R1 stays blocked
                // for 8/10 (not long enough for the server to expire the session).
                std::thread::sleep(negotiated * 4 / 10);
                let (cpu_before, wall_before) = (cpu_time(&task_dir), std::time::Instant::now());
                tokio::time::sleep(negotiated * 3 / 10).await;
                let (cpu, wall) = (cpu_time(&task_dir) - cpu_before, wall_before.elapsed());
                report.push(format!("round {round}: R2 used {cpu:?} of CPU in {wall:?} while R1 was blocked"));
                blocker.await.unwrap();
                let led = b.await_leader(negotiated * 10).await.map_err(|e| e.to_string())?;
                let led = led.ok_or_else(|| format!("round {round}: b did not lead"))?;
                assert!(led.is_leader());
                b.close().await.map_err(|e| e.to_string())?;
                // Waiting costs a wake-up per beat of the framework (1/20 of the session timeout);
                // the old loop, which went round without waiting, used 10-50% of the thread.
                if cpu > wall / 10 {
                    return Err(format!("{}: the latch spun while the framework's task was late", report.join("; ")));
                }
            }
            eprintln!("{}", report.join("; "));
            drop(raw);
            fw.close().await;
            other.close().await;
            Ok(())
        });
        let _ = done_tx.send(outcome);
    });
    let outcome = done_rx.recv_timeout(HUNG);
    let _ = stop_r1.send(());
    match outcome {
        Ok(Ok(())) => {
            runner.join().expect("runtime thread");
            r1_thread.join().expect("R1 thread");
        }
        Ok(Err(error)) => panic!("{error}"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("the runtime thread panicked"),
        Err(_) => panic!("the current_thread runtime hung (a task spun without yielding)"),
    }
}
