//! Drives real kazoo (the Python ZooKeeper client) from integration tests, for wire
//! compatibility of kazoo's recipes (`src/lease/`, `src/partition/`).
//!
//! [`KazooPeer`] runs `interop/kazoo_peer.py` with `python3` and talks to it over the line
//! protocol documented at the top of that file: one reply line per command, in order.
//!
//! Environment:
//! - `ZKR_REQUIRE_KAZOO=1`: a missing `python3` or kazoo is an error instead of a skip
//!   (`scripts/setup.sh` installs kazoo with pip).
//! - `ZKR_KAZOO_TRACE=1`: echo every protocol line to stderr.
#![allow(dead_code)] // each test binary uses a different part of this module

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// Bound on waiting for the reply to one command.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on the interpreter's start plus the first connection to ZooKeeper.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The peer's source, relative to the repository root.
const SOURCE_IN_REPO: &str = "interop/kazoo_peer.py";

fn source_path() -> PathBuf {
    super::repo_file(SOURCE_IN_REPO)
}

fn kazoo_required() -> bool {
    std::env::var("ZKR_REQUIRE_KAZOO").is_ok_and(|v| v == "1")
}

/// `Err(why)` when `python3` or kazoo is missing (checked once per process).
fn available() -> Result<(), String> {
    static CHECK: OnceLock<Result<(), String>> = OnceLock::new();
    CHECK
        .get_or_init(|| {
            let out = std::process::Command::new("python3")
                .args(["-c", "import kazoo"])
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("python3 not found: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                let stderr = String::from_utf8_lossy(&out.stderr);
                Err(format!("python3 cannot import kazoo ({})", stderr.lines().last().unwrap_or_default()))
            }
        })
        .clone()
}

/// A kazoo peer on `connect` with the interop session timeout
/// ([`super::timing::INTEROP_SESSION`]); `None` (after printing why) when python3 or kazoo is
/// missing, so the test skips. Panics instead with `ZKR_REQUIRE_KAZOO=1`, or when the peer
/// does not come up.
pub async fn peer(connect: &str) -> Option<KazooPeer> {
    super::fixtures::init_tracing();
    if let Err(why) = available() {
        assert!(!kazoo_required(), "kazoo interop is required (ZKR_REQUIRE_KAZOO=1) but unavailable: {why}");
        eprintln!("skipping kazoo interop: {why} (set ZKR_REQUIRE_KAZOO=1 to make this an error)");
        return None;
    }
    Some(KazooPeer::start(connect, super::timing::INTEROP_SESSION).await.expect("starting the kazoo peer"))
}

/// A running Python process with a kazoo client connected to one ZooKeeper ensemble.
///
/// Dropping it kills the process (its session then ends by expiry); it also exits on its own
/// when its stdin closes.
pub struct KazooPeer {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    trace: bool,
    pid: u32,
}

impl KazooPeer {
    /// Starts `interop/kazoo_peer.py` against `connect`, returning once its client is connected.
    pub async fn start(connect: &str, session_timeout: Duration) -> Result<KazooPeer, String> {
        let mut child = Command::new("python3")
            .arg("-B")
            .arg(source_path())
            .arg(connect)
            .arg(session_timeout.as_secs_f64().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting python3: {e}"))?;
        let pid = child.id().unwrap_or(0);
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("python3 started without piped stdin/stdout".to_owned());
        };
        let trace = std::env::var("ZKR_KAZOO_TRACE").is_ok_and(|v| v == "1");
        let mut peer = KazooPeer { child, stdin, lines: BufReader::new(stdout).lines(), trace, pid };
        let ready = peer.read_line(START_TIMEOUT).await?;
        if ready != "ready" {
            return Err(format!("the kazoo peer said {ready:?} instead of `ready`"));
        }
        Ok(peer)
    }

    /// Sends one command and returns its reply; an `error ...` reply is an `Err`.
    pub async fn command(&mut self, line: &str) -> Result<String, String> {
        if line.contains('\n') {
            return Err(format!("a command is one line: {line:?}"));
        }
        if self.trace {
            eprintln!("[kazoo-peer {}] > {line}", self.pid);
        }
        let data = format!("{line}\n");
        self.stdin.write_all(data.as_bytes()).await.map_err(|e| format!("writing `{line}`: {e}"))?;
        self.stdin.flush().await.map_err(|e| format!("writing `{line}`: {e}"))?;
        let reply = self.read_line(COMMAND_TIMEOUT).await.map_err(|e| format!("`{line}`: {e}"))?;
        if reply.starts_with("error") {
            return Err(format!("`{line}`: {reply}"));
        }
        Ok(reply)
    }

