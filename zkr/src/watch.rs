//! `zkr watch <path>`: a `CuratorCache` of a subtree, its events printed as they happen.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use serde::Serialize;
use zk_recipes::{CacheEvent, CacheMode, ChildData, CuratorCache};

use crate::connect::{with_progress, Options};
use crate::exit::Failure;
use crate::render;

/// Longest data shown on a table line (JSON has it all).
const DATA_WIDTH: usize = 40;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The node to watch (it need not exist yet); by default it and everything below it
    path: String,

    /// Print one JSON object per line instead of a table line per event
    #[arg(long)]
    json: bool,

    /// What to hold: the node and its descendants, the node alone, or its direct children
    #[arg(long, value_enum, default_value = "tree")]
    mode: Mode,

    /// Keep stats only: nodes are read without their data, events carry none
    #[arg(long)]
    stats_only: bool,

    /// Stop after printing this many events (the initial load's included) [default: until
    /// Ctrl-C]
    #[arg(long, value_name = "N")]
    count: Option<u64>,

    /// Stop after this long (e.g. 30s, 5m) [default: until Ctrl-C]
    #[arg(long = "for", value_parser = crate::parse_duration, value_name = "DURATION")]
    duration: Option<Duration>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Mode {
    /// The node and all its descendants (Curator's default)
    Tree,
    /// The node alone
    Node,
    /// The node's direct children, not the node itself
    Children,
}

/// One printed event, as `--json` writes it.
#[derive(Debug, Serialize)]
struct Line<'a> {
    /// Milliseconds since the Unix epoch, when zkr received the event.
    at_ms: u128,
    /// `created`, `changed`, `deleted`, `initialized` or `lagged` (zkr fell behind: `missed`
    /// events were dropped, and `nodes` is the cache's size as of then).
    event: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<&'a str>,
    /// The node as the event leaves it (its last value for `deleted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<Node>,
    /// `changed`: the value before.
    #[serde(skip_serializing_if = "Option::is_none")]
    old: Option<Node>,
    /// `initialized` and `lagged`: how many nodes the cache holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    nodes: Option<usize>,
    /// `lagged`: how many events zkr missed.
    #[serde(skip_serializing_if = "Option::is_none")]
    missed: Option<u64>,
}

#[derive(Debug, Serialize)]
struct Node {
    version: i32,
    czxid: i64,
    mzxid: i64,
    num_children: i32,
    ephemeral_owner: Option<String>,
    /// The data as text or hex, decompressed when it was gzip (see `data_encoding`: `text`,
    /// `hex`, `gzip-text`, `gzip-hex`); `null` with `--stats-only`.
    data: Option<String>,
    data_encoding: Option<&'static str>,
}

impl Node {
    fn of(node: &ChildData) -> Node {
        let stat = node.stat();
        let (data, data_encoding) = match node.data() {
            Some(bytes) => {
                let (text, encoding) = render::data_decompressed(bytes);
                (text, Some(encoding))
            }
            None => (None, None),
        };
        Node {
            version: stat.version,
            czxid: stat.czxid,
            mzxid: stat.mzxid,
            num_children: stat.num_children,
            ephemeral_owner: (stat.ephemeral_owner != 0).then(|| format!("{:#x}", stat.ephemeral_owner)),
            data,
            data_encoding,
        }
    }
}

pub async fn run(options: &Options, args: Args) -> Result<(), Failure> {
    let connect = options.connect_string();
    let framework = options.build(connect)?;
    let mode = match args.mode {
        Mode::Tree => CacheMode::Tree,
        Mode::Node => CacheMode::SingleNode,
        Mode::Children => CacheMode::Children,
    };
    let mut builder = CuratorCache::builder(&framework, &args.path).mode(mode);
    if args.stats_only {
        builder = builder.stats_only();
    }
    let cache = builder.build().map_err(|e| Failure::from_error(e, "checking the path", connect))?;
    options.start(&framework, connect).await?;
    // What the cache could not do (a node it may not read, left out of it) goes to stderr.
    let errors = tokio::spawn(report_errors(framework.errors()));
    let outcome = watch(&cache, &args, connect).await;
    cache.close().await;
    // Closing ends the errors' stream: the reporter prints what came before and ends.
    framework.close().await;
    let _ = errors.await;
    outcome
}

/// Prints each background error of the framework to stderr (`zkr: cache CacheReadRefused at
/// <path>: ...`).
async fn report_errors(mut errors: zk_recipes::BackgroundErrors) {
    while let Some(event) = errors.next().await {
        match event {
            zk_recipes::BackgroundEvent::Error(error) => eprintln!("zkr: {error}"),
            zk_recipes::BackgroundEvent::Lagged(missed) => eprintln!("zkr: {missed} background errors not shown"),
            _ => {}
        }
    }
}

