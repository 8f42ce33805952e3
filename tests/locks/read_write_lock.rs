//! `InterProcessReadWriteLock` against a real ZooKeeper server (the process-wide shared one,
//! unless a test injects faults; every test uses its own lock path): every scenario of
//! Curator's `TestInterProcessReadWriteLock` (`testContendingDowngrading` included, which
//! Curator 5.4 fails), `TestLockACLs` for the read-write lock, kazoo's `test_read_lock`,
//! `test_write_lock` and `test_rw_lock`, downgrade and upgrade edge cases and bad input.
//!
//! Interop with real Curator is in `tests/interop/read_write_lock.rs`; revocation in `revocation.rs`.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::fixtures::shared_framework as fw;
use common::fixtures::{
    bounded, children, children_count_becomes, eventually, framework, init_tracing, is_curator_node_name, node_name,
    sequence_of, shared_connect, unique_path, within, FaultyServer,
};
use common::timing::{EVENT, LIMIT, QUIET, SESSION};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use zk_recipes::zk::{Acl, AuthId, CreateMode, Permission};
use zk_recipes::{Error, FixedAclProvider, Framework, InterProcessReadWriteLock, Lockable, MultiLock};

fn path(name: &str) -> String {
    unique_path("rwlock", name)
}

// ---------------------------------------------------------------------------------------------
// Curator TestInterProcessReadWriteLock

/// testGetParticipantNodes: 20 readers hold, 8 writers wait; each half lists its own nodes,
/// waiters included, in queue order.
#[tokio::test]
async fn participant_nodes_list_each_half_waiters_included() {
    bounded(LIMIT, async {
        const READERS: usize = 20;
        const WRITERS: usize = 8;
        let fw = fw().await;
        let path = path("participants");
        let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        let (held_tx, mut held) = mpsc::unbounded_channel();
        let (exit_tx, exit) = tokio::sync::watch::channel(false);
        let mut tasks = Vec::new();
        for _ in 0..READERS {
            let (read, held_tx, mut exit) = (lock.read_lock(), held_tx.clone(), exit.clone());
            tasks.push(tokio::spawn(async move {
                let guard = read.acquire().await.unwrap();
                held_tx.send(()).unwrap();
                exit.wait_for(|e| *e).await.unwrap();
                guard.release().await.unwrap();
            }));
        }
        for _ in 0..READERS {
            within(EVENT, "readers sharing the lock", held.recv()).await.unwrap();
        }
        for _ in 0..WRITERS {
            let (write, mut exit) = (lock.write_lock(), exit.clone());
            tasks.push(tokio::spawn(async move {
                let guard = write.acquire().await.unwrap();
                exit.wait_for(|e| *e).await.unwrap();
                guard.release().await.unwrap();
            }));
        }
        children_count_becomes(&fw, &path, READERS + WRITERS, EVENT).await;

        let readers = lock.read_lock().participant_nodes().await.unwrap();
        let writers = lock.write_lock().participant_nodes().await.unwrap();
        assert_eq!((readers.len(), writers.len()), (READERS, WRITERS));
        assert!(readers.iter().all(|p| is_curator_node_name(node_name(p), "__READ__")), "{readers:?}");
        assert!(writers.iter().all(|p| is_curator_node_name(node_name(p), "__WRIT__")), "{writers:?}");
        assert!(readers.iter().all(|p| p.starts_with(&format!("{path}/"))));
        let last_reader = readers.iter().map(|p| sequence_of(p)).max().unwrap();
        let first_writer = writers.iter().map(|p| sequence_of(p)).min().unwrap();
        assert!(last_reader < first_writer, "the writers queued behind the readers");
        let writer_seqs: Vec<u64> = writers.iter().map(|p| sequence_of(p)).collect();
        assert!(writer_seqs.windows(2).all(|w| w[0] < w[1]), "queue order: {writer_seqs:?}");
        assert!(held.try_recv().is_err());

        exit_tx.send(true).unwrap();
        for task in tasks {
            within(EVENT, "every holder finishing", task).await.unwrap();
        }
        assert!(children(&fw, &path).await.is_empty());
        fw.close().await;
    })
    .await;
}

