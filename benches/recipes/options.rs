//! The command line: options and workloads.

use std::time::Duration;

#[path = "../common/args.rs"]
mod args;
use args::{number, split_flag};

/// An acquire that takes longer than this is reported as a stall (the run fails, exit code 1).
pub(crate) const STALL: Duration = Duration::from_secs(60);

/// many-waiters: contending tasks per session.
pub(crate) const WAITERS_PER_SESSION: usize = 8;

pub(crate) const USAGE: &str = "\
usage: locks [options]
  --connect HOST:PORT[,..]  ZooKeeper to use (default: start a TestingServer)
  --ensemble N              without --connect: start a TestingCluster of N servers instead
                            (clients connect to all of them)
  --fsync                   without --connect: the started servers fsync their transaction
                            log before acknowledging (ZooKeeper's default; testing turns it off)
  --server-property K=V     without --connect: a Java system property for the started servers
                            (repeatable), e.g. zookeeper.flushDelay=3 for group commit
  --workloads LIST          comma-separated: mutex-uncontended, mutex-contended, semaphore,
                            rwlock, many-waiters, leader-handoff, cache-load, cache-events,
                            counter-increment, shared-count-cas, queue-throughput,
                            discovery-register, discovery-query, many-locks, cached-counter,
                            queue-sharded, typed-cas, or all
                            (default: all)
  --iters N                 mutex-uncontended, discovery-register, typed-cas: measured cycles
                            (default 3000)
  --warmup N                their warmup cycles (default 1000)
  --clients N               sessions for the contended workloads (default 4)
  --cycles N                measured acquisitions (leader-handoff: terms) per client (default 400)
  --warmup-cycles N         warmup acquisitions per client (default 20)
  --hold-ms MS              mutex hold time (default 0)
  --sem-hold-ms MS          semaphore lease hold time (default 0)
  --rw-hold-ms MS           read-write lock hold time (default 0)
  --max-leases N            semaphore leases (default 3)
  --read-pct P              rwlock: percentage of read acquisitions (default 80)
  --seed N                  rwlock: seed of the read/write choice (default 1)
  --cache-nodes N           cache-load: nodes in the two-level tree (default 10000)
  --event-nodes N           cache-events: nodes the writer updates (default 1000)
  --event-passes N          cache-events: writes per node (default 10)
  --event-batch N           cache-events: writes per request (a multi of N set-data, default 1);
                            above one the writer outruns a cache that reads once per change
  --retries N               counter-increment: the counter's RetryNTimes tries after the first
                            (default 10)
  --retry-sleep-ms MS       counter-increment: RetryNTimes' sleep between tries (default 1)
  --cache-factor N          cached-counter: values per block reserved (default 100)
  --cached-values N         cached-counter: measured values per client (default 20000; the
                            warmup is --warmup-cycles blocks)
  --queue-items N           queue-throughput, queue-sharded: measured items (default 1000;
                            --warmup items go through first, unmeasured)
  --queue-shards N          queue-sharded: shards of the queue (default 4)
  --instances N             discovery-query: registered instances (default 1000)
  --lock-paths N            many-locks: distinct lock paths, each taken once (default 10000)
  --queries N               discovery-query: measured queries without a cache (default 10)
  --query-warmup N          discovery-query: unmeasured queries first, per line (default 3)
  --cache-queries N         discovery-query: measured reads of a ServiceCache (default 500)
  --label TEXT              copied into every JSON line (default \"\")
  --only LINES              print only these lines (`impl` names, comma-separated; `curator`
                            for Curator's, which runs only when named); the other lines a
                            workload runs through contenders (locks, counters, discovery) run
                            two cycles each, so that a profiler or a CPU count sees one line
                            alone
  --rounds N                run each workload's lines N times in turn (raw, zk-recipes,
                            Curator, raw, ...) and print the median ratio (default 1)
  --curator MODE            also run each workload through Apache Curator (java, javac and the
                            Curator jars): auto (default: when installed, else a skipped line),
                            off, require (fail when not installed)
  --curator-warmup-solo N   Curator, JIT warm-up: uncontended cycles per session first, each
                            contender on a lock of its own (default 8000)
  --curator-warmup-contended N
                            Curator, JIT warm-up: then cycles per session on the measured lock
                            (default 300)
  --curator-warmup-ms MS    Curator, JIT warm-up: then more of them until this long has passed
                            since the warm-up began (default 0)
  --server-warmup-ms MS     with the bench's own TestingServer: unmeasured lock traffic for
                            this long before the first line, for the server's JIT (default 5000)
  --count-ops               clients go through a counting proxy; print requests per op by
                            kind on stderr (adds a hop: for profiling, not for timing)";

// ---------------------------------------------------------------------------------------------
// Options

/// `--curator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CuratorMode {
    /// Curator lines when java, javac and the Curator jars are there; skipped lines otherwise.
    Auto,
    Off,
    /// Missing java, javac or Curator jars fail the run.
    Require,
}

#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) connect: Option<String>,
    pub(crate) ensemble: Option<usize>,
    pub(crate) fsync: bool,
    pub(crate) server_properties: Vec<(String, String)>,
    pub(crate) workloads: Vec<Workload>,
    pub(crate) iters: usize,
    pub(crate) warmup: usize,
    pub(crate) clients: usize,
    pub(crate) cycles: usize,
    pub(crate) warmup_cycles: usize,
    pub(crate) hold: Duration,
    pub(crate) sem_hold: Duration,
    pub(crate) rw_hold: Duration,
    pub(crate) max_leases: usize,
    pub(crate) read_pct: u32,
    pub(crate) seed: u64,
    pub(crate) cache_nodes: usize,
    pub(crate) event_nodes: usize,
    pub(crate) event_passes: usize,
    pub(crate) event_batch: usize,
    pub(crate) retries: u32,
    pub(crate) retry_sleep: Duration,
    pub(crate) cache_factor: u32,
    pub(crate) cached_values: usize,
    pub(crate) queue_items: usize,
    /// queue-sharded: the shards made before each line (the sharders add none).
    pub(crate) queue_shards: usize,
    pub(crate) instances: usize,
    /// many-locks: distinct lock paths, each acquired and released once.
    pub(crate) lock_paths: usize,
    pub(crate) queries: usize,
    pub(crate) query_warmup: usize,
    pub(crate) cache_queries: usize,
    pub(crate) label: String,
    /// `--only`: the lines measured and printed; `None`: every line.
    pub(crate) only: Option<Vec<String>>,
    pub(crate) rounds: usize,
    pub(crate) count_ops: bool,
    pub(crate) curator: CuratorMode,
    pub(crate) curator_warmup: Duration,
    pub(crate) curator_warmup_solo: usize,
    pub(crate) curator_warmup_contended: usize,
    pub(crate) server_warmup: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            connect: None,
            ensemble: None,
            fsync: false,
            server_properties: Vec::new(),
            workloads: Workload::ALL.to_vec(),
            iters: 3000,
            warmup: 1000,
            clients: 4,
            cycles: 400,
            warmup_cycles: 20,
            hold: Duration::ZERO,
            sem_hold: Duration::ZERO,
            rw_hold: Duration::ZERO,
            max_leases: 3,
            read_pct: 80,
            seed: 1,
            cache_nodes: 10_000,
            event_nodes: 1_000,
            event_passes: 10,
            event_batch: 1,
            retries: 10,
            retry_sleep: Duration::from_millis(1),
            cache_factor: 100,
            cached_values: 20_000,
            queue_items: 1_000,
            queue_shards: 4,
            instances: 1_000,
            lock_paths: 10_000,
            queries: 10,
            query_warmup: 3,
            cache_queries: 500,
            label: String::new(),
            only: None,
            rounds: 1,
            count_ops: false,
            curator: CuratorMode::Auto,
            curator_warmup: Duration::ZERO,
            curator_warmup_solo: 8000,
            curator_warmup_contended: 300,
            server_warmup: Duration::from_secs(5),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Workload {
    MutexUncontended,
    MutexContended,
    Semaphore,
    RwLock,
    ManyWaiters,
    LeaderHandoff,
    CacheLoad,
    CacheEvents,
    CounterIncrement,
    SharedCountCas,
    QueueThroughput,
    DiscoveryRegister,
    DiscoveryQuery,
    ManyLocks,
    CachedCounter,
    QueueSharded,
    TypedCas,
}

impl Workload {
    pub(crate) const ALL: [Workload; 17] = [
        Workload::MutexUncontended,
        Workload::MutexContended,
        Workload::Semaphore,
        Workload::RwLock,
        Workload::ManyWaiters,
        Workload::LeaderHandoff,
        Workload::CacheLoad,
        Workload::CacheEvents,
        Workload::CounterIncrement,
        Workload::SharedCountCas,
        Workload::QueueThroughput,
        Workload::DiscoveryRegister,
        Workload::DiscoveryQuery,
        Workload::ManyLocks,
        Workload::CachedCounter,
        Workload::QueueSharded,
        Workload::TypedCas,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Workload::MutexUncontended => "mutex-uncontended",
            Workload::MutexContended => "mutex-contended",
            Workload::Semaphore => "semaphore",
            Workload::RwLock => "rwlock",
            Workload::ManyWaiters => "many-waiters",
            Workload::LeaderHandoff => "leader-handoff",
            Workload::CacheLoad => "cache-load",
            Workload::CacheEvents => "cache-events",
            Workload::CounterIncrement => "counter-increment",
            Workload::SharedCountCas => "shared-count-cas",
            Workload::QueueThroughput => "queue-throughput",
            Workload::DiscoveryRegister => "discovery-register",
            Workload::DiscoveryQuery => "discovery-query",
            Workload::ManyLocks => "many-locks",
            Workload::CachedCounter => "cached-counter",
            Workload::QueueSharded => "queue-sharded",
            Workload::TypedCas => "typed-cas",
        }
    }

    fn parse(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }
}

