//! Compile-time checks that every public type and future can cross tasks and threads.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use zk_recipes::retry::{ExponentialBackoffRetry, RetryForever, RetryNTimes, RetryUntilElapsed};
use zk_recipes::testing::{
    CountingProxy, FaultProxy, Installation, ProxyMode, RequestCounts, TestingCluster, TestingClusterBuilder,
    TestingError, TestingServer, TestingServerBuilder,
};
use zk_recipes::{
    ConnectionState, ConnectionStateErrorPolicy, ConnectionStateStream, Error, FixedAclProvider, Framework,
    FrameworkBuilder, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphore, InterProcessSemaphoreMutex,
    LeaderLatch, LeaderSelector, Leadership, LeadershipEvents, ListenerHandle, LockHold, Lockable, MultiLock,
    MultiLockGuard, MutexGuard, OpenAclProvider, Participant, ReadLock, ReadLockGuard, Revocable, Revoker,
    SemaphoreLease, SemaphoreMutexGuard, StateSnapshot, WriteLock, WriteLockGuard,
};

use zk_recipes::{BackgroundError, BackgroundErrors, BackgroundEvent};

fn send<T: Send>(_: &T) {}
fn send_sync_static<T: Send + Sync + 'static>() {}
fn send_static<T: Send + 'static>() {}

#[test]
fn public_types_are_send_sync_static() {
    // The framework and its configuration.
    send_sync_static::<Framework>();
    send_sync_static::<FrameworkBuilder>();
    send_sync_static::<ConnectionState>();
    send_sync_static::<StateSnapshot>();
    send_sync_static::<ConnectionStateErrorPolicy>();
    send_sync_static::<ListenerHandle>();
    send_static::<ConnectionStateStream>();
    send_sync_static::<BackgroundError>();
    send_sync_static::<BackgroundEvent>();
    send_static::<BackgroundErrors>();
    send_sync_static::<OpenAclProvider>();
    send_sync_static::<FixedAclProvider>();
    send_sync_static::<ExponentialBackoffRetry>();
    send_sync_static::<RetryNTimes>();
    send_sync_static::<RetryUntilElapsed>();
    send_sync_static::<RetryForever>();
    send_sync_static::<Error>();
    // Lock handles and guards.
    send_sync_static::<InterProcessMutex>();
    send_sync_static::<MutexGuard>();
    send_sync_static::<InterProcessSemaphore>();
    send_sync_static::<SemaphoreLease>();
    send_sync_static::<InterProcessSemaphoreMutex>();
    send_sync_static::<SemaphoreMutexGuard>();
    send_sync_static::<MultiLock>();
    send_sync_static::<MultiLockGuard>();
    send_sync_static::<InterProcessReadWriteLock>();
    send_sync_static::<ReadLock>();
    send_sync_static::<ReadLockGuard>();
    send_sync_static::<WriteLock>();
    send_sync_static::<WriteLockGuard>();
    send_sync_static::<Revocable<InterProcessMutex>>();
    send_sync_static::<Revocable<ReadLock>>();
    send_sync_static::<Revocable<WriteLock>>();
    send_sync_static::<Revoker>();
    send_sync_static::<Arc<dyn Lockable>>();
    send_sync_static::<Box<dyn LockHold>>();
    // Leader election.
    send_sync_static::<LeaderLatch>();
    send_sync_static::<LeaderSelector>();
    send_sync_static::<Leadership>();
    send_sync_static::<Participant>();
    send_static::<LeadershipEvents>();
    // The testing module.
    send_sync_static::<TestingServer>();
    send_sync_static::<TestingServerBuilder>();
    send_sync_static::<TestingCluster>();
    send_sync_static::<TestingClusterBuilder>();
    send_sync_static::<FaultProxy>();
    send_sync_static::<ProxyMode>();
    send_sync_static::<CountingProxy>();
    send_sync_static::<RequestCounts>();
    send_sync_static::<Installation>();
    send_sync_static::<TestingError>();
}

