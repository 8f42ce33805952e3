//! Running the `zkr` binary from a test: its exit code and output, bounded in time.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use super::common::fixtures::within;

/// What one run of `zkr` produced.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> Value {
        assert_eq!(self.code, 0, "zkr failed: {self:?}");
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }

    pub fn table(&self) -> Vec<&str> {
        assert_eq!(self.code, 0, "zkr failed: {self:?}");
        self.stdout.lines().collect()
    }
}

/// `zkr --connect <connect> <args>` with a clean environment, bounded in time.
pub async fn zkr(connect: &str, args: &[&str]) -> Run {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_zkr"));
    command
        .arg("--connect")
        .arg(connect)
        .args(args)
        .env_remove("ZK_CONNECT")
        .env_remove("ZK_DIGEST")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let output = within(Duration::from_secs(90), "zkr to finish", command.output()).await.expect("running zkr");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}
