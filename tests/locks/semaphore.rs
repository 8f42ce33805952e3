//! `InterProcessSemaphore` against a real ZooKeeper server: ports of Curator's
//! `TestInterProcessSemaphore`, kazoo's semaphore scenarios that apply, the classic
//! 15-workers-on-3-leases demonstration, a cancellation matrix and bad input. The semaphore
//! mutex is in `semaphore_mutex.rs`; the base lock suite, over a one-lease semaphore too, in
//! `conformance.rs`.

use crate::common;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use common::fixtures::{
    bounded, children, children_count_becomes, eventually, plain_framework, semaphore_settles, shared_connect,
    unique_path,
};
use common::timing::{LIMIT, PROMPT, QUIET as BLOCKED, SESSION};
use tokio::sync::mpsc;
use tokio::time::{timeout, Instant};
use zk_recipes::testing::{FaultProxy, TestingServer};
use zk_recipes::zk::CreateMode;
use zk_recipes::{ConnectionState, Error, Framework, InterProcessMutex, InterProcessSemaphore, SemaphoreLease};

/// Peak tracking for "never more than N at once".
#[derive(Default)]
struct Occupancy {
    now: AtomicUsize,
    peak: AtomicUsize,
}

impl Occupancy {
    fn enter(&self) -> usize {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        now
    }

    fn exit(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }

    fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

/// Polls `fut` `polls` times, letting the runtime run in between (so replies arrive and the
/// future moves on), then drops it. Returns the output if it finished first.
async fn poll_then_drop<F: Future>(fut: F, polls: usize) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    for _ in 0..polls {
        if let Poll::Ready(out) = futures::poll!(fut.as_mut()) {
            return Some(out);
        }
        tokio::task::yield_now().await;
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Curator TestInterProcessSemaphore

/// testSimple: one lease; a second timed acquire gets nothing.
#[tokio::test]
async fn simple() {
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("sem", "simple");
        let semaphore = InterProcessSemaphore::new(&fw, &path, 1).unwrap();
        let lease = semaphore.acquire_timeout(PROMPT).await.unwrap().expect("first lease");
        assert!(semaphore.acquire_timeout(BLOCKED).await.unwrap().is_none());
        assert!(semaphore.try_acquire().await.unwrap().is_none());
        lease.release().await.unwrap();
        semaphore_settles(&fw, &path, 0).await;
    })
    .await;
}

/// testSimple2: three handles on max 3; the fourth times out until one lease is closed.
#[tokio::test]
async fn simple2() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("sem", "simple2");
        let mut leases = Vec::new();
        let mut frameworks = Vec::new();
        for _ in 0..3 {
            let fw = plain_framework(&connect, SESSION).await;
            let semaphore = InterProcessSemaphore::new(&fw, &path, 3).unwrap();
            leases.push(semaphore.acquire_timeout(PROMPT).await.unwrap().expect("lease"));
            frameworks.push(fw);
        }
        let fw = plain_framework(&connect, SESSION).await;
        let fourth = InterProcessSemaphore::new(&fw, &path, 3).unwrap();
        assert!(fourth.acquire_timeout(BLOCKED).await.unwrap().is_none());
        leases.pop().unwrap().release().await.unwrap();
        let lease = fourth.acquire_timeout(PROMPT).await.unwrap().expect("freed lease");
        lease.release().await.unwrap();
        SemaphoreLease::release_all(leases).await.unwrap();
        semaphore_settles(&fw, &path, 0).await;
    })
    .await;
}

/// testGetParticipantNodes: after three leases, three participants, the lease nodes' paths.
#[tokio::test]
async fn participant_nodes_are_the_lease_paths() {
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("sem", "participants");
        let semaphore = InterProcessSemaphore::new(&fw, &path, 5).unwrap();
        assert!(semaphore.participant_nodes().await.unwrap().is_empty(), "never used: no participants");
        let leases = vec![
            semaphore.acquire().await.unwrap(),
            semaphore.acquire().await.unwrap(),
            semaphore.acquire().await.unwrap(),
        ];
        let participants = semaphore.participant_nodes().await.unwrap();
        assert_eq!(participants.len(), 3);
        let mut held: Vec<String> = leases.iter().map(|l| l.lease_path().to_owned()).collect();
        held.sort_by_key(|p| zk_recipes::path::sequence(p));
        assert_eq!(participants, held, "in sequence order");
        for p in &participants {
            let name = p.strip_prefix(&format!("{path}/leases/")).expect("under leases/");
            assert!(zk_recipes::path::is_protected(name), "{name}");
            assert_eq!(zk_recipes::path::strip_protected(name).len(), "lease-".len() + 10, "{name}");
            assert!(zk_recipes::path::strip_protected(name).starts_with("lease-"), "{name}");
        }
        assert!(semaphore.is_acquired_in_this_process());
        SemaphoreLease::release_all(leases).await.unwrap();
        assert!(!semaphore.is_acquired_in_this_process());
        semaphore_settles(&fw, &path, 0).await;
    })
    .await;
}

