//! Compile-time checks that the shared values, atomics, barriers and queues, their results and
//! their futures can cross tasks and threads.

#![allow(dead_code)]

use zk_recipes::retry::RetryNTimes;
use zk_recipes::{
    AtomicStats, AtomicValue, DistributedAtomicInteger, DistributedAtomicLong, DistributedAtomicValue,
    DistributedBarrier, DistributedDoubleBarrier, DistributedQueue, Framework, PromotedToLock, SharedCount,
    SharedCountChanges, SharedValue, SharedValueChanges, SimpleDistributedQueue, VersionedValue,
};

fn send<T: Send>(_: &T) {}
fn send_sync_static<T: Send + Sync + 'static>() {}
fn send_static<T: Send + 'static>() {}

#[test]
fn types_are_send_sync_static() {
    send_sync_static::<SharedValue>();
    send_sync_static::<SharedCount>();
    send_sync_static::<VersionedValue<Vec<u8>>>();
    send_static::<SharedValueChanges>();
    send_static::<SharedCountChanges>();
    send_sync_static::<DistributedAtomicLong>();
    send_sync_static::<DistributedAtomicInteger>();
    send_sync_static::<DistributedAtomicValue>();
    send_sync_static::<AtomicValue<i64>>();
    send_sync_static::<AtomicStats>();
    send_sync_static::<PromotedToLock>();
    send_sync_static::<DistributedBarrier>();
    send_sync_static::<DistributedDoubleBarrier>();
    send_sync_static::<SimpleDistributedQueue>();
    send_sync_static::<DistributedQueue>();
}

/// Never run: checks that the futures are `Send`, so they can be spawned.
async fn futures_are_send(fw: Framework) {
    let value = SharedValue::new(&fw, "/v", vec![]).unwrap();
    send(&value.start());
    send(&value.set(b""));
    let seen = value.versioned_value();
    send(&value.try_set(&seen, b""));
    let count = SharedCount::new(&fw, "/c", 0).unwrap();
    send(&count.start());
    let long = DistributedAtomicLong::new(&fw, "/l", RetryNTimes::new(1, std::time::Duration::from_millis(1))).unwrap();
    send(&long.increment());
    send(&long.compare_and_set(0, 1));
    let barrier = DistributedDoubleBarrier::new(&fw, "/b", 2).unwrap();
    send(&barrier.enter());
    send(&barrier.leave());
    send(&DistributedBarrier::new(&fw, "/g").unwrap().wait());
    send(&SimpleDistributedQueue::new(&fw, "/q").unwrap().take());
    let queue = DistributedQueue::new(&fw, "/d").unwrap();
    send(&queue.take());
    send(&queue.consume(|items| async move { Ok::<_, ()>(items) }));
}
