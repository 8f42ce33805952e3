//! MultiLock: take two mutexes all-or-nothing under one deadline, release in reverse order.
//!
//! `cargo run --features testing --example multi_lock [-- --connect host:port]`.

use std::time::Duration;

use zk_recipes::testing::TestingServer;
use zk_recipes::{Framework, MultiLock};

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let given = args.iter().position(|a| a == "--connect").and_then(|i| args.get(i + 1)).cloned();
    let server = match given {
        Some(_) => None,
        None => Some(TestingServer::start().await?),
    };
    let connect = given.unwrap_or_else(|| server.as_ref().map(|s| s.connect_string()).unwrap_or_default());
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
