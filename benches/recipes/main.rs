//! Side-by-side benchmarks of the recipes (locks, leader election, caches, counters, the queue,
//! service discovery): each workload runs through zk-recipes, through a "raw floor"
//! (the same cycle done with plain zookeeper-client calls) and through Apache Curator 5.x
//! (`interop/CuratorBench.java`, in a JVM) in the same run, against the same server, and prints
//! one JSON line per workload and implementation on stdout. Progress goes to stderr.
//!
//! ```text
//! cargo bench --bench recipes --features testing -- --workloads mutex-uncontended,mutex-contended
//! ```
//!
//! See `benches/README.md` for the options, what each workload and `impl` label measures, and
//! how to read the request counts printed on stderr.
//!
//! | file | holds |
//! | --- | --- |
//! | `options.rs` | command line: options, workloads |
//! | `report.rs` | errors, the exclusion check, measurements and their JSON lines |
//! | `raw.rs` | the raw floors: Curator's algorithms with plain zookeeper-client calls |
//! | `caches.rs` | the cache workloads: a large tree's load, events under a writer |
//! | `contenders.rs` | one session's way of taking and giving back a lock, per implementation |
//! | `values.rs` | the counters' and service discovery's contenders, and their raw floors |
//! | `queues.rs` | the queue workloads: a producer and a consumer, on one queue or its shards |
//! | `curator.rs` | the same workloads through Curator in a JVM |
//! | `workloads.rs` | the environment, and each workload's lines |
//! | `main.rs` | the run loop: rounds of each workload, its Curator line, the ratios |
//!
//! Each file uses only the files above it in this table (and `classpath.rs`, shared with
//! the interop tests): `main` -> `workloads` -> `queues`, `values` -> `contenders`, `curator` ->
//! `raw`, `report` -> `options`.

mod caches;
#[path = "../../interop/classpath.rs"]
mod classpath;
mod contenders;
mod curator;
#[path = "../common/javac.rs"]
mod javac;
mod options;
mod queues;
mod raw;
mod report;
mod values;
mod workloads;

use std::fmt::Write as _;
use std::process::ExitCode;

use zk_recipes::testing::CountingProxy;