/// testRelease1AtATime: ten clients, max five. Five hold at once and the others wait; each
/// release lets exactly one more in, until all ten have had a lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_one_at_a_time() {
    bounded(LIMIT, async {
        const CLIENTS: usize = 10;
        const MAX: usize = 5;
        let connect = shared_connect().await;
        let path = unique_path("sem", "one-at-a-time");
        let (tx, mut rx) = mpsc::unbounded_channel::<SemaphoreLease>();
        let mut frameworks = Vec::new();
        for _ in 0..CLIENTS {
            let fw = plain_framework(&connect, SESSION).await;
            let semaphore = InterProcessSemaphore::new(&fw, &path, MAX).unwrap();
            let tx = tx.clone();
            tokio::spawn(async move {
                let lease = semaphore.acquire().await.unwrap();
                let _ = tx.send(lease);
            });
            frameworks.push(fw);
        }
        drop(tx);
        let mut held = Vec::new();
        for _ in 0..MAX {
            held.push(timeout(PROMPT, rx.recv()).await.expect("a lease in time").unwrap());
        }
        let mut served = MAX;
        while served < CLIENTS {
            assert!(timeout(BLOCKED, rx.recv()).await.is_err(), "a sixth lease while {MAX} are held");
            assert_eq!(children(&frameworks[0], &format!("{path}/leases")).await.len(), MAX + 1, "one waiter's node");
            held.remove(0).release().await.unwrap();
            held.push(timeout(PROMPT, rx.recv()).await.expect("the next lease").unwrap());
            served += 1;
        }
        assert_eq!(held.len(), MAX);
        SemaphoreLease::release_all(held).await.unwrap();
        semaphore_settles(&frameworks[0], &path, 0).await;
    })
    .await;
}

/// A small deterministic generator (no extra dependency).
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// testReleaseInChunks (scaled to two cores): many waiters on max 7, released in random
/// chunks. Never more than 7 held; every waiter is served; nothing is left over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_in_chunks() {
    bounded(LIMIT, async {
        const WAITERS: usize = 24;
        const MAX: usize = 7;
        let connect = shared_connect().await;
        let path = unique_path("sem", "chunks");
        let frameworks = [
            plain_framework(&connect, SESSION).await,
            plain_framework(&connect, SESSION).await,
            plain_framework(&connect, SESSION).await,
        ];
        let (tx, mut rx) = mpsc::unbounded_channel::<SemaphoreLease>();
        for i in 0..WAITERS {
            let semaphore = InterProcessSemaphore::new(&frameworks[i % 3], &path, MAX).unwrap();
            let tx = tx.clone();
            tokio::spawn(async move {
                let _ = tx.send(semaphore.acquire().await.unwrap());
            });
        }
        drop(tx);
        let mut random = XorShift(0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id()));
        let mut held: Vec<SemaphoreLease> = Vec::new();
        let mut served = 0;
        while served < WAITERS {
            // Take what has been granted until the semaphore is full (or everyone is served).
            while held.len() < MAX && served < WAITERS {
                held.push(timeout(PROMPT, rx.recv()).await.expect("a lease in time").unwrap());
                served += 1;
            }
            assert!(held.len() <= MAX);
            let chunk = 1 + random.below(held.len());
            let released: Vec<SemaphoreLease> = held.drain(..chunk).collect();
            SemaphoreLease::release_all(released).await.unwrap();
        }
        assert!(rx.try_recv().is_err(), "no lease beyond the waiters");
        SemaphoreLease::release_all(held).await.unwrap();
        semaphore_settles(&frameworks[0], &path, 0).await;
    })
    .await;
}

/// testMaxPerSession (scaled): clients take random numbers of leases at once; the shared
/// count of held leases never exceeds the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_multi_lease_acquires_stay_within_max() {
    bounded(LIMIT, async {
        const CLIENTS: usize = 5;
        const MAX: usize = 6;
        const ROUNDS: usize = 8;
        let connect = shared_connect().await;
        let path = unique_path("sem", "max-per-session");
        let held = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for client in 0..CLIENTS {
            let fw = plain_framework(&connect, SESSION).await;
            let (held, peak, path) = (held.clone(), peak.clone(), path.clone());
            tasks.push(tokio::spawn(async move {
                let semaphore = InterProcessSemaphore::new(&fw, &path, MAX).unwrap();
                let mut random = XorShift(0x2545_f491_4f6c_dd1d ^ (client as u64 + 1));
                for _ in 0..ROUNDS {
                    let n = 1 + random.below(3);
                    let leases = semaphore.acquire_many(n).await.unwrap();
                    assert_eq!(leases.len(), n);
                    let now = held.fetch_add(n, Ordering::SeqCst) + n;
                    peak.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= MAX, "{now} leases held at once, max {MAX}");
                    tokio::task::yield_now().await;
                    held.fetch_sub(n, Ordering::SeqCst);
                    SemaphoreLease::release_all(leases).await.unwrap();
                }
                fw
            }));
        }
        let frameworks = futures::future::try_join_all(tasks).await.unwrap();
        assert!(peak.load(Ordering::SeqCst) <= MAX);
        semaphore_settles(&frameworks[0], &path, 0).await;
    })
    .await;
}

