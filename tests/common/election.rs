//! A leadership log shared by candidates in this process and in Curator JVMs, and its checker:
//! never two leaders that were not told.
//!
//! Every candidate appends `enter <who> <nanos>` when it learns that it leads and `exit <who>`
//! when it learns that it no longer does, each line with one `write(2)` on a file opened with
//! `O_APPEND`, so lines from all processes land whole and in the order they were written. The
//! log is valid when the enters and exits alternate and each exit is by the candidate that
//! entered last: a candidate may only start leading after the previous leader was told.
#![allow(dead_code)] // each test binary uses a different part of this module

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::task::JoinHandle;
use zk_recipes::LeaderLatch;

/// A log file in the temporary directory, removed on drop.
#[derive(Debug)]
pub struct LeaderLog {
    path: PathBuf,
}

impl LeaderLog {
    /// A fresh, empty log named after `name`.
    pub fn new(name: &str) -> Arc<LeaderLog> {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let path = std::env::temp_dir().join(format!("zkr-leader-{name}-{}-{nanos}.log", std::process::id()));
        std::fs::write(&path, b"").expect("creating the leader log");
        Arc::new(LeaderLog { path })
    }

    /// The file's path, for a Curator peer's command line.
    pub fn path_arg(&self) -> String {
        self.path.display().to_string()
    }

    fn append(&self, line: String) {
        let mut file = std::fs::OpenOptions::new().append(true).open(&self.path).expect("opening the leader log");
        file.write_all(line.as_bytes()).expect("appending to the leader log"); // one write(2) per line
    }

    /// `who` (e.g. `rust:R1`) learned that it leads.
    pub fn enter(&self, who: &str) {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        self.append(format!("enter {who} {nanos}\n"));
    }

    /// `who` learned that it no longer leads.
    pub fn exit(&self, who: &str) {
        self.append(format!("exit {who}\n"));
    }

    /// The raw lines.
    pub fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.path).expect("reading the leader log").lines().map(str::to_owned).collect()
    }

    /// Checks the log and returns the leaders in order (one entry per term) and who leads at
    /// the end of the log, if anyone. Panics, with the log, on two leaders at once or an exit
    /// by someone who was not leading.
    pub fn check(&self) -> (Vec<String>, Option<String>) {
        let lines = self.lines();
        let mut terms = Vec::new();
        let mut current: Option<String> = None;
        for (i, line) in lines.iter().enumerate() {
            let mut words = line.split_whitespace();
            match (words.next(), words.next()) {
                (Some("enter"), Some(who)) => {
                    if let Some(leader) = &current {
                        panic!(
                            "line {}: {who} leads while {leader} was not told it stopped:\n{}",
                            i + 1,
                            lines.join("\n")
                        );
                    }
                    current = Some(who.to_owned());
                    terms.push(who.to_owned());
                }
                (Some("exit"), Some(who)) => {
                    if current.as_deref() != Some(who) {
                        panic!("line {}: {who} exits while {current:?} leads:\n{}", i + 1, lines.join("\n"));
                    }
                    current = None;
                }
                _ => panic!("line {}: unexpected {line:?}", i + 1),
            }
        }
        (terms, current)
    }

    /// Polls the log until `pred` holds for (terms, current leader), for at most `limit`.
    pub async fn wait_until(
        &self,
        limit: std::time::Duration,
        what: &str,
        mut pred: impl FnMut(&[String], Option<&str>) -> bool,
    ) -> (Vec<String>, Option<String>) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let (terms, current) = self.check();
            if pred(&terms, current.as_deref()) {
                return (terms, current);
            }
            if tokio::time::Instant::now() >= deadline {
                panic!("{what}: not within {limit:?}; log:\n{}", self.lines().join("\n"));
            }
            tokio::time::sleep(super::fixtures::POLL).await;
        }
    }
}

impl Drop for LeaderLog {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Logs `latch`'s terms as `who`: `enter` when it leads, `exit` when its leadership's `lost()`
/// completes, until the latch is closed (the task then ends; abort it to stop earlier).
pub fn follow_latch(latch: Arc<LeaderLatch>, log: Arc<LeaderLog>, who: &str) -> JoinHandle<()> {
    let who = who.to_owned();
    tokio::spawn(async move {
        while let Ok(leadership) = latch.await_leadership().await {
            log.enter(&who);
            leadership.lost().await;
            log.exit(&who);
        }
    })
}

/// `terms` handed over from a candidate whose name starts with `from` to one starting with
/// `to` at least once.
pub fn handed_over(terms: &[String], from: &str, to: &str) -> bool {
    terms.windows(2).any(|w| w[0].starts_with(from) && w[1].starts_with(to))
}