/// testThatUpgradingIsDisallowed: while the task holds the read lock, its write acquire is
/// refused at once, with no node created (Curator's timed acquire waits out its 5 s and
/// returns false; its untimed acquire hangs).
#[tokio::test]
async fn upgrading_is_refused_at_once_without_a_node() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("upgrade");
        let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        let read = lock.read_lock().acquire().await.unwrap();
        let write = lock.write_lock();

        let started = Instant::now();
        assert!(write.acquire_timeout(Duration::from_secs(5)).await.unwrap().is_none());
        assert!(started.elapsed() < Duration::from_secs(1), "refused at once, not after the timeout");
        assert!(write.try_acquire().await.unwrap().is_none());
        let refused = write.acquire().await;
        assert!(matches!(&refused, Err(Error::UpgradeRefused { path: p }) if *p == path), "{refused:?}");
        let refused = write.revocable().acquire().await;
        assert!(matches!(refused, Err(Error::UpgradeRefused { .. })), "{refused:?}");
        assert!(write.revocable().acquire_timeout(EVENT).await.unwrap().is_none());
        let multi = MultiLock::new([Arc::new(write.clone()) as Arc<dyn Lockable>]).unwrap();
        assert!(matches!(multi.acquire().await, Err(Error::UpgradeRefused { .. })));
        assert_eq!(children(&fw, &path).await.len(), 1, "only the read node: nothing was created");
        assert!(!write.is_acquired_in_this_process());

        // Another task is another contender: it waits for the reader like any writer.
        let other = {
            let write = write.clone();
            tokio::spawn(async move { write.acquire_timeout(QUIET).await.unwrap().is_none() })
        };
        assert!(other.await.unwrap(), "another task's writer waits behind the reader");
        read.release().await.unwrap();
        write.acquire().await.unwrap().release().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// testThatDowngradingRespectsThreads: task 1 holds the write lock; task 2's read acquire on
/// the same lock object is another contender and times out.
#[tokio::test]
async fn downgrading_respects_tasks() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let lock = InterProcessReadWriteLock::new(&fw, &path("downgrade-tasks")).unwrap();
        let write = lock.write_lock().acquire().await.unwrap();
        let read = lock.read_lock();
        let other = tokio::spawn(async move { read.acquire_timeout(Duration::from_secs(1)).await.unwrap().is_none() });
        assert!(other.await.unwrap(), "another task does not get the downgrade shortcut");
        assert!(!lock.read_lock().is_acquired_in_this_process());
        write.release().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// testDowngrading: write, then read (granted at once), release write, release read. The read
/// node is Curator 5.5+'s downgrade node: protected, plain ephemeral, named with the write
/// node's sequence.
#[tokio::test]
async fn downgrading_creates_curators_tied_read_node() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("downgrade");
        let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        let write = lock.write_lock().acquire().await.unwrap();
        let read = within(Duration::from_secs(5), "the downgrade", lock.read_lock().acquire()).await.unwrap();
        assert!(lock.read_lock().is_owned_by_current_task() && lock.write_lock().is_owned_by_current_task());

        let (write_name, read_name) = (node_name(write.lock_path()), node_name(read.lock_path()));
        assert!(is_curator_node_name(read_name, "__READ__"), "{read_name}");
        assert_eq!(sequence_of(read.lock_path()), sequence_of(write.lock_path()), "the write node's sequence");
        assert_ne!(read_name[..40], write_name[..40], "a fresh protected prefix");
        let (_, stat) = fw.get_data(read.lock_path()).await.unwrap();
        assert_eq!(stat.ephemeral_owner, fw.snapshot().session_id, "ephemeral, ours");
        assert!(read.fencing_token() > write.fencing_token());
        let mut names = children(&fw, &path).await;
        names.sort();
        let mut expected = vec![write_name.to_owned(), read_name.to_owned()];
        expected.sort();
        assert_eq!(names, expected);
        assert_eq!(lock.read_lock().participant_nodes().await.unwrap(), vec![read.lock_path().to_owned()]);

        write.release().await.unwrap();
        assert!(read.is_held());
        assert_eq!(children(&fw, &path).await, vec![read_name.to_owned()]);
        // Still the owner of the read hold: a nested read guard at once, the write is refused.
        lock.read_lock().acquire().await.unwrap().release().await.unwrap();
        assert!(lock.write_lock().try_acquire().await.unwrap().is_none());
        read.release().await.unwrap();
        assert!(children(&fw, &path).await.is_empty());
        fw.close().await;
    })
    .await;
}