/// testClientClose: closing a framework frees its leases for others.
#[tokio::test]
async fn closing_the_framework_frees_its_leases() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("sem", "client-close");
        let fw1 = plain_framework(&connect, SESSION).await;
        let fw2 = plain_framework(&connect, SESSION).await;
        let s1 = InterProcessSemaphore::new(&fw1, &path, 2).unwrap();
        let s2 = InterProcessSemaphore::new(&fw2, &path, 2).unwrap();
        let leases = s1.acquire_many(2).await.unwrap();
        assert!(s2.acquire_timeout(BLOCKED).await.unwrap().is_none());
        let waiting = tokio::spawn(async move { s2.acquire_many(2).await });
        children_count_becomes(&fw2, &format!("{path}/leases"), 4, PROMPT).await; // two held, two waiting (created together)
        fw1.close().await;
        let got = timeout(PROMPT, waiting).await.expect("leases freed by close").unwrap().unwrap();
        assert_eq!(got.len(), 2);
        drop(leases); // after close: nothing to send, the session took the nodes
        SemaphoreLease::release_all(got).await.unwrap();
        semaphore_settles(&fw2, &path, 0).await;
    })
    .await;
}

/// testNoOrphanedNodes: a waiting acquire whose lease node is deleted by someone else makes a
/// new one, still waits, gets through when the holder releases, and leaves nothing behind.
#[tokio::test]
async fn waiting_lease_deleted_externally_is_recreated() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("sem", "no-orphans");
        let leases_dir = format!("{path}/leases");
        let fw = plain_framework(&connect, SESSION).await;
        let admin = plain_framework(&connect, SESSION).await;
        let semaphore = InterProcessSemaphore::new(&fw, &path, 1).unwrap();
        let first = semaphore.acquire().await.unwrap();
        let waiter = {
            let semaphore = semaphore.clone();
            tokio::spawn(async move { semaphore.acquire().await })
        };
        let nodes = children_count_becomes(&admin, &leases_dir, 2, PROMPT).await;
        let theirs = nodes.iter().find(|n| !first.lease_path().ends_with(n.as_str())).unwrap().clone();
        admin.delete(&format!("{leases_dir}/{theirs}")).await.unwrap();
        // The waiter notices, makes a new node, and waits again.
        let deadline = Instant::now() + PROMPT;
        loop {
            let now = children(&admin, &leases_dir).await;
            if now.len() == 2 && !now.contains(&theirs) {
                break;
            }
            assert!(Instant::now() < deadline, "waiter did not recreate its lease: {now:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!waiter.is_finished());
        first.release().await.unwrap();
        let second = timeout(PROMPT, waiter).await.expect("waiter gets through").unwrap().unwrap();
        children_count_becomes(&admin, &leases_dir, 1, PROMPT).await;
        second.release().await.unwrap();
        semaphore_settles(&admin, &path, 0).await;
        let again = semaphore.acquire_timeout(PROMPT).await.unwrap().expect("a new acquire works");
        again.release().await.unwrap();
    })
    .await;
}

/// testInterruptAcquire (CURATOR-462): a waiting acquire that is dropped removes its lease
/// node (one remains), and a later acquire works.
#[tokio::test]
async fn dropped_waiting_acquire_removes_its_lease() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("sem", "interrupt");
        let fw = plain_framework(&connect, SESSION).await;
        let semaphore = InterProcessSemaphore::new(&fw, &path, 1).unwrap();
        let lease = semaphore.acquire().await.unwrap();
        let waiter = {
            let semaphore = semaphore.clone();
            tokio::spawn(async move { semaphore.acquire().await })
        };
        children_count_becomes(&fw, &format!("{path}/leases"), 2, PROMPT).await;
        waiter.abort();
        assert!(waiter.await.unwrap_err().is_cancelled());
        semaphore_settles(&fw, &path, 1).await;
        lease.release().await.unwrap();
        let next = semaphore.acquire_timeout(PROMPT).await.unwrap().expect("a later acquire works");
        next.release().await.unwrap();
        semaphore_settles(&fw, &path, 0).await;
    })
    .await;
}

/// testAcquireAfterLostServer / CURATOR-335, CURATOR-315: looping acquirers whose connections
/// are cut again and again (FIN and RST, at arbitrary points of their acquires) all carry on,
/// never over the limit, and leave no orphaned lease behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loops_carry_on_through_connection_drops() {
    loops_through_connection_drops(false).await;
}

/// The same with `pipelined_admission`: a contender's create carries the internal lock's delete
/// behind it, and the cuts also catch contenders counting their leases without the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_loops_carry_on_through_connection_drops() {
    loops_through_connection_drops(true).await;
}

