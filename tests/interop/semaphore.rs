//! Wire compatibility with real Apache Curator 5.4 (through `tests/common/curator.rs`):
//! Rust `InterProcessSemaphore` leases and Curator `InterProcessSemaphoreV2` leases on one path
//! share one limit, and Rust and Curator `InterProcessSemaphoreMutex`es exclude each other.
//!
//! Skipped (with a message) when java/javac/Curator are missing, unless `ZKR_REQUIRE_CURATOR=1`.

use crate::common;

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::curator::CuratorPeer;
use common::fixtures::{bounded, framework_waiting, plain_framework, shared_connect, unique_path, waits};
use common::timing::{INTEROP_EVENT as EVENT, INTEROP_SESSION as SESSION, SLOW_LIMIT as LIMIT};
use tokio::time::timeout;
use zk_recipes::{InterProcessSemaphore, InterProcessSemaphoreMutex, SemaphoreLease};

/// How long a contender is given to (wrongly) get through when it must not.
const BLOCKED_MS: u64 = 300;

/// A log file shared by Java and Rust holders: `enter <who> ...` after acquiring, `exit <who>`
/// before releasing, one append write per line (so lines from both sides never interleave).
struct SharedLog(PathBuf);

impl SharedLog {
    fn new(name: &str) -> Self {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        Self(std::env::temp_dir().join(format!("zkr-sem-interop-{name}-{}-{nanos}.log", std::process::id())))
    }

    fn arg(&self) -> String {
        self.0.display().to_string()
    }

    fn append(path: &Path, line: &str) {
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).expect("opening the log");
        file.write_all(format!("{line}\n").as_bytes()).expect("writing the log");
    }

    /// The most holders at once, checking that every exit matches an enter; and the number of
    /// `enter` lines per holder prefix (`java:` / `rust:`).
    fn analyse(&self) -> (usize, usize, usize) {
        let text = std::fs::read_to_string(&self.0).expect("reading the log");
        let mut inside: Vec<String> = Vec::new();
        let (mut peak, mut java, mut rust) = (0, 0, 0);
        for line in text.lines() {
            let mut words = line.split_whitespace();
            match (words.next(), words.next()) {
                (Some("enter"), Some(who)) => {
                    assert!(!inside.iter().any(|w| w == who), "{who} entered twice: {text}");
                    inside.push(who.to_owned());
                    peak = peak.max(inside.len());
                    if who.starts_with("java:") {
                        java += 1;
                    } else {
                        rust += 1;
                    }
                }
                (Some("exit"), Some(who)) => {
                    let i = inside.iter().position(|w| w == who).unwrap_or_else(|| panic!("{who} exits unseen"));
                    inside.remove(i);
                }
                _ => panic!("unexpected log line {line:?}"),
            }
        }
        assert!(inside.is_empty(), "holders never left: {inside:?}");
        (peak, java, rust)
    }
}

impl Drop for SharedLog {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A Rust holder looping like the Java peer's `loop`: acquire, log enter, hold, log exit,
/// release.
async fn rust_loop<F, Fut, G>(acquire: F, who: String, log: PathBuf, cycles: usize)
where
    F: Fn() -> Fut,
    Fut: Future<Output = G>,
{
    for _ in 0..cycles {
        let held = acquire().await;
        SharedLog::append(&log, &format!("enter rust:{who}"));
        tokio::time::sleep(Duration::from_millis(2)).await;
        SharedLog::append(&log, &format!("exit rust:{who}"));
        drop(held); // the delete goes out at once
    }
}

/// Rust and Curator leases on one path never exceed the limit together, and each side sees
/// the other's leases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_curator_leases_share_one_limit() {
    leases_share_one_limit(false, false).await;
}

/// The same with the Rust sessions counting leases on their mirror of the lease directory
/// (`WaitStrategy::Mirror`) while Curator lists and watches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_mirror_sessions_and_curator_leases_share_one_limit() {
    leases_share_one_limit(true, false).await;
}

