//! Counters shared by a fleet: a `DistributedAtomicLong` incremented from two sessions, and a
//! `SharedCount` changed with compare-and-set and followed by a listener.
//!
//! `cargo run --features testing --example counter [-- --connect host:port]` (without
//! `--connect` it starts an embedded ZooKeeper server).

use std::time::Duration;

use zk_recipes::retry::RetryNTimes;
use zk_recipes::{DistributedAtomicLong, Error as ZkrError, Framework, SharedCount};

mod common;
use common::{server_or_connect, Error};

const INCREMENTS: i64 = 20;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    let start = || Framework::builder(&connect).session_timeout(Duration::from_secs(10)).start();
    let (a, b) = (start().await?, start().await?);

    // Two sessions increment one counter; every increment is applied exactly once.
    let path = "/examples/counter/hits";
    DistributedAtomicLong::new(&a, path, RetryNTimes::new(0, Duration::from_millis(1)))?.force_set(0).await?;
    let mut workers = Vec::new();
    for framework in [a.clone(), b.clone()] {
        workers.push(tokio::spawn(async move {
            let hits = DistributedAtomicLong::new(&framework, path, RetryNTimes::new(100, Duration::from_millis(5)))?;
            let mut tries = 0;
            for _ in 0..INCREMENTS {
                match hits.increment().await {
                    Ok(result) if result.succeeded() => tries += result.stats().optimistic_tries,
                    Ok(_) => println!("an increment lost every race (the retry policy gave up)"),
                    // The connection broke mid-write and reading back cannot tell: never retry blindly.
                    Err(ZkrError::OutcomeUnknown { .. }) => println!("an increment's outcome is unknown"),
                    Err(e) => return Err(e),
                }
            }
            Ok::<u32, ZkrError>(tries)
        }));
    }
    for worker in workers {
        let tries = worker.await.map_err(|e| e.to_string())??;
        println!("a worker made {INCREMENTS} increments in {tries} optimistic tries");
    }
    let total = DistributedAtomicLong::new(&a, path, RetryNTimes::new(0, Duration::from_millis(1)))?.get().await?;
    println!("hits = {} (expected {})", total.post_value(), 2 * INCREMENTS);
    if *total.post_value() != 2 * INCREMENTS {
        return Err("the counter does not add up".into());
    }

    // A SharedCount: compare-and-set on the node's version, change notification.
    let workers_wanted = SharedCount::new(&a, "/examples/counter/workers", 4)?;
    workers_wanted.start().await?;
    let watcher = SharedCount::new(&b, "/examples/counter/workers", 4)?;
    watcher.start().await?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let listener = watcher.add_listener(move |count| {
        let _ = tx.send(count.map(|c| *c.value()));
    })?;
    let seen = workers_wanted.versioned_count()?;
    let next = seen.value() + 1;
    if workers_wanted.try_set(&seen, next).await? {
        println!("workers: {} -> {next}", seen.value());
    }
    let heard = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(count) = rx.recv().await {
            if count? == next {
                return Ok(());
            }
        }
        Err(ZkrError::Closed)
    })
    .await
    .map_err(|_| "the listener heard nothing")?;
    heard?;
    println!("the other session's listener saw workers = {next}");
    drop(listener);
    a.delete("/examples/counter").recursive().await?;
    a.close().await;
    b.close().await;
    Ok(())
}