async fn loops_through_connection_drops(pipelined: bool) {
    common::fixtures::init_tracing();
    bounded(LIMIT, async {
        const CLIENTS: usize = 4;
        const MAX: usize = 2;
        let connect = shared_connect().await;
        let proxy = Arc::new(FaultProxy::start(&connect).await.unwrap());
        let path = unique_path("sem", if pipelined { "lost-connections-pipelined" } else { "lost-connections" });
        let occupancy = Arc::new(Occupancy::default());
        let done = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..CLIENTS {
            let fw = plain_framework(&proxy.connect_string(), SESSION).await;
            let (occupancy, done, path) = (occupancy.clone(), done.clone(), path.clone());
            tasks.push(tokio::spawn(async move {
                let semaphore = InterProcessSemaphore::new(&fw, &path, MAX).unwrap().pipelined_admission(pipelined);
                let mut count = 0usize;
                while count < 40 {
                    let lease = match semaphore.acquire().await {
                        Ok(lease) => lease,
                        Err(e) if e.is_retryable() => continue,
                        Err(e) => panic!("acquire: {e}"),
                    };
                    // Every lease counts while it exists, trusted or not: its node is on the
                    // server until it is deleted (the cuts are far shorter than the session).
                    assert!(occupancy.enter() <= MAX, "over the limit");
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    occupancy.exit();
                    let _ = lease.release().await; // a cut during the delete: the reaper finishes it
                    count += 1;
                    done.fetch_add(1, Ordering::SeqCst);
                }
                fw
            }));
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cutter = {
            let (done, stop, proxy) = (done.clone(), stop.clone(), proxy.clone());
            tokio::spawn(async move {
                let mut cuts = 0u32;
                while !stop.load(Ordering::SeqCst) {
                    // Wait for some progress between cuts, so the loops are caught mid-acquire.
                    let before = done.load(Ordering::SeqCst);
                    while done.load(Ordering::SeqCst) < before + 3 && !stop.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    if cuts % 2 == 0 {
                        proxy.drop_connections();
                    } else {
                        proxy.reset_connections();
                    }
                    cuts += 1;
                }
                cuts
            })
        };
        let frameworks = futures::future::try_join_all(tasks).await.unwrap();
        stop.store(true, Ordering::SeqCst);
        let cuts = cutter.await.unwrap();
        assert!(cuts >= 5, "only {cuts} cuts");
        assert!(occupancy.peak() <= MAX);
        let admin = plain_framework(&connect, SESSION).await;
        semaphore_settles(&admin, &path, 0).await;
        drop(frameworks);
    })
    .await;
}

/// testAcquireAfterLostServer: the server stops until every client has lost its session, then
/// comes back; the looping acquirers all carry on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loops_carry_on_after_the_server_comes_back() {
    bounded(LIMIT, async {
        const CLIENTS: usize = 3;
        let session = Duration::from_secs(3);
        let mut server = TestingServer::start().await.unwrap();
        let path = unique_path("sem", "lost-server");
        let done = Arc::new(AtomicUsize::new(0));
        let mut frameworks = Vec::new();
        for _ in 0..CLIENTS {
            let fw = Framework::builder(&server.connect_string()).session_timeout(session).start().await.unwrap();
            let semaphore = InterProcessSemaphore::new(&fw, &path, 1).unwrap();
            let done = done.clone();
            tokio::spawn(async move {
                loop {
                    match semaphore.acquire().await {
                        Ok(lease) => {
                            let _ = lease.release().await;
                            done.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(Error::Closed) => return,
                        Err(e) => {
                            eprintln!("acquire failed (the loop goes on): {e}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
            });
            frameworks.push(fw);
        }
        let wait_progress = |n: usize| {
            let done = done.clone();
            async move {
                let target = done.load(Ordering::SeqCst) + n;
                while done.load(Ordering::SeqCst) < target {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        };
        timeout(PROMPT, wait_progress(20)).await.expect("loops make progress");

        let mut lost = Vec::new();
        for fw in &frameworks {
            let mut rx = fw.state_watch();
            lost.push(async move {
                let _ = rx.wait_for(|s| s.state == ConnectionState::Lost).await;
            });
        }
        server.stop().await.unwrap();
        // Suspended, then Lost one session timeout later.
        timeout(session * 3, futures::future::join_all(lost)).await.expect("every client sees Lost");
        server.restart().await.unwrap();
        // Leases of the old sessions go when the server expires them (one session timeout).
        timeout(session * 4 + PROMPT, wait_progress(20)).await.expect("loops carry on after the restart");
        for fw in &frameworks {
            fw.close().await;
        }
    })
    .await;
}

/// kazoo's test_handle_session_loss / Curator's testKilledSession: the holder's session is
/// expired on the server; its lease is gone (`lost()` fires, `is_held()` is false) and a
/// waiter of another client gets it. Then a waiting client's own session is expired: it
/// re-queues on its new session (no orphan from the old one) and gets through later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_expiry_of_holder_and_of_waiter() {
    bounded(LIMIT, async {
        let direct = shared_connect().await;
        let proxy = FaultProxy::start(&direct).await.unwrap();
        let path = unique_path("sem", "session-loss");
        let leases = format!("{path}/leases");
        let proxied = plain_framework(&proxy.connect_string(), SESSION).await;
        let other = plain_framework(&direct, SESSION).await;
        let s1 = InterProcessSemaphore::new(&proxied, &path, 1).unwrap();
        let s2 = InterProcessSemaphore::new(&other, &path, 1).unwrap();

        // The holder's session ends.
        let held = s1.acquire().await.unwrap();
        let waiting = {
            let s2 = s2.clone();
            tokio::spawn(async move { s2.acquire().await })
        };
        children_count_becomes(&other, &leases, 2, PROMPT).await;
        let session = proxied.zk_client().unwrap().session().clone();
        zk_recipes::testing::expire_session(&proxy, &direct, session).await.unwrap();
        timeout(PROMPT, held.lost()).await.expect("lost() fires when the session ends");
        assert!(!held.is_held());
        let theirs = timeout(PROMPT, waiting).await.expect("the waiter gets the lease").unwrap().unwrap();
        held.release().await.unwrap(); // its node went with the session: nothing to do

        // A waiter's session ends: it starts over on the new session.
        let mut rx = proxied.state_watch();
        timeout(SESSION, rx.wait_for(|s| s.state.is_connected() && s.epoch == 2)).await.unwrap().unwrap();
        let waiting = {
            let s1 = s1.clone();
            tokio::spawn(async move { s1.acquire().await })
        };
        let before = children_count_becomes(&other, &leases, 2, PROMPT).await;
        let session = proxied.zk_client().unwrap().session().clone();
        zk_recipes::testing::expire_session(&proxy, &direct, session).await.unwrap();
        // The old lease node went with the old session; a new one appears for the new session.
        let deadline = Instant::now() + SESSION;
        loop {
            let now = children(&other, &leases).await;
            if now.len() == 2 && now.iter().filter(|n| before.contains(n)).count() == 1 {
                break;
            }
            assert!(Instant::now() < deadline, "no new waiting lease: {now:?} (before {before:?})");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!waiting.is_finished());
        theirs.release().await.unwrap();
        let ours = timeout(PROMPT, waiting).await.expect("the waiter gets through").unwrap().unwrap();
        assert!(ours.is_held());
        assert_eq!(proxied.snapshot().epoch, 3);
        ours.release().await.unwrap();
        semaphore_settles(&other, &path, 0).await;
    })
    .await;
}

/// Regression (engine and semaphore retry loops): waiters whose session ends while the
/// framework still reads "connected" must neither spin nor burn their retries at once.
///
/// Here the server refuses an auth packet and drops the connection, so the client is
/// `AuthFailed` (terminal) at once while the framework state is still `Connected`. Requests on
/// an ended client fail without ever being pending; a retry loop that only pauses when the
/// state is not connected then retried at full speed: with a finite retry policy it gave up
/// with `NoNode` within microseconds, and with `RetryForever` it never yielded, starving the
/// state manager on this single-threaded runtime (a livelock). The runtime runs on its own
/// thread so that a livelock fails the test instead of hanging it.
#[test]
fn waiters_survive_a_session_that_ends_while_connected() {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(session_ends_while_connected());
        let _ = done_tx.send(());
    });
    match done_rx.recv_timeout(LIMIT) {
        Ok(()) => {}
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("the scenario failed (see its panic above)"),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("livelock: the runtime never came back"),
    }
}

async fn session_ends_while_connected() {
    let direct = shared_connect().await;
    // Short, so that the server soon expires the old session and its nodes.
    let short = Duration::from_secs(2);
    let fw = Framework::builder(&direct).session_timeout(short).start().await.unwrap();
    let other = plain_framework(&direct, SESSION).await;
    let path = unique_path("sem", "ended-while-connected");
    // A plain mutex waiter exercises the engine's retry loop on its own.
    let mutex_path = format!("{path}-mutex");
    let mutex_holder = InterProcessMutex::new(&other, &mutex_path).unwrap().acquire().await.unwrap();
    let mutex = InterProcessMutex::new(&fw, &mutex_path).unwrap();
    let w0 = tokio::spawn(async move { mutex.acquire().await?.release().await });
    children_count_becomes(&other, &mutex_path, 2, PROMPT).await;
    let holder = InterProcessSemaphore::new(&other, &path, 1).unwrap().acquire().await.unwrap();
    let semaphore = InterProcessSemaphore::new(&fw, &path, 1).unwrap();
    let spawn_waiter = || {
        let semaphore = semaphore.clone();
        tokio::spawn(async move { semaphore.acquire().await?.release().await })
    };
    // w1 holds the internal lock and waits for a lease; w2 waits for the internal lock.
    let w1 = spawn_waiter();
    children_count_becomes(&other, &format!("{path}/leases"), 2, PROMPT).await;
    let w2 = spawn_waiter();
    children_count_becomes(&other, &format!("{path}/locks"), 2, PROMPT).await;

    let refused = fw.zk_client().unwrap().auth("no-such-scheme", b"x").await;
    assert_eq!(refused, Err(zk_recipes::zk::Error::AuthFailed));
    // Both re-queue on the next session and get through once the holder releases (after the
    // server has expired the old session, whose nodes block them until then).
    let mut rx = fw.state_watch();
    timeout(PROMPT, rx.wait_for(|s| s.epoch == 2 && s.state.is_connected())).await.unwrap().unwrap();
    holder.release().await.unwrap();
    mutex_holder.release().await.unwrap();
    let limit = short * 3 + PROMPT;
    timeout(limit, w0).await.expect("w0 gets through").unwrap().expect("w0 neither failed nor gave up");
    timeout(limit, w1).await.expect("w1 gets through").unwrap().expect("w1 neither failed nor gave up");
    timeout(limit, w2).await.expect("w2 gets through").unwrap().expect("w2 neither failed nor gave up");
    semaphore_settles(&other, &path, 0).await;
    children_count_becomes(&other, &mutex_path, 0, PROMPT).await;
    fw.close().await;
}

// ---------------------------------------------------------------------------------------------
// acquire_many, leases, two tasks of one process

#[tokio::test]
async fn acquire_many_is_all_or_nothing() {
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("sem", "many");
        let semaphore = InterProcessSemaphore::new(&fw, &path, 3).unwrap();
        let two = semaphore.acquire_many(2).await.unwrap();
        assert_eq!(two.len(), 2);
        assert!(semaphore.try_acquire_many(2).await.unwrap().is_none());
        semaphore_settles(&fw, &path, 2).await;
        assert!(semaphore.acquire_many_timeout(2, BLOCKED).await.unwrap().is_none());
        semaphore_settles(&fw, &path, 2).await;
        let one = semaphore.try_acquire_many(1).await.unwrap().expect("one is free");
        assert_eq!(one.len(), 1);
        SemaphoreLease::release_all(two).await.unwrap();
        let three = semaphore.acquire_many_timeout(2, PROMPT).await.unwrap().expect("two are free");
        SemaphoreLease::release_all(three.into_iter().chain(one)).await.unwrap();
        semaphore_settles(&fw, &path, 0).await;
    })
    .await;
}

#[tokio::test]
async fn cancelled_acquire_many_releases_what_it_took() {
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("sem", "many-cancel");
        let semaphore = InterProcessSemaphore::new(&fw, &path, 3).unwrap();
        let held = semaphore.acquire().await.unwrap();
        let waiter = {
            let semaphore = semaphore.clone();
            tokio::spawn(async move { semaphore.acquire_many(3).await })
        };
        // It created its three leases and waits for the held one.
        children_count_becomes(&fw, &format!("{path}/leases"), 4, PROMPT).await;
        waiter.abort();
        let _ = waiter.await;
        semaphore_settles(&fw, &path, 1).await;
        held.release().await.unwrap();
        let all = semaphore.acquire_many_timeout(3, PROMPT).await.unwrap().expect("all three");
        SemaphoreLease::release_all(all).await.unwrap();
        semaphore_settles(&fw, &path, 0).await;
    })
    .await;
}

