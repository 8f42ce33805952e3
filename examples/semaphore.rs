//! InterProcessSemaphore: at most three leases at once across every process on the path.
//!
//! `cargo run --features testing --example semaphore [-- --connect host:port]`.

use std::time::Duration;

use zk_recipes::{Framework, InterProcessSemaphore, SemaphoreLease};

mod common;
use common::{server_or_connect, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    let framework = Framework::connect(&connect).await?;
    let semaphore = InterProcessSemaphore::new(&framework, "/examples/semaphore", 3)?;

    let two = semaphore.acquire_many(2).await?;
    println!("holding {} leases: {:?}", two.len(), two.iter().map(|l| l.lease_path()).collect::<Vec<_>>());
    let third = semaphore.acquire().await?;
    // All three leases are taken: a fourth does not come within the timeout.
    let fourth = semaphore.acquire_timeout(Duration::from_millis(300)).await?;
    println!("fourth lease while three are held: {}", if fourth.is_some() { "got it" } else { "timed out" });

    third.release().await?;
    SemaphoreLease::release_all(two).await?;
    println!("participants after release: {:?}", semaphore.participant_nodes().await?);
    framework.close().await;
    Ok(())
}
