//! Every program in `examples/` runs to completion against a real server, so none rots.
//!
//! The examples are (re)built with the same features and profile first (`cargo build
//! --examples`, a no-op after `cargo test` built them), then each runs with `--connect` to
//! this test's server; one also runs with its own embedded server, the way the README shows.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::fixtures::{bounded, shared_connect};

/// Bound on one example's run.
const RUN_LIMIT: Duration = Duration::from_secs(90);

/// The example programs: every `examples/*.rs`.
fn example_names() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            (path.extension()? == "rs").then(|| path.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    names.sort();
    names
}

/// Builds the examples with this test's profile and features, for the workspace's default
/// members as `cargo test` at its root builds them (their dependencies' features unified with
/// `zkr`'s), so that this finds them fresh after such a run; returns their directory.
fn build_examples() -> PathBuf {
    let features: Vec<&str> = [
        ("testing", cfg!(feature = "testing")),
        ("tls", cfg!(feature = "tls")),
        ("sasl", cfg!(feature = "sasl")),
        ("discovery", cfg!(feature = "discovery")),
        ("serde", cfg!(feature = "serde")),
        ("schema", cfg!(feature = "schema")),
        ("sasl-gssapi", cfg!(feature = "sasl-gssapi")),
    ]
    .into_iter()
    .filter_map(|(feature, on)| on.then_some(feature))
    .collect();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = std::process::Command::new(cargo);
    command
        .args(["build", "--quiet", "--examples", "--features", &features.join(",")])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null());
    if cfg!(debug_assertions) {
        command.args(["--profile", "test"]);
    } else {
        command.arg("--release");
    }
    let status = command.status().expect("running cargo build --examples");
    assert!(status.success(), "cargo build --examples failed: {status}");
    // This test runs from <target>/<profile>/deps/; the examples are in <target>/<profile>/examples/.
    let exe = std::env::current_exe().expect("the test's own path");
    exe.parent().and_then(Path::parent).expect("<target>/<profile>").join("examples")
}

async fn run_example(dir: &Path, name: &str, args: &[&str]) -> Result<String, String> {
    let mut command = tokio::process::Command::new(dir.join(name));
    command.args(args).stdin(Stdio::null()).kill_on_drop(true);
    let output = match tokio::time::timeout(RUN_LIMIT, command.output()).await {
        Err(_) => return Err(format!("{name} {args:?}: still running after {RUN_LIMIT:?}")),
        Ok(Err(e)) => return Err(format!("{name}: cannot run {}: {e}", dir.join(name).display())),
        Ok(Ok(output)) => output,
    };
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() && !stdout.trim().is_empty() {
        Ok(stdout)
    } else {
        Err(format!(
            "{name} {args:?}: {}\n--- stdout\n{stdout}--- stderr\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_example_runs() {
    bounded(Duration::from_secs(300), async {
        let names = example_names();
        for expected in [
            "barrier",
            "cache",
            "config_watch",
            "connection_states",
            "counter",
            "discovery",
            "leader_observer",
            "leader",
            "lease",
            "metrics",
            "migrations",
            "multi_lock",
            "mutex",
            "queue_sharder",
            "registration",
            "schema",
            "semaphore",
            "typed_config",
            "service",
            "set_partitioner",
        ] {
            assert!(names.iter().any(|n| n == expected), "examples/{expected}.rs is missing: {names:?}");
        }
        let dir = tokio::task::spawn_blocking(build_examples).await.expect("building the examples");
        let connect = shared_connect().await;

        // One at a time: several use the same fixed paths.
        let mut failures = Vec::new();
        // The schema example needs its feature (on in every test build through the
        // dev-dependency on this package).
        for name in names.iter().filter(|n| *n != "schema" || cfg!(feature = "schema")) {
            match run_example(&dir, name, &["--connect", &connect]).await {
                // The whole service follows a typed configuration and keeps it through a bad write.
                Ok(stdout) if name == "service" => {
                    assert!(stdout.contains("config: batch-size = 40"), "{stdout}");
                    assert!(stdout.contains("does not decode; batch-size stays 40"), "{stdout}");
                    assert!(stdout.contains("with batch-size 40"), "{stdout}");
                }
                Ok(_) => {}
                Err(failure) => failures.push(failure),
            }
        }
        // Without --connect, an example starts its own server.
        match run_example(&dir, "mutex", &[]).await {
            Ok(stdout) => assert!(stdout.contains("holding"), "{stdout}"),
            Err(failure) => failures.push(failure),
        }
        assert!(failures.is_empty(), "{} example run(s) failed:\n{}", failures.len(), failures.join("\n"));
    })
    .await
}