/// Two tasks of one process contend like two processes (the internal lock is not reentrant).
#[tokio::test]
async fn two_tasks_of_one_process_contend() {
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("sem", "two-tasks");
        let semaphore = InterProcessSemaphore::new(&fw, &path, 1).unwrap();
        let lease = semaphore.acquire().await.unwrap();
        let other = semaphore.clone();
        let blocked = tokio::spawn(async move { other.acquire_timeout(BLOCKED).await }).await.unwrap().unwrap();
        assert!(blocked.is_none());
        // The same task does not get a second lease either: leases are not reentrant.
        assert!(semaphore.acquire_timeout(BLOCKED).await.unwrap().is_none());
        lease.release().await.unwrap();
        semaphore_settles(&fw, &path, 0).await;
    })
    .await;
}

#[tokio::test]
async fn lease_guard_reports_path_token_and_loss() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let admin = plain_framework(&connect, SESSION).await;
        let path = unique_path("sem", "guard");
        let semaphore = InterProcessSemaphore::with_data(&fw, &path, 2, b"worker-7".to_vec()).unwrap();
        let a = semaphore.acquire().await.unwrap();
        let b = semaphore.acquire().await.unwrap();
        assert!(a.lease_path().starts_with(&format!("{path}/leases/_c_")), "{}", a.lease_path());
        assert!(a.fencing_token() < b.fencing_token());
        assert!(a.is_held() && b.is_held());
        let (data, stat) = admin.get_data(a.lease_path()).await.unwrap();
        assert_eq!(data, b"worker-7");
        assert_eq!(stat.czxid, a.fencing_token());
        assert_ne!(stat.ephemeral_owner, 0, "lease nodes are ephemeral");

        // Someone deletes a's node: a.lost() completes; its release still succeeds.
        admin.delete(a.lease_path()).await.unwrap();
        timeout(PROMPT, a.lost()).await.expect("lost() fires when the node goes");
        a.release().await.unwrap();
        let c = semaphore.acquire().await.unwrap();
        assert!(c.fencing_token() > b.fencing_token());
        // A lease can be released from another task.
        tokio::spawn(async move { SemaphoreLease::release_all([b, c]).await }).await.unwrap().unwrap();
        semaphore_settles(&fw, &path, 0).await;
    })
    .await;
}

