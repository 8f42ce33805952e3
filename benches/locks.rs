//! Side-by-side lock benchmarks (DESIGN.md section 7): each workload runs through zk-recipes,
//! through a "raw floor" (the same cycle done with plain zookeeper-client calls) and through
//! Apache Curator 5.x (`interop/CuratorBench.java`, in a JVM) in the same run, against the
//! same server, and prints one JSON line per workload and implementation on stdout. Progress
//! goes to stderr.
//!
//! ```text
//! cargo bench --bench locks --features testing -- --workloads mutex-uncontended,mutex-contended
//! ```
//!
//! See `benches/README.md` for the options, what each workload and `impl` label measures, and
//! how to read the request counts printed on stderr.

#[path = "../interop/classpath.rs"]
mod classpath;
use classpath::curator_classpath;

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Barrier;
use zk_recipes::zk::{self, Acls, CreateMode};
use zk_recipes::{Framework, InterProcessMutex, InterProcessSemaphore};

/// An acquire that takes longer than this is reported as a stall (the run fails, exit code 1).
const STALL: Duration = Duration::from_secs(60);

/// Every run works under `BENCH_ROOT/<pid>-<millis>`, deleted at the end.
const BENCH_ROOT: &str = "/zk-recipes-bench";

/// many-waiters: contending tasks per session.
const WAITERS_PER_SESSION: usize = 8;

const USAGE: &str = "\
usage: locks [options]
  --connect HOST:PORT[,..]  ZooKeeper to use (default: start a TestingServer)
  --workloads LIST          comma-separated: mutex-uncontended, mutex-contended, semaphore,
                            rwlock, many-waiters, or all (default: all)
  --iters N                 mutex-uncontended measured cycles (default 3000)
  --warmup N                mutex-uncontended warmup cycles (default 1000)
  --clients N               sessions for the contended workloads (default 4)
  --cycles N                measured acquisitions per client (default 400)
  --warmup-cycles N         warmup acquisitions per client (default 20)
  --hold-ms MS              mutex hold time (default 0)
  --sem-hold-ms MS          semaphore lease hold time (default 0)
  --rw-hold-ms MS           read-write lock hold time (default 0)
  --max-leases N            semaphore leases (default 3)
  --read-pct P              rwlock: percentage of read acquisitions (default 80)
  --seed N                  rwlock: seed of the read/write choice (default 1)
  --label TEXT              copied into every JSON line (default \"\")
  --curator MODE            also run each workload through Apache Curator (java, javac and the
                            Curator jars): auto (default: when installed, else a skipped line),
                            off, require (fail when not installed)
  --curator-warmup-ms MS    Curator: unmeasured cycles for this long first, for the JIT
                            (default 5000)
  --server-warmup-ms MS     with the bench's own TestingServer: unmeasured lock traffic for
                            this long before the first line, for the server's JIT (default 5000)
  --count-ops               clients go through a counting proxy; print requests per op by
                            kind on stderr (adds a hop: for profiling, not for timing)";

// ---------------------------------------------------------------------------------------------
// Options

#[derive(Debug, Clone)]
struct Options {
    connect: Option<String>,
    workloads: Vec<Workload>,
    iters: usize,
    warmup: usize,
    clients: usize,
    cycles: usize,
    warmup_cycles: usize,
    hold: Duration,
    sem_hold: Duration,
    rw_hold: Duration,
    max_leases: usize,
    read_pct: u32,
    seed: u64,
    label: String,
    count_ops: bool,
    curator: CuratorMode,
    curator_warmup: Duration,
    server_warmup: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            connect: None,
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
            label: String::new(),
            count_ops: false,
            curator: CuratorMode::Auto,
            curator_warmup: Duration::from_secs(5),
            server_warmup: Duration::from_secs(5),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    MutexUncontended,
    MutexContended,
    Semaphore,
    RwLock,
    ManyWaiters,
}

impl Workload {
    const ALL: [Workload; 5] = [
        Workload::MutexUncontended,
        Workload::MutexContended,
        Workload::Semaphore,
        Workload::RwLock,
        Workload::ManyWaiters,
    ];

    fn name(self) -> &'static str {
        match self {
            Workload::MutexUncontended => "mutex-uncontended",
            Workload::MutexContended => "mutex-contended",
            Workload::Semaphore => "semaphore",
            Workload::RwLock => "rwlock",
            Workload::ManyWaiters => "many-waiters",
        }
    }

    fn parse(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Option<Options>, String> {
    let mut options = Options::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag.to_owned(), Some(value.to_owned())),
            _ => (arg.clone(), None),
        };
        match flag.as_str() {
            // `cargo bench` appends `--bench` to a harness-less benchmark's arguments.
            "--bench" => continue,
            "-h" | "--help" => return Ok(None),
            "--count-ops" => {
                options.count_ops = true;
                continue;
            }
            _ => {}
        }
        let mut value = || inline.clone().or_else(|| args.next()).ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--connect" => options.connect = Some(value()?),
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
            "--label" => options.label = value()?,
            "--curator" => {
                options.curator = match value()?.as_str() {
                    "auto" => CuratorMode::Auto,
                    "off" => CuratorMode::Off,
                    "require" => CuratorMode::Require,
                    other => return Err(format!("--curator: expected auto, off or require, got {other:?}")),
                }
            }
            "--curator-warmup-ms" => options.curator_warmup = Duration::from_millis(number(&flag, &value()?)?),
            "--server-warmup-ms" => options.server_warmup = Duration::from_millis(number(&flag, &value()?)?),
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    if options.iters == 0 || options.cycles == 0 || options.clients == 0 || options.max_leases == 0 {
        return Err("--iters, --cycles, --clients and --max-leases must be at least 1".into());
    }
    if options.read_pct > 100 {
        return Err("--read-pct must be at most 100".into());
    }
    Ok(Some(options))
}

fn number<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T, String> {
    value.parse().map_err(|_| format!("{flag}: not a valid number: {value:?}"))
}

// ---------------------------------------------------------------------------------------------
// Errors, exclusion check, results