/// testContendingDowngrading (Curator 5.5+; 5.4 fails it): lock1 holds write while lock2
/// (another object on the same framework) waits for write; lock1 downgrades and releases
/// write; lock2 keeps waiting until lock1 releases read.
#[tokio::test]
async fn contending_downgrade_keeps_a_queued_writer_out() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("contending-downgrade");
        let lock1 = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        let lock2 = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        let write = lock1.write_lock().acquire().await.unwrap();
        let (acquired_tx, mut acquired) = oneshot::channel();
        let waiter = tokio::spawn(async move {
            let guard = lock2.write_lock().acquire().await.unwrap();
            acquired_tx.send(()).unwrap();
            guard.release().await.unwrap();
        });
        children_count_becomes(&fw, &path, 2, EVENT).await;

        let read = within(Duration::from_secs(5), "the downgrade", lock1.read_lock().acquire()).await.unwrap();
        write.release().await.unwrap();
        tokio::time::sleep(QUIET).await; // room for a wrong handoff: the writer's watch fired
        assert!(acquired.try_recv().is_err(), "the queued writer got in beside the downgraded reader");
        assert!(read.is_held());

        read.release().await.unwrap();
        within(EVENT, "the queued writer after the read release", &mut acquired).await.unwrap();
        waiter.await.unwrap();
        fw.close().await;
    })
    .await;
}

/// A tiny seedable generator (xorshift64*) for the tests' random choices.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// testBasic: 8 sessions × 100 rounds, about 10 % writes, holding 1-9 ms: every acquire
/// succeeds within 10 s, a writer is always alone, and readers do share (peak above 1).
#[tokio::test]
async fn basic_eight_sessions_mixed_readers_and_writers() {
    bounded(Duration::from_secs(180), async {
        const SESSIONS: u64 = 8;
        const ROUNDS: usize = 100;
        let connect = shared_connect().await;
        let path = path("basic");
        let readers = Arc::new(AtomicUsize::new(0));
        let writers = Arc::new(AtomicUsize::new(0));
        let peak_readers = Arc::new(AtomicUsize::new(0));
        let counts = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let mut tasks = Vec::new();
        let mut frameworks = Vec::new();
        for i in 0..SESSIONS {
            let fw = framework(&connect, SESSION).await;
            let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
            let (readers, writers, peak_readers, counts) =
                (readers.clone(), writers.clone(), peak_readers.clone(), counts.clone());
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng(0x9e37_79b9 + i);
                for _ in 0..ROUNDS {
                    let hold = Duration::from_millis(1 + rng.below(9));
                    if rng.below(100) < 10 {
                        let guard = lock.write_lock().acquire_timeout(Duration::from_secs(10)).await.unwrap();
                        let guard = guard.expect("a write acquire within 10 s");
                        assert_eq!(writers.fetch_add(1, Ordering::SeqCst), 0, "two writers");
                        assert_eq!(readers.load(Ordering::SeqCst), 0, "a writer beside readers");
                        tokio::time::sleep(hold).await;
                        assert_eq!(readers.load(Ordering::SeqCst), 0, "a reader beside the writer");
                        writers.fetch_sub(1, Ordering::SeqCst);
                        guard.release().await.unwrap();
                        counts[1].fetch_add(1, Ordering::SeqCst);
                    } else {
                        let guard = lock.read_lock().acquire_timeout(Duration::from_secs(10)).await.unwrap();
                        let guard = guard.expect("a read acquire within 10 s");
                        let now = readers.fetch_add(1, Ordering::SeqCst) + 1;
                        peak_readers.fetch_max(now, Ordering::SeqCst);
                        assert_eq!(writers.load(Ordering::SeqCst), 0, "a reader beside a writer");
                        tokio::time::sleep(hold).await;
                        readers.fetch_sub(1, Ordering::SeqCst);
                        guard.release().await.unwrap();
                        counts[0].fetch_add(1, Ordering::SeqCst);
                    }
                }
            }));
            frameworks.push(fw);
        }
        for task in tasks {
            task.await.unwrap();
        }
        let (reads, writes) = (counts[0].load(Ordering::SeqCst), counts[1].load(Ordering::SeqCst));
        assert_eq!(reads + writes, SESSIONS as usize * ROUNDS);
        assert!(reads > 0 && writes > 0, "reads {reads}, writes {writes}");
        assert!(peak_readers.load(Ordering::SeqCst) > 1, "readers never shared the lock");
        for fw in frameworks {
            fw.close().await;
        }
    })
    .await;
}

