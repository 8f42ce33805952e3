//! Compile-time checks that public handles, guards and futures can cross tasks and threads.

#![allow(dead_code)]

use zk_recipes::{ConnectionStateStream, Error, Framework, InterProcessMutex, ListenerHandle, MutexGuard};

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
