//! Critical sections that stop when the hold is lost (`run` on every guard and lease): the
//! section's value when it finishes, every guard kind; the section dropped and a `LockLost`
//! naming the node when the holder's session is expired mid-way, within the session timeout;
//! and a caller that drops `run` dropping the section with it while the guard stays held and
//! usable.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};

use common::fixtures::{bounded, endless_work, plain_framework, shared_connect, shared_framework, unique_path, within};
use common::timing::{FAULT_SESSION, LIMIT, PROMPT};
use tokio::time::Instant;
use zk_recipes::testing::{expire_session, FaultProxy};
use zk_recipes::{
    Error, Framework, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphore, InterProcessSemaphoreMutex,
    LockLost, MultiLock, SemaphoreLease,
};

/// Expires `fw`'s session on the server once every section has started; returns when the
/// expiry began.
async fn expire_once_started<const N: usize>(
    fw: &Framework,
    proxy: &FaultProxy,
    direct: &str,
    started: [tokio::sync::oneshot::Receiver<()>; N],
) -> Instant {
    for section in started {
        section.await.unwrap();
    }
    let began = Instant::now();
    let session = fw.zk_client().unwrap().session().clone();
    expire_session(proxy, direct, session).await.unwrap();
    began
}

/// Every guard's and lease's `run` returns the section's value, and the hold stays held after
/// it.
#[tokio::test]
async fn a_finished_section_returns_its_value_on_every_guard() {
    bounded(LIMIT, async {
        let fw = shared_framework().await;
        let path = unique_path("critical", "finishes");

        let mutex = InterProcessMutex::new(&fw, &format!("{path}/mutex")).unwrap();
        let guard = mutex.acquire().await.unwrap();
        assert_eq!(guard.run(async { 1 }).await, Ok(1));
        assert!(guard.is_held());
        guard.release().await.unwrap();

        let rw = InterProcessReadWriteLock::new(&fw, &format!("{path}/rw")).unwrap();
        let read = rw.read_lock().acquire().await.unwrap();
        assert_eq!(read.run(async { 2 }).await, Ok(2));
        read.release().await.unwrap();
        let write = rw.write_lock().acquire().await.unwrap();
        assert_eq!(write.run(async { 3 }).await, Ok(3));
        write.release().await.unwrap();

        let semaphore = InterProcessSemaphore::new(&fw, &format!("{path}/sem"), 3).unwrap();
        let lease = semaphore.acquire().await.unwrap();
        assert_eq!(lease.run(async { 4 }).await, Ok(4));
        lease.release().await.unwrap();
        let leases = semaphore.acquire_many(2).await.unwrap();
        assert_eq!(SemaphoreLease::run_all(&leases, async { 5 }).await, Ok(5));
        assert!(leases.iter().all(SemaphoreLease::is_held));
        SemaphoreLease::release_all(leases).await.unwrap();

        let semaphore_mutex = InterProcessSemaphoreMutex::new(&fw, &format!("{path}/sem-mutex")).unwrap();
        let guard = semaphore_mutex.acquire().await.unwrap();
        assert_eq!(guard.run(async { 6 }).await, Ok(6));
        guard.release().await.unwrap();

        let multi = MultiLock::of_mutexes(&fw, [format!("{path}/m1"), format!("{path}/m2")]).unwrap();
        let guard = multi.acquire().await.unwrap();
        assert_eq!(guard.run(async { 7 }).await, Ok(7));
        assert!(guard.is_held());
        guard.release().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// The holder's session is expired on the server while its section runs: the section is
/// dropped and `run` fails with `LockLost` naming the lock node, within the session timeout
/// of the expiry's start; the same for a lease, and for leases run together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_expired_mid_section_stops_it() {
    bounded(LIMIT, async {
        let direct = shared_connect().await;
        let proxy = FaultProxy::start(&direct).await.unwrap();
        let fw = plain_framework(&proxy.connect_string(), FAULT_SESSION).await;
        let path = unique_path("critical", "expired");
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let guard = mutex.acquire().await.unwrap();
        let semaphore = InterProcessSemaphore::new(&fw, &format!("{path}-sem"), 3).unwrap();
        let lease = semaphore.acquire().await.unwrap();
        let leases = semaphore.acquire_many(2).await.unwrap();

        let (section, dropped, started) = endless_work();
        let (lease_section, lease_dropped, lease_started) = endless_work();
        let (many_section, many_dropped, many_started) = endless_work();
        let expire = expire_once_started(&fw, &proxy, &direct, [started, lease_started, many_started]);
        let runs = async {
            let outcomes = tokio::join!(
                guard.run(section),
                lease.run(lease_section),
                SemaphoreLease::run_all(&leases, many_section)
            );
            (outcomes, Instant::now())
        };
        let (began, ((mutex_run, lease_run, many_run), stopped)) = tokio::join!(expire, runs);

        let lost: LockLost = mutex_run.expect_err("the section cannot finish");
        assert_eq!(lost.path(), Some(guard.lock_path()));
        assert!(lost.to_string().contains("lock lost"), "{lost}");
        assert!(Error::from(lost).is_lock_lost());
        assert_eq!(lease_run.expect_err("the lease section cannot finish").path(), Some(lease.lease_path()));
        let many_lost = many_run.expect_err("the leases' section cannot finish");
        assert!(leases.iter().any(|l| Some(l.lease_path()) == many_lost.path()), "{many_lost}");
        assert!(
            stopped.saturating_duration_since(began) < FAULT_SESSION,
            "stopped {:?} after the expiry began",
            stopped - began
        );
        for (flag, what) in [(&dropped, "mutex"), (&lease_dropped, "lease"), (&many_dropped, "leases")] {
            assert!(flag.load(Ordering::SeqCst), "the {what} section was not dropped");
        }
        assert!(!guard.is_held() && !lease.is_held());
        // A section on a hold already lost never starts.
        let started_late = AtomicBool::new(false);
        let late = guard.run(async { started_late.store(true, Ordering::SeqCst) }).await;
        assert!(late.is_err() && !started_late.load(Ordering::SeqCst));
        drop((guard, lease, leases));
        fw.close().await;
    })
    .await;
}

/// The same for the other holds: a multi-lock (its own watch over every lock it holds), the
/// write and the read half of a read-write lock, and a semaphore mutex.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_expired_mid_section_stops_it_on_the_other_holds() {
    bounded(LIMIT, async {
        let direct = shared_connect().await;
        let proxy = FaultProxy::start(&direct).await.unwrap();
        let fw = plain_framework(&proxy.connect_string(), FAULT_SESSION).await;
        let path = unique_path("critical", "expired-others");
        let multi = MultiLock::of_mutexes(&fw, [format!("{path}/m1"), format!("{path}/m2")]).unwrap();
        let multi_guard = multi.acquire().await.unwrap();
        let write = InterProcessReadWriteLock::new(&fw, &format!("{path}/rw-write")).unwrap().write_lock();
        let write_guard = write.acquire().await.unwrap();
        let read = InterProcessReadWriteLock::new(&fw, &format!("{path}/rw-read")).unwrap().read_lock();
        let read_guard = read.acquire().await.unwrap();
        let semaphore_mutex = InterProcessSemaphoreMutex::new(&fw, &format!("{path}/sem-mutex")).unwrap();
        let semaphore_guard = semaphore_mutex.acquire().await.unwrap();

        let (multi_section, multi_dropped, multi_started) = endless_work();
        let (write_section, write_dropped, write_started) = endless_work();
        let (read_section, read_dropped, read_started) = endless_work();
        let (semaphore_section, semaphore_dropped, semaphore_started) = endless_work();
        let started = [multi_started, write_started, read_started, semaphore_started];
        let expire = expire_once_started(&fw, &proxy, &direct, started);
        let runs = async {
            let outcomes = tokio::join!(
                multi_guard.run(multi_section),
                write_guard.run(write_section),
                read_guard.run(read_section),
                semaphore_guard.run(semaphore_section)
            );
            (outcomes, Instant::now())
        };
        let (began, ((multi_run, write_run, read_run, semaphore_run), stopped)) = tokio::join!(expire, runs);

        // A multi-lock does not tell which of its locks went.
        let multi_lost = multi_run.expect_err("the multi-lock section cannot finish");
        assert_eq!(multi_lost.path(), None, "{multi_lost}");
        assert_eq!(write_run.expect_err("the write section cannot finish").path(), Some(write_guard.lock_path()));
        assert_eq!(read_run.expect_err("the read section cannot finish").path(), Some(read_guard.lock_path()));
        let semaphore_lost = semaphore_run.expect_err("the semaphore mutex section cannot finish");
        assert_eq!(semaphore_lost.path(), Some(semaphore_guard.lock_path()));
        assert!(
            stopped.saturating_duration_since(began) < FAULT_SESSION,
            "stopped {:?} after the expiry began",
            stopped - began
        );
        for (flag, what) in [
            (&multi_dropped, "multi-lock"),
            (&write_dropped, "write"),
            (&read_dropped, "read"),
            (&semaphore_dropped, "semaphore mutex"),
        ] {
            assert!(flag.load(Ordering::SeqCst), "the {what} section was not dropped");
        }
        assert!(!multi_guard.is_held() && !write_guard.is_held() && !read_guard.is_held());
        assert!(!semaphore_guard.is_held());
        drop((multi_guard, write_guard, read_guard, semaphore_guard));
        fw.close().await;
    })
    .await;
}

/// A caller that stops waiting (drops the `run` future) drops the section with it; the guard
/// stays held (another client cannot take the lock) and runs the next section.
#[tokio::test]
async fn a_cancelled_run_drops_the_section_and_keeps_the_guard() {
    bounded(LIMIT, async {
        let fw = shared_framework().await;
        let other = shared_framework().await;
        let path = unique_path("critical", "cancelled");
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let guard = mutex.acquire().await.unwrap();

        let (section, dropped, started) = endless_work();
        tokio::select! {
            _ = guard.run(section) => panic!("the section cannot finish"),
            started = started => started.unwrap(),
        }
        assert!(dropped.load(Ordering::SeqCst), "dropping run() drops the section");
        assert!(guard.is_held());
        let theirs = InterProcessMutex::new(&other, &path).unwrap();
        assert!(theirs.try_acquire().await.unwrap().is_none(), "the lock is still held");
        assert_eq!(within(PROMPT, "a second section", guard.run(async { "again" })).await, Ok("again"));
        guard.release().await.unwrap();
        let next = within(PROMPT, "the lock after release", theirs.try_acquire()).await.unwrap();
        assert!(next.is_some());
        fw.close().await;
        other.close().await;
    })
    .await;
}