/// The same with `pipelined_admission` on the Rust side: our contenders release the internal
/// lock with their lease's create, Curator's keep it until they have counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_pipelined_sessions_and_curator_leases_share_one_limit() {
    leases_share_one_limit(true, true).await;
}

async fn leases_share_one_limit(mirror: bool, pipelined: bool) {
    bounded(LIMIT, async {
        const MAX: usize = 3;
        let connect = shared_connect().await;
        let Some(mut java) = CuratorPeer::started(&connect, SESSION).await else {
            return;
        };
        let name = match (mirror, pipelined) {
            (false, _) => "leases",
            (true, false) => "leases-mirror",
            (true, true) => "leases-pipelined",
        };
        let path = unique_path("sem-interop", name);
        let fw = framework_waiting(&connect, SESSION, waits(mirror)).await;
        let semaphore = InterProcessSemaphore::new(&fw, &path, MAX).unwrap().pipelined_admission(pipelined);
        for id in ["J1", "J2"] {
            assert_eq!(java.command(&format!("semaphore {id} {path} {MAX}")).await.unwrap(), "ok");
        }

        // Rust holds all three: Curator gets none, and lists our leases as participants.
        let mut ours = semaphore.acquire_many(MAX).await.unwrap();
        assert_eq!(java.command(&format!("acquire J1 {BLOCKED_MS}")).await.unwrap(), "timeout J1");
        let mut seen = java.participants("J1").await.unwrap();
        seen.sort();
        let mut names: Vec<String> =
            ours.iter().map(|l| zk_recipes::path::node_name(l.lease_path()).to_owned()).collect();
        names.sort();
        assert_eq!(seen, names, "Curator sees exactly our leases");

        // A waiting Curator acquire gets through when we release one.
        java.send("acquire J1").await.unwrap();
        ours.pop().unwrap().release().await.unwrap();
        assert_eq!(java.wait_for("acquired J1", EVENT).await.unwrap(), "acquired J1");
        let java_lease = java.lock_paths("J1").await.unwrap();
        assert_eq!(java_lease.len(), 1);
        assert!(java_lease[0].starts_with(&format!("{path}/leases/_c_")), "{java_lease:?}");
        // Now two of ours and one of Curator's: we get no more, and see all three.
        assert!(semaphore.try_acquire().await.unwrap().is_none());
        assert!(semaphore.acquire_timeout(Duration::from_millis(BLOCKED_MS)).await.unwrap().is_none());
        let participants = semaphore.participant_nodes().await.unwrap();
        assert_eq!(participants.len(), MAX);
        assert!(participants.contains(&java_lease[0]), "{participants:?}");
        // A waiting Rust acquire gets through when Curator releases.
        let waiting = {
            let semaphore = semaphore.clone();
            tokio::spawn(async move { semaphore.acquire().await })
        };
        assert_eq!(java.command("release J1").await.unwrap(), "released J1");
        ours.push(timeout(EVENT, waiting).await.expect("our waiter gets the lease").unwrap().unwrap());
        SemaphoreLease::release_all(ours).await.unwrap();

        // Both sides loop on the same path; the shared log never shows more than MAX holders.
        const CYCLES: usize = 25;
        let log = SharedLog::new("leases");
        for id in ["J1", "J2"] {
            let reply = java.command(&format!("loop {id} {CYCLES} {} 2", log.arg())).await.unwrap();
            assert_eq!(reply, format!("loop-started {id}"));
        }
        let fw2 = framework_waiting(&connect, SESSION, waits(mirror)).await;
        let mut rust = Vec::new();
        for (i, fw) in [&fw, &fw2, &fw2].into_iter().enumerate() {
            let semaphore = InterProcessSemaphore::new(fw, &path, MAX).unwrap().pipelined_admission(pipelined);
            let acquire = move || {
                let semaphore = semaphore.clone();
                async move { semaphore.acquire().await.unwrap() }
            };
            rust.push(tokio::spawn(rust_loop(acquire, format!("R{i}"), log.0.clone(), CYCLES)));
        }
        for task in rust {
            timeout(EVENT * 2, task).await.expect("Rust loops finish").unwrap();
        }
        for id in ["J1", "J2"] {
            let done = java.wait_for(&format!("loop-done {id}"), EVENT).await.unwrap();
            assert_eq!(done, format!("loop-done {id} {CYCLES}"));
        }
        let (peak, java_entries, rust_entries) = log.analyse();
        assert!(peak <= MAX, "{peak} holders at once, max {MAX}");
        assert!(peak >= 2, "the loops never overlapped: the check proves nothing");
        assert_eq!((java_entries, rust_entries), (2 * CYCLES, 3 * CYCLES));
        java.quit().await.unwrap();
    })
    .await;
}

