//! `MultiLock` against a real ZooKeeper server: Curator's `TestInterProcessMultiMutex` (the base
//! mutex suite over two paths, `testSomeReleasesFail`, `testSomeLocksFailToLock`), mixed lock
//! kinds, release order, one total deadline, rollback and cancellation.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::fixtures::{bounded, children, children_count_becomes, plain_framework, shared_connect, unique_path};
use common::timing::{LIMIT, PROMPT, QUIET as BLOCKED, SESSION};
use tokio::time::{timeout, Instant};
use zk_recipes::{
    Error, InterProcessMutex, InterProcessSemaphore, InterProcessSemaphoreMutex, LockHold, Lockable, MultiLock,
};

/// The two Curator test paths, `.../our-lock-1` and `-2`, under a unique parent.
fn two_paths(name: &str) -> [String; 2] {
    let base = unique_path("multi", name);
    [format!("{base}/our-lock-1"), format!("{base}/our-lock-2")]
}

fn arc<L: Lockable + 'static>(lock: L) -> Arc<dyn Lockable> {
    Arc::new(lock)
}

// ---------------------------------------------------------------------------------------------
// A test lock whose acquire or release can be made to fail, and which records what happened.

#[derive(Debug, Default)]
struct Journal(Mutex<Vec<String>>);

impl Journal {
    fn push(&self, entry: String) {
        self.0.lock().unwrap().push(entry);
    }

    fn entries(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

#[derive(Debug)]
struct TestLock {
    name: &'static str,
    fail_lock: bool,
    fail_release: bool,
    held: Arc<AtomicBool>,
    journal: Arc<Journal>,
}

impl TestLock {
    fn new(name: &'static str, journal: &Arc<Journal>) -> Self {
        Self { name, fail_lock: false, fail_release: false, held: Arc::default(), journal: journal.clone() }
    }

    fn hold(&self) -> Box<dyn LockHold> {
        self.held.store(true, Ordering::SeqCst);
        self.journal.push(format!("lock {}", self.name));
        Box::new(TestHold {
            name: self.name,
            fail_release: self.fail_release,
            held: self.held.clone(),
            journal: self.journal.clone(),
            done: false,
        })
    }
}

#[async_trait]
impl Lockable for TestLock {
    async fn lock(&self) -> zk_recipes::Result<Box<dyn LockHold>> {
        if self.fail_lock {
            self.journal.push(format!("fail {}", self.name));
            return Err(Error::ZooKeeper(zk_recipes::zk::Error::NoAuth));
        }
        Ok(self.hold())
    }

    async fn try_lock(&self) -> zk_recipes::Result<Option<Box<dyn LockHold>>> {
        self.lock().await.map(Some)
    }

    fn is_acquired_in_this_process(&self) -> bool {
        self.held.load(Ordering::SeqCst)
    }
}

#[derive(Debug)]
struct TestHold {
    name: &'static str,
    fail_release: bool,
    held: Arc<AtomicBool>,
    journal: Arc<Journal>,
    done: bool,
}

#[async_trait]
impl LockHold for TestHold {
    async fn release(mut self: Box<Self>) -> zk_recipes::Result<()> {
        self.done = true;
        self.journal.push(format!("release {}", self.name));
        if self.fail_release {
            return Err(Error::ZooKeeper(zk_recipes::zk::Error::NoAuth));
        }
        self.held.store(false, Ordering::SeqCst);
        Ok(())
    }

    fn is_held(&self) -> bool {
        self.held.load(Ordering::SeqCst)
    }

    async fn lost(&self) {
        std::future::pending().await // an in-memory lock is never lost
    }

    fn fencing_tokens(&self) -> Vec<i64> {
        Vec::new()
    }
}

impl Drop for TestHold {
    fn drop(&mut self) {
        if !self.done {
            self.journal.push(format!("drop {}", self.name));
            self.held.store(false, Ordering::SeqCst);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Curator TestInterProcessMultiMutex

/// testSomeReleasesFail: the failing release is reported, and the good lock was released anyway.
#[tokio::test]
async fn some_releases_fail() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let other = plain_framework(&connect, SESSION).await;
        let path = unique_path("multi", "releases-fail");
        let journal = Arc::new(Journal::default());
        let good = InterProcessMutex::new(&fw, &path).unwrap();
        let bad = TestLock { fail_release: true, ..TestLock::new("bad", &journal) };
        let multi = MultiLock::new([arc(good.clone()), arc(bad)]).unwrap();
        let guard = multi.acquire().await.unwrap();
        assert!(multi.is_acquired_in_this_process());
        assert!(guard.is_held());
        let err = guard.release().await.unwrap_err();
        assert!(matches!(err, Error::ZooKeeper(zk_recipes::zk::Error::NoAuth)), "{err}");
        assert!(!good.is_acquired_in_this_process(), "the good lock was released");
        let taken = InterProcessMutex::new(&other, &path).unwrap().acquire_timeout(PROMPT).await.unwrap();
        taken.expect("another client gets the good lock").release().await.unwrap();
    })
    .await;
}

/// testSomeLocksFailToLock: the second lock's acquire fails; the first is rolled back and the
/// error comes out.
#[tokio::test]
async fn some_locks_fail_to_lock() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let path = unique_path("multi", "locks-fail");
        let journal = Arc::new(Journal::default());
        let good = InterProcessMutex::new(&fw, &path).unwrap();
        let recorded = TestLock::new("recorded", &journal);
        let bad = TestLock { fail_lock: true, ..TestLock::new("bad", &journal) };
        let multi = MultiLock::new([arc(good.clone()), arc(recorded), arc(bad)]).unwrap();
        let err = multi.acquire().await.unwrap_err();
        assert!(matches!(err, Error::ZooKeeper(zk_recipes::zk::Error::NoAuth)), "{err}");
        assert!(!good.is_acquired_in_this_process(), "rolled back");
        assert_eq!(journal.entries(), ["lock recorded", "fail bad", "release recorded"]);
        children_count_becomes(&fw, &path, 0, PROMPT).await;
        assert!(multi.try_acquire().await.is_err());
        assert!(!good.is_acquired_in_this_process());
    })
    .await;
}

