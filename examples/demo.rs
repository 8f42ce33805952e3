//! The demo: connection states, then the classic mutex and semaphore scenarios, on an
//! embedded ZooKeeper.
//!
//! Run with `scripts/demo.sh` (or `cargo run --features testing --example demo`). With
//! `--connect host:port` it uses that ensemble instead of starting a server (the
//! connection-state part needs the embedded server and is skipped then).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use zk_recipes::testing::{expire_session, FaultProxy, ProxyMode, TestingServer};
use zk_recipes::{ConnectionState, Framework, InterProcessMutex, InterProcessSemaphore};

mod common;
use common::{server_or_connect, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let started = Instant::now();
    let (server, connect) = server_or_connect().await?;
    if server.is_some() {
        println!("started an embedded ZooKeeper server at {connect}");
    }

    if let Some(server) = &server {
        connection_states(server).await?;
    }
    mutex_workers(&connect, 5).await?;
    semaphore_workers(&connect, 15, 3).await?;
    println!("demo finished in {:.1?}", started.elapsed());
    Ok(())
}

/// Walks the framework through Connected, Suspended, Reconnected, Lost and Reconnected.
async fn connection_states(server: &TestingServer) -> Result<(), Error> {
    println!("\n== connection states ==");
    let proxy = FaultProxy::start(&server.connect_string()).await?;
    let framework = Framework::builder(&proxy.connect_string()).session_timeout(Duration::from_secs(4)).build()?;
    let mut events = framework.state_changes();
    let printer = tokio::spawn(async move {
        while let Some(s) = events.next().await {
            println!("  state {:<11} session {:#x} epoch {}", format!("{:?}", s.state), s.session_id, s.epoch);
            if s.state == ConnectionState::Reconnected && s.epoch == 2 {
                break;
            }
        }
    });
    framework.start().await?;

    println!("- cutting the connection (the session survives)");
    proxy.drop_connections();
    wait_state(&framework, ConnectionState::Reconnected, 1).await?;

    println!("- expiring the session on the server (a new one is opened)");
    let session = framework.zk_client()?.session().clone();
    expire_session(&proxy, &server.connect_string(), session).await?;
    wait_state(&framework, ConnectionState::Reconnected, 2).await?;
    printer.await?;
    proxy.set_mode(ProxyMode::Pass);
    framework.close().await;
    Ok(())
}

async fn wait_state(framework: &Framework, state: ConnectionState, epoch: u64) -> Result<(), Error> {
    let mut watch = framework.state_watch();
    tokio::time::timeout(Duration::from_secs(30), watch.wait_for(|s| s.state == state && s.epoch == epoch)).await??;
    Ok(())
}

/// Five workers, one mutex: each prints when it enters and leaves; no two overlap.
async fn mutex_workers(connect: &str, workers: usize) -> Result<(), Error> {
    println!("\n== {workers} workers, one InterProcessMutex ==");
    let inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for worker in 0..workers {
        let (connect, inside) = (connect.to_owned(), inside.clone());
        tasks.push(tokio::spawn(async move {
            let framework = Framework::connect(&connect).await?;
            let mutex = InterProcessMutex::new(&framework, "/zk-recipes-demo/mutex")?;
            for round in 0..2 {
                let guard = mutex.acquire().await?;
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                println!("  worker {worker} round {round}: start (holders: {now}, token {})", guard.fencing_token());
                assert_eq!(now, 1, "exclusion violated");
                tokio::time::sleep(Duration::from_millis(50)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                println!("  worker {worker} round {round}: end");
                guard.release().await?;
            }
            framework.close().await;
            Ok::<_, Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    println!("  exclusion held: never more than one holder");
    Ok(())
}

/// Fifteen workers, three leases: at most three run at once, and every one of them runs.
async fn semaphore_workers(connect: &str, workers: usize, leases: usize) -> Result<(), Error> {
    println!("\n== {workers} workers, one InterProcessSemaphore with {leases} leases ==");
    let inside = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let framework = Framework::connect(connect).await?;
    let mut tasks = Vec::new();
    for worker in 0..workers {
        let (inside, peak) = (inside.clone(), peak.clone());
        let semaphore = InterProcessSemaphore::new(&framework, "/zk-recipes-demo/semaphore", leases)?;
        tasks.push(tokio::spawn(async move {
            let lease = semaphore.acquire().await?;
            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            println!("  worker {worker:>2}: start (holders: {now})");
            assert!(now <= leases, "more than {leases} holders");
            tokio::time::sleep(Duration::from_millis(100)).await;
            inside.fetch_sub(1, Ordering::SeqCst);
            println!("  worker {worker:>2}: end");
            lease.release().await?;
            Ok::<_, Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    framework.close().await;
    println!("  all {workers} ran; at most {} held leases at once", peak.load(Ordering::SeqCst));
    Ok(())
}
