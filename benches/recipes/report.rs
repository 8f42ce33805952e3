//! Errors, the exclusion check, one run's measurement and its JSON line.

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[path = "../common/json.rs"]
mod json;
pub(crate) use json::json_string;

use zk_recipes::zk;

use crate::options::Workload;

#[derive(Debug)]
pub(crate) enum BenchError {
    /// More holders at once than the recipe admits.
    Violation(String),
    /// A cache does not hold what the server does.
    Diverged(String),
    /// A counter or a queue does not hold what its ops reported (an op lost or applied twice).
    Miscounted(String),
    Failed(String),
}

impl BenchError {
    /// A correctness failure (exit code 3), not a mere failure to run.
    pub(crate) fn is_violation(&self) -> bool {
        matches!(self, BenchError::Violation(_) | BenchError::Diverged(_) | BenchError::Miscounted(_))
    }
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BenchError::Violation(what) => write!(f, "EXCLUSION VIOLATED: {what}"),
            BenchError::Diverged(what) => write!(f, "CACHE DIVERGED FROM THE SERVER: {what}"),
            BenchError::Miscounted(what) => write!(f, "OPS LOST OR APPLIED TWICE: {what}"),
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

pub(crate) type BenchResult<T> = Result<T, BenchError>;

/// Counts the current holders of one lock (shared by every contender of a run) and records a
/// violation the moment more than `max` hold at once.
#[derive(Debug)]
pub(crate) struct Exclusion {
    pub(crate) max: usize,
    pub(crate) holders: AtomicUsize,
    pub(crate) violated: AtomicBool,
}

impl Exclusion {
    pub(crate) fn new(max: usize) -> Arc<Self> {
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

    /// The read-write lock's critical section: a writer must be alone, a reader must have no
    /// writer beside it (`max` is not used). Yields and holds as [`critical_section`](Self::critical_section).
    pub(crate) async fn read_write_section(&self, write: bool, hold: Duration) -> BenchResult<()> {
        // A writer counts as WRITER holders, a reader as one.
        const WRITER: usize = 1 << 20;
        let before = self.holders.fetch_add(if write { WRITER } else { 1 }, Ordering::SeqCst);
        if (write && before != 0) || before >= WRITER {
            self.violated.store(true, Ordering::SeqCst);
            let (writers, readers) = (before / WRITER + usize::from(write), before % WRITER + usize::from(!write));
            return Err(BenchError::Violation(format!("{writers} writers and {readers} readers at once")));
        }
        tokio::task::yield_now().await;
        if !hold.is_zero() {
            tokio::time::sleep(hold).await;
        }
        self.holders.fetch_sub(if write { WRITER } else { 1 }, Ordering::SeqCst);
        Ok(())
    }

    /// Enter, hold for `hold`, exit: the critical section of every workload.
    ///
    /// Even with no hold, the section yields to the scheduler once (microseconds, not a
    /// sleep): that lets the other contenders' tasks run while we count as a holder, so a lock
    /// that admits two holders is caught within a few cycles rather than by luck.
    pub(crate) async fn critical_section(&self, hold: Duration) -> BenchResult<()> {
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
pub(crate) struct Measured {
    pub(crate) implementation: &'static str,
    pub(crate) workload: Workload,
    pub(crate) clients: usize,
    pub(crate) secs: f64,
    /// Latency samples (cycle or acquire, per workload), one per op.
    pub(crate) samples: Vec<Duration>,
    /// Requests the server received per op during the measured part, when it could be read.
    pub(crate) requests_per_op: Option<f64>,
    /// Transaction-log fsyncs per op on each server (the servers' mean), when fsync is on.
    pub(crate) fsyncs_per_op: Option<f64>,
    /// With `--count-ops`: requests and watch events per op, by kind.
    pub(crate) breakdown: Option<String>,
    /// For the read-write lock: the reads and the writes apart.
    pub(crate) halves: Option<Halves>,
    /// The op count when it is not one per sample (cache-events: events, sampled per write).
    pub(crate) ops: Option<usize>,
    /// More fields for the JSON line, each written `,"name":value`.
    pub(crate) extra: String,
}

/// The reads and the writes of a read-write lock run, apart.
#[derive(Debug, Default)]
pub(crate) struct Halves {
    pub(crate) read_samples: Vec<Duration>,
    pub(crate) write_samples: Vec<Duration>,
    /// With `--count-ops`: requests by kind over the reads and over the writes.
    pub(crate) read_requests: Tally,
    pub(crate) write_requests: Tally,
}

impl Halves {
    /// `reads N (p50 .. ms, p99 .. ms), writes M (...)`, and with counts, their requests per op.
    pub(crate) fn summary(&self) -> String {
        let part = |what: &str, samples: &[Duration]| {
            let mut sorted = samples.to_vec();
            sorted.sort_unstable();
            let ms = |d: Duration| d.as_secs_f64() * 1000.0;
            format!(
                "{what} {} (acquire p50 {:.3} ms, p99 {:.3} ms)",
                sorted.len(),
                ms(nearest_rank(&sorted, 50.0)),
                ms(nearest_rank(&sorted, 99.0))
            )
        };
        format!("{}, {}", part("reads", &self.read_samples), part("writes", &self.write_samples))
    }

    /// Requests per read and per write, when counted.
    pub(crate) fn requests(&self) -> Option<String> {
        if self.read_requests.ops == 0 && self.write_requests.ops == 0 {
            return None;
        }
        Some(format!("per read: {}; per write: {}", self.read_requests.per_op(), self.write_requests.per_op()))
    }
}

/// Requests by kind over some ops (pings left out: they follow idle time, not the work).
#[derive(Debug, Default, Clone)]
pub(crate) struct Tally {
    pub(crate) ops: u64,
    pub(crate) counts: std::collections::BTreeMap<&'static str, u64>,
}

impl Tally {
    /// Adds one op that cost `counts`.
    pub(crate) fn add(&mut self, counts: &zk_recipes::testing::RequestCounts) {
        self.ops += 1;
        self.merge_counts(counts.iter());
    }

    pub(crate) fn merge(&mut self, other: &Tally) {
        self.ops += other.ops;
        self.merge_counts(other.counts.iter().map(|(k, n)| (*k, *n)));
    }

    fn merge_counts(&mut self, counts: impl Iterator<Item = (&'static str, u64)>) {
        for (kind, n) in counts.filter(|(kind, _)| *kind != "ping") {
            *self.counts.entry(kind).or_default() += n;
        }
    }

    /// `kind n.nn` pairs per op; `requests` is every request kind together (not watch events
    /// nor round trips).
    pub(crate) fn per_op(&self) -> String {
        let ops = self.ops.max(1) as f64;
        let requests: u64 =
            self.counts.iter().filter(|(k, _)| !matches!(**k, "watch-event" | "round-trip")).map(|(_, n)| n).sum();
        let mut out = format!("requests {:.2}", requests as f64 / ops);
        for (kind, n) in &self.counts {
            let _ = write!(out, ", {kind} {:.2}", *n as f64 / ops);
        }
        out
    }
}

impl Measured {
    pub(crate) fn ops_per_sec(&self) -> f64 {
        if self.secs > 0.0 {
            self.ops() as f64 / self.secs
        } else {
            0.0
        }
    }

    pub(crate) fn ops(&self) -> usize {
        self.ops.unwrap_or(self.samples.len())
    }

    pub(crate) fn json(&self, label: &str) -> String {
        let mut sorted = self.samples.clone();
        sorted.sort_unstable();
        let ops = self.ops();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let ops_per_sec = self.ops_per_sec();
        format!(
            "{{\"impl\":{},\"workload\":{},\"ops\":{},\"secs\":{:.3},\"ops_per_sec\":{:.1},\"p50_ms\":{:.3},\
             \"p99_ms\":{:.3},\"clients\":{}{},\"label\":{}}}",
            json_string(self.implementation),
            json_string(self.workload.name()),
            ops,
            self.secs,
            ops_per_sec,
            ms(nearest_rank(&sorted, 50.0)),
            ms(nearest_rank(&sorted, 99.0)),
            self.clients,
            self.extra,
            json_string(label),
        )
    }
}

/// The CPU time this process has used so far (user and system, every thread), from
/// `/proc/self/stat`, in its 10 ms ticks (Linux reports them in `USER_HZ`, 100 per second).
/// `None` where there is no such file. The servers and Curator's JVM are other processes.
pub(crate) fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
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

/// What the servers have done so far, summed over every server of a connect string (chroot
/// ignored), from ZooKeeper's four-letter words (enabled by default). `None` when a server does
/// not answer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServerCounters {
    /// Packets received from clients (`Received:` of `srvr`): requests of every session, pings
    /// included; a request forwarded from a follower to the leader counts once.
    pub(crate) received: u64,
    /// Transaction-log fsyncs (`zk_cnt_fsynctime` of `mntr`); zero while fsync is off.
    pub(crate) fsyncs: u64,
    /// How many servers answered.
    pub(crate) servers: u64,
}

impl ServerCounters {
    pub(crate) fn read(connect: &str) -> Option<Self> {
        let mut counters = Self { received: 0, fsyncs: 0, servers: 0 };
        for host in connect.split('/').next()?.split(',') {
            let field = |word: &[u8], prefix: &str| -> Option<u64> {
                four_letter_word(host, word)?
                    .lines()
                    .find_map(|line| line.strip_prefix(prefix))
                    .and_then(|n| n.trim().parse().ok())
            };
            counters.received += field(b"srvr", "Received:")?;
            counters.fsyncs += field(b"mntr", "zk_cnt_fsynctime\t").unwrap_or(0);
            counters.servers += 1;
        }
        Some(counters)
    }
}

pub(crate) fn four_letter_word(host: &str, word: &[u8]) -> Option<String> {
    let addr = std::net::ToSocketAddrs::to_socket_addrs(host).ok()?.next()?;
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(word).ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text)
}

/// The request counters at one moment of a line that runs its own loop (not `workloads::run`):
/// the servers' `srvr` counts and, with `--count-ops`, the proxy's.
pub(crate) struct CountersAt {
    server: Option<ServerCounters>,
    proxy: Option<zk_recipes::testing::RequestCounts>,
}

impl CountersAt {
    pub(crate) fn read(server: &str, proxy: Option<&zk_recipes::testing::CountingProxy>) -> Self {
        CountersAt { server: ServerCounters::read(server), proxy: proxy.map(|p| p.counts()) }
    }

    /// Requests per op, fsyncs per op per server and the proxy's breakdown per op since `self`,
    /// into `line`.
    pub(crate) fn fill(&self, server: &str, proxy: Option<&zk_recipes::testing::CountingProxy>, line: &mut Measured) {
        let ops = line.ops();
        if let (Some(before), Some(after)) = (self.server, ServerCounters::read(server)) {
            if ops > 0 && before.servers == after.servers {
                line.requests_per_op = Some(after.received.saturating_sub(before.received) as f64 / ops as f64);
                let fsyncs = after.fsyncs.saturating_sub(before.fsyncs) as f64 / (after.servers * ops as u64) as f64;
                line.fsyncs_per_op = Some(fsyncs).filter(|&f| f > 0.0);
            }
        }
        if let (Some(before), Some(proxy)) = (&self.proxy, proxy) {
            line.breakdown = Some(proxy.counts().since(before).per_op(ops));
        }
    }
}

/// A string field of a flat JSON line (no escapes inside).
pub(crate) fn json_str<'a>(line: &'a str, field: &str) -> Option<&'a str> {
    let key = format!("\"{field}\":\"");
    let rest = &line[line.find(&key)? + key.len()..];
    Some(&rest[..rest.find('"')?])
}

/// A number field of a flat JSON line.
pub(crate) fn json_number(line: &str, field: &str) -> Option<f64> {
    let key = format!("\"{field}\":");
    let rest = &line[line.find(&key)? + key.len()..];
    rest[..rest.find([',', '}']).unwrap_or(rest.len())].trim().parse().ok()
}
