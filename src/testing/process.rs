//! One ZooKeeper server JVM, tied to the life of the test process.
//!
//! The JVM is started through a tiny `sh` wrapper:
//!
//! ```text
//! sh -c '<watchdog> & exec java …' zk-testing CLEANUP_DIR LOG_FILE java ARGS…
//! ```
//!
//! The shell forks a watchdog subshell that blocks reading a pipe whose only writer is this
//! process, then `exec`s Java, so the JVM keeps the shell's pid and is our direct child (we can
//! wait for it and SIGKILL it without `unsafe`). When this process goes away for any reason
//! (normal exit with the server still owned by a `static`, panic with `panic = "abort"`,
//! SIGKILL), the pipe reaches EOF and the watchdog SIGKILLs the JVM and removes the server's
//! temporary directory. When we retire a server ourselves, we reap the JVM first and then
//! write `release` to the pipe: the watchdog exits without touching anything, so it never
//! signals a pid that could have been reused.

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Installation, TestingError};

/// The wrapper script; positional parameters: cleanup dir, log file, then the command.
/// The watchdog ignores the signals a terminal or `timeout` sends to the whole process
/// group, so it outlives the test process and can clean up after it.
const WRAPPER: &str = r#"cleanup=$1; log=$2; shift 2
exec 3<&0
( trap '' HUP INT TERM
  read -r cmd <&3 || cmd=
  if [ "$cmd" != release ]; then kill -9 $$; rm -rf -- "$cleanup"; fi ) </dev/null >/dev/null 2>&1 &
exec "$@" </dev/null 3<&- >>"$log" 2>&1
"#;

/// Bound on a SIGSTOPped JVM's threads all reaching the stopped state.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// JVM flags that keep several servers cheap to start on a small machine.
const JVM_FLAGS: &[&str] = &[
    "-Xmx256m",
    "-Xss512k",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    // No /tmp/hsperfdata_<user>/<pid> file that a SIGKILL would leave behind.
    "-XX:-UsePerfData",
    "-Djava.net.preferIPv4Stack=true",
    "-Djava.awt.headless=true",
    "-Dzookeeper.jmx.log4j.disable=true",
    "-Dzookeeper.admin.enableServer=false",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
];

/// Everything needed to (re)start one server JVM.
#[derive(Debug, Clone)]
pub(crate) struct LaunchSpec {
    /// For messages: `standalone`, `node0`, ….
    pub(crate) name: String,
    pub(crate) installation: Installation,
    pub(crate) main_class: &'static str,
    pub(crate) config_file: PathBuf,
    pub(crate) log_file: PathBuf,
    /// Removed by the watchdog if this process dies without cleaning up.
    pub(crate) cleanup_dir: PathBuf,
    /// Extra `-Dkey=value` system properties.
    pub(crate) system_properties: Vec<(String, String)>,
    /// Extra JVM options, after the defaults (so they win).
    pub(crate) jvm_args: Vec<String>,
}

impl LaunchSpec {
    pub(crate) fn spawn(&self) -> Result<JavaProcess, TestingError> {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(WRAPPER)
            .arg("zk-testing")
            .arg(&self.cleanup_dir)
            .arg(&self.log_file)
            .arg(self.installation.java())
            .args(JVM_FLAGS)
            .args(&self.jvm_args)
            .args(self.system_properties.iter().map(|(key, value)| format!("-D{key}={value}")))
            .arg("-cp")
            .arg(self.installation.classpath_arg())
            .arg(self.main_class)
            .arg(&self.config_file)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(dir) = self.config_file.parent() {
            command.current_dir(dir);
        }
        let mut child = command
            .spawn()
            .map_err(|e| TestingError::io(format!("spawning ZooKeeper server {} (sh + java)", self.name), e))?;
        let watchdog = child.stdin.take();
        tracing::debug!(server = %self.name, pid = child.id(), "spawned ZooKeeper server");
        Ok(JavaProcess { name: self.name.clone(), child, watchdog, exit: None })
    }
}

/// A running (or exited, not yet dropped) server JVM. Dropping it SIGKILLs the JVM.
#[derive(Debug)]
pub(crate) struct JavaProcess {
    name: String,
    child: Child,
    watchdog: Option<ChildStdin>,
    exit: Option<ExitStatus>,
}

