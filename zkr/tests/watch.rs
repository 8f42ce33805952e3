//! `zkr watch` against a real ZooKeeper server: the initial load, then one line per change of
//! a subtree (created, changed, deleted at every depth), as JSON lines and as table lines,
//! and the ways it ends (`--count`, `--for`, a bad path).

#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::future::IntoFuture;
use std::process::Stdio;
use std::time::Duration;

use common::fixtures::{bounded, plain_framework, shared_connect, unique_path, within};
use common::timing::{EVENT, LIMIT, SESSION};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};
use zk_recipes::protocol::gzip;

fn spawn(args: &[&str]) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_zkr"))
        .args(args)
        .env_remove("ZK_CONNECT")
        .env_remove("ZK_DIGEST")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("starting zkr watch");
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>) -> String {
    within(EVENT, "a line from zkr watch", lines.next_line()).await.unwrap().expect("more output from zkr watch")
}

async fn next_json(lines: &mut Lines<BufReader<ChildStdout>>) -> Value {
    let line = next_line(lines).await;
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"))
}

/// `(event, path, version, data)` of a JSON line.
fn summary(line: &Value) -> (String, String, i64, String) {
    (
        line["event"].as_str().unwrap_or("").to_owned(),
        line["path"].as_str().unwrap_or("").to_owned(),
        line["node"]["version"].as_i64().unwrap_or(-1),
        line["node"]["data"].as_str().unwrap_or("").to_owned(),
    )
}

async fn exit_code(mut child: Child) -> i32 {
    within(EVENT, "zkr watch to end", child.wait()).await.unwrap().code().unwrap_or(-1)
}

