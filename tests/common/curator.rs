//! Drives real Apache Curator from integration tests, for wire-compatibility checks.
//!
//! [`CuratorPeer`] runs `interop/CuratorPeer.java` in a JVM against Debian's Curator 5.4 jars and
//! talks to it over a line protocol (documented at the top of that file). The Java file is
//! compiled once per source/classpath into `$CARGO_TARGET_TMPDIR/curator-peer/<hash>/`, shared by
//! every test binary and safe against parallel compiles (each compiles into its own directory and
//! renames it into place).
//!
//! Environment:
//! - `ZKR_REQUIRE_CURATOR=1`: a missing `java`/`javac`/Curator is an error instead of a skip.
//! - `ZKR_CURATOR_CLASSPATH`: the runtime classpath to use instead of the Debian jars in
//!   `/usr/share/java` (include an slf4j binding to see Curator's log).
//! - `JAVA_HOME`: take `java` and `javac` from `$JAVA_HOME/bin` instead of `PATH`.
//! - `ZKR_CURATOR_LOG=<level>`: slf4j-simple level for Curator and ZooKeeper (defaults: Curator
//!   `warn`, ZooKeeper `error`). The JVM's stderr goes straight to the test's stderr.
//! - `ZKR_CURATOR_TRACE=1`: echo every protocol line to stderr.
//!
//! Replies and asynchronous lines (`connection ...`, `revoke-requested ID`, `loop-done ID N`,
//! `loop-error ID msg`) share stdout; lines that are not the awaited one are buffered in order
//! and stay available to [`CuratorPeer::wait_for`] and later commands.
#![allow(dead_code)] // each test binary uses a different part of this module

#[path = "../../interop/classpath.rs"]
mod classpath;

use std::collections::hash_map::DefaultHasher;
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::{timeout_at, Instant};

/// Bound on waiting for the reply to one command ([`CuratorPeer::command`]).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on JVM start plus the first connection to ZooKeeper.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The peer's source, relative to the repository root.
const SOURCE_IN_REPO: &str = "interop/CuratorPeer.java";
const MAIN_CLASS: &str = "CuratorPeer";

fn source_path() -> PathBuf {
    super::repo_file(SOURCE_IN_REPO)
}

/// Where compiled classes go: the target directory's scratch space for tests.
fn build_root() -> PathBuf {
    match option_env!("CARGO_TARGET_TMPDIR") {
        Some(dir) => PathBuf::from(dir).join("curator-peer"),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp/curator-peer"),
    }
}

/// The compiled peer, ready to start.
#[derive(Clone, Debug)]
struct Build {
    java: PathBuf,
    /// Class directory followed by the Curator classpath.
    classpath: String,
}

/// Why the peer cannot run.
#[derive(Clone, Debug)]
enum Problem {
    /// Java or Curator is not installed: skip unless `ZKR_REQUIRE_CURATOR=1`.
    Missing(String),
    /// Installed but broken (for example the Java source does not compile): always an error.
    Broken(String),
}

static BUILD: OnceLock<Result<Build, Problem>> = OnceLock::new();

fn curator_required() -> bool {
    std::env::var("ZKR_REQUIRE_CURATOR").is_ok_and(|v| v == "1")
}

/// Finds a JDK tool (see `interop/classpath.rs`).
fn find_tool(name: &str) -> Result<PathBuf, Problem> {
    classpath::find_jdk_tool(name).map_err(Problem::Missing)
}

/// The Curator runtime classpath (see `interop/classpath.rs`).
fn curator_classpath() -> Result<String, Problem> {
    classpath::curator_classpath().map_err(Problem::Missing)
}