impl JavaProcess {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if the JVM has exited (reaps it and retires the watchdog).
    pub(crate) fn poll_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exit = Some(status);
                self.release_watchdog();
            }
        }
        self.exit
    }

    pub(crate) fn is_running(&mut self) -> bool {
        self.poll_exit().is_none()
    }

    /// Sends a signal by name (`STOP`, `CONT`, `TERM`) through the shell's `kill` builtin.
    pub(crate) fn signal(&mut self, signal: &'static str) -> Result<(), TestingError> {
        if !self.is_running() {
            return Err(TestingError::NotRunning { name: self.name.clone() });
        }
        // Not reaped yet (poll_exit above did not see an exit), so the pid is still ours.
        let pid = self.pid();
        let output = Command::new("sh")
            .arg("-c")
            .arg(r#"kill -s "$1" "$2""#)
            .arg("zk-testing-kill")
            .arg(signal)
            .arg(pid.to_string())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| TestingError::io(format!("running kill -s {signal} {pid}"), e))?;
        if !output.status.success() {
            let detail = String::from_utf8_lossy(&output.stderr).trim().to_owned();
            return Err(TestingError::Signal { signal, pid, detail });
        }
        if signal == "STOP" {
            // kill(2) returns before the threads have stopped: on a loaded machine a JVM
            // thread can still answer a request for a while. Wait until all have stopped.
            let deadline = Instant::now() + STOP_TIMEOUT;
            while all_threads_stopped(pid) == Some(false) {
                if Instant::now() >= deadline {
                    return Err(TestingError::timeout(format!("pausing {} (SIGSTOP)", self.name), STOP_TIMEOUT));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(())
    }

    /// SIGKILL (works on a stopped process too).
    pub(crate) fn kill(&mut self) {
        if self.is_running() {
            let _ = self.child.kill();
        }
    }

    /// Waits (polling) until the JVM has exited, at most `timeout`.
    pub(crate) async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.poll_exit() {
                return Some(status);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Graceful stop: SIGTERM (plus SIGCONT in case it is paused), SIGKILL after `grace`.
    pub(crate) async fn terminate(&mut self, grace: Duration) -> Result<(), TestingError> {
        if !self.is_running() {
            return Ok(());
        }
        let sent = self.signal("TERM").and_then(|()| self.signal("CONT"));
        if let Err(err) = sent {
            if self.is_running() {
                tracing::debug!(server = %self.name, error = %err, "SIGTERM failed; killing");
            }
        }
        if self.wait_exit(grace).await.is_none() {
            tracing::warn!(server = %self.name, ?grace, "server ignored SIGTERM; killing it");
            self.kill();
            self.wait_exit(Duration::from_secs(10))
                .await
                .ok_or_else(|| TestingError::timeout(format!("killing server {}", self.name), grace))?;
        }
        Ok(())
    }

    /// SIGKILL and wait for the exit.
    pub(crate) async fn kill_and_wait(&mut self) -> Result<(), TestingError> {
        self.kill();
        let timeout = Duration::from_secs(10);
        self.wait_exit(timeout)
            .await
            .map(|_| ())
            .ok_or_else(|| TestingError::timeout(format!("killing server {}", self.name), timeout))
    }

    fn release_watchdog(&mut self) {
        if let Some(mut pipe) = self.watchdog.take() {
            // The watchdog may already be gone; nothing to do then.
            let _ = pipe.write_all(b"release\n");
        }
    }
}

impl Drop for JavaProcess {
    fn drop(&mut self) {
        if self.exit.is_none() {
            let _ = self.child.kill();
            // A SIGKILLed JVM is gone within milliseconds; bound the wait anyway.
            let deadline = Instant::now() + Duration::from_secs(2);
            while self.poll_exit().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        // If the JVM was reaped, the watchdog was released; otherwise dropping the pipe makes
        // the watchdog kill it (again) and clean up.
        if self.exit.is_some() {
            tracing::debug!(server = %self.name, "ZooKeeper server process gone");
        }
    }
}

/// Whether every thread of `pid` is stopped (or gone), from `/proc/PID/task/*/stat`;
/// `None` where `/proc` is not available.
fn all_threads_stopped(pid: u32) -> Option<bool> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    for task in tasks.flatten() {
        // A thread that exited meanwhile has no stat any more.
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
        if !matches!(state, Some('T' | 't' | 'Z' | 'X')) {
            return Some(false);
        }
    }
    Some(true)
}

/// A mutex-protected optional process, for `&self` signal methods.
pub(crate) type ProcessSlot = crate::sync::Mutex<Option<JavaProcess>>;

/// Ports handed out by this process, so parallel tests never get the same one twice.
static HANDED_OUT: crate::sync::Mutex<Vec<u16>> = crate::sync::Mutex::new(Vec::new());

/// A currently free loopback port: bind 127.0.0.1:0, read the port, close.
pub(crate) fn free_port() -> Result<u16, TestingError> {
    for _ in 0..100 {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| TestingError::io("binding 127.0.0.1:0 to find a free port", e))?;
        let port = listener.local_addr().map_err(|e| TestingError::io("reading a bound port", e))?.port();
        let mut handed_out = HANDED_OUT.lock();
        if !handed_out.contains(&port) {
            handed_out.push(port);
            return Ok(port);
        }
    }
    Err(TestingError::io(
        "finding a free port",
        std::io::Error::new(std::io::ErrorKind::AddrInUse, "no new free port after 100 tries"),
    ))
}

/// The last `lines` lines of a log file (empty if unreadable).
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Sends a ZooKeeper four-letter word to `address` and returns the whole answer.
pub(crate) async fn four_letter_word_with_timeout(
    address: &str,
    word: &str,
    timeout: Duration,
) -> Result<String, TestingError> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(address).await?;
        stream.write_all(word.as_bytes()).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&answer).into_owned())
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(TestingError::io(format!("sending `{word}` to {address}"), e)),
        Err(_) => Err(TestingError::timeout(format!("four-letter word `{word}` to {address}"), timeout)),
    }
}