#[derive(Debug)]
enum BenchError {
    /// More holders at once than the recipe admits.
    Violation(String),
    Failed(String),
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BenchError::Violation(what) => write!(f, "EXCLUSION VIOLATED: {what}"),
            BenchError::Failed(what) => f.write_str(what),
        }
    }
}

impl From<zk_recipes::Error> for BenchError {
    fn from(e: zk_recipes::Error) -> Self {
        BenchError::Failed(format!("zk-recipes: {e}"))
    }
}

impl From<zk::Error> for BenchError {
    fn from(e: zk::Error) -> Self {
        BenchError::Failed(format!("zookeeper-client: {e}"))
    }
}

type BenchResult<T> = Result<T, BenchError>;

/// Counts the current holders of one lock (shared by every contender of a run) and records a
/// violation the moment more than `max` hold at once.
#[derive(Debug)]
struct Exclusion {
    max: usize,
    holders: AtomicUsize,
    violated: AtomicBool,
}

impl Exclusion {
    fn new(max: usize) -> Arc<Self> {
        Arc::new(Self { max, holders: AtomicUsize::new(0), violated: AtomicBool::new(false) })
    }

    fn enter(&self) -> BenchResult<()> {
        let before = self.holders.fetch_add(1, Ordering::SeqCst);
        if before >= self.max {
            self.violated.store(true, Ordering::SeqCst);
            return Err(BenchError::Violation(format!("{} holders at once, at most {} allowed", before + 1, self.max)));
        }
        Ok(())
    }

    fn exit(&self) {
        self.holders.fetch_sub(1, Ordering::SeqCst);
    }

    /// Enter, hold for `hold`, exit: the critical section of every workload.
    ///
    /// Even with no hold, the section yields to the scheduler once (microseconds, not a
    /// sleep): that lets the other contenders' tasks run while we count as a holder, so a lock
    /// that admits two holders is caught within a few cycles rather than by luck.
    async fn critical_section(&self, hold: Duration) -> BenchResult<()> {
        self.enter()?;
        tokio::task::yield_now().await;
        if !hold.is_zero() {
            tokio::time::sleep(hold).await;
        }
        self.exit();
        Ok(())
    }
}

/// One measured run of one implementation of one workload.
struct Measured {
    implementation: &'static str,
    workload: Workload,
    clients: usize,
    secs: f64,
    /// Latency samples (cycle or acquire, per workload), one per op.
    samples: Vec<Duration>,
    /// Requests the server received per op during the measured part, when it could be read.
    requests_per_op: Option<f64>,
    /// With `--count-ops`: requests and watch events per op, by kind.
    breakdown: Option<String>,
}

impl Measured {
    fn ops_per_sec(&self) -> f64 {
        if self.secs > 0.0 {
            self.samples.len() as f64 / self.secs
        } else {
            0.0
        }
    }

    fn json(&self, label: &str) -> String {
        let mut sorted = self.samples.clone();
        sorted.sort_unstable();
        let ops = sorted.len();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let ops_per_sec = self.ops_per_sec();
        format!(
            "{{\"impl\":{},\"workload\":{},\"ops\":{},\"secs\":{:.3},\"ops_per_sec\":{:.1},\"p50_ms\":{:.3},\
             \"p99_ms\":{:.3},\"clients\":{},\"label\":{}}}",
            json_string(self.implementation),
            json_string(self.workload.name()),
            ops,
            self.secs,
            ops_per_sec,
            ms(nearest_rank(&sorted, 50.0)),
            ms(nearest_rank(&sorted, 99.0)),
            self.clients,
            json_string(label),
        )
    }
}