/// test2Clients over two paths: one client holds both; the other gets neither until release.
#[tokio::test]
async fn two_clients_exclude() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let [p1, p2] = two_paths("two-clients");
        let (fw1, fw2) = (plain_framework(&connect, SESSION).await, plain_framework(&connect, SESSION).await);
        let m1 = MultiLock::of_mutexes(&fw1, [&p1, &p2]).unwrap();
        let m2 = MultiLock::of_mutexes(&fw2, [&p1, &p2]).unwrap();
        let g1 = m1.acquire().await.unwrap();
        assert_eq!(g1.len(), 2);
        assert!(m2.acquire_timeout(BLOCKED).await.unwrap().is_none());
        assert!(m2.try_acquire().await.unwrap().is_none());
        // The timed-out attempt left nothing behind.
        children_count_becomes(&fw1, &p1, 1, PROMPT).await;
        children_count_becomes(&fw1, &p2, 1, PROMPT).await;
        let waiting = {
            let m2 = m2.clone();
            tokio::spawn(async move { m2.acquire().await })
        };
        children_count_becomes(&fw1, &p1, 2, PROMPT).await;
        g1.release().await.unwrap();
        assert!(!m1.is_acquired_in_this_process());
        let g2 = timeout(PROMPT, waiting).await.expect("the other client gets both").unwrap().unwrap();
        assert!(m2.is_acquired_in_this_process());
        g2.release().await.unwrap();
        children_count_becomes(&fw1, &p1, 0, PROMPT).await;
        children_count_becomes(&fw1, &p2, 0, PROMPT).await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Mixed kinds, order, deadline, rollback, cancellation

/// Every kind of lock handle in one set; release goes in reverse order; so does Drop.
#[tokio::test]
async fn mixed_kinds_and_reverse_release_order() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let other = plain_framework(&connect, SESSION).await;
        let base = unique_path("multi", "mixed");
        let (pm, ps, pl) = (format!("{base}/mutex"), format!("{base}/semmutex"), format!("{base}/semaphore"));
        let journal = Arc::new(Journal::default());
        let multi = MultiLock::new([
            arc(TestLock::new("first", &journal)),
            arc(InterProcessMutex::new(&fw, &pm).unwrap()),
            arc(InterProcessSemaphoreMutex::new(&fw, &ps).unwrap()),
            arc(InterProcessSemaphore::new(&fw, &pl, 2).unwrap()),
            arc(TestLock::new("last", &journal)),
        ])
        .unwrap();
        assert_eq!(multi.len(), 5);
        let guard = multi.acquire().await.unwrap();
        assert!(multi.is_acquired_in_this_process());
        assert_eq!(children(&fw, &pm).await.len(), 1);
        assert_eq!(children(&fw, &format!("{ps}/leases")).await.len(), 1);
        assert_eq!(children(&fw, &format!("{pl}/leases")).await.len(), 1);
        // Others see them held: the semaphore mutex is taken, one of two leases is left.
        let sm = InterProcessSemaphoreMutex::new(&other, &ps).unwrap();
        assert!(sm.try_acquire().await.unwrap().is_none());
        guard.release().await.unwrap();
        assert_eq!(journal.entries(), ["lock first", "lock last", "release last", "release first"]);
        children_count_becomes(&fw, &pm, 0, PROMPT).await;
        children_count_becomes(&fw, &format!("{ps}/leases"), 0, PROMPT).await;
        children_count_becomes(&fw, &format!("{pl}/leases"), 0, PROMPT).await;

        // Drop releases in reverse order too.
        let guard = multi.acquire().await.unwrap();
        drop(guard);
        let entries = journal.entries();
        assert_eq!(&entries[4..], ["lock first", "lock last", "drop last", "drop first"]);
        children_count_becomes(&fw, &pm, 0, PROMPT).await;
        children_count_becomes(&fw, &format!("{ps}/leases"), 0, PROMPT).await;
        children_count_becomes(&fw, &format!("{pl}/leases"), 0, PROMPT).await;
        assert!(!multi.is_acquired_in_this_process());
    })
    .await;
}