/// testSetNodeData: the nodes carry the lock's data (Curator's `lockData`).
#[tokio::test]
async fn nodes_carry_the_locks_data() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("data");
        let lock = InterProcessReadWriteLock::with_data(&fw, &path, vec![1, 2, 3, 4]).unwrap();
        let write = lock.write_lock().acquire().await.unwrap();
        let names = children(&fw, &path).await;
        assert_eq!(names.len(), 1);
        assert_eq!(fw.get_data(&format!("{path}/{}", names[0])).await.unwrap().0, [1, 2, 3, 4]);
        let read = lock.read_lock().acquire().await.unwrap(); // the downgrade node too
        assert_eq!(fw.get_data(read.lock_path()).await.unwrap().0, [1, 2, 3, 4]);
        write.release().await.unwrap();
        read.release().await.unwrap();
        let read = lock.read_lock().acquire().await.unwrap();
        assert_eq!(fw.get_data(read.lock_path()).await.unwrap().0, [1, 2, 3, 4]);
        read.release().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// testLockPath: client 1 holds write and its session is killed; client 2 gets read; client
/// 1's lock path no longer exists and its release succeeds (the node went with the session).
#[tokio::test]
async fn lock_path_after_the_session_is_lost() {
    bounded(LIMIT, async {
        init_tracing();
        let server = FaultyServer::start().await;
        let fw1 = framework(&server.proxied(), Duration::from_secs(4)).await;
        let fw2 = framework(&server.direct(), SESSION).await;
        let path = path("lock-path");
        let lock1 = InterProcessReadWriteLock::new(&fw1, &path).unwrap();
        let lock2 = InterProcessReadWriteLock::new(&fw2, &path).unwrap();
        let write = lock1.write_lock().acquire().await.unwrap();
        let node = write.lock_path().to_owned();

        server.expire(&fw1, Duration::from_secs(30)).await;
        let read = within(EVENT, "client 2 reading after the expiry", lock2.read_lock().acquire()).await.unwrap();
        assert!(fw2.exists(&node).await.unwrap().is_none(), "the write node went with the session");
        assert!(!write.is_held());
        within(EVENT, "lost() after the expiry", write.lost()).await;
        // The same task asking for read now: the write hold is over, no downgrade.
        let downgrade = lock1.read_lock().acquire().await;
        assert!(matches!(&downgrade, Err(Error::LockLost { path: p }) if *p == node), "{downgrade:?}");
        write.release().await.unwrap();
        read.release().await.unwrap();
        assert!(children(&fw2, &path).await.is_empty(), "no stale read node was created");
        fw1.close().await;
        fw2.close().await;
    })
    .await;
}