    /// kazoo's `NonBlockingLease` at `path` for `identifier`, for `duration` from `now`
    /// (kazoo's own clock when `None`): true when obtained.
    pub async fn lease(
        &mut self,
        path: &str,
        duration: Duration,
        identifier: &str,
        now: Option<SystemTime>,
    ) -> Result<bool, String> {
        let line = format!("lease {path} {} {identifier}{}", duration.as_secs_f64(), clock(now));
        granted(self.command(&line).await?)
    }

    /// kazoo's `MultiNonBlockingLease` of `count` leases under `path`: true when one was
    /// obtained.
    pub async fn multi_lease(
        &mut self,
        count: usize,
        path: &str,
        duration: Duration,
        identifier: &str,
        now: Option<SystemTime>,
    ) -> Result<bool, String> {
        let line = format!("multi-lease {count} {path} {} {identifier}{}", duration.as_secs_f64(), clock(now));
        granted(self.command(&line).await?)
    }

    /// Joins kazoo's `SetPartitioner` at `path` as `identifier` over `items`.
    pub async fn partition_join(
        &mut self,
        path: &str,
        identifier: &str,
        time_boundary: Duration,
        max_reaction_time: Duration,
        items: &[String],
    ) -> Result<(), String> {
        let line = format!(
            "partition-join {path} {identifier} {} {} {}",
            time_boundary.as_secs_f64(),
            max_reaction_time.as_secs_f64(),
            items.join(" ")
        );
        match self.command(&line).await?.as_str() {
            "joined" => Ok(()),
            other => Err(format!("`partition-join`: {other}")),
        }
    }

    /// The partitioner's state (`allocating`, `acquired`, `release`, `failure`) and its
    /// partition (the items of its last acquisition).
    pub async fn partition_state(&mut self) -> Result<(String, Vec<String>), String> {
        let reply = self.command("partition-state").await?;
        let mut words = reply.split_whitespace();
        match (words.next(), words.next()) {
            (Some("state"), Some(state)) => Ok((state.to_owned(), words.map(str::to_owned).collect())),
            _ => Err(format!("unexpected reply to `partition-state`: {reply}")),
        }
    }

    /// kazoo's `finish()`: releases the items and leaves the party.
    pub async fn partition_finish(&mut self) -> Result<(), String> {
        match self.command("partition-finish").await?.as_str() {
            "finished" => Ok(()),
            other => Err(format!("`partition-finish`: {other}")),
        }
    }

    /// Closes the kazoo client (its session ends now) and waits for the process to exit.
    pub async fn quit(mut self) -> Result<(), String> {
        match self.command("quit").await?.as_str() {
            "bye" => {}
            other => return Err(format!("`quit`: {other}")),
        }
        match tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(Ok(status)) => Err(format!("the kazoo peer exited with {status}")),
            Ok(Err(e)) => Err(format!("waiting for the kazoo peer: {e}")),
            Err(_) => Err("the kazoo peer did not exit within 10 s of `quit`".to_owned()),
        }
    }

    async fn read_line(&mut self, limit: Duration) -> Result<String, String> {
        let line = match tokio::time::timeout(limit, self.lines.next_line()).await {
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) => return Err("the kazoo peer closed its stdout".to_owned()),
            Ok(Err(e)) => return Err(format!("reading from the kazoo peer: {e}")),
            Err(_) => return Err(format!("no reply from the kazoo peer within {limit:?}")),
        };
        if self.trace {
            eprintln!("[kazoo-peer {}] < {line}", self.pid);
        }
        Ok(line)
    }
}

/// The optional clock argument of a lease command.
fn clock(now: Option<SystemTime>) -> String {
    now.map(|t| format!(" {}", t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()))).unwrap_or_default()
}

fn granted(reply: String) -> Result<bool, String> {
    match reply.as_str() {
        "granted" => Ok(true),
        "refused" => Ok(false),
        _ => Err(format!("unexpected reply to a lease: {reply}")),
    }
}
