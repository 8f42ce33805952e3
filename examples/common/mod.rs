//! What the example programs share: where to find ZooKeeper.

use zk_recipes::testing::TestingServer;

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
