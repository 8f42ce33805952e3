//! Errors, the exclusion check, one run's measurement and its JSON line.

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_recipes::zk;

use crate::options::Workload;

#[derive(Debug)]
pub(crate) enum BenchError {
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
    /// With `--count-ops`: requests and watch events per op, by kind.
    pub(crate) breakdown: Option<String>,
}

impl Measured {
    pub(crate) fn ops_per_sec(&self) -> f64 {
        if self.secs > 0.0 {
            self.samples.len() as f64 / self.secs
        } else {
            0.0
        }
    }

    pub(crate) fn json(&self, label: &str) -> String {
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

pub(crate) fn json_string(s: &str) -> String {
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

/// Server-side request counting (ZooKeeper's `srvr` four-letter word, enabled by default).
/// The number of packets the server has received so far (`Received:` of `srvr`), which
/// counts requests of every session (pings included). `None` when the server does not answer.
pub(crate) fn server_received(connect: &str) -> Option<u64> {
    let host = connect.split(',').next()?.split('/').next()?;
    let addr = std::net::ToSocketAddrs::to_socket_addrs(host).ok()?.next()?;
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(b"srvr").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    text.lines().find_map(|line| line.strip_prefix("Received:")).and_then(|n| n.trim().parse().ok())
}

/// A number field of a flat JSON line.
pub(crate) fn json_number(line: &str, field: &str) -> Option<f64> {
    let key = format!("\"{field}\":");
    let rest = &line[line.find(&key)? + key.len()..];
    rest[..rest.find([',', '}']).unwrap_or(rest.len())].trim().parse().ok()
}
