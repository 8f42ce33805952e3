//! A `ConnectionStateListener` that tells a service what each connection state means for its
//! locks, shown by cutting the network and expiring the session on purpose.
//!
//! `cargo run --features testing --example connection_states [-- --connect host:port]` (without
//! `--connect` it starts an embedded ZooKeeper server). The framework connects through a fault
//! proxy from the `testing` feature, so the example can break its connection whatever server it
//! talks to; it only ever breaks its own session.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use zk_recipes::testing::{expire_session, FaultProxy};
use zk_recipes::{ConnectionState, ConnectionStateListener, Framework, InterProcessMutex, StateSnapshot};

mod common;
use common::{server_or_connect, Error};

/// How long each step may take before the example gives up.
const STEP: Duration = Duration::from_secs(30);

/// Prints each transition with what it means for locks, and publishes the last one seen (so the
/// example can wait for the listener itself, not only for the framework).
struct LockAdvisor {
    last_epoch: Mutex<u64>,
    seen: watch::Sender<StateSnapshot>,
}

#[async_trait::async_trait]
impl ConnectionStateListener for LockAdvisor {
    async fn state_changed(&self, _framework: &Framework, snapshot: StateSnapshot) {
        let new_session = {
            let mut last = self.last_epoch.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::replace(&mut *last, snapshot.epoch) != snapshot.epoch
        };
        let advice = match snapshot.state {
            ConnectionState::Connected => "connected: locks may be taken",
            ConnectionState::Suspended => {
                "suspended: the session may live on, but stop acting on locks until it is back"
            }
            ConnectionState::Reconnected if new_session => {
                "reconnected on a NEW session: every lock of the old one is gone; take them again"
            }
            ConnectionState::Reconnected => "reconnected on the same session: locks held before are still held",
            ConnectionState::Lost => "lost: the session is gone, and every lock it held with it",
            ConnectionState::ReadOnly => "read-only server: reads work, locks cannot be taken",
            _ => "a state this example does not know",
        };
        println!(
            "  [listener] {:<11} session {:#x} epoch {}: {advice}",
            format!("{:?}", snapshot.state),
            snapshot.session_id,
            snapshot.epoch
        );
        self.seen.send_replace(snapshot);
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    // The proxy forwards to the first server; a chroot stays on the client's connect string.
    let (hosts, chroot) = connect.split_at(connect.find('/').unwrap_or(connect.len()));
    let first_host = hosts.split(',').next().unwrap_or(hosts);
    let proxy = FaultProxy::start(first_host).await?;

    let framework = Framework::builder(&format!("{}{chroot}", proxy.connect_string()))
        .session_timeout(Duration::from_secs(4))
        .build()?;
    let (seen, mut seen_rx) = watch::channel(framework.snapshot());
    let advisor = Arc::new(LockAdvisor { last_epoch: Mutex::new(0), seen });
    // Dropping the handle unregisters the listener; keep it for as long as it should listen.
    let _listening = framework.add_listener(advisor)?;
    framework.start().await?;
    wait_seen(&mut seen_rx, ConnectionState::Connected, 1).await?;

    let mutex = InterProcessMutex::new(&framework, "/examples/connection-states")?;
    let guard = mutex.acquire().await?;
    println!("holding {}", guard.lock_path());

    println!("- cutting the connection (the server keeps the session)");
    proxy.refuse_new(true);
    proxy.drop_connections();
    wait_seen(&mut seen_rx, ConnectionState::Suspended, 1).await?;
    tokio::time::timeout(STEP, guard.lost()).await?;
    println!("  guard.lost() completed: while suspended the lock is uncertain; is_held() = {}", guard.is_held());
    proxy.refuse_new(false);
    wait_seen(&mut seen_rx, ConnectionState::Reconnected, 1).await?;
    println!("  back on the same session; guard.is_held() = {}", guard.is_held());

    println!("- expiring the session on the server");
    let session = framework.zk_client()?.session().clone();
    expire_session(&proxy, hosts, session).await?;
    wait_seen(&mut seen_rx, ConnectionState::Reconnected, 2).await?;
    println!("  new session; guard.is_held() = {} (its node went with the old session)", guard.is_held());
    guard.release().await?;

    framework.close().await;
    Ok(())
}

/// Waits until the listener has reported `state` on session `epoch`.
async fn wait_seen(seen: &mut watch::Receiver<StateSnapshot>, state: ConnectionState, epoch: u64) -> Result<(), Error> {
    let reached = seen.wait_for(|s| s.state == state && s.epoch == epoch);
    tokio::time::timeout(STEP, reached).await??;
    Ok(())
}
