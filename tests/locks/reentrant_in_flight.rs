//! Two acquires of one lock in flight at once in one task (two branches of a `join!` or a
//! `select!`), against a real ZooKeeper server: the reentrant locks (mutex, both halves of the
//! read-write lock, their revocable forms) nest the second acquire in the hold the first made,
//! so the task never queues behind its own node and no hold is ever replaced; the non-reentrant
//! semaphore mutex makes the second wait like any other contender, and a bounded second
//! acquire ends. Throughout, another session never enters while a guard says `is_held()`.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::fixtures::shared_framework as fw;
use common::fixtures::{bounded, children_count_becomes, unique_path, within};
use common::timing::{EVENT, LIMIT};
use zk_recipes::{Error, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreMutex, Lockable, Revoker};

/// The bound of an acquire that is expected to give up: several round trips on loopback.
const GIVE_UP: Duration = Duration::from_millis(500);

fn path(name: &str) -> String {
    unique_path("in-flight", name)
}

/// Whether `other` (a lock of another session) can be taken right now; taken, it is released
/// again.
async fn enters(other: &dyn Lockable) -> bool {
    match other.try_lock().await.expect("another session's try") {
        Some(hold) => {
            hold.release().await.expect("another session's release");
            true
        }
        None => false,
    }
}

/// Fails when `other` can be taken while a guard of ours says it holds.
async fn excluded_while_held(held: bool, other: &dyn Lockable, what: &str) {
    if held {
        assert!(!enters(other).await, "{what}: another session entered while a guard says is_held()");
    }
}

// ---------------------------------------------------------------------------------------------
// The read-write lock

/// Two joined read acquires: one read node, two guards nested in it. Releasing the second
/// leaves the first holding, and a writer on another session stays out until it ends too.
#[tokio::test]
async fn joined_read_acquires_nest_in_one_read_node() {
    bounded(LIMIT, async {
        let (fw, other_fw) = (fw().await, fw().await);
        let path = path("read");
        let read = InterProcessReadWriteLock::new(&fw, &path).unwrap().read_lock();
        let writer = InterProcessReadWriteLock::new(&other_fw, &path).unwrap().write_lock();

        let (first, second) =
            within(EVENT, "two joined read acquires", async { tokio::join!(read.acquire(), read.acquire()) }).await;
        let (first, second) = (first.unwrap(), second.unwrap());
        let second_path = second.lock_path().to_owned();
        excluded_while_held(first.is_held() || second.is_held(), &writer, "both read guards out").await;
        second.release().await.unwrap();
        assert!(first.is_held(), "the first read guard still holds");
        excluded_while_held(first.is_held(), &writer, "the first read guard out").await;
        assert_eq!(first.lock_path(), second_path, "both guards nest in one read node");
        assert_eq!(read.participant_nodes().await.unwrap().len(), 1);

        first.release().await.unwrap();
        assert!(enters(&writer).await, "the writer enters once every read guard has ended");
        children_count_becomes(&fw, &path, 0, EVENT).await;
    })
    .await;
}

/// Two joined write acquires end (they used to wait on each other forever): the second nests
/// in the first's hold, and neither a writer nor a reader of another session enters until both
/// guards have ended.
#[tokio::test]
async fn joined_write_acquires_nest_instead_of_waiting_on_each_other() {
    bounded(LIMIT, async {
        let (fw, other_fw) = (fw().await, fw().await);
        let path = path("write");
        let write = InterProcessReadWriteLock::new(&fw, &path).unwrap().write_lock();
        let other = InterProcessReadWriteLock::new(&other_fw, &path).unwrap();

        let (first, second) =
            within(EVENT, "two joined write acquires", async { tokio::join!(write.acquire(), write.acquire()) }).await;
        let (first, second) = (first.unwrap(), second.unwrap());
        assert_eq!(first.lock_path(), second.lock_path(), "both guards nest in one write node");
        first.release().await.unwrap();
        assert!(second.is_held());
        excluded_while_held(second.is_held(), &other.write_lock(), "the second write guard out").await;
        excluded_while_held(second.is_held(), &other.read_lock(), "the second write guard out").await;

        second.release().await.unwrap();
        assert!(enters(&other.write_lock()).await);
    })
    .await;
}