/// A Curator `InterProcessSemaphoreMutex` and ours exclude each other, both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_curator_semaphore_mutexes_exclude_each_other() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = CuratorPeer::started(&connect, SESSION).await else {
            return;
        };
        let path = unique_path("sem-interop", "semmutex");
        let fw = plain_framework(&connect, SESSION).await;
        let mutex = InterProcessSemaphoreMutex::new(&fw, &path).unwrap();
        assert_eq!(java.command(&format!("semmutex M {path}")).await.unwrap(), "ok");

        // Curator holds: we wait, and get it when Curator releases.
        assert_eq!(java.command("acquire M").await.unwrap(), "acquired M");
        assert!(mutex.acquire_timeout(Duration::from_millis(BLOCKED_MS)).await.unwrap().is_none());
        assert!(mutex.try_acquire().await.unwrap().is_none());
        let waiting = {
            let mutex = mutex.clone();
            tokio::spawn(async move { mutex.acquire().await })
        };
        let leases = format!("{path}/leases");
        let deadline = tokio::time::Instant::now() + EVENT;
        while fw.get_children(&leases).await.map_or(0, |c| c.len()) < 2 {
            assert!(tokio::time::Instant::now() < deadline, "our waiter never made its lease");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(java.command("release M").await.unwrap(), "released M");
        let guard = timeout(EVENT, waiting).await.expect("we get it after Curator").unwrap().unwrap();

        // We hold: Curator waits, and gets it when we release.
        assert_eq!(java.command(&format!("acquire M {BLOCKED_MS}")).await.unwrap(), "timeout M");
        assert_eq!(java.command("is_acquired M").await.unwrap(), "is_acquired M false");
        java.send("acquire M").await.unwrap();
        guard.release().await.unwrap();
        assert_eq!(java.wait_for("acquired M", EVENT).await.unwrap(), "acquired M");
        assert_eq!(java.command("release M").await.unwrap(), "released M");

        // Looping on both sides: never two holders.
        const CYCLES: usize = 20;
        let log = SharedLog::new("semmutex");
        assert_eq!(java.command(&format!("loop M {CYCLES} {} 1", log.arg())).await.unwrap(), "loop-started M");
        let fw2 = plain_framework(&connect, SESSION).await;
        let mut rust = Vec::new();
        for (i, fw) in [&fw, &fw2].into_iter().enumerate() {
            let mutex = InterProcessSemaphoreMutex::new(fw, &path).unwrap();
            let acquire = move || {
                let mutex = mutex.clone();
                async move { mutex.acquire().await.unwrap() }
            };
            rust.push(tokio::spawn(rust_loop(acquire, format!("M{i}"), log.0.clone(), CYCLES)));
        }
        for task in rust {
            timeout(EVENT * 2, task).await.expect("Rust loops finish").unwrap();
        }
        assert_eq!(java.wait_for("loop-done M", EVENT).await.unwrap(), format!("loop-done M {CYCLES}"));
        let (peak, java_entries, rust_entries) = log.analyse();
        assert_eq!(peak, 1, "two holders of one semaphore mutex at once");
        assert_eq!((java_entries, rust_entries), (CYCLES, 2 * CYCLES));
        java.quit().await.unwrap();
    })
    .await;
}