/// The parents are containers: with a namespace, everything lives under it, and the layout is
/// Curator's (`locks/`, `leases/`).
#[tokio::test]
async fn namespace_and_layout() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let ns = format!("ns-sem-{}", std::process::id());
        let fw = Framework::builder(&connect).namespace(&ns).session_timeout(SESSION).start().await.unwrap();
        let raw = plain_framework(&connect, SESSION).await;
        let path = unique_path("sem", "namespace");
        let semaphore = InterProcessSemaphore::new(&fw, &path, 1).unwrap();
        let lease = semaphore.acquire_timeout(PROMPT).await.unwrap().expect("lease");
        assert!(lease.lease_path().starts_with(&format!("{path}/leases/")), "namespace stripped");
        let full = format!("/{ns}{}", lease.lease_path());
        assert!(raw.exists(&full).await.unwrap().is_some(), "{full} exists");
        // A second contender holds the internal lock while it waits for a lease (an empty
        // `locks` container may be reaped at any moment otherwise).
        let waiting = {
            let semaphore = semaphore.clone();
            tokio::spawn(async move { semaphore.acquire().await })
        };
        eventually(PROMPT, "both parents under the namespace", || async {
            let mut kids = children(&raw, &format!("/{ns}{path}")).await;
            kids.sort();
            match kids == ["leases", "locks"] {
                true => Ok(()),
                false => Err(format!("{kids:?}")),
            }
        })
        .await;
        waiting.abort();
        let _ = waiting.await;
        let parent = raw.exists(&format!("/{ns}{path}/leases")).await.unwrap().unwrap();
        assert_eq!(parent.ephemeral_owner, 0);
        lease.release().await.unwrap();
        semaphore_settles(&raw, &format!("/{ns}{path}"), 0).await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Classic demonstration: 15 workers, 3 leases

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifteen_workers_three_leases() {
    bounded(LIMIT, async {
        const WORKERS: usize = 15;
        const MAX: usize = 3;
        let connect = shared_connect().await;
        let path = unique_path("sem", "demo");
        let frameworks = [
            plain_framework(&connect, SESSION).await,
            plain_framework(&connect, SESSION).await,
            plain_framework(&connect, SESSION).await,
        ];
        let occupancy = Arc::new(Occupancy::default());
        let ran = Arc::new(AtomicUsize::new(0));
        let mut workers = Vec::new();
        for i in 0..WORKERS {
            let semaphore = InterProcessSemaphore::new(&frameworks[i % 3], &path, MAX).unwrap();
            let (occupancy, ran) = (occupancy.clone(), ran.clone());
            workers.push(tokio::spawn(async move {
                let lease = semaphore.acquire().await.unwrap();
                assert!(occupancy.enter() <= MAX, "more than {MAX} workers hold a lease");
                tokio::time::sleep(Duration::from_millis(30)).await; // the work
                occupancy.exit();
                ran.fetch_add(1, Ordering::SeqCst);
                lease.release().await.unwrap();
            }));
        }
        futures::future::try_join_all(workers).await.unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), WORKERS);
        assert!(occupancy.peak() <= MAX);
        assert!(occupancy.peak() >= 2, "workers ran concurrently (peak {})", occupancy.peak());
        semaphore_settles(&frameworks[0], &path, 0).await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Cancellation matrix

/// Uncontended: an acquire dropped before its first poll, or after any number of polls, leaves
/// no node under `locks/` or `leases/` (once the reaper is done), and the next acquire works.
#[tokio::test]
async fn cancellation_uncontended() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let other = plain_framework(&connect, SESSION).await;
        let path = unique_path("sem", "cancel-uncontended");
        let semaphore = InterProcessSemaphore::new(&fw, &path, 1).unwrap();
        let next = InterProcessSemaphore::new(&other, &path, 1).unwrap();

        // Never polled: nothing was sent.
        drop(semaphore.acquire());
        drop(semaphore.acquire_many(1));
        assert!(fw.exists(&path).await.unwrap().is_none());

        for polls in [1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 20, 30] {
            if let Some(lease) = poll_then_drop(semaphore.acquire(), polls).await {
                lease.unwrap().release().await.unwrap();
            }
            semaphore_settles(&other, &path, 0).await;
            let lease = next.acquire_timeout(PROMPT).await.unwrap().expect("the next contender acquires");
            lease.release().await.unwrap();
        }
        // Timeouts of varied length land at other points.
        for micros in [50, 100, 200, 400, 800, 1600, 3200] {
            if let Ok(lease) = timeout(Duration::from_micros(micros), semaphore.acquire()).await {
                lease.unwrap().release().await.unwrap();
            }
            semaphore_settles(&other, &path, 0).await;
            let lease = next.acquire_timeout(PROMPT).await.unwrap().expect("the next contender acquires");
            lease.release().await.unwrap();
        }
        semaphore_settles(&other, &path, 0).await;
    })
    .await;
}

