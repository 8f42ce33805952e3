//! What the example programs share: where to find ZooKeeper, and a clean start.

use zk_recipes::testing::TestingServer;
use zk_recipes::Framework;

/// The error type of the examples.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// `--connect host:port` from the command line, or else an embedded server (kept alive by the
/// returned handle) and its connect string.
pub async fn server_or_connect() -> Result<(Option<TestingServer>, String), Error> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--connect").and_then(|i| args.get(i + 1)) {
        Some(connect) => Ok((None, connect.clone())),
        None => {
            let server = TestingServer::start().await?;
            let connect = server.connect_string();
            Ok((Some(server), connect))
        }
    }
}

/// Deletes `path` and everything under it; a path that is not there is fine (a clean start
/// after an earlier run, and the clean-up at the end).
#[allow(dead_code)] // not every example leaves nodes behind
pub async fn remove_tree(framework: &Framework, path: &str) -> Result<(), Error> {
    match framework.delete(path).recursive().await {
        Err(e) if !e.is_no_node() => Err(e.into()),
        _ => Ok(()),
    }
}
