//! InterProcessMutex: take a lock, watch for its loss while working, release it.
//!
//! `cargo run --features testing --example mutex [-- --connect host:port]` (without
//! `--connect` it starts an embedded ZooKeeper server).

use std::time::Duration;

use zk_recipes::{Framework, InterProcessMutex};

mod common;
use common::{server_or_connect, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    let framework = Framework::builder(&connect).session_timeout(Duration::from_secs(10)).start().await?;
    let mutex = InterProcessMutex::new(&framework, "/examples/mutex")?;

    let guard = mutex.acquire().await?;
    println!("holding {} (fencing token {})", guard.lock_path(), guard.fencing_token());
    // Reentrant for the same task: a nested guard, no ZooKeeper traffic.
    let nested = mutex.acquire().await?;
    // The critical section runs until it finishes or the lock is lost (then it is dropped).
    match guard.run(tokio::time::sleep(Duration::from_millis(200))).await {
        Ok(()) => println!("work done while holding the lock"),
        Err(lost) => println!("{lost}"),
    }
    nested.release().await?;
    guard.release().await?;
    println!("released; held in this process: {}", mutex.is_acquired_in_this_process());

    // The non-blocking form: take it only if it is free.
    match mutex.try_acquire().await? {
        Some(guard) => drop(guard), // dropping releases in the background
        None => println!("someone else holds it"),
    }
    framework.close().await;
    Ok(())
}