/// A write acquire joined with a read acquire is a downgrade once the write lock is held; a
/// read acquire joined with a write acquire refuses the upgrade (`None` for a try). Neither
/// waits on itself.
#[tokio::test]
async fn joined_acquires_of_both_halves_downgrade_or_refuse_the_upgrade() {
    bounded(LIMIT, async {
        let (fw, other_fw) = (fw().await, fw().await);
        let path = path("halves");
        let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        let writer = InterProcessReadWriteLock::new(&other_fw, &path).unwrap().write_lock();
        let (read, write) = (lock.read_lock(), lock.write_lock());

        let (writing, reading) = within(EVENT, "a write acquire joined with a read acquire", async {
            tokio::join!(write.acquire(), read.acquire())
        })
        .await;
        let (writing, reading) = (writing.unwrap(), reading.unwrap());
        writing.release().await.unwrap();
        assert!(reading.is_held(), "the downgraded read lock stays");
        excluded_while_held(reading.is_held(), &writer, "the downgraded read guard out").await;
        reading.release().await.unwrap();

        let (reading, upgrade) = within(EVENT, "a read acquire joined with a write acquire", async {
            tokio::join!(read.acquire(), write.acquire())
        })
        .await;
        let reading = reading.unwrap();
        assert!(matches!(upgrade, Err(Error::UpgradeRefused { .. })), "{upgrade:?}");
        let (again, tried) = within(EVENT, "a read acquire joined with a write try", async {
            tokio::join!(read.acquire(), write.try_acquire())
        })
        .await;
        assert!(tried.unwrap().is_none(), "a write try is refused while the task reads");
        drop(again.unwrap());
        excluded_while_held(reading.is_held(), &writer, "the read guard out").await;
        reading.release().await.unwrap();
        assert!(enters(&writer).await);
        children_count_becomes(&fw, &path, 0, EVENT).await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// The mutex

/// Two joined mutex acquires end with two guards of one hold; a try joined with an acquire is
/// `None` (the task's own acquire is in flight); a `select!` of two acquires leaves one node.
#[tokio::test]
async fn joined_mutex_acquires_nest_and_a_select_leaves_one_node() {
    bounded(LIMIT, async {
        let (fw, other_fw) = (fw().await, fw().await);
        let path = path("mutex");
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let other = InterProcessMutex::new(&other_fw, &path).unwrap();

        let (first, second) =
            within(EVENT, "two joined mutex acquires", async { tokio::join!(mutex.acquire(), mutex.acquire()) }).await;
        let (first, second) = (first.unwrap(), second.unwrap());
        assert_eq!(first.lock_path(), second.lock_path(), "both guards nest in one node");
        second.release().await.unwrap();
        excluded_while_held(first.is_held(), &other, "the first mutex guard out").await;
        assert!(first.is_held());
        first.release().await.unwrap();
        assert!(enters(&other).await);

        let (held, tried) =
            within(EVENT, "an acquire joined with a try", async { tokio::join!(mutex.acquire(), mutex.try_acquire()) })
                .await;
        assert!(tried.unwrap().is_none(), "a try while the task's own acquire is in flight");
        let held = held.unwrap();
        excluded_while_held(held.is_held(), &other, "the mutex guard out").await;
        held.release().await.unwrap();

        let held = within(EVENT, "a select of two acquires", async {
            tokio::select! {
                guard = mutex.acquire() => guard,
                guard = mutex.acquire() => guard,
            }
        })
        .await
        .unwrap();
        children_count_becomes(&fw, &path, 1, EVENT).await;
        excluded_while_held(held.is_held(), &other, "the selected guard out").await;
        held.release().await.unwrap();
        children_count_becomes(&fw, &path, 0, EVENT).await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// The revocable forms

/// Joined revocable acquires nest in one revocable hold, and both guards hear a request to it;
/// a plain acquire joined with a revocable one nests in whichever hold came first.
#[tokio::test]
async fn joined_revocable_acquires_nest_and_both_guards_hear_a_request() {
    bounded(LIMIT, async {
        let (fw, other_fw) = (fw().await, fw().await);
        let mutex = InterProcessMutex::new(&fw, &path("revocable-mutex")).unwrap();
        let revocable = mutex.revocable();
        let (first, second) = within(EVENT, "two joined revocable mutex acquires", async {
            tokio::join!(revocable.acquire(), revocable.acquire())
        })
        .await;
        let (first, second) = (first.unwrap(), second.unwrap());
        assert_eq!(first.lock_path(), second.lock_path());
        Revoker::attempt_revoke(&other_fw, first.lock_path()).await.unwrap();
        assert!(within(EVENT, "the first guard hears the request", first.revocation_requested()).await);
        assert!(within(EVENT, "the second guard hears the request", second.revocation_requested()).await);
        drop((first, second));

        let (plain, nested) = within(EVENT, "a plain and a revocable acquire joined", async {
            tokio::join!(mutex.acquire(), revocable.acquire())
        })
        .await;
        let (plain, nested) = (plain.unwrap(), nested.unwrap());
        assert_eq!(plain.lock_path(), nested.lock_path());
        assert!(!nested.revocation_requested().await, "nested in a hold that was not acquired revocably");
        drop((plain, nested));

        let path = path("revocable-rw");
        let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        let other = InterProcessReadWriteLock::new(&other_fw, &path).unwrap();
        let write = lock.write_lock().revocable();
        let (first, second) = within(EVENT, "two joined revocable write acquires", async {
            tokio::join!(write.acquire(), write.acquire())
        })
        .await;
        let (first, second) = (first.unwrap(), second.unwrap());
        assert_eq!(first.lock_path(), second.lock_path());
        Revoker::attempt_revoke(&other_fw, second.lock_path()).await.unwrap();
        assert!(within(EVENT, "the write guard hears the request", first.revocation_requested()).await);
        first.release().await.unwrap();
        excluded_while_held(second.is_held(), &other.read_lock(), "a revocable write guard out").await;
        second.release().await.unwrap();

        let read = lock.read_lock().revocable();
        let (first, second) =
            within(EVENT, "two joined revocable read acquires", async { tokio::join!(read.acquire(), read.acquire()) })
                .await;
        let (first, second) = (first.unwrap(), second.unwrap());
        let first_path = first.lock_path().to_owned();
        first.release().await.unwrap();
        excluded_while_held(second.is_held(), &other.write_lock(), "a revocable read guard out").await;
        assert_eq!(second.lock_path(), first_path, "both guards nest in one read node");
        Revoker::attempt_revoke(&other_fw, second.lock_path()).await.unwrap();
        assert!(within(EVENT, "the read guard hears the request", second.revocation_requested()).await);
        second.release().await.unwrap();
        assert!(enters(&other.write_lock()).await);
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// The semaphore mutex (not reentrant)

/// The semaphore mutex does not nest: a second acquire of the task waits for the first guard's
/// release like any other contender. Joined with the acquire that holds, a bounded second
/// acquire gives up (`None`, leaving no lease behind); two branches that each release take the
/// lock in turn, never together; a `select!` of two acquires leaves one lease.
#[tokio::test]
async fn joined_semaphore_mutex_acquires_wait_their_turn_and_end() {
    bounded(LIMIT, async {
        let (fw, other_fw) = (fw().await, fw().await);
        let path = path("semaphore-mutex");
        let mutex = InterProcessSemaphoreMutex::new(&fw, &path).unwrap();
        let other = InterProcessSemaphoreMutex::new(&other_fw, &path).unwrap();
        // The directories exist before the join (fresh containers, which the server does not
        // reap before their first child): otherwise both creates fail, make the parents and
        // are sent again, in an order no longer the join's, and the bounded acquire may take
        // the lease while the unbounded one waits for its guard, which the join holds.
        for dir in ["locks", "leases"] {
            let dir = format!("{path}/{dir}");
            fw.create(&dir).mode(zk_recipes::zk::CreateMode::Container).await.unwrap();
        }

        let (held, second) = within(EVENT, "an acquire joined with a bounded acquire", async {
            tokio::join!(mutex.acquire(), mutex.acquire_timeout(GIVE_UP))
        })
        .await;
        let held = held.unwrap();
        assert!(second.unwrap().is_none(), "not reentrant: the second acquire gives up");
        assert_eq!(mutex.participant_nodes().await.unwrap().len(), 1, "no lease left behind");
        excluded_while_held(held.is_held(), &other, "the semaphore mutex guard out").await;
        held.release().await.unwrap();

        let inside = AtomicBool::new(false);
        let branch = || async {
            let guard = mutex.acquire().await.unwrap();
            assert!(!inside.swap(true, Ordering::SeqCst), "two branches hold the semaphore mutex at once");
            tokio::task::yield_now().await;
            inside.store(false, Ordering::SeqCst);
            guard.release().await.unwrap();
        };
        within(EVENT, "two joined branches that each release", async { tokio::join!(branch(), branch()) }).await;

        let held = within(EVENT, "a select of two acquires", async {
            tokio::select! {
                guard = mutex.acquire() => guard,
                guard = mutex.acquire() => guard,
            }
        })
        .await
        .unwrap();
        assert!(mutex.participant_nodes().await.unwrap().len() <= 1);
        excluded_while_held(held.is_held(), &other, "the selected guard out").await;
        held.release().await.unwrap();
        assert!(enters(&other).await);
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// A guard moved to another task

/// The hold belongs to the task that acquired: with its guard moved to another task, the owner
/// acquiring again nests at once, and the task holding the moved guard is another contender
/// (its try is `None`). The non-reentrant semaphore mutex makes the old owner wait instead.
#[tokio::test]
async fn a_guard_moved_to_another_task_keeps_its_owners_hold() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let mutex = InterProcessMutex::new(&fw, &path("moved")).unwrap();
        let first = mutex.acquire().await.unwrap();
        let (first_path, moved_mutex) = (first.lock_path().to_owned(), mutex.clone());
        let elsewhere = tokio::spawn(async move {
            let tried = moved_mutex.try_acquire().await.unwrap();
            (first, tried.is_none())
        });
        let (first, contended) = elsewhere.await.unwrap();
        assert!(contended, "the task holding the moved guard is not the owner");
        let nested = within(EVENT, "the owner acquiring again", mutex.acquire()).await.unwrap();
        assert_eq!(nested.lock_path(), first_path, "nested in the owner's hold");
        drop((first, nested));

        let semaphore_mutex = InterProcessSemaphoreMutex::new(&fw, &path("moved-semaphore-mutex")).unwrap();
        let guard = semaphore_mutex.acquire().await.unwrap();
        let holder = tokio::spawn(async move { guard });
        let guard = holder.await.unwrap();
        assert!(semaphore_mutex.acquire_timeout(GIVE_UP).await.unwrap().is_none(), "not reentrant");
        guard.release().await.unwrap();
    })
    .await;
}
