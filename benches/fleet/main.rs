//! A fleet in one box: `--instances` service instances (1,000 by default), each its own
//! `Framework` and session in this one process, on a `TestingCluster` of `--ensemble` servers.
//! Each instance registers with service discovery, follows one shared configuration node
//! through a `CuratorCache`, and now and then takes a per-entity `InterProcessMutex`. The bench
//! prints JSON lines on stdout (progress on stderr): client memory per instance, the time for
//! a configuration change to reach every instance, the time for all to be back after the
//! ensemble's leader is killed, the servers' connections and watches, and whether anything was
//! lost or doubled. Then the same fleet runs through Apache Curator 5.x in one JVM
//! (`interop/CuratorFleet.java`), on the same ensemble, phase by phase (`--curator`).
//!
//! ```text
//! cargo bench --bench fleet --features testing,discovery -- --instances 1000
//! ```
//!
//! See "A fleet in one box" in `benches/README.md` for each line and the numbers of a run.
//!
//! | file | holds |
//! | --- | --- |
//! | `options.rs` | command line |
//! | `report.rs` | JSON lines, percentiles, resident memory, the servers' `cons` and `wchs` |
//! | `instance.rs` | one instance: its session, registration, cache and entity locks |
//! | `phases.rs` | bring-up, configuration changes, the leader's kill, take-down; the same through Curator |
//! | `curator.rs` | the Curator fleet (`interop/CuratorFleet.java`): compiling, starting and driving its JVM |
//! | `main.rs` | the ensemble and the order of the phases |
//!
//! Exit code: 0, 1 when a phase failed or ran out of time (stderr says what was missing), 2
//! for bad options, 3 when something was lost or doubled (two holders of an entity lock at
//! once, a registration missing or twice).

#[path = "../../interop/classpath.rs"]
mod classpath;
mod curator;
mod instance;
#[path = "../common/javac.rs"]
mod javac;
mod options;
mod phases;
mod report;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use zk_recipes::discovery::{JsonInstanceSerializer, ServiceDiscovery};
use zk_recipes::testing::TestingCluster;
use zk_recipes::Framework;

use crate::curator::CuratorFleet;
use crate::instance::{generation_data, Fleet, LockCounts};
use crate::options::{parse_args, Options, USAGE};
use crate::phases::{Failure, Run};

/// Where the fleet's nodes live (the ensemble is the run's own).
const ROOT: &str = "/fleet";
/// Where the Curator fleet's nodes live.
const CURATOR_ROOT: &str = "/fleet-curator";

fn main() -> ExitCode {
    let options = match parse_args(std::env::args().skip(1)) {
        Ok(Some(options)) => options,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("fleet: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("fleet: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let curator = match CuratorFleet::prepare(options.curator) {
        Ok(curator) => curator,
        Err(message) => {
            eprintln!("fleet: {message}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(bench(options, curator))
}

async fn bench(options: Options, curator: Option<CuratorFleet>) -> ExitCode {
    let mut cluster = match start_cluster(&options).await {
        Ok(cluster) => cluster,
        Err(e) => {
            eprintln!("fleet: cannot start the ensemble: {e}");
            return ExitCode::FAILURE;
        }
    };
    let connect = cluster.connect_string();
    eprintln!("[fleet] started a TestingCluster of {} at {connect}", cluster.len());
    let admin = match Framework::builder(&connect).session_timeout(options.session_timeout).start().await {
        Ok(admin) => admin,
        Err(e) => {
            eprintln!("fleet: cannot connect: {e}");
            return ExitCode::FAILURE;
        }
    };
    let fleet = Arc::new(Fleet {
        connect,
        session_timeout: options.session_timeout,
        services: format!("{ROOT}/services"),
        config: format!("{ROOT}/config"),
        entities: format!("{ROOT}/entities"),
        held: (0..options.entities).map(|_| std::sync::Mutex::new(None)).collect(),
        locks: LockCounts::default(),
    });
    if let Err(e) = admin.create(&fleet.config).data(&generation_data(0)).or_set().await {
        eprintln!("fleet: cannot write the configuration: {e}");
        admin.close().await;
        return ExitCode::FAILURE;
    }
    let admin_discovery = match ServiceDiscovery::new(&admin, &fleet.services, JsonInstanceSerializer::new()) {
        Ok(discovery) => discovery,
        Err(e) => {
            eprintln!("fleet: {e}");
            admin.close().await;
            return ExitCode::FAILURE;
        }
    };
    let (stop, _) = tokio::sync::watch::channel(false);
    let mut run = Run {
        options: &options,
        fleet,
        admin,
        admin_discovery,
        instances: Vec::with_capacity(options.instances),
        generation: 0,
        stop,
        violations: Vec::new(),
    };
    let outcome = phases(&mut run, &mut cluster).await;
    run.report_locks();
    eprintln!("[fleet] closing {} instances ...", run.instances.len());
    run.take_down().await;
    let mut failed = outcome.is_err();
    if let Err(Failure::Phase(what)) = &outcome {
        eprintln!("fleet: {what}");
    }
    let mut violations = std::mem::take(&mut run.violations);
    if let (Some(curator), false) = (curator, failed) {
        match curator.spawn(&options, &cluster.connect_string(), CURATOR_ROOT) {
            Ok(mut jvm) => {
                let outcome = phases::curator_phases(&options, &mut cluster, &mut jvm, &mut violations).await;
                jvm.finish(options.session_timeout * 2).await;
                if let Err(e) = outcome {
                    eprintln!("fleet: {e}");
                    failed = true;
                }
            }
            Err(e) => {
                eprintln!("fleet: {e}");
                failed = true;
            }
        }
    }
    drop(cluster);
    for violation in &violations {
        eprintln!("fleet: lost or doubled: {violation}");
    }
    if !violations.is_empty() {
        ExitCode::from(3)
    } else if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The measured phases in order; the first failure ends them (a violation of registrations
/// too: what follows would measure a broken fleet).
async fn phases(run: &mut Run<'_>, cluster: &mut TestingCluster) -> Result<(), Failure> {
    run.bring_up().await?;
    run.check_setup(cluster).await?;
    if !run.options.steady.is_zero() {
        // Only the background locks run meanwhile: the later phases meet a fleet in its stride.
        eprintln!("[fleet] the fleet runs for {:?} (background locks only) ...", run.options.steady);
        tokio::time::sleep(run.options.steady).await;
    }
    eprintln!(
        "[fleet] changing the configuration {} times unmeasured, {} times measured ...",
        run.options.warmup_changes, run.options.changes
    );
    run.propagate().await?;
    if run.options.leader_kill {
        run.kill_leader(cluster).await?;
    }
    let deadline = tokio::time::Instant::now() + run.options.session_timeout * 2;
    run.check_registrations("end", deadline).await.map(|_| ())
}

/// The ensemble: full JIT (the testing defaults stop at C1 for a quick start), the heap of
/// `--server-heap-mb`, and no per-address connection limit (every session comes from
/// 127.0.0.1; ZooKeeper's own default of 60 would refuse the 61st).
async fn start_cluster(options: &Options) -> Result<TestingCluster, zk_recipes::testing::TestingError> {
    let cluster = TestingCluster::builder()
        .size(options.ensemble)
        .jvm_arg("-XX:TieredStopAtLevel=4")
        .jvm_arg(format!("-Xmx{}m", options.server_heap_mb))
        .config("maxClientCnxns", "0")
        .max_session_timeout(options.session_timeout.max(Duration::from_secs(60)))
        .start()
        .await?;
    cluster.settle(Duration::from_secs(60)).await?;
    Ok(cluster)
}