/// Contended: waiters queued on the internal lock and the one waiting for a lease (holding the
/// internal lock) are dropped in every order; nothing of theirs remains and the next contender
/// acquires once the holder releases.
#[tokio::test]
async fn cancellation_contended() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let other = plain_framework(&connect, SESSION).await;
        let path = unique_path("sem", "cancel-contended");
        let semaphore = InterProcessSemaphore::new(&fw, &path, 1).unwrap();
        let next = InterProcessSemaphore::new(&other, &path, 1).unwrap();
        let locks = format!("{path}/locks");
        let leases = format!("{path}/leases");

        for lease_waiter_first in [true, false] {
            let holder = semaphore.acquire().await.unwrap();
            // w1 takes the internal lock and waits for a lease; w2 queues on the internal lock.
            let w1 = {
                let s = semaphore.clone();
                tokio::spawn(async move { s.acquire().await })
            };
            children_count_becomes(&other, &leases, 2, PROMPT).await;
            let w2 = {
                let s = semaphore.clone();
                tokio::spawn(async move { s.acquire().await })
            };
            children_count_becomes(&other, &locks, 2, PROMPT).await;
            let (a, b) = if lease_waiter_first { (w1, w2) } else { (w2, w1) };
            a.abort();
            let _ = a.await;
            b.abort();
            let _ = b.await;
            semaphore_settles(&other, &path, 1).await;
            holder.release().await.unwrap();
            let lease = next.acquire_timeout(PROMPT).await.unwrap().expect("the next contender acquires");
            lease.release().await.unwrap();
            semaphore_settles(&other, &path, 0).await;
        }

        // Contended drops at arbitrary points, including before the first poll.
        let holder = semaphore.acquire().await.unwrap();
        drop(semaphore.acquire());
        for polls in [1, 2, 3, 5, 8, 13, 21] {
            assert!(poll_then_drop(semaphore.acquire(), polls).await.is_none(), "cannot acquire while held");
            semaphore_settles(&other, &path, 1).await;
        }
        for millis in [1, 2, 5, 10, 20] {
            assert!(timeout(Duration::from_millis(millis), semaphore.acquire()).await.is_err());
            semaphore_settles(&other, &path, 1).await;
        }
        holder.release().await.unwrap();
        let lease = next.acquire_timeout(PROMPT).await.unwrap().expect("the next contender acquires");
        lease.release().await.unwrap();
        semaphore_settles(&other, &path, 0).await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Bad input