async fn watch(cache: &CuratorCache, args: &Args, connect: &str) -> Result<(), Failure> {
    let mut events = cache.events();
    with_progress(&format!("adding a watch on {}", args.path), cache.start())
        .await
        .map_err(|e| Failure::from_error(e, &format!("watching {}", args.path), connect))?;
    // A duration past the clock's range watches for ever, as no duration does.
    let deadline = args.duration.and_then(|d| tokio::time::Instant::now().checked_add(d));
    let until = async {
        match deadline {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    let mut until = std::pin::pin!(until);
    let mut printed = 0u64;
    loop {
        if args.count.is_some_and(|n| printed >= n) {
            return Ok(());
        }
        tokio::select! {
            event = events.next() => match event {
                Some(event) => {
                    print(cache, &event, args.json);
                    printed += 1;
                }
                // The cache ended without our asking: the server refused to add its watch
                // again (the framework reconnects for ever otherwise). What was printed is not
                // all there was.
                None => {
                    return Err(Failure::other(format!(
                        "the watch on {} ended: the server at {connect} refused to add it again (the error above says why)",
                        args.path
                    )))
                }
            },
            _ = &mut until => return Ok(()),
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

fn print(cache: &CuratorCache, event: &CacheEvent, json: bool) {
    let at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    if json {
        let mut line = Line {
            at_ms: at.as_millis(),
            event: "",
            path: event.path(),
            node: None,
            old: None,
            nodes: None,
            missed: None,
        };
        match event {
            CacheEvent::Created(node) => (line.event, line.node) = ("created", Some(Node::of(node))),
            CacheEvent::Changed(old, new) => {
                (line.event, line.node, line.old) = ("changed", Some(Node::of(new)), Some(Node::of(old)));
            }
            CacheEvent::Deleted(node) => (line.event, line.node) = ("deleted", Some(Node::of(node))),
            CacheEvent::Initialized => (line.event, line.nodes) = ("initialized", Some(cache.len())),
            CacheEvent::Lagged { missed, nodes } => {
                (line.event, line.nodes, line.missed) = ("lagged", Some(nodes.len()), Some(*missed));
            }
            _ => return,
        }
        match serde_json::to_string(&line) {
            Ok(text) => println!("{text}"),
            Err(e) => eprintln!("zkr: cannot encode an event: {e}"),
        }
        return;
    }
    let clock = clock(at);
    match event {
        CacheEvent::Created(node) => println!("{clock}  created      {}  {}", node.path(), summary(node)),
        CacheEvent::Changed(old, new) => {
            println!("{clock}  changed      {}  {} (was v{})", new.path(), summary(new), old.stat().version)
        }
        CacheEvent::Deleted(node) => println!("{clock}  deleted      {}  {}", node.path(), summary(node)),
        CacheEvent::Initialized => println!("{clock}  initialized  {} nodes", cache.len()),
        CacheEvent::Lagged { missed, nodes } => {
            println!("{clock}  lagged       {missed} events missed; the cache holds {} nodes", nodes.len())
        }
        _ => {}
    }
}

/// `v3 "text"`, `v3 hex 00ff..`, `v3 gzip "text"` (decompressed), `v3` (no data kept),
/// `v3 ephemeral 0x..`.
fn summary(node: &ChildData) -> String {
    let stat = node.stat();
    let mut out = format!("v{}", stat.version);
    if stat.ephemeral_owner != 0 {
        out.push_str(&format!(" ephemeral {:#x}", stat.ephemeral_owner));
    }
    if let Some(bytes) = node.data() {
        match render::data_decompressed(bytes) {
            (Some(text), "text") => out.push_str(&format!(" {:?}", shorten(&text))),
            (Some(text), "gzip-text") => out.push_str(&format!(" gzip {:?}", shorten(&text))),
            (Some(hex), "gzip-hex") => out.push_str(&format!(" gzip hex {}", shorten(&hex))),
            (Some(hex), _) => out.push_str(&format!(" hex {}", shorten(&hex))),
            (None, _) => {}
        }
    }
    out
}

fn shorten(text: &str) -> String {
    if text.chars().count() <= DATA_WIDTH {
        return text.to_owned();
    }
    let mut short: String = text.chars().take(DATA_WIDTH - 1).collect();
    short.push('…');
    short
}

/// `HH:MM:SS.mmm` (UTC).
fn clock(at: Duration) -> String {
    let secs = at.as_secs() % 86_400;
    format!("{:02}:{:02}:{:02}.{:03}Z", secs / 3_600, (secs % 3_600) / 60, secs % 60, at.subsec_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_and_shortening() {
        assert_eq!(clock(Duration::from_millis(86_400_000 + 3_723_045)), "01:02:03.045Z");
        assert_eq!(shorten("abc"), "abc");
        assert_eq!(shorten(&"x".repeat(100)).chars().count(), DATA_WIDTH);
    }
}