#[tokio::test(flavor = "multi_thread")]
async fn json_lines_for_the_load_and_every_change() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let root = unique_path("zkr", "watch-json");
        let fw = plain_framework(&connect, SESSION).await;
        fw.create(&root).data(b"root").await.unwrap();
        fw.create(&format!("{root}/a")).data(b"a0").await.unwrap();
        fw.create(&format!("{root}/a/b")).data(b"b0").await.unwrap();

        // 3 nodes + initialized, then 7 changes: it ends by itself after 11 lines.
        let (child, mut lines) = spawn(&["--connect", &connect, "watch", &root, "--json", "--count", "11"]);
        let mut loaded = BTreeSet::new();
        for _ in 0..3 {
            let line = next_json(&mut lines).await;
            assert_eq!(line["event"], "created", "{line}");
            loaded.insert((summary(&line).1, summary(&line).3));
        }
        let expected: BTreeSet<_> =
            [(root.clone(), "root"), (format!("{root}/a"), "a0"), (format!("{root}/a/b"), "b0")]
                .into_iter()
                .map(|(p, d)| (p, d.to_owned()))
                .collect();
        assert_eq!(loaded, expected);
        let line = next_json(&mut lines).await;
        assert_eq!((line["event"].as_str(), line["nodes"].as_u64()), (Some("initialized"), Some(3)), "{line}");

        // One change at a time, each line awaited before the next change: every depth.
        let c = format!("{root}/a/b/c");
        fw.create(&c).data(b"c0").await.unwrap();
        assert_eq!(summary(&next_json(&mut lines).await), ("created".into(), c.clone(), 0, "c0".into()));
        fw.set_data(&c, b"c1").await.unwrap();
        let line = next_json(&mut lines).await;
        assert_eq!(summary(&line), ("changed".into(), c.clone(), 1, "c1".into()));
        assert_eq!((line["old"]["version"].as_i64(), line["old"]["data"].as_str()), (Some(0), Some("c0")));
        fw.set_data(&root, b"root1").await.unwrap();
        assert_eq!(summary(&next_json(&mut lines).await), ("changed".into(), root.clone(), 1, "root1".into()));
        fw.set_data(&format!("{root}/a"), &[0xff, 0x00]).await.unwrap();
        let line = next_json(&mut lines).await;
        assert_eq!(summary(&line), ("changed".into(), format!("{root}/a"), 1, "ff00".into()));
        assert_eq!(line["node"]["data_encoding"], "hex");
        // Gzip (as Curator's `compressed()` writes) is shown decompressed.
        fw.set_data(&format!("{root}/a"), &gzip::compress(br#"{"on":true}"#)).await.unwrap();
        let line = next_json(&mut lines).await;
        assert_eq!(summary(&line), ("changed".into(), format!("{root}/a"), 2, r#"{"on":true}"#.into()));
        assert_eq!(line["node"]["data_encoding"], "gzip-text");
        fw.delete(&c).await.unwrap();
        let line = next_json(&mut lines).await;
        assert_eq!(summary(&line), ("deleted".into(), c.clone(), 1, "c1".into()), "the last value");
        fw.delete(&format!("{root}/a/b")).await.unwrap();
        assert_eq!(summary(&next_json(&mut lines).await), ("deleted".into(), format!("{root}/a/b"), 0, "b0".into()));

        assert_eq!(exit_code(child).await, 0, "--count 11 ends it with success");
        fw.delete(&format!("{root}/a")).await.unwrap();
        fw.delete(&root).await.unwrap();
        fw.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn table_lines_for_a_path_created_later_and_for_ends() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let root = unique_path("zkr", "watch-table");
        let fw = plain_framework(&connect, SESSION).await;

        // The path does not exist yet: the load is empty.
        let (child, mut lines) = spawn(&["--connect", &connect, "watch", &root, "--count", "4"]);
        let line = next_line(&mut lines).await;
        assert!(line.ends_with("initialized  0 nodes"), "{line}");
        fw.create(&root).data(b"hello").await.unwrap();
        let line = next_line(&mut lines).await;
        assert!(line.contains(&format!("created      {root}  v0 \"hello\"")), "{line}");
        fw.create(&format!("{root}/x")).await.unwrap();
        let line = next_line(&mut lines).await;
        assert!(line.contains(&format!("created      {root}/x  v0")), "{line}");
        fw.set_data(&root, b"bye").await.unwrap();
        let line = next_line(&mut lines).await;
        assert!(line.contains(&format!("changed      {root}  v1 \"bye\" (was v0)")), "{line}");
        assert_eq!(exit_code(child).await, 0);

        // --for ends it too, with --stats-only and --mode children.
        let started = std::time::Instant::now();
        let (child, mut lines) =
            spawn(&["--connect", &connect, "watch", &root, "--mode", "children", "--stats-only", "--for", "1s"]);
        let line = next_line(&mut lines).await;
        assert!(line.contains(&format!("created      {root}/x  v0")) && !line.contains('"'), "{line}");
        assert!(next_line(&mut lines).await.ends_with("initialized  1 nodes"));
        assert_eq!(exit_code(child).await, 0);
        assert!(started.elapsed() >= Duration::from_secs(1));

        // A duration past the clock's range watches for ever (here: until --count).
        let (child, mut lines) = spawn(&[
            "--connect",
            &connect,
            "watch",
            &root,
            "--stats-only",
            "--for",
            "3000000000000000h",
            "--count",
            "1",
        ]);
        assert!(next_line(&mut lines).await.contains(&format!("created      {root}")));
        assert_eq!(exit_code(child).await, 0);

        // A path that is not a valid path: usage error (2), before connecting.
        let (child, _lines) = spawn(&["--connect", &connect, "watch", "no-slash"]);
        assert_eq!(exit_code(child).await, 2);

        fw.delete(&format!("{root}/x")).await.unwrap();
        fw.delete(&root).await.unwrap();
        fw.close().await;
    })
    .await
}

/// A reader that falls behind (its pipe full while thousands of changes come) gets a `lagged`
/// line saying how many events zkr missed, then the events that follow.
#[tokio::test(flavor = "multi_thread")]
async fn a_reader_that_falls_behind_gets_a_lagged_line() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let root = unique_path("zkr-watch", "lagged");
        fw.create(&root).data(b"").await.unwrap();
        let (child, mut lines) = spawn(&["--connect", &connect, "watch", &root, "--json"]);
        assert_eq!(next_json(&mut lines).await["event"], "created");
        assert_eq!(next_json(&mut lines).await["event"], "initialized");
        // Nobody reads while 12,000 nodes are made: the pipe fills, and zkr's cache stream falls
        // more than its 10,000 events behind.
        for round in 0..12u32 {
            let paths: Vec<String> = (0..1_000u32).map(|i| format!("{root}/n{}", round * 1_000 + i)).collect();
            let writes: Vec<_> = paths.iter().map(|path| fw.create(path).data(b"").into_future()).collect();
            for written in futures::future::join_all(writes).await {
                written.unwrap();
            }
        }
        let lagged = within(EVENT, "the lagged line", async {
            loop {
                let line = next_json(&mut lines).await;
                if line["event"] == "lagged" {
                    return line;
                }
                assert_eq!(line["event"], "created", "{line}");
            }
        })
        .await;
        assert!(lagged["missed"].as_u64().unwrap() > 0, "{lagged}");
        assert!(lagged["nodes"].as_u64().unwrap() > 1, "{lagged}");
        let after = format!("{root}/after");
        fw.create(&after).data(b"").await.unwrap();
        within(EVENT, "the event after", async {
            loop {
                let line = next_json(&mut lines).await;
                if line["path"] == after.as_str() {
                    assert_eq!(line["event"], "created", "{line}");
                    return;
                }
            }
        })
        .await;
        drop(child);
        fw.delete(&root).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// A node the session may not read is left out of the cache, and zkr says so on stderr (the
/// framework's background error), rather than showing a tree with a node silently missing.
#[tokio::test(flavor = "multi_thread")]
async fn a_node_zkr_may_not_read_is_reported_on_stderr() {
    use zk_recipes::{Acl, AuthId, Permission};
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let root = unique_path("zkr-watch", "unreadable");
        fw.create(&root).data(b"").await.unwrap();
        fw.create(&format!("{root}/open")).data(b"o").await.unwrap();
        let secret = format!("{root}/secret");
        let no_read = vec![Acl::new(Permission::WRITE | Permission::DELETE | Permission::ADMIN, AuthId::anyone())];
        fw.create(&secret).acl(no_read).await.unwrap();
        // The root and the open node, then initialized: three lines, and it ends.
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_zkr"))
            .args(["--connect", &connect, "watch", &root, "--json", "--count", "3"])
            .env_remove("ZK_CONNECT")
            .env_remove("ZK_DIGEST")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let output = within(EVENT, "zkr watch to end", output).await.unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        assert!(!stdout.contains("/secret"), "{stdout}");
        assert!(stderr.contains("CacheReadRefused") && stderr.contains(&secret), "{stderr}");
        // A recursive delete would list the secret node's children, which it may not.
        fw.delete(&secret).await.unwrap();
        fw.delete(&root).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}