#[tokio::test]
async fn bad_input_gives_typed_errors() {
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("sem", "bad-input");
        let invalid_argument = |r: zk_recipes::Result<_>| matches!(r, Err(Error::InvalidArgument { .. }));
        assert!(invalid_argument(InterProcessSemaphore::new(&fw, &path, 0).map(drop)));
        for bad in ["", "relative", "/trailing/", "/", "/a//b", "/zookeeper/x", "/a/./b"] {
            let e = InterProcessSemaphore::new(&fw, bad, 1).unwrap_err();
            assert!(matches!(e, Error::InvalidPath { .. }), "{bad:?}: {e}");
        }
        let semaphore = InterProcessSemaphore::new(&fw, &path, 2).unwrap();
        assert!(invalid_argument(semaphore.acquire_many(0).await.map(drop)));
        assert!(invalid_argument(semaphore.acquire_many(3).await.map(drop)));
        assert!(invalid_argument(semaphore.try_acquire_many(0).await.map(drop)));
        assert!(invalid_argument(semaphore.try_acquire_many(3).await.map(drop)));
        assert!(invalid_argument(semaphore.acquire_many_timeout(3, PROMPT).await.map(drop)));
        assert!(invalid_argument(semaphore.acquire_timeout(Duration::ZERO).await.map(drop)));
        assert!(invalid_argument(semaphore.acquire_many_timeout(1, Duration::ZERO).await.map(drop)));
        // Nothing was created by the refused calls.
        assert!(fw.exists(&path).await.unwrap().is_none());
        assert_eq!(semaphore.max_leases(), 2);
        assert_eq!(semaphore.path(), path);
    })
    .await;
}

/// A closed framework refuses to acquire with `Error::Closed`.
#[tokio::test]
async fn closed_framework_is_an_error() {
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let semaphore = InterProcessSemaphore::new(&fw, &unique_path("sem", "closed"), 1).unwrap();
        fw.close().await;
        assert!(matches!(semaphore.acquire().await, Err(Error::Closed)));
    })
    .await;
}

/// A raw Curator-layout check: a foreign, non-lease child under `leases/` counts as a lease,
/// exactly as Curator counts every child.
#[tokio::test]
async fn every_child_of_leases_counts() {
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("sem", "foreign-child");
        fw.create(&format!("{path}/leases/junk")).mode(CreateMode::Ephemeral).await.unwrap();
        let semaphore = InterProcessSemaphore::new(&fw, &path, 1).unwrap();
        assert!(semaphore.try_acquire().await.unwrap().is_none());
        fw.delete(&format!("{path}/leases/junk")).await.unwrap();
        semaphore.try_acquire().await.unwrap().expect("free now").release().await.unwrap();
        semaphore_settles(&fw, &path, 0).await;
    })
    .await;
}
