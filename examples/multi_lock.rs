//! MultiLock: take two mutexes all-or-nothing under one deadline, release in reverse order.
//!
//! `cargo run --features testing --example multi_lock [-- --connect host:port]`.

use std::time::Duration;

use zk_recipes::{Framework, MultiLock};

mod common;
use common::{server_or_connect, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    let framework = Framework::connect(&connect).await?;

    let both = MultiLock::of_mutexes(&framework, ["/examples/accounts/a", "/examples/accounts/b"])?;
    match both.acquire_timeout(Duration::from_secs(5)).await? {
        Some(guard) => {
            println!("holding both accounts; transferring");
            guard.release().await?;
        }
        None => println!("could not get both within 5 s; nothing is held"),
    }
    framework.close().await;
    Ok(())
}
