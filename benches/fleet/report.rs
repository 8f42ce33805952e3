//! JSON lines, percentiles, the process's resident memory and the servers' own counts.

use std::fmt::Write as _;
use std::time::Duration;

#[path = "../common/json.rs"]
mod json;
pub(crate) use json::json_string;

use zk_recipes::testing::{four_letter_word, TestingCluster};

/// One JSON line: `{"bench":"fleet","measure":...,<fields>,"label":...}`, printed by
/// [`print`](Self::print).
pub(crate) struct Line(String);

impl Line {
    /// A line of the zk-recipes fleet.
    pub(crate) fn new(measure: &str) -> Self {
        Self::of("zk-recipes", measure)
    }

    /// A line of `implementation`'s fleet (`zk-recipes`, `curator`).
    pub(crate) fn of(implementation: &str, measure: &str) -> Self {
        Line(format!(
            "{{\"bench\":\"fleet\",\"impl\":{},\"measure\":{}",
            json_string(implementation),
            json_string(measure)
        ))
    }

    pub(crate) fn int(mut self, field: &str, value: impl Into<u64>) -> Self {
        let _ = write!(self.0, ",\"{field}\":{}", value.into());
        self
    }

    pub(crate) fn count(self, field: &str, value: usize) -> Self {
        self.int(field, value as u64)
    }

    /// A number with three decimals.
    pub(crate) fn float(mut self, field: &str, value: f64) -> Self {
        let _ = write!(self.0, ",\"{field}\":{value:.3}");
        self
    }

    pub(crate) fn millis(self, field: &str, value: Duration) -> Self {
        self.float(field, value.as_secs_f64() * 1000.0)
    }

    pub(crate) fn text(mut self, field: &str, value: &str) -> Self {
        let _ = write!(self.0, ",\"{field}\":{}", json_string(value));
        self
    }

    pub(crate) fn print(mut self, label: &str) {
        let _ = write!(self.0, ",\"label\":{}}}", json_string(label));
        println!("{}", self.0);
    }
}

/// Nearest-rank percentile `p` (0..=100) of `sorted`; zero when empty.
pub(crate) fn nearest_rank(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The median of `values` (sorted here); zero when empty.
pub(crate) fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    nearest_rank(&values, 50.0)
}

/// The process's resident memory in KiB (`VmRSS` of `/proc/self/status`), `None` off Linux.
pub(crate) fn rss_kib() -> Option<u64> {
    process_rss_kib("self")
}

/// Process `pid`'s resident memory in KiB (`"self"` for this one), `None` off Linux.
fn process_rss_kib(pid: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// What one ensemble member reports about its clients.
pub(crate) struct MemberLoad {
    pub(crate) mode: String,
    /// Client connections (`cons`: one line per connection).
    pub(crate) connections: usize,
    /// `wchs`: `Total watches:` and the paths they are on.
    pub(crate) watches: u64,
    pub(crate) watched_paths: u64,
    /// The member's JVM's resident memory.
    pub(crate) rss_kib: Option<u64>,
}

/// Member `i`'s load, `None` when it does not answer.
pub(crate) async fn member_load(cluster: &TestingCluster, i: usize) -> Option<MemberLoad> {
    const ASK: Duration = Duration::from_secs(5);
    let address = cluster.server_connect_string(i);
    let mode = cluster.mode(i).await?;
    let cons = four_letter_word(&address, "cons", ASK).await.ok()?;
    // `cons` lists each connection as ` /127.0.0.1:PORT[..](queued=..,...)`, this one included.
    let connections = cons.lines().filter(|line| line.trim_start().starts_with('/')).count().saturating_sub(1);
    let wchs = four_letter_word(&address, "wchs", ASK).await.ok()?;
    let watches = wchs.lines().find_map(|l| l.strip_prefix("Total watches:")).and_then(|n| n.trim().parse().ok())?;
    // "N connections watching M paths"
    let watched_paths = wchs
        .lines()
        .find_map(|l| l.split_once(" watching ").map(|(_, paths)| paths.trim_end_matches(" paths").trim().to_owned()))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let rss_kib = cluster.pid(i).ok().flatten().and_then(|pid| process_rss_kib(&pid.to_string()));
    Some(MemberLoad { mode, connections, watches, watched_paths, rss_kib })
}