/// One deadline for the whole set (Curator gives each lock the full time): with the second
/// lock held elsewhere, a timed acquire returns after about the timeout, not twice it, and
/// holds nothing afterwards.
#[tokio::test]
async fn one_total_deadline_and_rollback() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let (fw, other) = (plain_framework(&connect, SESSION).await, plain_framework(&connect, SESSION).await);
        let [p1, p2] = two_paths("deadline");
        let blocker = InterProcessMutex::new(&other, &p2).unwrap().acquire().await.unwrap();
        let first = InterProcessMutex::new(&fw, &p1).unwrap();
        let multi = MultiLock::new([arc(first.clone()), arc(InterProcessMutex::new(&fw, &p2).unwrap())]).unwrap();
        let wait = Duration::from_millis(600);
        let started = Instant::now();
        assert!(multi.acquire_timeout(wait).await.unwrap().is_none());
        let took = started.elapsed();
        assert!(took >= wait && took < wait * 2, "took {took:?} for a {wait:?} deadline");
        assert!(!first.is_acquired_in_this_process(), "the first lock was rolled back");
        children_count_becomes(&other, &p1, 0, PROMPT).await;
        children_count_becomes(&other, &p2, 1, PROMPT).await;
        // try_acquire rolls back too.
        assert!(multi.try_acquire().await.unwrap().is_none());
        assert!(!first.is_acquired_in_this_process());
        children_count_becomes(&other, &p1, 0, PROMPT).await;
        blocker.release().await.unwrap();
        let guard = multi.acquire_timeout(PROMPT).await.unwrap().expect("free now");
        guard.release().await.unwrap();
    })
    .await;
}

/// A multi-lock acquire dropped while waiting for its second lock (and one dropped before its
/// first poll) leaves nothing held.
#[tokio::test]
async fn cancelled_acquire_releases_what_it_took() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let (fw, other) = (plain_framework(&connect, SESSION).await, plain_framework(&connect, SESSION).await);
        let [p1, p2] = two_paths("cancel");
        let multi = MultiLock::of_mutexes(&fw, [&p1, &p2]).unwrap();
        drop(multi.acquire());
        let blocker = InterProcessMutex::new(&other, &p2).unwrap().acquire().await.unwrap();
        let waiting = {
            let multi = multi.clone();
            tokio::spawn(async move { multi.acquire().await })
        };
        children_count_becomes(&other, &p2, 2, PROMPT).await; // it holds p1 and waits for p2
        assert_eq!(children(&other, &p1).await.len(), 1);
        waiting.abort();
        let _ = waiting.await;
        children_count_becomes(&other, &p1, 0, PROMPT).await;
        children_count_becomes(&other, &p2, 1, PROMPT).await;
        blocker.release().await.unwrap();
        let m2 = MultiLock::of_mutexes(&other, [&p1, &p2]).unwrap();
        m2.acquire_timeout(PROMPT).await.unwrap().expect("the next contender acquires").release().await.unwrap();
    })
    .await;
}

/// A multi-lock is itself lockable: nested sets work and release inside out.
#[tokio::test]
async fn nested_multi_locks() {
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let journal = Arc::new(Journal::default());
        let inner = MultiLock::new([arc(TestLock::new("a", &journal)), arc(TestLock::new("b", &journal))]).unwrap();
        let path = unique_path("multi", "nested");
        let outer = MultiLock::new([arc(inner), arc(InterProcessMutex::new(&fw, &path).unwrap())]).unwrap();
        let guard = outer.acquire().await.unwrap();
        assert!(outer.is_acquired_in_this_process());
        guard.release().await.unwrap();
        assert_eq!(journal.entries(), ["lock a", "lock b", "release b", "release a"]);
        children_count_becomes(&fw, &path, 0, PROMPT).await;
    })
    .await;
}

#[tokio::test]
async fn bad_input_gives_typed_errors() {
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        assert!(matches!(MultiLock::new(Vec::new()), Err(Error::InvalidArgument { .. })));
        assert!(matches!(MultiLock::of_mutexes(&fw, Vec::<String>::new()), Err(Error::InvalidArgument { .. })));
        assert!(matches!(MultiLock::of_mutexes(&fw, ["/ok", "bad"]), Err(Error::InvalidPath { .. })));
        // Two mutexes on one path would wait on each other for ever.
        let twice = MultiLock::of_mutexes(&fw, ["/a", "/b", "/a"]);
        assert!(matches!(twice, Err(Error::InvalidArgument { name: "paths", .. })), "{twice:?}");
        let multi = MultiLock::of_mutexes(&fw, [unique_path("multi", "bad-input")]).unwrap();
        assert!(matches!(multi.acquire_timeout(Duration::ZERO).await, Err(Error::InvalidArgument { .. })));
    })
    .await;
}