use crate::curator::Curator;
use crate::options::{parse_args, Options, Workload, USAGE};
use crate::report::{json_string, BenchError, Measured};
use crate::workloads::{run_workload, warm_up_server, Env, BENCH_ROOT};

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some(caches::WRITER_PROCESS) {
        return match caches::writer_process(std::env::args().skip(2)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("locks: cache-events writer: {e}");
                ExitCode::FAILURE
            }
        };
    }
    // The library's own log (a missed wake-up, a predecessor deleted across a reconnect) goes
    // to stderr when RUST_LOG asks for it, e.g. RUST_LOG=zk_recipes=debug.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let options = match parse_args(std::env::args().skip(1)) {
        Ok(Some(options)) => options,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("locks: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let curator = match Curator::prepare(options.curator) {
        Ok(curator) => curator,
        Err(message) => {
            eprintln!("locks: {message}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("locks: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(bench(options, curator))
}

async fn bench(options: Options, curator: Curator) -> ExitCode {
    let (servers, connect) = match options.connect.clone() {
        Some(connect) => (None, connect),
        None => match StartedServers::start(&options).await {
            Ok(started) => {
                let connect = started.connect_string();
                eprintln!(
                    "[locks] started {} at {connect} (full JIT, fsync {})",
                    started.describe(),
                    if options.fsync { "on" } else { "off" }
                );
                (Some(started), connect)
            }
            Err(e) => {
                eprintln!("locks: cannot start ZooKeeper: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis();
    let proxy = if options.count_ops {
        let upstream = connect.split(',').next().unwrap_or_default().split('/').next().unwrap_or_default();
        match CountingProxy::start(upstream).await {
            Ok(proxy) => {
                let at = proxy.connect_string();
                eprintln!("[locks] counting requests through a proxy at {at} (timings include its hop)");
                Some(proxy)
            }
            Err(e) => {
                eprintln!("locks: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    let env = Env {
        // Through the proxy: its address, with the connect string's chroot (if any) kept.
        connect: proxy.as_ref().map_or_else(
            || connect.clone(),
            |p| format!("{}{}", p.connect_string(), connect.find('/').map_or("", |at| &connect[at..])),
        ),
        server: connect,
        proxy,
        root: format!("{BENCH_ROOT}/{}-{stamp}", std::process::id()),
        options,
    };
    if servers.is_some() && !env.options.server_warmup.is_zero() {
        eprintln!("[locks] warming up the server's JIT for {:?} ...", env.options.server_warmup);
        match warm_up_server(&env, env.options.server_warmup).await {
            Ok(()) => {}
            Err(e) if e.is_violation() => {
                eprintln!("[locks] server warm-up: {e}");
                return ExitCode::from(3);
            }
            Err(e) => {
                eprintln!("[locks] server warm-up failed: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let mut code = ExitCode::SUCCESS;
    let mut ratios = Vec::new();
    'workloads: for workload in env.options.workloads.clone() {
        // Each zk-recipes line's ratio to Curator, one per round.
        let mut round_ratios: Vec<(&'static str, Vec<f64>)> = Vec::new();
        for round in 1..=env.options.rounds {
            if env.options.rounds > 1 {
                eprintln!("[locks] {} round {round} of {} ...", workload.name(), env.options.rounds);
            } else {
                eprintln!("[locks] {} ...", workload.name());
            }
            let ended = match run_round(&env, &curator, workload).await {
                Ok(ended) => ended,
                Err(e) => {
                    eprintln!("[locks] {}: {e}", workload.name());
                    code = ExitCode::from(3);
                    break 'workloads;
                }
            };
            if ended.failed {
                code = ExitCode::FAILURE;
            }
            for (implementation, ratio) in ended.ratios {
                match round_ratios.iter_mut().find(|(name, _)| *name == implementation) {
                    Some((_, all)) => all.push(ratio),
                    None => round_ratios.push((implementation, vec![ratio])),
                }
            }
            if env.options.rounds == 1 {
                ratios.extend(ended.summary);
            }
        }
        if env.options.rounds > 1 && !round_ratios.is_empty() {
            let summary = median_summary(workload.name(), env.options.rounds, round_ratios);
            eprintln!("[locks] ratio {summary}");
            ratios.push(summary);
        }
    }
    if !ratios.is_empty() {
        eprintln!("[locks] zk-recipes ÷ Curator, ops/s:");
        for summary in &ratios {
            eprintln!("[locks]   {summary}");
        }
    }
    // The raw floors' directories were persistent; the library's containers are empty now.
    env.remove_tree(&env.root).await;
    if let Ok(client) = env.raw_client().await {
        let _ = client.delete(BENCH_ROOT, None).await; // fails harmlessly while others use it
    }
    code
}

/// How one round of a workload went.
struct Round {
    /// Each zk-recipes line's ops/s divided by Curator's (none without a Curator line).
    ratios: Vec<(&'static str, f64)>,
    /// The ratio line as printed.
    summary: Option<String>,
    /// A line failed; the others still ran.
    failed: bool,
}

/// One round of `workload`: its zk-recipes and raw-floor lines, then Curator's, each printed
/// as a JSON line. `Err` only for a violated exclusion, which stops the whole run.
async fn run_round(env: &Env, curator: &Curator, workload: Workload) -> Result<Round, BenchError> {
    let mut round = Round { ratios: Vec::new(), summary: None, failed: false };
    // ops/s of the zk-recipes lines (and of the write ceiling, the most any lock could do),
    // for the ratios to Curator.
    let mut ours = Vec::new();
    match run_workload(env, workload).await {
        Ok(results) => {
            for result in results.into_iter().filter(|result| env.options.measures(result.implementation)) {
                if result.implementation.starts_with("zk-recipes")
                    || ["write-ceiling", "raw-two-ahead"].contains(&result.implementation)
                {
                    ours.push((result.implementation, result.ops_per_sec()));
                }
                print_result(env, &result);
            }
        }
        Err(e) if e.is_violation() => return Err(e),
        Err(e) => {
            eprintln!("[locks] {} failed: {e}", workload.name());
            round.failed = true;
        }
    }
    let bench = match curator {
        Curator::Off => return Ok(round),
        // `--only` without `curator`: its JVM would run beside the lines measured alone.
        _ if !env.options.measures("curator") => return Ok(round),
        Curator::Missing(why) => {
            println!(
                "{{\"impl\":\"curator\",\"workload\":{},\"skipped\":{}}}",
                json_string(workload.name()),
                json_string(why)
            );
            return Ok(round);
        }
        Curator::Ready(bench) => bench,
    };
    eprintln!("[locks] {} through Curator ...", workload.name());
    let target = env.curator_target(workload);
    // A counter, a queue, a registry or a typed record starts afresh in every round (the lock
    // directories are containers, and the cache workloads share or renew their trees). So do
    // many-locks' paths: the JVM numbers them from 0 each round, and the last round's
    // directories (containers, reaped only at the server's container check, 60 s by default)
    // would spare a later round the parents' creates that the zk-recipes line pays each time.
    let fresh = matches!(
        workload,
        Workload::ManyLocks
            | Workload::CounterIncrement
            | Workload::SharedCountCas
            | Workload::QueueThroughput
            | Workload::QueueSharded
            | Workload::DiscoveryRegister
            | Workload::DiscoveryQuery
            | Workload::CachedCounter
            | Workload::TypedCas
    );
    if fresh {
        env.remove_tree(&target.dir).await;
    }
    match bench.run(&env.options, target, workload).await {
        Ok(lines) => {
            for line in &lines {
                println!("{}", line.json);
            }
            // Each zk-recipes line against the Curator line of the same variant
            // (`zk-recipes-cache` against `curator-cache`), else against `curator`.
            let theirs = |implementation: &str| {
                let variant = implementation.strip_prefix("zk-recipes").unwrap_or_default();
                let find = |name: String| lines.iter().find(|l| l.implementation == name);
                find(format!("curator{variant}"))
                    .or_else(|| find("curator".to_owned()))
                    .and_then(|l| Some((l.implementation.as_str(), l.ops_per_sec.filter(|&t| t > 0.0)?)))
            };
            let mut summary = None::<String>;
            for (implementation, ops_per_sec) in ours {
                let Some((name, theirs)) = theirs(implementation) else { continue };
                let summary = summary.get_or_insert_with(|| match lines.len() {
                    1 => format!("{} (ops/s ÷ curator's {theirs:.1}):", workload.name()),
                    _ => format!("{}:", workload.name()),
                });
                let ratio = ops_per_sec / theirs;
                let _ = write!(summary, " {implementation} {ratio:.2}");
                if lines.len() > 1 {
                    let _ = write!(summary, " (÷ {name}'s {theirs:.1} ops/s)");
                }
                round.ratios.push((implementation, ratio));
            }
            if let Some(summary) = summary {
                eprintln!("[locks] ratio {summary}");
                round.summary = Some(summary);
            }
        }
        Err(e) if e.is_violation() => return Err(e),
        Err(e) => {
            eprintln!("[locks] {} (curator) failed: {e}", workload.name());
            round.failed = true;
        }
    }
    Ok(round)
}

/// One measured line on stdout (JSON), its request counts and breakdowns on stderr.
fn print_result(env: &Env, result: &Measured) {
    let requests = result.requests_per_op.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.2}"));
    let fsyncs = result.fsyncs_per_op.map_or_else(String::new, |f| format!("; log fsyncs/op {f:.2} per server"));
    eprintln!(
        "[locks]   {:<20} server requests/op {requests} (all sessions, pings included){fsyncs}",
        result.implementation
    );
    if let Some(breakdown) = &result.breakdown {
        eprintln!("[locks]   {:<20} per op: {breakdown}", "");
    }
    if let Some(halves) = &result.halves {
        eprintln!("[locks]   {:<20} {}", "", halves.summary());
        if let Some(requests) = halves.requests() {
            eprintln!("[locks]   {:<20} {requests}", "");
        }
    }
    println!("{}", result.json(&env.options.label));
}

/// The ratio line over several rounds: each zk-recipes line's median ratio, then every
/// round's, sorted.
fn median_summary(workload: &str, rounds: usize, ratios: Vec<(&'static str, Vec<f64>)>) -> String {
    let mut summary = format!("{workload} (median ops/s ÷ curator's, {rounds} rounds):");
    for (implementation, mut all) in ratios {
        all.sort_by(f64::total_cmp);
        let mid = all.len() / 2;
        let median = if all.len() % 2 == 1 { all[mid] } else { (all[mid - 1] + all[mid]) / 2.0 };
        let each: Vec<String> = all.iter().map(|r| format!("{r:.2}")).collect();
        let _ = write!(summary, " {implementation} {median:.2} (rounds, sorted: {})", each.join(" "));
    }
    summary
}

/// The ZooKeeper the bench started for itself (no `--connect`), stopped when dropped.
enum StartedServers {
    Standalone(Box<zk_recipes::testing::TestingServer>),
    Ensemble(zk_recipes::testing::TestingCluster),
}

impl StartedServers {
    /// The testing defaults stop the JIT at C1 for a quick start; a benchmark wants the
    /// servers at full speed (the later flag wins). `--fsync` puts back ZooKeeper's own default.
    async fn start(options: &Options) -> Result<Self, zk_recipes::testing::TestingError> {
        const FULL_JIT: &str = "-XX:TieredStopAtLevel=4";
        let force_sync = if options.fsync { "yes" } else { "no" };
        Ok(match options.ensemble {
            None => {
                let mut builder =
                    zk_recipes::testing::TestingServer::builder().jvm_arg(FULL_JIT).config("forceSync", force_sync);
                for (key, value) in &options.server_properties {
                    builder = builder.system_property(key, value);
                }
                Self::Standalone(Box::new(builder.start().await?))
            }
            Some(size) => {
                let mut builder = zk_recipes::testing::TestingCluster::builder()
                    .size(size)
                    .jvm_arg(FULL_JIT)
                    .config("forceSync", force_sync);
                for (key, value) in &options.server_properties {
                    builder = builder.system_property(key, value);
                }
                Self::Ensemble(builder.start().await?)
            }
        })
    }

    fn connect_string(&self) -> String {
        match self {
            Self::Standalone(server) => server.connect_string(),
            Self::Ensemble(cluster) => cluster.connect_string(),
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Standalone(_) => "a TestingServer".to_owned(),
            Self::Ensemble(cluster) => format!("a TestingCluster of {}", cluster.len()),
        }
    }
}
