//! Time-bounded leases that need no session (kazoo's `NonBlockingLease` and
//! `MultiNonBlockingLease`): two processes contend for one lease; the holder gives it up
//! early, the other takes it and is the one refused until it runs out; then three workers share
//! two leases of a `MultiNonBlockingLease`.
//!
//! `cargo run --features testing --example lease [-- --connect host:port]` (without
//! `--connect` it starts an embedded ZooKeeper server).

use std::time::{Duration, SystemTime};

use zk_recipes::protocol::kazoo::format_utc;
use zk_recipes::{Framework, MultiNonBlockingLease, NonBlockingLease};

mod common;
use common::{remove_tree, server_or_connect, Error};

const ROOT: &str = "/examples/lease";
const LEASE: &str = "/examples/lease/nightly-report";
const WORKERS: &str = "/examples/lease/reporters";
/// How long a lease is obtained for. Ends are written in whole seconds (kazoo's record), so a
/// lease may end up to a second early: the refusals below come well within that.
const DURATION: Duration = Duration::from_secs(3);

/// One attempt at the lease, printed.
async fn attempt(framework: &Framework, who: &str, duration: Duration) -> Result<NonBlockingLease, Error> {
    let lease = NonBlockingLease::obtain(framework, LEASE, duration, who).await?;
    match lease.end() {
        Some(end) => println!("{who}: obtained {LEASE} until {} UTC", format_utc(end)),
        None => println!("{who}: refused, someone else holds {LEASE}"),
    }
    Ok(lease)
}

/// `Err` unless `lease` went as `expected`.
fn expect(lease: &NonBlockingLease, expected: bool) -> Result<(), Error> {
    if lease.obtained() == expected {
        Ok(())
    } else {
        Err(format!("{}: obtained {} where {expected} was expected", lease.identifier(), lease.obtained()).into())
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    // Two processes, each with a session of its own.
    let host_a = Framework::builder(&connect).session_timeout(Duration::from_secs(10)).start().await?;
    let host_b = Framework::builder(&connect).session_timeout(Duration::from_secs(10)).start().await?;
    remove_tree(&host_a, ROOT).await?; // a lease left by an earlier run

    // One lease: whoever asks first while it is free gets it; the other is refused.
    expect(&attempt(&host_a, "host-a", DURATION).await?, true)?;
    expect(&attempt(&host_b, "host-b", DURATION).await?, false)?;
    // Asking again with the same identifier renews it.
    expect(&attempt(&host_a, "host-a", DURATION).await?, true)?;

    // kazoo's lease has no release: the holder gives it up by renewing it to end now.
    println!("host-a gives the lease up: it renews it for no time");
    expect(&attempt(&host_a, "host-a", Duration::ZERO).await?, true)?;
    let lease_b = attempt(&host_b, "host-b", DURATION).await?;
    expect(&lease_b, true)?;
    expect(&attempt(&host_a, "host-a", DURATION).await?, false)?;

    // Nothing is held between attempts: the lease ends at its time, whatever the holder does.
    let end = lease_b.end().ok_or("host-b's lease has no end")?;
    let left = end.duration_since(SystemTime::now()).unwrap_or_default();
    println!("host-a waits {:.1} s for host-b's lease to run out", left.as_secs_f64());
    // (A little more: the local clock and the timer's may drift apart by a few milliseconds.)
    tokio::time::sleep(left + Duration::from_millis(100)).await;
    expect(&attempt(&host_a, "host-a", DURATION).await?, true)?;

    // Several leases: at most two of three workers report at a time.
    let mut refused = 0;
    for worker in ["worker-1", "worker-2", "worker-3"] {
        let framework = if worker == "worker-2" { &host_b } else { &host_a };
        let lease = MultiNonBlockingLease::obtain(framework, 2, WORKERS, Duration::from_secs(60), worker).await?;
        match lease.slot() {
            Some(slot) => println!("{worker}: reporting with lease {slot} of 2"),
            None => {
                println!("{worker}: refused, both leases are held");
                refused += 1;
            }
        }
    }
    if refused != 1 {
        return Err(format!("{refused} workers refused where one was expected").into());
    }

    remove_tree(&host_a, ROOT).await?;
    host_a.close().await;
    host_b.close().await;
    Ok(())
}