/// The nearest-rank percentile of sorted samples: the smallest sample with at least `p`
/// percent of the samples at or below it.
fn nearest_rank(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

// ---------------------------------------------------------------------------------------------
// Server-side request counting (ZooKeeper's `srvr` four-letter word, enabled by default)

/// The number of packets the server has received so far (`Received:` of `srvr`), which
/// counts requests of every session (pings included). `None` when the server does not answer.
fn server_received(connect: &str) -> Option<u64> {
    let host = connect.split(',').next()?.split('/').next()?;
    let addr = std::net::ToSocketAddrs::to_socket_addrs(host).ok()?.next()?;
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(b"srvr").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    text.lines().find_map(|line| line.strip_prefix("Received:")).and_then(|n| n.trim().parse().ok())
}

// ---------------------------------------------------------------------------------------------
// Request counting by kind (`--count-ops`): a pass-through proxy that reads the frames

/// Counts what crosses a [`CountingProxy`], by kind: requests by opcode (`getData+watch` when
/// the request sets a watch), `watch-event` for notifications from the server.
#[derive(Debug, Default)]
struct OpCounts(std::sync::Mutex<std::collections::BTreeMap<&'static str, u64>>);

impl OpCounts {
    fn add(&self, kind: &'static str) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()).entry(kind).or_default() += 1;
    }

    fn snapshot(&self) -> std::collections::BTreeMap<&'static str, u64> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The kind of a client request frame (the bytes after the length prefix: xid, opcode, body).
fn request_kind(frame: &[u8]) -> &'static str {
    let int = |at: usize| frame.get(at..at + 4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let Some(opcode) = int(4) else { return "short-frame" };
    // getData, exists and getChildren end in a `watch` flag.
    let watch = frame.last() == Some(&1);
    match opcode {
        1 => "create",
        2 => "delete",
        3 if watch => "exists+watch",
        3 => "exists",
        4 if watch => "getData+watch",
        4 => "getData",
        5 => "setData",
        8 | 12 if watch => "getChildren+watch",
        8 | 12 => "getChildren",
        9 => "sync",
        11 => "ping",
        13 => "check",
        14 => "multi",
        15 => "create2",
        17 => "checkWatches",
        18 => "removeWatches",
        19 => "createContainer",
        21 => "createTtl",
        101 | 105 => "setWatches",
        106 => "addWatch",
        -11 => "closeSession",
        _ => "other",
    }
}

/// A loopback TCP proxy in front of one ZooKeeper server that counts the requests going up
/// and the watch events coming down. It adds a hop, so runs through it are for counting, not
/// for timing.
struct CountingProxy {
    address: String,
    counts: Arc<OpCounts>,
    task: tokio::task::JoinHandle<()>,
}

impl CountingProxy {
    async fn start(upstream: &str) -> BenchResult<Self> {
        let failed = |e: std::io::Error| BenchError::Failed(format!("counting proxy: {e}"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(failed)?;
        let address = listener.local_addr().map_err(failed)?.to_string();
        let counts = Arc::new(OpCounts::default());
        let (upstream, shared) = (upstream.to_owned(), counts.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (upstream, counts) = (upstream.clone(), shared.clone());
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else { return };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    let up = Self::pump(client_read, server_write, counts.clone(), true);
                    let down = Self::pump(server_read, client_write, counts, false);
                    let _ = tokio::join!(up, down);
                });
            }
        });
        Ok(Self { address, counts, task })
    }

    /// Copies length-prefixed frames from `from` to `to`, counting them. The first frame in
    /// each direction is the session handshake.
    async fn pump(
        mut from: tokio::net::tcp::OwnedReadHalf,
        mut to: tokio::net::tcp::OwnedWriteHalf,
        counts: Arc<OpCounts>,
        requests: bool,
    ) -> std::io::Result<()> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut first = true;
        let mut buffer = Vec::new();
        loop {
            let mut length = [0u8; 4];
            if from.read_exact(&mut length).await.is_err() {
                return to.shutdown().await;
            }
            let n = usize::try_from(i32::from_be_bytes(length)).unwrap_or(0);
            buffer.clear();
            buffer.extend_from_slice(&length);
            buffer.resize(4 + n, 0);
            from.read_exact(&mut buffer[4..]).await?;
            let frame = &buffer[4..];
            if first {
                first = false;
            } else if requests {
                counts.add(request_kind(frame));
            } else if frame.get(..4) == Some(&(-1i32).to_be_bytes()[..]) {
                counts.add("watch-event");
            }
            to.write_all(&buffer).await?;
        }
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Per-op counts between two snapshots, as `kind n.nn` pairs.
fn per_op(
    before: &std::collections::BTreeMap<&'static str, u64>,
    after: &std::collections::BTreeMap<&'static str, u64>,
    ops: usize,
) -> String {
    let mut out = String::new();
    for (kind, total) in after {
        let delta = total - before.get(kind).copied().unwrap_or(0);
        if delta > 0 && ops > 0 {
            let _ = write!(out, "{}{kind} {:.2}", if out.is_empty() { "" } else { ", " }, delta as f64 / ops as f64);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Contenders: one session's way of taking and giving back the lock

/// How a zk-recipes mutex guard is given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReleaseStyle {
    /// `guard.release().await` (reports errors; what the docs show).
    Await,
    /// `drop(guard)`: the delete goes out on the session at once, the reply goes to the reaper.
    Drop,
}

/// One contender (one session) of a workload, through one implementation.
enum Contender {
    Mutex {
        framework: Framework,
        mutex: InterProcessMutex,
        release: ReleaseStyle,
    },
    Semaphore {
        framework: Framework,
        semaphore: InterProcessSemaphore,
    },
    RawMutex(RawMutex),
    /// create, then delete; with `listed`, a getChildren is sent right behind the create.
    RawCreateDelete {
        raw: RawMutex,
        listed: bool,
    },
    /// The previous delete, the create and a getChildren back to back: one round trip.
    RawMutexPipelined {
        raw: RawMutex,
        pending_delete: Option<String>,
    },
    RawSemaphore(RawSemaphore),
}

/// What one cycle took.
struct CycleTimes {
    acquire: Duration,
    cycle: Duration,
}

impl Contender {
    /// Acquire, run the critical section, release.
    async fn cycle(&mut self, exclusion: &Exclusion, hold: Duration) -> BenchResult<CycleTimes> {
        let started = Instant::now();
        match self {
            Contender::Mutex { mutex, release, .. } => {
                let guard = stall_guard(mutex.acquire()).await??;
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                match release {
                    ReleaseStyle::Await => guard.release().await?,
                    ReleaseStyle::Drop => drop(guard),
                }
                Ok(CycleTimes { acquire, cycle: started.elapsed() })
            }
            Contender::Semaphore { semaphore, .. } => {
                let lease = stall_guard(semaphore.acquire()).await??;
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                lease.release().await?;
                Ok(CycleTimes { acquire, cycle: started.elapsed() })
            }
            Contender::RawMutex(raw) => {
                let node = stall_guard(raw.acquire()).await??;
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                raw.client.delete(&node, None).await?;
                Ok(CycleTimes { acquire, cycle: started.elapsed() })
            }
            Contender::RawCreateDelete { raw, listed } => {
                let node = if *listed { raw.create_listed().await? } else { raw.create().await? };
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                raw.client.delete(&node, None).await?;
                Ok(CycleTimes { acquire, cycle: started.elapsed() })
            }
            Contender::RawMutexPipelined { raw, pending_delete } => {
                // The previous cycle's delete goes out right before this cycle's create and
                // getChildren, and the replies are awaited together: one round trip per cycle.
                let node = match pending_delete.take() {
                    Some(previous) => {
                        let delete = raw.client.delete(&previous, None);
                        let (deleted, created) = futures::join!(delete, raw.create_listed());
                        deleted?;
                        created?
                    }
                    None => raw.create_listed().await?,
                };
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                *pending_delete = Some(node);
                Ok(CycleTimes { acquire, cycle: started.elapsed() })
            }
            Contender::RawSemaphore(raw) => {
                let lease = stall_guard(raw.acquire()).await??;
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                raw.client.delete(&lease, None).await?;
                Ok(CycleTimes { acquire, cycle: started.elapsed() })
            }
        }
    }

    async fn close(self) -> BenchResult<()> {
        match self {
            Contender::Mutex { framework, .. } | Contender::Semaphore { framework, .. } => framework.close().await,
            Contender::RawMutexPipelined { raw, pending_delete } => {
                if let Some(node) = pending_delete {
                    raw.client.delete(&node, None).await?;
                }
            }
            Contender::RawMutex(_) | Contender::RawCreateDelete { .. } | Contender::RawSemaphore(_) => {}
        }
        Ok(())
    }
}

async fn stall_guard<F: std::future::Future>(future: F) -> BenchResult<F::Output> {
    tokio::time::timeout(STALL, future)
        .await
        .map_err(|_| BenchError::Failed(format!("an acquire stalled for more than {STALL:?}")))
}

fn ephemeral_sequential() -> zk::CreateOptions<'static> {
    CreateMode::EphemeralSequential.with_acls(Acls::anyone_all())
}

/// Curator's mutex algorithm, naively, with plain zookeeper-client calls: create an
/// ephemeral-sequential `lock-` node, list the children, hold if first, otherwise watch the
/// predecessor (getData watch), and list again when it changes. Every call is awaited before
/// the next is sent (no pipelining).
struct RawMutex {
    client: zk::Client,
    dir: String,
}

impl RawMutex {
    async fn create(&self) -> BenchResult<String> {
        let prefix = format!("{}/lock-", self.dir);
        let (_, sequence) = self.client.create(&prefix, &[], &ephemeral_sequential()).await?;
        Ok(format!("{prefix}{sequence}"))
    }

    /// The create with a getChildren sent right behind it (one round trip), as an uncontended
    /// acquire that must see the children to know it is first. Fails if it is not first.
    async fn create_listed(&self) -> BenchResult<String> {
        let prefix = format!("{}/lock-", self.dir);
        let options = ephemeral_sequential();
        let create = self.client.create(&prefix, &[], &options);
        let list = self.client.list_children(&self.dir);
        let (created, listed) = futures::join!(create, list);
        let node = format!("{prefix}{}", created?.1);
        let first = listed?.into_iter().min();
        if first.as_deref() != Some(&node[self.dir.len() + 1..]) {
            return Err(BenchError::Failed(format!("raw floor: {node} is not first; is the path in use?")));
        }
        Ok(node)
    }

    /// Returns the full path of the held node.
    async fn acquire(&self) -> BenchResult<String> {
        let node = self.create().await?;
        wait_until_first(&self.client, &self.dir, &node).await?;
        Ok(node)
    }
}

/// The wait loop of Curator's `LockInternals` for a mutex whose children are all `lock-<seq>`.
async fn wait_until_first(client: &zk::Client, dir: &str, node: &str) -> BenchResult<()> {
    let ours = &node[dir.len() + 1..];
    loop {
        let mut children = client.list_children(dir).await?;
        children.sort_unstable();
        let Some(index) = children.iter().position(|c| c == ours) else {
            return Err(BenchError::Failed(format!("raw floor: our node {node} vanished")));
        };
        if index == 0 {
            return Ok(());
        }
        let predecessor = format!("{dir}/{}", children[index - 1]);
        match client.get_and_watch_data(&predecessor).await {
            Ok((_, _, watcher)) => {
                watcher.changed().await;
            }
            Err(zk::Error::NoNode) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Curator's `InterProcessSemaphoreV2` algorithm with plain calls: take the internal mutex
/// (`<path>/locks`, as [`RawMutex`]), create the lease node (`<path>/leases/lease-`), list the
/// leases with a children watch until ours is among the first `max` (waiting for the watch
/// otherwise), release the internal mutex; the lease is released by deleting its node.
struct RawSemaphore {
    client: zk::Client,
    locks: RawMutex,
    leases: String,
    max: usize,
}

impl RawSemaphore {
    async fn acquire(&self) -> BenchResult<String> {
        let lock = self.locks.acquire().await?;
        let prefix = format!("{}/lease-", self.leases);
        let (_, sequence) = self.client.create(&prefix, &[], &ephemeral_sequential()).await?;
        let lease = format!("{prefix}{sequence}");
        let ours = &lease[self.leases.len() + 1..];
        loop {
            let (children, watcher) = self.client.list_and_watch_children(&self.leases).await?;
            if !children.iter().any(|c| c == ours) {
                return Err(BenchError::Failed(format!("raw floor: our lease {lease} vanished")));
            }
            if children.len() <= self.max {
                break;
            }
            watcher.changed().await;
        }
        self.client.delete(&lock, None).await?;
        Ok(lease)
    }
}

// ---------------------------------------------------------------------------------------------
// Running workloads

/// Which latency a workload reports.
#[derive(Debug, Clone, Copy)]
enum Latency {
    Cycle,
    Acquire,
}

struct Plan {
    workload: Workload,
    implementation: &'static str,
    warmup: usize,
    cycles: usize,
    hold: Duration,
    latency: Latency,
    max_holders: usize,
    /// Sessions behind the contenders (the `clients` field); contenders may share one.
    sessions: usize,
}

/// Runs `contenders` (one task each) through `plan.warmup` unmeasured cycles, then, from a
/// common start, through `plan.cycles` measured cycles each.
async fn run(env: &Env, plan: Plan, contenders: Vec<Contender>) -> BenchResult<Measured> {
    let tasks_count = contenders.len();
    let exclusion = Exclusion::new(plan.max_holders);
    // Everyone warms up, then waits at `warm` while the server's counters are read, then
    // starts at `go`, even after a failure, so that no one is left waiting.
    let warm = Arc::new(Barrier::new(tasks_count + 1));
    let go = Arc::new(Barrier::new(tasks_count + 1));
    let mut tasks = Vec::with_capacity(tasks_count);
    for mut contender in contenders {
        let (exclusion, warm, go) = (exclusion.clone(), warm.clone(), go.clone());
        let (warmup, cycles, hold, latency) = (plan.warmup, plan.cycles, plan.hold, plan.latency);
        tasks.push(tokio::spawn(async move {
            let mut outcome: BenchResult<Vec<Duration>> = Ok(Vec::with_capacity(cycles));
            for _ in 0..warmup {
                if let Err(e) = contender.cycle(&exclusion, hold).await {
                    outcome = Err(e);
                    break;
                }
            }
            warm.wait().await;
            go.wait().await;
            if let Ok(samples) = &mut outcome {
                for _ in 0..cycles {
                    match contender.cycle(&exclusion, hold).await {
                        Ok(times) => samples.push(match latency {
                            Latency::Cycle => times.cycle,
                            Latency::Acquire => times.acquire,
                        }),
                        Err(e) => {
                            outcome = Err(e);
                            break;
                        }
                    }
                }
            }
            (outcome.map(|samples| (samples, Instant::now())), contender)
        }));
    }
    warm.wait().await;
    let received_before = server_received(&env.server);
    let counts_before = env.proxy.as_ref().map(|p| p.counts.snapshot());
    go.wait().await;
    let started = Instant::now();
    let mut samples = Vec::with_capacity(tasks_count * plan.cycles);
    let mut last_end = started;
    let mut failure = None;
    let mut finished = Vec::with_capacity(tasks_count);
    for task in tasks {
        match task.await {
            Ok((outcome, contender)) => {
                finished.push(contender);
                match outcome {
                    Ok((mut client_samples, ended)) => {
                        samples.append(&mut client_samples);
                        last_end = last_end.max(ended);
                    }
                    Err(e) => {
                        if failure.is_none() || matches!(e, BenchError::Violation(_)) {
                            failure = Some(e);
                        }
                    }
                }
            }
            Err(e) => failure = failure.or(Some(BenchError::Failed(format!("contender task failed: {e}")))),
        }
    }
    let secs = (last_end - started).as_secs_f64();
    let received_after = server_received(&env.server);
    let counts_after = env.proxy.as_ref().map(|p| p.counts.snapshot());
    for contender in finished {
        if let Err(e) = contender.close().await {
            failure = failure.or(Some(e));
        }
    }
    if exclusion.violated.load(Ordering::SeqCst) {
        return Err(failure.unwrap_or_else(|| BenchError::Violation("exclusion counter".into())));
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let ops = samples.len();
    let requests_per_op = match (received_before, received_after) {
        (Some(before), Some(after)) if ops > 0 => Some(after.saturating_sub(before) as f64 / ops as f64),
        _ => None,
    };
    let breakdown = counts_before.zip(counts_after).map(|(before, after)| per_op(&before, &after, ops));
    Ok(Measured {
        implementation: plan.implementation,
        workload: plan.workload,
        clients: plan.sessions,
        secs,
        samples,
        requests_per_op,
        breakdown,
    })
}

/// Where one benchmark run keeps its nodes, and how to reach the server.
struct Env {
    /// The server (for `srvr`).
    server: String,
    /// What clients connect to: the server, or the counting proxy in front of it.
    connect: String,
    proxy: Option<CountingProxy>,
    /// A fresh root per run, so runs against a shared server do not meet.
    root: String,
    options: Options,
}

impl Env {
    fn dir(&self, workload: Workload, implementation: &str) -> String {
        format!("{}/{}/{}", self.root, workload.name(), implementation)
    }

    async fn framework(&self) -> BenchResult<Framework> {
        Ok(Framework::connect(&self.connect).await?)
    }

    async fn frameworks(&self, n: usize) -> BenchResult<Vec<Framework>> {
        futures::future::try_join_all((0..n).map(|_| self.framework())).await
    }

    async fn raw_client(&self) -> BenchResult<zk::Client> {
        Ok(zk::Client::connect(&self.connect).await?)
    }

    /// A raw client per contender, and `dirs` created as persistent nodes (parents included).
    async fn raw_clients(&self, n: usize, dirs: &[&str]) -> BenchResult<Vec<zk::Client>> {
        let clients = futures::future::try_join_all((0..n).map(|_| self.raw_client())).await?;
        let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
        for dir in dirs {
            clients[0].mkdir(dir, &options).await?;
        }
        Ok(clients)
    }

    async fn mutex_contenders(&self, n: usize, dir: &str, release: ReleaseStyle) -> BenchResult<Vec<Contender>> {
        let mut contenders = Vec::with_capacity(n);
        for framework in self.frameworks(n).await? {
            let mutex = InterProcessMutex::new(&framework, dir)?;
            contenders.push(Contender::Mutex { framework, mutex, release });
        }
        Ok(contenders)
    }

    async fn raw_mutexes(&self, n: usize, dir: &str) -> BenchResult<Vec<RawMutex>> {
        let clients = self.raw_clients(n, &[dir]).await?;
        Ok(clients.into_iter().map(|client| RawMutex { client, dir: dir.to_owned() }).collect())
    }

    /// Deletes a raw floor's persistent directories (children first), best effort.
    async fn remove_tree(&self, dir: &str) {
        let Ok(client) = self.raw_client().await else { return };
        let mut stack = vec![(dir.to_owned(), false)];
        while let Some((node, expanded)) = stack.pop() {
            if expanded {
                let _ = client.delete(&node, None).await;
                continue;
            }
            stack.push((node.clone(), true));
            if let Ok(children) = client.list_children(&node).await {
                stack.extend(children.into_iter().map(|c| (format!("{node}/{c}"), false)));
            }
        }
    }
}

/// Runs zk-recipes mutex and semaphore contention (`--clients` sessions each, no hold) for
/// `duration`, unmeasured, so that a freshly started server's JIT has compiled its hot paths
/// before the first line: otherwise the first lines of a run see a slower server than the later
/// ones (a quarter to a third fewer ops/s in `mutex-uncontended`).
async fn warm_up_server(env: &Env, duration: Duration) -> BenchResult<()> {
    let o = &env.options;
    let dir = format!("{}/server-warmup", env.root);
    let deadline = Instant::now() + duration;
    let mut contenders = env.mutex_contenders(o.clients, &format!("{dir}/mutex"), ReleaseStyle::Await).await?;
    for framework in env.frameworks(o.clients).await? {
        let semaphore = InterProcessSemaphore::new(&framework, &format!("{dir}/semaphore"), o.max_leases)?;
        contenders.push(Contender::Semaphore { framework, semaphore });
    }
    let (mutex, semaphore) = (Exclusion::new(1), Exclusion::new(o.max_leases));
    let tasks: Vec<_> = contenders
        .into_iter()
        .map(|mut contender| {
            let exclusion = if matches!(contender, Contender::Semaphore { .. }) { &semaphore } else { &mutex }.clone();
            tokio::spawn(async move {
                while Instant::now() < deadline {
                    if let Err(e) = contender.cycle(&exclusion, Duration::ZERO).await {
                        return (Err(e), contender);
                    }
                }
                (Ok(()), contender)
            })
        })
        .collect();
    let mut failure = None;
    for task in tasks {
        match task.await {
            Ok((outcome, contender)) => {
                if let Err(e) = outcome.and(contender.close().await) {
                    if failure.is_none() || matches!(e, BenchError::Violation(_)) {
                        failure = Some(e);
                    }
                }
            }
            Err(e) => failure = failure.or(Some(BenchError::Failed(format!("warm-up task failed: {e}")))),
        }
    }
    failure.map_or(Ok(()), Err)
}

/// Runs one workload through every implementation; returns the lines' data.
async fn run_workload(env: &Env, workload: Workload) -> BenchResult<Vec<Measured>> {
    let o = &env.options;
    let mut results = Vec::new();
    match workload {
        Workload::MutexUncontended => {
            let plan = |implementation| Plan {
                workload,
                implementation,
                warmup: o.warmup,
                cycles: o.iters,
                hold: o.hold,
                latency: Latency::Cycle,
                max_holders: 1,
                sessions: 1,
            };
            for (implementation, listed) in [("raw-floor", false), ("raw-floor-listed", true)] {
                let dir = env.dir(workload, implementation);
                let raw = env.raw_mutexes(1, &dir).await?;
                let contenders = raw.into_iter().map(|raw| Contender::RawCreateDelete { raw, listed }).collect();
                results.push(run(env, plan(implementation), contenders).await?);
                env.remove_tree(&dir).await;
            }

            let dir = env.dir(workload, "raw-pipelined");
            let raw = env.raw_mutexes(1, &dir).await?;
            let contenders = raw.into_iter().map(|raw| Contender::RawMutexPipelined { raw, pending_delete: None });
            results.push(run(env, plan("raw-floor-pipelined"), contenders.collect()).await?);
            env.remove_tree(&dir).await;

            let dir = env.dir(workload, "zk-recipes");
            let contenders = env.mutex_contenders(1, &dir, ReleaseStyle::Await).await?;
            results.push(run(env, plan("zk-recipes"), contenders).await?);

            let dir = env.dir(workload, "zk-recipes-drop");
            let contenders = env.mutex_contenders(1, &dir, ReleaseStyle::Drop).await?;
            results.push(run(env, plan("zk-recipes-drop"), contenders).await?);
        }
        Workload::MutexContended => {
            let plan = |implementation| Plan {
                workload,
                implementation,
                warmup: o.warmup_cycles,
                cycles: o.cycles,
                hold: o.hold,
                latency: Latency::Acquire,
                max_holders: 1,
                sessions: o.clients,
            };
            let dir = env.dir(workload, "raw");
            let raw = env.raw_mutexes(o.clients, &dir).await?;
            results.push(run(env, plan("raw-floor"), raw.into_iter().map(Contender::RawMutex).collect()).await?);
            env.remove_tree(&dir).await;

            let dir = env.dir(workload, "zk-recipes");
            let contenders = env.mutex_contenders(o.clients, &dir, ReleaseStyle::Await).await?;
            results.push(run(env, plan("zk-recipes"), contenders).await?);
        }
        Workload::Semaphore => {
            let plan = |implementation| Plan {
                workload,
                implementation,
                warmup: o.warmup_cycles,
                cycles: o.cycles,
                hold: o.sem_hold,
                latency: Latency::Acquire,
                max_holders: o.max_leases,
                sessions: o.clients,
            };
            let dir = env.dir(workload, "raw");
            let (locks, leases) = (format!("{dir}/locks"), format!("{dir}/leases"));
            let clients = env.raw_clients(o.clients, &[&locks, &leases]).await?;
            let contenders = clients.into_iter().map(|client| {
                let locks = RawMutex { client: client.clone(), dir: locks.clone() };
                Contender::RawSemaphore(RawSemaphore { client, locks, leases: leases.clone(), max: o.max_leases })
            });
            results.push(run(env, plan("raw-floor"), contenders.collect()).await?);
            env.remove_tree(&dir).await;

            let dir = env.dir(workload, "zk-recipes");
            let mut contenders = Vec::with_capacity(o.clients);
            for framework in env.frameworks(o.clients).await? {
                let semaphore = InterProcessSemaphore::new(&framework, &dir, o.max_leases)?;
                contenders.push(Contender::Semaphore { framework, semaphore });
            }
            results.push(run(env, plan("zk-recipes"), contenders).await?);
        }
        Workload::ManyWaiters => {
            // WAITERS_PER_SESSION tasks per session share the session's budget of cycles, so
            // the run is as long as mutex-contended but the queue is that many times deeper.
            let per_task = |n: usize| n.div_ceil(WAITERS_PER_SESSION);
            let plan = |implementation| Plan {
                workload,
                implementation,
                warmup: per_task(o.warmup_cycles),
                cycles: per_task(o.cycles),
                hold: o.hold,
                latency: Latency::Acquire,
                max_holders: 1,
                sessions: o.clients,
            };
            let dir = env.dir(workload, "raw");
            let raw = env.raw_mutexes(o.clients, &dir).await?;
            let contenders = raw.iter().flat_map(|raw| {
                (0..WAITERS_PER_SESSION)
                    .map(|_| Contender::RawMutex(RawMutex { client: raw.client.clone(), dir: raw.dir.clone() }))
            });
            results.push(run(env, plan("raw-floor"), contenders.collect()).await?);
            env.remove_tree(&dir).await;

            let dir = env.dir(workload, "zk-recipes");
            let sessions = env.mutex_contenders(o.clients, &dir, ReleaseStyle::Await).await?;
            let mut contenders = Vec::with_capacity(o.clients * WAITERS_PER_SESSION);
            for session in sessions {
                if let Contender::Mutex { framework, mutex, release } = session {
                    for _ in 0..WAITERS_PER_SESSION {
                        contenders.push(Contender::Mutex {
                            framework: framework.clone(),
                            mutex: mutex.clone(),
                            release,
                        });
                    }
                }
            }
            results.push(run(env, plan("zk-recipes"), contenders).await?);
        }
        Workload::RwLock => {}
    }
    Ok(results)
}

// ---------------------------------------------------------------------------------------------
// Curator: the same workloads through Apache Curator 5.x (`interop/CuratorBench.java`, a JVM)

/// `--curator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CuratorMode {
    /// Curator lines when java, javac and the Curator jars are there; skipped lines otherwise.
    Auto,
    Off,
    /// Missing java, javac or Curator jars fail the run.
    Require,
}

const CURATOR_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/CuratorBench.java");
const CURATOR_MAIN: &str = "CuratorBench";
/// Whether this run has Curator lines.
enum Curator {
    Off,
    /// Not installed (`--curator auto`): every workload gets a skipped line with this reason.
    Missing(String),
    Ready(CuratorBench),
}

/// `interop/CuratorBench.java`, compiled for this run.
struct CuratorBench {
    java: PathBuf,
    /// The class directory, then the Curator classpath.
    classpath: String,
    /// Removed when the run ends.
    _classes: tempfile::TempDir,
}

impl Curator {
    /// Finds java, javac and the Curator jars and compiles `CuratorBench.java` into a temporary
    /// directory. `Err` when `--curator require` finds something missing, and whenever the
    /// source does not compile.
    fn prepare(mode: CuratorMode) -> Result<Curator, String> {
        if mode == CuratorMode::Off {
            return Ok(Curator::Off);
        }
        let found = find_jdk_tool("java").and_then(|java| Ok((java, find_jdk_tool("javac")?, curator_classpath()?)));
        let (java, javac, curator_classpath) = match found {
            Ok(found) => found,
            Err(why) if mode == CuratorMode::Require => return Err(format!("--curator require: {why}")),
            Err(why) => {
                eprintln!("[locks] no Curator lines: {why}");
                return Ok(Curator::Missing(why));
            }
        };
        let classes = tempfile::Builder::new()
            .prefix("zk-recipes-curator-bench-")
            .tempdir()
            .map_err(|e| format!("creating a directory for {CURATOR_MAIN}'s classes: {e}"))?;
        let started = Instant::now();
        let out = std::process::Command::new(&javac)
            .args(["-encoding", "UTF-8", "--release", "17", "-nowarn", "-cp"])
            .arg(&curator_classpath)
            .arg("-d")
            .arg(classes.path())
            .arg(CURATOR_SOURCE)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running {}: {e}", javac.display()))?;
        if !out.status.success() {
            return Err(format!(
                "javac {CURATOR_SOURCE} failed ({}):\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        eprintln!("[locks] compiled {CURATOR_MAIN}.java in {:.1} s", started.elapsed().as_secs_f64());
        let classpath = format!("{}:{curator_classpath}", classes.path().display());
        Ok(Curator::Ready(CuratorBench { java, classpath, _classes: classes }))
    }
}

/// A JDK tool from `$JAVA_HOME/bin`, else from `PATH`, that answers `-version`.
fn find_jdk_tool(name: &str) -> Result<PathBuf, String> {
    let from_home = std::env::var_os("JAVA_HOME").map(|home| PathBuf::from(home).join("bin").join(name));
    let path = match from_home.filter(|p| p.is_file()) {
        Some(path) => path,
        None => std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
            .ok_or_else(|| format!("`{name}` not found (JAVA_HOME or PATH)"))?,
    };
    let out = std::process::Command::new(&path)
        .arg("-version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", path.display()))?;
    if !out.status.success() {
        return Err(format!("{} -version failed ({})", path.display(), out.status));
    }
    Ok(path)
}

/// The JSON line of one Curator run.
struct CuratorLine {
    json: String,
    ops_per_sec: Option<f64>,
}

impl CuratorBench {
    /// Runs `workload` through Curator in a JVM (default flags: full JIT), with this run's
    /// options and server, under `<root>/<workload>/curator`. Its stderr goes to ours.
    async fn run(&self, env: &Env, workload: Workload) -> BenchResult<CuratorLine> {
        let o = &env.options;
        // The same counting as the Rust lines': mutex-uncontended in total, the others per
        // session (many-waiters divides them among the session's threads, rounded up).
        let (cycles, warmup, hold) = match workload {
            Workload::MutexUncontended => (o.iters, o.warmup, o.hold),
            Workload::Semaphore => (o.cycles, o.warmup_cycles, o.sem_hold),
            _ => (o.cycles, o.warmup_cycles, o.hold),
        };
        let counts_before = env.proxy.as_ref().map(|p| p.counts.snapshot());
        let output = tokio::process::Command::new(&self.java)
            .arg("-cp")
            .arg(&self.classpath)
            .arg(CURATOR_MAIN)
            .arg(&env.connect)
            .arg(workload.name())
            .args([cycles, warmup, o.clients, o.max_leases].map(|n| n.to_string()))
            .arg(env.dir(workload, "curator"))
            .arg(format!("hold-ms={}", hold.as_millis()))
            // With --count-ops the op count must be known (and timing does not matter anyway).
            .arg(format!("jit-warmup-ms={}", if env.proxy.is_some() { 0 } else { o.curator_warmup.as_millis() }))
            .arg(format!("label={}", o.label))
            .arg(format!("srvr={}", env.server))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            // Not `output()`: that would capture stderr too.
            .spawn()
            .map_err(|e| BenchError::Failed(format!("starting {}: {e}", self.java.display())))?
            .wait_with_output()
            .await
            .map_err(|e| BenchError::Failed(format!("waiting for {CURATOR_MAIN}: {e}")))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let mut json = None;
        for line in stdout.lines() {
            if json.is_none() && line.starts_with('{') {
                json = Some(line.to_owned());
            } else if !line.trim().is_empty() {
                eprintln!("[locks] {CURATOR_MAIN}: {line}");
            }
        }
        match output.status.code() {
            Some(0) => {}
            Some(3) => return Err(BenchError::Violation(format!("{CURATOR_MAIN} (Curator) exited with code 3"))),
            _ => return Err(BenchError::Failed(format!("{CURATOR_MAIN} failed ({})", output.status))),
        }
        let json = json.ok_or_else(|| BenchError::Failed(format!("{CURATOR_MAIN} printed no JSON line")))?;
        if let (Some(before), Some(proxy)) = (counts_before, env.proxy.as_ref()) {
            // The JVM's whole run went through the proxy: per op of the warmup and the measured
            // part together (the JIT warm-up's cycles are not counted: it is off with
            // --count-ops), session set-up and close included.
            let per_task = |n: usize| n.div_ceil(WAITERS_PER_SESSION);
            let total_ops = match workload {
                Workload::MutexUncontended => o.warmup + o.iters,
                Workload::ManyWaiters => {
                    o.clients * WAITERS_PER_SESSION * (per_task(o.warmup_cycles) + per_task(o.cycles))
                }
                _ => o.clients * (o.warmup_cycles + o.cycles),
            };
            let breakdown = per_op(&before, &proxy.counts.snapshot(), total_ops);
            eprintln!("[locks]   {:<20} per op (warmup, session set-up and close included): {breakdown}", "");
        }
        Ok(CuratorLine { ops_per_sec: json_number(&json, "ops_per_sec"), json })
    }
}

/// A number field of a flat JSON line.
fn json_number(line: &str, field: &str) -> Option<f64> {
    let key = format!("\"{field}\":");
    let rest = &line[line.find(&key)? + key.len()..];
    rest[..rest.find([',', '}']).unwrap_or(rest.len())].trim().parse().ok()
}

// ---------------------------------------------------------------------------------------------

fn main() -> ExitCode {
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
    let mut _server = None;
    let connect = match options.connect.clone() {
        Some(connect) => connect,
        // The testing defaults stop the JIT at C1 for a quick start; a benchmark wants the
        // server at full speed (the later flag wins).
        None => match zk_recipes::testing::TestingServer::builder().jvm_arg("-XX:TieredStopAtLevel=4").start().await {
            Ok(server) => {
                let connect = server.connect_string();
                eprintln!("[locks] started a TestingServer at {connect} (full JIT)");
                _server = Some(server);
                connect
            }
            Err(e) => {
                eprintln!("locks: cannot start a TestingServer: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis();
    let proxy = if options.count_ops {
        let upstream = connect.split(',').next().unwrap_or_default().split('/').next().unwrap_or_default();
        match CountingProxy::start(upstream).await {
            Ok(proxy) => {
                eprintln!("[locks] counting requests through a proxy at {} (timings include its hop)", proxy.address);
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
            |p| format!("{}{}", p.address, connect.find('/').map_or("", |at| &connect[at..])),
        ),
        server: connect,
        proxy,
        root: format!("{BENCH_ROOT}/{}-{stamp}", std::process::id()),
        options,
    };
    if _server.is_some() && !env.options.server_warmup.is_zero() {
        eprintln!("[locks] warming up the server's JIT for {:?} ...", env.options.server_warmup);
        match warm_up_server(&env, env.options.server_warmup).await {
            Ok(()) => {}
            Err(e @ BenchError::Violation(_)) => {
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
    for workload in env.options.workloads.clone() {
        if workload == Workload::RwLock {
            println!("{{\"workload\":{},\"skipped\":\"not implemented\"}}", json_string(workload.name()));
            continue;
        }
        eprintln!("[locks] {} ...", workload.name());
        // ops/s of the zk-recipes lines, for the ratios to Curator.
        let mut ours = Vec::new();
        match run_workload(&env, workload).await {
            Ok(results) => {
                for result in results {
                    if result.implementation.starts_with("zk-recipes") {
                        ours.push((result.implementation, result.ops_per_sec()));
                    }
                    let requests = result.requests_per_op.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.2}"));
                    eprintln!(
                        "[locks]   {:<20} server requests/op {requests} (all sessions, pings included)",
                        result.implementation
                    );
                    if let Some(breakdown) = &result.breakdown {
                        eprintln!("[locks]   {:<20} per op: {breakdown}", "");
                    }
                    println!("{}", result.json(&env.options.label));
                }
            }
            Err(e @ BenchError::Violation(_)) => {
                eprintln!("[locks] {}: {e}", workload.name());
                code = ExitCode::from(3);
                break;
            }
            Err(e) => {
                eprintln!("[locks] {} failed: {e}", workload.name());
                code = ExitCode::FAILURE;
            }
        }
        match &curator {
            Curator::Off => {}
            Curator::Missing(why) => println!(
                "{{\"impl\":\"curator\",\"workload\":{},\"skipped\":{}}}",
                json_string(workload.name()),
                json_string(why)
            ),
            Curator::Ready(bench) => {
                eprintln!("[locks] {} through Curator ...", workload.name());
                match bench.run(&env, workload).await {
                    Ok(line) => {
                        println!("{}", line.json);
                        if let Some(theirs) = line.ops_per_sec.filter(|&t| t > 0.0) {
                            let mut summary = format!("{} (ops/s ÷ curator's {theirs:.1}):", workload.name());
                            for (implementation, ops_per_sec) in &ours {
                                let _ = write!(summary, " {implementation} {:.2}", ops_per_sec / theirs);
                            }
                            eprintln!("[locks] ratio {summary}");
                            ratios.push(summary);
                        }
                    }
                    Err(e @ BenchError::Violation(_)) => {
                        eprintln!("[locks] {} (curator): {e}", workload.name());
                        code = ExitCode::from(3);
                        break;
                    }
                    Err(e) => {
                        eprintln!("[locks] {} (curator) failed: {e}", workload.name());
                        code = ExitCode::FAILURE;
                    }
                }
            }
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