impl Options {
    /// Whether `implementation`'s line is measured and printed (see `--only`).
    pub(crate) fn measures(&self, implementation: &str) -> bool {
        match &self.only {
            None => true,
            Some(only) => only.iter().any(|line| line == implementation),
        }
    }
}

pub(crate) fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Option<Options>, String> {
    let mut options = Options::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = split_flag(&arg);
        match flag.as_str() {
            // `cargo bench` appends `--bench` to a harness-less benchmark's arguments.
            "--bench" => continue,
            "-h" | "--help" => return Ok(None),
            "--count-ops" => {
                options.count_ops = true;
                continue;
            }
            "--fsync" => {
                options.fsync = true;
                continue;
            }
            _ => {}
        }
        let mut value = || inline.clone().or_else(|| args.next()).ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--connect" => options.connect = Some(value()?),
            "--ensemble" => options.ensemble = Some(number(&flag, &value()?)?),
            "--server-property" => {
                let pair = value()?;
                let (key, value) =
                    pair.split_once('=').ok_or_else(|| format!("{flag}: expected KEY=VALUE, got {pair:?}"))?;
                options.server_properties.push((key.to_owned(), value.to_owned()));
            }
            "--workloads" => {
                let list = value()?;
                options.workloads = if list == "all" {
                    Workload::ALL.to_vec()
                } else {
                    list.split(',')
                        .filter(|w| !w.is_empty())
                        .map(|w| Workload::parse(w.trim()).ok_or_else(|| format!("unknown workload {w:?}")))
                        .collect::<Result<_, _>>()?
                };
            }
            "--iters" => options.iters = number(&flag, &value()?)?,
            "--warmup" => options.warmup = number(&flag, &value()?)?,
            "--clients" => options.clients = number(&flag, &value()?)?,
            "--cycles" => options.cycles = number(&flag, &value()?)?,
            "--warmup-cycles" => options.warmup_cycles = number(&flag, &value()?)?,
            "--hold-ms" => options.hold = Duration::from_millis(number(&flag, &value()?)?),
            "--sem-hold-ms" => options.sem_hold = Duration::from_millis(number(&flag, &value()?)?),
            "--rw-hold-ms" => options.rw_hold = Duration::from_millis(number(&flag, &value()?)?),
            "--max-leases" => options.max_leases = number(&flag, &value()?)?,
            "--read-pct" => options.read_pct = number(&flag, &value()?)?,
            "--seed" => options.seed = number(&flag, &value()?)?,
            "--cache-nodes" => options.cache_nodes = number(&flag, &value()?)?,
            "--event-nodes" => options.event_nodes = number(&flag, &value()?)?,
            "--event-passes" => options.event_passes = number(&flag, &value()?)?,
            "--event-batch" => options.event_batch = number(&flag, &value()?)?,
            "--retries" => options.retries = number(&flag, &value()?)?,
            "--retry-sleep-ms" => options.retry_sleep = Duration::from_millis(number(&flag, &value()?)?),
            "--cache-factor" => options.cache_factor = number(&flag, &value()?)?,
            "--cached-values" => options.cached_values = number(&flag, &value()?)?,
            "--queue-items" => options.queue_items = number(&flag, &value()?)?,
            "--queue-shards" => options.queue_shards = number(&flag, &value()?)?,
            "--instances" => options.instances = number(&flag, &value()?)?,
            "--lock-paths" => options.lock_paths = number(&flag, &value()?)?,
            "--queries" => options.queries = number(&flag, &value()?)?,
            "--query-warmup" => options.query_warmup = number(&flag, &value()?)?,
            "--cache-queries" => options.cache_queries = number(&flag, &value()?)?,
            "--label" => options.label = value()?,
            "--only" => options.only = Some(value()?.split(',').map(str::to_owned).collect()),
            "--rounds" => options.rounds = number(&flag, &value()?)?,
            "--curator" => {
                options.curator = match value()?.as_str() {
                    "auto" => CuratorMode::Auto,
                    "off" => CuratorMode::Off,
                    "require" => CuratorMode::Require,
                    other => return Err(format!("--curator: expected auto, off or require, got {other:?}")),
                }
            }
            "--curator-warmup-solo" => options.curator_warmup_solo = number(&flag, &value()?)?,
            "--curator-warmup-contended" => options.curator_warmup_contended = number(&flag, &value()?)?,
            "--curator-warmup-ms" => options.curator_warmup = Duration::from_millis(number(&flag, &value()?)?),
            "--server-warmup-ms" => options.server_warmup = Duration::from_millis(number(&flag, &value()?)?),
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    if options.iters == 0
        || options.cycles == 0
        || options.clients == 0
        || options.max_leases == 0
        || options.rounds == 0
        || options.cache_nodes == 0
        || options.event_nodes == 0
        || options.event_passes == 0
        || options.event_batch == 0
        || options.queue_items == 0
        || options.queue_shards == 0
        || options.instances == 0
        || options.lock_paths == 0
        || options.queries == 0
        || options.cache_queries == 0
        || options.retry_sleep.is_zero()
        || options.cache_factor == 0
        || options.cached_values == 0
    {
        return Err("--iters, --cycles, --clients, --max-leases, --rounds, --cache-nodes, --event-nodes, \
                    --event-passes, --event-batch, --queue-items, --queue-shards, --instances, --lock-paths, --queries, --cache-queries, \
                    --retry-sleep-ms, --cache-factor and --cached-values must be at least 1"
            .into());
    }
    if options.ensemble == Some(0) {
        return Err("--ensemble must be at least 1".into());
    }
    if options.connect.is_some()
        && (options.ensemble.is_some() || options.fsync || !options.server_properties.is_empty())
    {
        return Err(
            "--ensemble, --fsync and --server-property shape the servers the bench starts; not with --connect".into()
        );
    }
    if options.read_pct > 100 {
        return Err("--read-pct must be at most 100".into());
    }
    Ok(Some(options))
}