/// Compiles the peer unless this source/classpath/javac was compiled before (by any process).
fn build() -> Result<Build, Problem> {
    let java = find_tool("java")?;
    let javac = find_tool("javac")?;
    let curator = curator_classpath()?;
    let source_path = source_path();
    let source =
        std::fs::read(&source_path).map_err(|e| Problem::Broken(format!("reading {}: {e}", source_path.display())))?;

    let mut hasher = DefaultHasher::new();
    (&source, &curator, &javac).hash(&mut hasher);
    let root = build_root();
    let classes = root.join(format!("{:016x}", hasher.finish()));
    if !classes.join(format!("{MAIN_CLASS}.class")).is_file() {
        std::fs::create_dir_all(&root).map_err(|e| Problem::Broken(format!("creating {}: {e}", root.display())))?;
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let scratch = root.join(format!("tmp-{}-{nanos}", std::process::id()));
        let out = std::process::Command::new(&javac)
            .args(["-encoding", "UTF-8", "--release", "17", "-nowarn", "-cp"])
            .arg(&curator)
            .arg("-d")
            .arg(&scratch)
            .arg(&source_path)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Problem::Broken(format!("running {}: {e}", javac.display())))?;
        if !out.status.success() {
            let _ = std::fs::remove_dir_all(&scratch);
            return Err(Problem::Broken(format!(
                "javac {} failed ({}):\n{}{}",
                source_path.display(),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        // Atomic publish; if another test binary won the race, its classes are identical.
        if let Err(e) = std::fs::rename(&scratch, &classes) {
            let _ = std::fs::remove_dir_all(&scratch);
            if !classes.join(format!("{MAIN_CLASS}.class")).is_file() {
                return Err(Problem::Broken(format!("publishing {}: {e}", classes.display())));
            }
        }
    }
    Ok(Build { java, classpath: format!("{}:{curator}", classes.display()) })
}

/// Which reply answers a command: accepted first words, and the key (the command's first
/// argument) that keyed replies and `error` replies carry as their second word.
struct Expect {
    words: Vec<String>,
    key: Option<String>,
}

impl Expect {
    fn for_command(line: &str) -> Result<Expect, String> {
        let mut tokens = line.split_whitespace();
        let verb = tokens.next().ok_or("empty command")?;
        let words: &[&str] = match verb {
            "mutex" | "semaphore" | "semaphore_count" | "semmutex" | "rwlock" | "revocable" | "revoke" => &["ok"],
            "acquire" | "acquire_many" => &["acquired", "timeout"],
            "release" => &["released"],
            "loop" | "rwloop" => &["loop-started"],
            "quit" => &["bye"],
            other => &[other], // participants, lockpath, is_acquired, state, session, ...
        };
        Ok(Expect { words: words.iter().map(|w| (*w).to_owned()).collect(), key: tokens.next().map(str::to_owned) })
    }

    /// Bare replies (`ok`, `bye`, or any reply to an argument-less command) cannot be told
    /// apart from each other when several commands are in flight.
    fn is_keyed(&self) -> bool {
        self.key.is_some() && !self.words.iter().any(|w| w == "ok" || w == "bye")
    }

    fn matches(&self, line: &str) -> bool {
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else { return false };
        if first != "error" && !self.words.iter().any(|w| w == first) {
            return false;
        }
        if first == "ok" || first == "bye" {
            return true;
        }
        match &self.key {
            Some(key) => words.next() == Some(key.as_str()),
            None => true,
        }
    }
}

/// Whether `line`'s leading words are exactly `prefix`'s words (`"loop-done A"` does not match
/// `"loop-done AB 3"`).
fn starts_with_words(line: &str, prefix: &str) -> bool {
    let mut words = line.split_whitespace();
    prefix.split_whitespace().all(|p| words.next() == Some(p))
}

/// A Curator peer on `connect` with the interop session timeout
/// ([`super::timing::INTEROP_SESSION`]), tracing set up; `None` when Curator is unavailable
/// (the test skips, unless `ZKR_REQUIRE_CURATOR=1`).
pub async fn peer(connect: &str) -> Option<CuratorPeer> {
    super::fixtures::init_tracing();
    CuratorPeer::started(connect, super::timing::INTEROP_SESSION).await
}

/// Polls Curator's `participants ID` until it lists `n` nodes.
pub async fn java_participants(java: &mut CuratorPeer, id: &str, n: usize) -> Vec<String> {
    java.participants_become(id, n, super::timing::INTEROP_EVENT).await.unwrap()
}

/// A running JVM with a Curator client connected to one ZooKeeper ensemble.
///
/// Dropping it kills the JVM. The JVM also exits on its own when its stdin closes, so it cannot
/// outlive the test process.
pub struct CuratorPeer {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    /// Lines read but not yet consumed, in arrival order.
    pending: VecDeque<String>,
    trace: bool,
    pid: u32,
}

impl CuratorPeer {
    /// [`start`](Self::start) for a test: panics on an `Err`; `None` means skip the test.
    pub async fn started(connect: &str, session_timeout: Duration) -> Option<CuratorPeer> {
        Self::start(connect, session_timeout).await.expect("starting the Curator peer")
    }

    /// Compiles `interop/CuratorPeer.java` (once per test binary and source version) and starts
    /// it against `connect`, returning once its client is connected.
    ///
    /// `Ok(None)` (after printing why) when java, javac or the Curator jars are missing, so the
    /// caller can skip; with `ZKR_REQUIRE_CURATOR=1` that is an `Err` instead. A compile error
    /// or a JVM that does not come up is always an `Err`.
    pub async fn start(connect: &str, session_timeout: Duration) -> Result<Option<CuratorPeer>, String> {
        let build = tokio::task::spawn_blocking(|| BUILD.get_or_init(build).clone())
            .await
            .map_err(|e| format!("building the Curator peer panicked: {e}"))?;
        let build = match build {
            Ok(build) => build,
            Err(Problem::Missing(why)) if curator_required() => {
                return Err(format!("Curator interop is required (ZKR_REQUIRE_CURATOR=1) but unavailable: {why}"));
            }
            Err(Problem::Missing(why)) => {
                eprintln!("skipping Curator interop: {why} (set ZKR_REQUIRE_CURATOR=1 to make this an error)");
                return Ok(None);
            }
            Err(Problem::Broken(why)) => return Err(why),
        };

        let log = std::env::var("ZKR_CURATOR_LOG").ok();
        let mut command = Command::new(&build.java);
        command
            // Short-lived test process: fast startup matters more than peak speed.
            .args(["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData"])
            .arg(format!("-Dorg.slf4j.simpleLogger.defaultLogLevel={}", log.as_deref().unwrap_or("warn")))
            .arg(format!("-Dorg.slf4j.simpleLogger.log.org.apache.zookeeper={}", log.as_deref().unwrap_or("error")))
            .arg("-cp")
            .arg(&build.classpath)
            .arg(MAIN_CLASS)
            .arg(connect)
            .arg(session_timeout.as_millis().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|e| format!("starting {}: {e}", build.java.display()))?;
        let pid = child.id().unwrap_or(0);
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("JVM started without piped stdin/stdout".to_owned());
        };
        let mut peer = CuratorPeer {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            pending: VecDeque::new(),
            trace: std::env::var("ZKR_CURATOR_TRACE").is_ok_and(|v| v == "1"),
            pid,
        };
        let started = Instant::now();
        peer.next_matching(started + START_TIMEOUT, "`ready`", |l| starts_with_words(l, "ready"))
            .await
            .map_err(|e| format!("Curator peer did not come up against {connect}: {e}"))?;
        if peer.trace {
            eprintln!("[curator-peer {pid}] ready after {:?}", started.elapsed());
        }
        Ok(Some(peer))
    }

    /// Sends one command and returns its reply line (including `error <key> <message>`
    /// replies; `Err` is for a dead peer or no reply within [`COMMAND_TIMEOUT`]).
    ///
    /// The reply is recognized by its first word (`ok`, `acquired`/`timeout`, `released`,
    /// `participants`, `lockpath`, `loop-started`, `state`, ... or `error`) and, for keyed
    /// replies, by the ID as second word, so asynchronous lines and replies to commands sent
    /// with [`send`](Self::send) are set aside. `acquire ID` without a timeout waits for the
    /// lock: use `send` + `wait_for` when that can take a while.
    pub async fn command(&mut self, line: &str) -> Result<String, String> {
        self.command_within(line, COMMAND_TIMEOUT).await
    }

    /// [`command`](Self::command) with an explicit bound on the wait for the reply.
    pub async fn command_within(&mut self, line: &str, limit: Duration) -> Result<String, String> {
        let expect = Expect::for_command(line)?;
        self.write_line(line).await?;
        self.next_matching(Instant::now() + limit, &format!("the reply to `{line}`"), |l| expect.matches(l)).await
    }

    /// Sends a command without waiting; collect its reply later with
    /// [`wait_for`](Self::wait_for) (e.g. `send("acquire B")`, then `wait_for("acquired B", ..)`).
    ///
    /// Only for commands whose reply carries the ID (acquire, acquire_many, release, lockpath,
    /// participants, is_acquired, loop, rwloop): a bare `ok` left unread would be taken for the reply to
    /// a later command.
    pub async fn send(&mut self, line: &str) -> Result<(), String> {
        if !Expect::for_command(line)?.is_keyed() {
            return Err(format!("`{line}` has an unkeyed reply: use command()"));
        }
        self.write_line(line).await
    }

    /// Waits for a line whose leading words are `prefix` (e.g. `"loop-done A"`, `"acquired B"`,
    /// `"revoke-requested A"`), buffered or new, consuming it; other lines stay buffered.
    pub async fn wait_for(&mut self, prefix: &str, timeout: Duration) -> Result<String, String> {
        self.next_matching(Instant::now() + timeout, &format!("`{prefix}`"), |l| starts_with_words(l, prefix)).await
    }

    /// Takes a buffered line with these leading words, if one has arrived already (no waiting).
    pub fn take_buffered(&mut self, prefix: &str) -> Option<String> {
        let i = self.pending.iter().position(|l| starts_with_words(l, prefix))?;
        self.pending.remove(i)
    }

    /// `participants ID` as a list: full node paths for mutexes and read/write halves, lease
    /// node names for semaphores (as Curator's `getParticipantNodes` returns them).
    pub async fn participants(&mut self, id: &str) -> Result<Vec<String>, String> {
        let reply = self.command(&format!("participants {id}")).await?;
        let mut words = reply.split_whitespace().skip(2);
        let count = words.next().and_then(|n| n.parse::<usize>().ok());
        let nodes: Vec<String> = words.map(str::to_owned).collect();
        if !reply.starts_with("participants ") || count != Some(nodes.len()) {
            return Err(format!("unexpected reply to `participants {id}`: {reply}"));
        }
        Ok(nodes)
    }

    /// Polls `participants ID` until it lists `n` nodes (an `Err` naming the last list when
    /// `timeout` passes first).
    pub async fn participants_become(&mut self, id: &str, n: usize, timeout: Duration) -> Result<Vec<String>, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let nodes = self.participants(id).await?;
            if nodes.len() == n {
                return Ok(nodes);
            }
            if Instant::now() > deadline {
                return Err(format!("Curator's participants of {id}: {nodes:?}, not {n} within {timeout:?}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `lockpath ID`: the node(s) that ID holds, empty when it holds none.
    pub async fn lock_paths(&mut self, id: &str) -> Result<Vec<String>, String> {
        let reply = self.command(&format!("lockpath {id}")).await?;
        if !reply.starts_with("lockpath ") {
            return Err(format!("unexpected reply to `lockpath {id}`: {reply}"));
        }
        Ok(reply.split_whitespace().skip(2).filter(|p| *p != "none").map(str::to_owned).collect())
    }

    /// The JVM's process id (for pausing it with SIGSTOP, for example).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Kills the JVM without closing its session (a crash: its ephemeral nodes stay until the
    /// session expires) and waits for it to exit.
    pub async fn kill(&mut self) -> Result<(), String> {
        let _ = self.child.start_kill();
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .map_err(|_| "JVM did not exit within 10 s of SIGKILL".to_owned())?
            .map(drop)
            .map_err(|e| format!("waiting for the JVM: {e}"))
    }

    /// Closes the Curator client (its session ends now, deleting its ephemeral nodes) and
    /// waits for the JVM to exit.
    pub async fn quit(mut self) -> Result<(), String> {
        self.command_within("quit", Duration::from_secs(10)).await?;
        match tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(Ok(status)) => Err(format!("Curator peer exited with {status}")),
            Ok(Err(e)) => Err(format!("waiting for the JVM: {e}")),
            Err(_) => Err("JVM did not exit within 10 s of `quit`".to_owned()),
        }
    }

    async fn write_line(&mut self, line: &str) -> Result<(), String> {
        if line.contains('\n') {
            return Err(format!("a command is one line: {line:?}"));
        }
        if self.trace {
            eprintln!("[curator-peer {}] > {line}", self.pid);
        }
        let data = format!("{line}\n");
        let write = async {
            self.stdin.write_all(data.as_bytes()).await?;
            self.stdin.flush().await
        };
        tokio::time::timeout(Duration::from_secs(10), write)
            .await
            .map_err(|_| format!("writing `{line}` to the Curator peer timed out"))?
            .map_err(|e| format!("writing `{line}` to the Curator peer: {e}"))
    }

    /// Takes the first buffered line satisfying `pred`, else reads until one arrives,
    /// buffering the others. `Lines::next_line` is cancel-safe, so a timeout loses nothing.
    async fn next_matching(
        &mut self,
        deadline: Instant,
        what: &str,
        pred: impl Fn(&str) -> bool,
    ) -> Result<String, String> {
        if let Some(i) = self.pending.iter().position(|l| pred(l)) {
            return Ok(self.pending.remove(i).unwrap_or_default());
        }
        loop {
            let line = match timeout_at(deadline, self.lines.next_line()).await {
                Ok(Ok(Some(line))) => line,
                Ok(Ok(None)) => {
                    let status = match self.child.try_wait() {
                        Ok(Some(status)) => status.to_string(),
                        _ => "still running".to_owned(),
                    };
                    return Err(format!(
                        "Curator peer closed stdout ({status}) while waiting for {what}; unconsumed lines: {:?}",
                        self.pending
                    ));
                }
                Ok(Err(e)) => return Err(format!("reading from the Curator peer: {e}")),
                Err(_) => return Err(format!("timed out waiting for {what}; unconsumed lines: {:?}", self.pending)),
            };
            if self.trace {
                eprintln!("[curator-peer {}] < {line}", self.pid);
            }
            if pred(&line) {
                return Ok(line);
            }
            self.pending.push_back(line);
        }
    }
}

impl Drop for CuratorPeer {
    fn drop(&mut self) {
        // SIGKILL, no waiting; tokio reaps the process in the background (kill_on_drop).
        let _ = self.child.start_kill();
    }
}

/// Leader election commands (`latch*`, `selector*`; see the `Elections` class of
/// `interop/CuratorPeer.java`). Every reply starts with the verb and the ID.
impl CuratorPeer {
    /// Sends an election command and returns the words of its reply after the verb and ID
    /// (`Err` for an `error ID msg` reply).
    pub async fn election(&mut self, line: &str) -> Result<Vec<String>, String> {
        let reply = self.command(line).await?;
        let mut words = reply.split_whitespace();
        let verb = line.split_whitespace().next().unwrap_or_default();
        if words.next() != Some(verb) {
            return Err(format!("`{line}` failed: {reply}"));
        }
        Ok(words.skip(1).map(str::to_owned).collect())
    }

    /// Sends an election command whose reply is `<verb> <ID> ok`.
    pub async fn election_ok(&mut self, line: &str) -> Result<(), String> {
        match self.election(line).await?.as_slice() {
            [ok] if ok == "ok" => Ok(()),
            other => Err(format!("`{line}`: unexpected reply {other:?}")),
        }
    }

    /// `latch_participants ID` / `selector_participants ID` as (participant id, is leader)
    /// pairs in Curator's order (an empty id reads as `""`).
    pub async fn election_participants(&mut self, verb: &str, id: &str) -> Result<Vec<(String, bool)>, String> {
        let words = self.election(&format!("{verb} {id}")).await?;
        let count = words.first().and_then(|n| n.parse::<usize>().ok());
        let pairs: Vec<(String, bool)> = words
            .iter()
            .skip(1)
            .filter_map(|w| w.rsplit_once('='))
            .map(|(pid, leader)| (if pid == "-" { String::new() } else { pid.to_owned() }, leader == "true"))
            .collect();
        if count != Some(pairs.len()) {
            return Err(format!("unexpected reply to `{verb} {id}`: {words:?}"));
        }
        Ok(pairs)
    }

    /// `latch_leader ID` / `selector_leader ID`: (participant id, is leader); Curator answers
    /// `("", false)` when there is no leader.
    pub async fn election_leader(&mut self, verb: &str, id: &str) -> Result<(String, bool), String> {
        match self.election(&format!("{verb} {id}")).await?.as_slice() {
            [pid, leader] => Ok((if pid == "-" { String::new() } else { pid.clone() }, leader == "true")),
            other => Err(format!("unexpected reply to `{verb} {id}`: {other:?}")),
        }
    }

    /// `latch_has ID` / `selector_has ID`.
    pub async fn election_has_leadership(&mut self, verb: &str, id: &str) -> Result<bool, String> {
        match self.election(&format!("{verb} {id}")).await?.as_slice() {
            [flag] => Ok(flag == "true"),
            other => Err(format!("unexpected reply to `{verb} {id}`: {other:?}")),
        }
    }
}

impl CuratorPeer {
    /// Sends a value-recipe command (`count_incr ID ...`, `atomic_get ID ...`, `barrier_wait
    /// ID ...`, ...: the `Values` commands of the peer) and returns the words of its reply after
    /// the verb and the ID; `Err` for an `error ID msg` reply, a dead peer or no reply within
    /// `limit`.
    pub async fn value_command(&mut self, line: &str, limit: Duration) -> Result<Vec<String>, String> {
        let reply = self.command_within(line, limit).await?;
        value_reply(&reply)
    }

    /// Waits for the reply of a value-recipe command sent with [`send`](Self::send): `verb ID`
    /// is its first two words. As [`value_command`](Self::value_command) returns.
    pub async fn value_reply(&mut self, verb_and_id: &str, limit: Duration) -> Result<Vec<String>, String> {
        let id = verb_and_id.split_whitespace().nth(1).unwrap_or("-");
        let error = format!("error {id}");
        let what = format!("`{verb_and_id}`");
        let reply = self
            .next_matching(Instant::now() + limit, &what, |l| {
                starts_with_words(l, verb_and_id) || starts_with_words(l, &error)
            })
            .await?;
        value_reply(&reply)
    }
}

fn value_reply(reply: &str) -> Result<Vec<String>, String> {
    if reply.starts_with("error ") {
        return Err(reply.to_owned());
    }
    Ok(reply.split_whitespace().skip(2).map(str::to_owned).collect())
}
