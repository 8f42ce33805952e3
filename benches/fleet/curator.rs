//! The same fleet through Apache Curator 5.x (`interop/CuratorFleet.java`), in one JVM, driven
//! command by command through its stdin: its JSON lines go to our stdout as they come.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::classpath::{curator_classpath, find_jdk_tool};
use crate::javac;
use crate::options::{CuratorMode, Options};
use crate::phases::Failure;

const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/CuratorFleet.java");
const MAIN: &str = "CuratorFleet";

/// `CuratorFleet.java`, compiled for this run.
pub(crate) struct CuratorFleet {
    java: PathBuf,
    /// The class directory, then the Curator classpath.
    classpath: String,
    /// Removed when the run ends.
    _classes: tempfile::TempDir,
}

impl CuratorFleet {
    /// Finds java, javac and the Curator jars (with curator-x-discovery) and compiles
    /// `CuratorFleet.java`. `Ok(None)` when something is missing and `--curator auto`, or
    /// with `--curator off`.
    pub(crate) fn prepare(mode: CuratorMode) -> Result<Option<CuratorFleet>, String> {
        if mode == CuratorMode::Off {
            return Ok(None);
        }
        let found = find_jdk_tool("java").and_then(|java| {
            let classpath = curator_classpath()?;
            if !classpath.contains("curator-x-discovery") && std::env::var_os("ZKR_CURATOR_CLASSPATH").is_none() {
                return Err("curator-x-discovery.jar not found (install libcurator-discovery-java)".to_owned());
            }
            Ok((java, find_jdk_tool("javac")?, classpath))
        });
        let (java, javac, curator_classpath) = match found {
            Ok(found) => found,
            Err(why) if mode == CuratorMode::Require => return Err(format!("--curator require: {why}")),
            Err(why) => {
                eprintln!("[fleet] no Curator fleet: {why}");
                return Ok(None);
            }
        };
        let classes = javac::compile(&javac, &curator_classpath, SOURCE, "zk-recipes-curator-fleet-")?;
        let classpath = format!("{}:{curator_classpath}", classes.path().display());
        Ok(Some(CuratorFleet { java, classpath, _classes: classes }))
    }

    /// Starts the JVM for a fleet under `root` on `connect` (default JVM flags: full JIT, G1,
    /// the heap of `--curator-heap-mb`). Its stderr goes to ours.
    pub(crate) fn spawn(&self, options: &Options, connect: &str, root: &str) -> Result<Jvm, Failure> {
        let mut child = tokio::process::Command::new(&self.java)
            .arg(format!("-Xmx{}m", options.curator_heap_mb))
            .arg("-cp")
            .arg(&self.classpath)
            .arg(MAIN)
            .arg(connect)
            .arg(root)
            .arg(options.instances.to_string())
            .arg(options.entities.to_string())
            .arg(options.session_timeout.as_millis().to_string())
            .arg(options.lock_every.as_millis().to_string())
            .arg(options.hold.as_millis().to_string())
            .arg(options.concurrency.to_string())
            .arg(options.seed.to_string())
            .arg(&options.label)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Failure::Phase(format!("starting {MAIN}: {e}")))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(Failure::Phase(format!("{MAIN}: no pipes")));
        };
        Ok(Jvm { child, stdin, stdout: BufReader::new(stdout).lines() })
    }
}

/// The running Curator fleet.
pub(crate) struct Jvm {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Jvm {
    /// Sends `command` and passes the JSON lines on until `OK` (or `FAIL`, or `bound`).
    /// Violations it reports are added to `violations`.
    pub(crate) async fn command(
        &mut self,
        command: &str,
        bound: Duration,
        violations: &mut Vec<String>,
    ) -> Result<(), Failure> {
        let deadline = tokio::time::Instant::now() + bound;
        self.stdin
            .write_all(format!("{command}\n").as_bytes())
            .await
            .map_err(|e| Failure::Phase(format!("{MAIN} `{command}`: {e}")))?;
        self.stdin.flush().await.map_err(|e| Failure::Phase(format!("{MAIN} `{command}`: {e}")))?;
        loop {
            let line = match tokio::time::timeout_at(deadline, self.stdout.next_line()).await {
                Ok(Ok(Some(line))) => line,
                Ok(Ok(None)) => return Err(Failure::Phase(format!("{MAIN} `{command}`: the JVM ended"))),
                Ok(Err(e)) => return Err(Failure::Phase(format!("{MAIN} `{command}`: {e}"))),
                Err(_) => return Err(Failure::Phase(format!("{MAIN} `{command}`: no answer within {bound:?}"))),
            };
            if line.starts_with('{') {
                println!("{line}");
            } else if line == "OK" {
                return Ok(());
            } else if let Some(what) = line.strip_prefix("FAIL ") {
                return Err(Failure::Phase(format!("{MAIN} `{command}`: {what}")));
            } else if let Some(what) = line.strip_prefix("VIOLATION ") {
                violations.push(what.to_owned());
            } else {
                eprintln!("[fleet] curator: {line}");
            }
        }
    }

    /// Waits (at most `bound`) for the JVM to exit after `end`, then kills it.
    pub(crate) async fn finish(mut self, bound: Duration) {
        drop(self.stdin);
        if tokio::time::timeout(bound, self.child.wait()).await.is_err() {
            eprintln!("[fleet] {MAIN} did not exit within {bound:?}; killing it");
            let _ = self.child.kill().await;
        }
    }
}