/// Never called: it only has to compile, proving the futures are `Send`.
#[allow(clippy::too_many_arguments)]
async fn futures_are_send(
    framework: Framework,
    mutex: InterProcessMutex,
    guard: MutexGuard,
    semaphore: InterProcessSemaphore,
    lease: SemaphoreLease,
    semaphore_mutex: InterProcessSemaphoreMutex,
    semaphore_guard: SemaphoreMutexGuard,
    multi: MultiLock,
    multi_guard: MultiLockGuard,
    held: Box<dyn LockHold>,
    rw: InterProcessReadWriteLock,
    read_guard: ReadLockGuard,
    write_guard: WriteLockGuard,
) {
    let timeout = Duration::from_secs(1);
    send(&framework.start());
    send(&framework.close());
    send(&framework.wait_until_connected(timeout));
    send(&mutex.acquire());
    send(&mutex.try_acquire());
    send(&mutex.acquire_timeout(timeout));
    send(&mutex.participant_nodes());
    send(&guard.lost());
    send(&semaphore.acquire());
    send(&semaphore.acquire_many(2));
    send(&semaphore.try_acquire_many(2));
    send(&semaphore.acquire_many_timeout(2, timeout));
    send(&semaphore.participant_nodes());
    send(&lease.lost());
    send(&semaphore_mutex.acquire());
    send(&semaphore_mutex.acquire_timeout(timeout));
    send(&semaphore_guard.lost());
    send(&multi.acquire());
    send(&multi.try_acquire());
    send(&multi.acquire_timeout(timeout));
    send(&multi_guard.lost());
    send(&held.lost());
    send(&rw.read_lock().acquire());
    send(&rw.read_lock().try_acquire());
    send(&rw.read_lock().acquire_timeout(timeout));
    send(&rw.read_lock().participant_nodes());
    send(&rw.write_lock().acquire());
    send(&rw.write_lock().try_acquire());
    send(&rw.write_lock().acquire_timeout(timeout));
    send(&rw.write_lock().participant_nodes());
    let revocable = mutex.revocable();
    send(&revocable.acquire());
    send(&revocable.try_acquire());
    send(&revocable.acquire_timeout(timeout));
    send(&revocable.revocation_requested());
    send(&rw.read_lock().revocable().acquire());
    send(&rw.write_lock().revocable().acquire());
    send(&Revoker::attempt_revoke(&framework, "/a/lock-0000000000"));
    send(&guard.revocation_requested());
    send(&read_guard.lost());
    send(&read_guard.revocation_requested());
    send(&write_guard.lost());
    send(&write_guard.revocation_requested());
    send(&read_guard.release());
    send(&write_guard.release());
    send(&guard.release());
    send(&lease.release());
    send(&semaphore_guard.release());
    send(&multi_guard.release());
    send(&held.release());
}

/// Never called: the leader recipes' futures are `Send` too.
async fn leader_futures_are_send(latch: LeaderLatch, selector: LeaderSelector, leadership: Leadership) {
    send(&latch.await_leadership());
    send(&latch.await_leader(std::time::Duration::from_secs(1)));
    send(&latch.participants());
    send(&latch.leader());
    send(&latch.close());
    send(&selector.participants());
    send(&selector.leader());
    send(&selector.close());
    send(&leadership.lost());
}

#[test]
fn temp_framework_circuit_breaker_migrations_and_schemas_are_send_sync_static() {
    send_sync_static::<zk_recipes::TempFramework>();
    send_static::<zk_recipes::CircuitBreakingStream>();
    send_sync_static::<zk_recipes::migrations::MigrationManager>();
    send_sync_static::<zk_recipes::migrations::MigrationSet>();
    send_sync_static::<zk_recipes::migrations::Migration>();
    #[cfg(feature = "schema")]
    {
        send_sync_static::<zk_recipes::schema::SchemaSet>();
        send_sync_static::<zk_recipes::schema::Schema>();
        send_sync_static::<zk_recipes::schema::SchemaBuilder>();
    }
}

/// The futures of the temp framework and the migration manager cross threads.
fn temp_and_migration_futures_are_send(
    temp: &zk_recipes::TempFramework,
    manager: &zk_recipes::migrations::MigrationManager,
    set: &zk_recipes::migrations::MigrationSet,
) {
    send(&temp.get_data("/x"));
    send(&temp.transaction(|t| t));
    send(&temp.close());
    send(&manager.migrate(set));
}