/// TestLockACLs (read-write lock): under a namespace, with an ACL provider, the write lock
/// creates its path with the provider's ACL.
#[tokio::test]
async fn write_lock_parents_get_the_providers_acl() {
    bounded(LIMIT, async {
        init_tracing();
        let connect = shared_connect().await;
        let namespace = path("ns").trim_start_matches('/').to_owned();
        let acl = vec![Acl::new(Permission::ALL, AuthId::new("ip", "127.0.0.1"))];
        let fw = Framework::builder(&connect)
            .session_timeout(SESSION)
            .namespace(&namespace)
            .acl_provider(FixedAclProvider::new(acl))
            .start()
            .await
            .unwrap();
        let client = fw.zk_client().unwrap();
        let check = |acls: Vec<Acl>| {
            assert_eq!(acls.len(), 1, "{acls:?}");
            assert_eq!(acls[0].permission(), Permission::ALL);
            assert_eq!((acls[0].auth_id().scheme(), acls[0].auth_id().id()), ("ip", "127.0.0.1"));
        };
        fw.create("/foo").await.unwrap();
        check(client.get_acl(&format!("/{namespace}/foo")).await.unwrap().0);

        let lock = InterProcessReadWriteLock::new(&fw, "/bar").unwrap();
        let write = lock.write_lock().acquire().await.unwrap();
        assert!(fw.exists("/bar").await.unwrap().is_some());
        check(client.get_acl(&format!("/{namespace}/bar")).await.unwrap().0);
        check(client.get_acl(&format!("/{namespace}{}", write.lock_path())).await.unwrap().0);
        assert!(write.lock_path().starts_with("/bar/_c_"), "namespace stripped: {}", write.lock_path());
        write.release().await.unwrap();
        fw.delete("/foo").await.unwrap();
        fw.close().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// kazoo test_lock.py

/// test_read_lock: readers on two sessions share the lock; a writer cannot take it. (kazoo's
/// second acquire on the same object returns False; here the holding task gets a nested guard,
/// with no new node.)
#[tokio::test]
async fn kazoo_read_lock() {
    bounded(LIMIT, async {
        let (fw1, fw2, fw3) = (fw().await, fw().await, fw().await);
        let path = path("kazoo-read");
        let lock1 = InterProcessReadWriteLock::new(&fw1, &path).unwrap();
        let read1 = lock1.read_lock().try_acquire().await.unwrap().expect("a free read lock");
        assert!(lock1.read_lock().is_acquired_in_this_process());
        let nested = lock1.read_lock().try_acquire().await.unwrap().expect("reentrant");
        assert_eq!(nested.lock_path(), read1.lock_path());
        assert_eq!(children(&fw1, &path).await.len(), 1);

        let lock2 = InterProcessReadWriteLock::new(&fw2, &path).unwrap();
        let read2 = lock2.read_lock().try_acquire().await.unwrap().expect("readers share");
        let lock3 = InterProcessReadWriteLock::new(&fw3, &path).unwrap();
        assert!(lock3.write_lock().try_acquire().await.unwrap().is_none(), "a writer beside readers");
        for guard in [nested, read1, read2] {
            guard.release().await.unwrap();
        }
        lock3.write_lock().try_acquire().await.unwrap().expect("free again").release().await.unwrap();
        for fw in [fw1, fw2, fw3] {
            fw.close().await;
        }
    })
    .await;
}

/// test_write_lock: a writer holds; another task of the same object cannot, and a reader on
/// another session cannot.
#[tokio::test]
async fn kazoo_write_lock() {
    bounded(LIMIT, async {
        let (fw1, fw2) = (fw().await, fw().await);
        let path = path("kazoo-write");
        let lock1 = InterProcessReadWriteLock::new(&fw1, &path).unwrap();
        let write = lock1.write_lock().try_acquire().await.unwrap().expect("a free write lock");
        assert!(lock1.write_lock().is_acquired_in_this_process());
        let other_task = lock1.write_lock();
        let refused = tokio::spawn(async move { other_task.try_acquire().await.unwrap().is_none() });
        assert!(refused.await.unwrap(), "another task took the write lock beside its holder");
        let lock2 = InterProcessReadWriteLock::new(&fw2, &path).unwrap();
        assert!(lock2.read_lock().try_acquire().await.unwrap().is_none(), "a reader beside the writer");
        write.release().await.unwrap();
        assert_eq!(children(&fw1, &path).await.len(), 0);
        fw1.close().await;
        fw2.close().await;
    })
    .await;
}

/// test_rw_lock: a writer holds; a reader queues, then a writer. On release they get the lock
/// in queue order: the reader, then (after the reader releases) the writer.
#[tokio::test]
async fn kazoo_rw_lock_hands_over_in_queue_order() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("kazoo-rw");
        let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        let first = lock.write_lock().acquire().await.unwrap();
        let (events_tx, mut events) = mpsc::unbounded_channel();
        let contender = |write: bool| {
            let (lock, events_tx) = (lock.clone(), events_tx.clone());
            let (release_tx, release_rx) = oneshot::channel::<()>();
            let task = tokio::spawn(async move {
                let name = if write { "writer" } else { "reader" };
                if write {
                    let guard = lock.write_lock().acquire().await.unwrap();
                    events_tx.send(name).unwrap();
                    release_rx.await.unwrap();
                    guard.release().await.unwrap();
                } else {
                    let guard = lock.read_lock().acquire().await.unwrap();
                    events_tx.send(name).unwrap();
                    release_rx.await.unwrap();
                    guard.release().await.unwrap();
                }
            });
            (task, release_tx)
        };
        let (reader, release_reader) = contender(false);
        children_count_becomes(&fw, &path, 2, EVENT).await;
        let (writer, release_writer) = contender(true);
        children_count_becomes(&fw, &path, 3, EVENT).await;
        let writers = lock.write_lock().participant_nodes().await.unwrap();
        let readers = lock.read_lock().participant_nodes().await.unwrap();
        assert_eq!(writers.len(), 2);
        assert_eq!(writers[0], first.lock_path());
        assert_eq!(readers.len(), 1);
        assert!(
            sequence_of(&writers[0]) < sequence_of(&readers[0]) && sequence_of(&readers[0]) < sequence_of(&writers[1])
        );

        first.release().await.unwrap();
        assert_eq!(within(EVENT, "the reader's turn", events.recv()).await, Some("reader"));
        tokio::time::sleep(QUIET).await;
        assert!(events.try_recv().is_err(), "the writer got in beside the reader");
        release_reader.send(()).unwrap();
        assert_eq!(within(EVENT, "the writer's turn", events.recv()).await, Some("writer"));
        release_writer.send(()).unwrap();
        reader.await.unwrap();
        writer.await.unwrap();
        fw.close().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Queue behaviour, reentrancy, downgrade edge cases

/// A reader that arrives after a waiting writer waits behind it, even though only readers
/// hold; a reentrant read of a holding task does not (no new node).
#[tokio::test]
async fn a_queued_writer_holds_back_later_readers_but_not_reentry() {
    bounded(LIMIT, async {
        let (fw1, fw2) = (fw().await, fw().await);
        let path = path("writer-first");
        let lock1 = InterProcessReadWriteLock::new(&fw1, &path).unwrap();
        let lock2 = InterProcessReadWriteLock::new(&fw2, &path).unwrap();
        let read = lock1.read_lock().acquire().await.unwrap();
        let writer = {
            let write = lock2.write_lock();
            tokio::spawn(async move { write.acquire().await.unwrap() })
        };
        children_count_becomes(&fw1, &path, 2, EVENT).await;

        let nested = lock1.read_lock().try_acquire().await.unwrap().expect("reentry does not queue");
        assert_eq!(children(&fw1, &path).await.len(), 2);
        assert!(lock2.read_lock().try_acquire().await.unwrap().is_none(), "a later reader passed the writer");
        let later = lock1.read_lock();
        let later = tokio::spawn(async move { later.acquire_timeout(QUIET).await.unwrap().is_none() });
        assert!(later.await.unwrap(), "another task's reader waits behind the writer");

        nested.release().await.unwrap();
        assert!(!writer.is_finished());
        read.release().await.unwrap();
        let write = within(EVENT, "the writer after the readers", writer).await.unwrap();
        write.release().await.unwrap();
        fw1.close().await;
        fw2.close().await;
    })
    .await;
}

/// Readers waiting behind a writer all get in together when it releases.
#[tokio::test]
async fn readers_behind_a_writer_enter_together() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("readers-together");
        let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        let write = lock.write_lock().acquire().await.unwrap();
        let inside = Arc::new(AtomicUsize::new(0));
        let (all_in_tx, all_in) = tokio::sync::watch::channel(0usize);
        let mut readers = Vec::new();
        for _ in 0..5 {
            let (read, inside, all_in_tx, mut all_in) =
                (lock.read_lock(), inside.clone(), all_in_tx.clone(), all_in.clone());
            readers.push(tokio::spawn(async move {
                let guard = read.acquire().await.unwrap();
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                all_in_tx.send_replace(now);
                all_in.wait_for(|n| *n == 5).await.unwrap(); // all five hold at once
                guard.release().await.unwrap();
            }));
        }
        children_count_becomes(&fw, &path, 6, EVENT).await;
        assert_eq!(inside.load(Ordering::SeqCst), 0);
        write.release().await.unwrap();
        for reader in readers {
            within(EVENT, "five readers holding at once", reader).await.unwrap();
        }
        drop(all_in);
        fw.close().await;
    })
    .await;
}