/// The `Mode:` line of a `srvr` answer.
pub(crate) fn parse_mode(srvr: &str) -> Option<String> {
    srvr.lines().find_map(|line| line.strip_prefix("Mode:")).map(|mode| mode.trim().to_owned())
}

/// `srvr`'s mode of the server at `address`, `None` if it does not answer or does not serve.
pub(crate) async fn server_mode(address: &str) -> Option<String> {
    let answer = four_letter_word_with_timeout(address, "srvr", Duration::from_secs(2)).await.ok()?;
    parse_mode(&answer)
}

/// Whether the server answering at `address` may be ours: not when its `conf` names a
/// `dataDir` outside our server's directory, nor when it refuses `conf` although our server's
/// configuration allows it (another server listens on the port: one of another process that
/// took it, or one of the machine's, answers `srvr` just as well while our JVM has yet to find
/// the port taken). A server not serving yet (no quorum) answers `conf` with no `dataDir`:
/// it may be ours.
async fn may_be_ours(address: &str, spec: &LaunchSpec) -> bool {
    let conf = four_letter_word_with_timeout(address, "conf", Duration::from_secs(2)).await.unwrap_or_default();
    if let Some(data) = conf.lines().find_map(|line| line.strip_prefix("dataDir=")) {
        return std::path::Path::new(data.trim()).starts_with(&spec.cleanup_dir);
    }
    conf.contains("not currently serving") || !allows_conf(&spec.config_file)
}

/// Whether the server configuration at `config` lets clients ask `conf` (its
/// `4lw.commands.whitelist` is `*` or names it).
fn allows_conf(config: &std::path::Path) -> bool {
    let text = std::fs::read_to_string(config).unwrap_or_default();
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("4lw.commands.whitelist="))
        .any(|words| words.split(',').map(str::trim).any(|word| word == "*" || word == "conf"))
}

/// Polls `srvr` on the server at `address` until `accept(answer)` holds and the answer is our
/// server's; fails early if the process exits, and after `timeout` with the log tail.
pub(crate) async fn wait_for_srvr(
    slot: &mut Option<JavaProcess>,
    spec: &LaunchSpec,
    address: &str,
    timeout: Duration,
    accept: impl Fn(&str) -> bool,
) -> Result<(), TestingError> {
    let deadline = crate::deadline::after(timeout);
    loop {
        let exited = match slot.as_mut() {
            Some(process) => process.poll_exit(),
            None => return Err(TestingError::NotRunning { name: spec.name.clone() }),
        };
        if let Some(status) = exited {
            return Err(TestingError::ServerExited {
                name: spec.name.clone(),
                status: status.to_string(),
                log: spec.log_file.clone(),
                log_tail: log_tail(&spec.log_file, 40),
            });
        }
        if let Ok(answer) = four_letter_word_with_timeout(address, "srvr", Duration::from_secs(2)).await {
            if accept(&answer) && may_be_ours(address, spec).await {
                return Ok(());
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(TestingError::StartTimeout {
                name: spec.name.clone(),
                timeout,
                log: spec.log_file.clone(),
                log_tail: log_tail(&spec.log_file, 40),
            });
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// An acceptor for [`wait_for_srvr`]: the server serves in one of `modes`.
pub(crate) fn mode_in(modes: &'static [&'static str]) -> impl Fn(&str) -> bool {
    move |answer| parse_mode(answer).is_some_and(|mode| modes.contains(&mode.as_str()))
}

/// Writes a server configuration file (`key=value` lines).
pub(crate) fn write_config(path: &Path, entries: &[(String, String)]) -> Result<(), TestingError> {
    let mut text = String::new();
    for (key, value) in entries {
        text.push_str(key);
        text.push('=');
        text.push_str(value);
        text.push('\n');
    }
    std::fs::write(path, text).map_err(|e| TestingError::io(format!("writing {}", path.display()), e))
}

/// Replaces or appends `key` in a config entry list.
pub(crate) fn set_entry(entries: &mut Vec<(String, String)>, key: &str, value: String) {
    match entries.iter_mut().find(|(k, _)| k == key) {
        Some(entry) => entry.1 = value,
        None => entries.push((key.to_owned(), value)),
    }
}

/// `127.0.0.1:port`.
pub(crate) fn loopback(port: u16) -> String {
    SocketAddr::from(([127, 0, 0, 1], port)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_srvr_mode() {
        let answer = "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: follower\nNode count: 5\n";
        assert_eq!(parse_mode(answer).as_deref(), Some("follower"));
        assert_eq!(parse_mode("This ZooKeeper instance is not currently serving requests\n"), None);
    }

    #[test]
    fn free_ports_are_distinct() {
        let a = free_port().unwrap();
        let b = free_port().unwrap();
        assert_ne!(a, b);
    }
}
