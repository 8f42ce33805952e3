//! Compile-time checks that public handles, guards and futures can cross tasks and threads.

#![allow(dead_code)]

use zk_recipes::{
    ConnectionStateStream, Error, Framework, InterProcessMutex, LeaderLatch, LeaderSelector, Leadership,
    LeadershipEvents, ListenerHandle, MutexGuard, Participant,
};

fn send<T: Send>(_: &T) {}
fn send_sync_static<T: Send + Sync + 'static>() {}
fn send_static<T: Send + 'static>() {}

#[test]
fn handles_and_guards_are_send_sync_static() {
    send_sync_static::<Framework>();
    send_sync_static::<InterProcessMutex>();
    send_sync_static::<MutexGuard>();
    send_sync_static::<Error>();
    send_sync_static::<ListenerHandle>();
    send_static::<ConnectionStateStream>();
    send_sync_static::<LeaderLatch>();
    send_sync_static::<LeaderSelector>();
    send_sync_static::<Leadership>();
    send_sync_static::<Participant>();
    send_static::<LeadershipEvents>();
}

/// Never called: it only has to compile, proving the futures are `Send`.
async fn futures_are_send(framework: Framework, mutex: InterProcessMutex, guard: MutexGuard) {
    send(&framework.start());
    send(&framework.close());
    send(&framework.wait_until_connected(std::time::Duration::from_secs(1)));
    send(&mutex.acquire());
    send(&mutex.try_acquire());
    send(&mutex.acquire_timeout(std::time::Duration::from_secs(1)));
    send(&mutex.participant_nodes());
    send(&guard.lost());
    send(&guard.release());
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