/// A downgrade checks the write node on the server first: deleted under us (the session still
/// alive), the read acquire fails with `LockLost` and creates nothing.
#[tokio::test]
async fn downgrade_checks_the_write_node_on_the_server() {
    bounded(LIMIT, async {
        let (fw, other) = (fw().await, fw().await);
        let path = path("downgrade-check");
        let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        let write = lock.write_lock().acquire().await.unwrap();
        other.delete(write.lock_path()).await.unwrap();
        let downgrade = lock.read_lock().acquire().await;
        assert!(matches!(downgrade, Err(Error::LockLost { .. })), "{downgrade:?}");
        assert!(lock.read_lock().try_acquire().await.is_err(), "the try form too");
        assert!(children(&fw, &path).await.is_empty(), "no read node with a stale sequence");
        write.release().await.unwrap(); // the node is gone: released
        lock.read_lock().acquire().await.unwrap().release().await.unwrap();
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// A foreign child containing `__WRIT__` blocks readers; one without a marker blocks writers
/// only (Curator's rules, CURATOR-43).
#[tokio::test]
async fn foreign_children_block_as_curator_says() {
    bounded(LIMIT, async {
        let (fw, other) = (fw().await, fw().await);
        let path = path("foreign");
        let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        other.create(&format!("{path}/0")).mode(CreateMode::Ephemeral).await.unwrap();
        let read = lock.read_lock().try_acquire().await.unwrap().expect("an unmarked child does not block readers");
        read.release().await.unwrap();
        assert!(lock.write_lock().try_acquire().await.unwrap().is_none(), "it blocks writers");
        let writer = {
            let write = lock.write_lock();
            tokio::spawn(async move { write.acquire().await.unwrap() })
        };
        children_count_becomes(&fw, &path, 2, EVENT).await;
        other.delete(&format!("{path}/0")).await.unwrap();
        within(EVENT, "the writer once the foreign child is gone", writer).await.unwrap().release().await.unwrap();

        other.create(&format!("{path}/x__WRIT__0000000000")).mode(CreateMode::Ephemeral).await.unwrap();
        assert!(lock.read_lock().try_acquire().await.unwrap().is_none(), "a foreign writer name blocks readers");
        other.close().await; // its ephemeral child goes
        eventually(EVENT, "the foreign writer node going with its session", || async {
            match lock.read_lock().try_acquire().await.unwrap() {
                Some(guard) => {
                    guard.release().await.unwrap();
                    Ok(())
                }
                None => Err("still blocked".to_owned()),
            }
        })
        .await;
        fw.close().await;
    })
    .await;
}

/// Both halves are `Lockable`: a multi-lock of one lock's write half and another's read half.
#[tokio::test]
async fn halves_compose_in_a_multi_lock() {
    bounded(LIMIT, async {
        let (fw, other) = (fw().await, fw().await);
        let (a, b) = (path("multi-a"), path("multi-b"));
        let lock_a = InterProcessReadWriteLock::new(&fw, &a).unwrap();
        let lock_b = InterProcessReadWriteLock::new(&fw, &b).unwrap();
        let multi = MultiLock::new([
            Arc::new(lock_a.write_lock()) as Arc<dyn Lockable>,
            Arc::new(lock_b.read_lock()) as Arc<dyn Lockable>,
        ])
        .unwrap();
        let guard = multi.acquire().await.unwrap();
        assert!(multi.is_acquired_in_this_process());
        assert_eq!(guard.fencing_tokens().len(), 2);
        let other_a = InterProcessReadWriteLock::new(&other, &a).unwrap();
        let other_b = InterProcessReadWriteLock::new(&other, &b).unwrap();
        assert!(other_a.read_lock().try_acquire().await.unwrap().is_none(), "a is write-locked");
        other_b
            .read_lock()
            .try_acquire()
            .await
            .unwrap()
            .expect("b is read-locked: readers share")
            .release()
            .await
            .unwrap();
        assert!(other_b.write_lock().try_acquire().await.unwrap().is_none(), "b is read-locked");
        guard.release().await.unwrap();
        other_a.write_lock().try_acquire().await.unwrap().expect("a is free").release().await.unwrap();
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// Cancelling a waiting read or write acquire leaves no node behind.
#[tokio::test]
async fn cancelled_waiters_leave_no_node() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("cancel");
        let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        let other = InterProcessReadWriteLock::new(&fw, &path).unwrap();
        let write = lock.write_lock().acquire().await.unwrap();
        assert!(other.read_lock().acquire_timeout(QUIET).await.unwrap().is_none());
        assert!(other.write_lock().acquire_timeout(QUIET).await.unwrap().is_none());
        let waiting = tokio::spawn({
            let read = other.read_lock();
            async move { read.acquire().await }
        });
        children_count_becomes(&fw, &path, 2, EVENT).await;
        waiting.abort();
        children_count_becomes(&fw, &path, 1, EVENT).await;
        write.release().await.unwrap();
        fw.close().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Bad input

/// Invalid paths, zero timeouts and oversized data are typed errors, never panics.
#[tokio::test]
async fn invalid_arguments_are_typed_errors() {
    bounded(LIMIT, async {
        let fw = fw().await;
        for bad in ["", "locks", "/", "/a/", "/a//b", "/a/./b", "/zookeeper", "/zookeeper/x", "/a\u{0}b"] {
            let refused = InterProcessReadWriteLock::new(&fw, bad);
            assert!(matches!(refused, Err(Error::InvalidPath { .. })), "{bad:?}: {refused:?}");
        }
        let lock = InterProcessReadWriteLock::new(&fw, &path("zero")).unwrap();
        assert!(matches!(lock.read_lock().acquire_timeout(Duration::ZERO).await, Err(Error::InvalidArgument { .. })));
        assert!(matches!(lock.write_lock().acquire_timeout(Duration::ZERO).await, Err(Error::InvalidArgument { .. })));
        let huge = InterProcessReadWriteLock::with_data(&fw, &path("huge"), vec![0; 2 << 20]);
        assert!(matches!(huge, Err(Error::TooLarge { name: "data", .. })), "{huge:?}");
        fw.close().await;
    })
    .await;
}
