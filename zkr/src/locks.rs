//! `zkr locks <path>`: reads a lock directory and shows its holders and waiters, once or on
//! every change.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};

use futures::future::join_all;
use serde::Serialize;
use zk_recipes::protocol::{self, Child, Decoded, Kind, Queue, Recipe, Role, LEASE_PARENT, LOCK_PARENT};
use zk_recipes::zk::{Error as ZkError, OneshotWatcher};
use zk_recipes::{path, Error, Framework, Stat};

use crate::connect::Options;
use crate::decode;
use crate::exit::{Code, Failure};
use crate::render;

/// Longest data shown in a table cell (JSON has it all).
const DATA_WIDTH: usize = 24;

/// How long `--watch` waits for a lost connection to come back before it gives up.
const RECONNECT_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The lock path, as given to the recipe (e.g. /locks/orders)
    path: String,

    /// Print JSON instead of a table (with --watch: one document per line, per change)
    #[arg(long)]
    json: bool,

    /// Redraw whenever a node joins or leaves (Ctrl-C to stop)
    #[arg(long)]
    watch: bool,
}

/// What `zkr locks` found at one moment; serialized as is by `--json`.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The lock path (without the namespace).
    pub path: String,
    #[serde(serialize_with = "decode::recipe")]
    pub recipe: Recipe,
    pub description: &'static str,
    /// Every node in queue order; a semaphore's leases first, then its internal lock's queue.
    pub nodes: Vec<NodeReport>,
}

/// One lock, lease or latch node.
#[derive(Debug, Serialize)]
pub struct NodeReport {
    /// For a semaphore: `leases` or `locks`, the child directory the node is in.
    pub section: Option<&'static str>,
    pub path: String,
    pub name: String,
    #[serde(serialize_with = "decode::role")]
    pub role: Role,
    #[serde(serialize_with = "decode::kind")]
    pub kind: Kind,
    /// The sequence number ZooKeeper appended.
    pub sequence: Option<i64>,
    /// For a waiter: the node (a name in the same directory) it waits on, as the recipe's
    /// contender watches it.
    pub waits_on: Option<String>,
    /// Whether the node's data is Curator's revocation request (`zkr revoke` wrote it).
    pub revocation_requested: bool,
    /// The session that owns the (ephemeral) node, `0x...`; `None` for a persistent node.
    pub owner_session: Option<String>,
    /// Creation time, milliseconds since the epoch (server clock).
    pub ctime_ms: i64,
    /// Now (this machine's clock) minus the creation time, never below zero.
    pub age_ms: i64,
    /// The node's data: text when it is printable UTF-8, else lowercase hex; `None` when the
    /// node's ACL does not let this client read it.
    pub data: Option<String>,
    /// `text`, `hex` or `unreadable`.
    pub data_format: &'static str,
}

pub async fn run(options: &Options, args: Args) -> Result<(), Failure> {
    let connect = options.connect_string();
    zk_recipes::path::validate(&args.path).map_err(|e| Failure::from_error(e, "checking the path", connect))?;
    let framework = options.build(connect)?;
    options.start(&framework, connect).await?;
    let result =
        if args.watch { watch(&framework, &args, connect).await } else { once(&framework, &args, connect).await };
    framework.close().await;
    result
}

async fn once(framework: &Framework, args: &Args, connect: &str) -> Result<(), Failure> {
    let report = read(framework, &args.path, &mut Lister::Plain).await.map_err(|e| e.into_failure(connect))?;
    print(&report, args.json, false);
    Ok(())
}

/// How long `--watch` waits before reading again when its read set no watch.
const EMPTY_WATCH_PAUSE: std::time::Duration = std::time::Duration::from_millis(200);

/// Renders, then waits on the watches set while reading; again on every change. Ctrl-C ends it.
async fn watch(framework: &Framework, args: &Args, connect: &str) -> Result<(), Failure> {
    let mut first = true;
    loop {
        let mut lister = Lister::Watching(Vec::new());
        match read(framework, &args.path, &mut lister).await {
            Ok(report) => print(&report, args.json, !first),
            Err(ReadError::Zk(e)) if !first && matches!(e.zk(), Some(ZkError::NoNode)) => {
                // The directory went away (the server removes empty lock directories); the
                // lister set an `exists` watch on it, so we hear when it comes back.
                say_gone(&args.path, args.json);
            }
            Err(ReadError::Zk(e)) if !first && e.is_connection_error() => {
                eprintln!("zkr: connection lost ({e}); waiting for it to come back");
                let back = framework.wait_until_connected(RECONNECT_WAIT).await;
                if !matches!(back, Ok(true)) {
                    return Err(ReadError::Zk(e).into_failure(connect));
                }
                continue;
            }
            Err(e) => return Err(e.into_failure(connect)),
        }
        first = false;
        let Lister::Watching(watchers) = lister else { unreachable!("a watching lister stays one") };
        if watchers.is_empty() {
            // The directory came and went between reads, faster than a watch could be set on
            // it: read again after a moment.
            tokio::select! {
                () = tokio::time::sleep(EMPTY_WATCH_PAUSE) => continue,
                _ = tokio::signal::ctrl_c() => return Ok(()),
            }
        }
        let changed = futures::future::select_all(watchers.into_iter().map(|w| Box::pin(w.changed())));
        tokio::select! {
            _ = changed => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

fn say_gone(path: &str, json: bool) {
    if json {
        println!("{}", serde_json::json!({ "path": path, "recipe": null, "gone": true, "nodes": [] }));
    } else {
        println!("{path} no longer exists (empty lock directories are removed by the server); waiting for it");
    }
}

fn print(report: &Report, json: bool, redraw: bool) {
    let mut out = std::io::stdout().lock();
    if json {
        let _ = writeln!(out, "{}", serde_json::to_string(report).unwrap_or_default());
    } else {
        if redraw {
            if std::io::stdout().is_terminal() {
                let _ = write!(out, "\x1b[H\x1b[2J");
            } else {
                let _ = writeln!(out);
            }
        }
        let _ = write!(out, "{}", table(report));
    }
    let _ = out.flush();
}

/// Why reading failed: a ZooKeeper error, or a path that is no lock directory.
#[derive(Debug)]
enum ReadError {
    Zk(Error),
    NotALockDirectory {
        path: String,
        children: Vec<String>,
    },
    /// A queue's or a barrier's nodes: another subcommand shows them.
    OtherRecipe {
        path: String,
        description: &'static str,
        subcommand: &'static str,
    },
}

impl From<Error> for ReadError {
    fn from(e: Error) -> Self {
        ReadError::Zk(e)
    }
}

impl ReadError {
    fn into_failure(self, connect: &str) -> Failure {
        match self {
            ReadError::Zk(e) => Failure::from_error(e, "reading the lock directory", connect),
            ReadError::NotALockDirectory { path, mut children } => {
                children.sort();
                let shown: Vec<&str> = children.iter().take(5).map(String::as_str).collect();
                let more = if children.len() > shown.len() { ", ..." } else { "" };
                Failure::new(
                    Code::WrongLayout,
                    format!(
                        "{path} is not a lock directory: none of its {} children ({}{more}) is a lock, lease or \
                         latch node, and it has no leases/ or locks/ child",
                        children.len(),
                        shown.join(", ")
                    ),
                )
            }
            ReadError::OtherRecipe { path, description, subcommand } => Failure::new(
                Code::WrongLayout,
                format!("{path} is not a lock directory: it holds a {description}; `zkr {subcommand} {path}` shows it"),
            ),
        }
    }
}

/// Lists children, plainly or setting a watch on each directory read.
enum Lister {
    Plain,
    Watching(Vec<OneshotWatcher>),
}

impl Lister {
    /// The children of `dir`, `None` when it does not exist. A watching lister leaves a child
    /// watch on `dir`, or an `exists` watch when it does not exist.
    async fn children(&mut self, framework: &Framework, dir: &str) -> Result<Option<Vec<String>>, Error> {
        let watchers = match self {
            Lister::Plain => {
                return match framework.get_children(dir).await {
                    Ok(children) => Ok(Some(children)),
                    Err(e) if matches!(e.zk(), Some(ZkError::NoNode)) => Ok(None),
                    Err(e) => Err(e),
                }
            }
            Lister::Watching(watchers) => watchers,
        };
        let client = framework.zk_client()?;
        let full = framework.full_path(dir)?;
        // A directory created between the two calls is listed again.
        for _ in 0..3 {
            match client.list_and_watch_children(&full).await {
                Ok((children, watcher)) => {
                    watchers.push(watcher);
                    return Ok(Some(children));
                }
                Err(ZkError::NoNode) => {}
                Err(e) => return Err(e.into()),
            }
            let (stat, watcher) = client.check_and_watch_stat(&full).await?;
            if stat.is_none() {
                watchers.push(watcher);
                return Ok(None);
            }
        }
        Err(ZkError::NoNode.into())
    }
}

/// Reads `path`: its children, the recipe they make, and each node's stat and data, directory
/// by directory of the recipe's layout.
async fn read(framework: &Framework, path: &str, lister: &mut Lister) -> Result<Report, ReadError> {
    let Some(children) = lister.children(framework, path).await? else {
        return Err(ReadError::Zk(ZkError::NoNode.into()));
    };
    let Some(recipe) = protocol::classify(&children) else {
        return Err(ReadError::NotALockDirectory { path: path.to_owned(), children });
    };
    let other = match recipe {
        Recipe::SimpleQueue | Recipe::DistributedQueue | Recipe::QueueSharder => Some("queue"),
        Recipe::DoubleBarrier => Some("barrier"),
        _ => None,
    };
    if let Some(subcommand) = other {
        let description = recipe.layout().description;
        return Err(ReadError::OtherRecipe { path: path.to_owned(), description, subcommand });
    }
    let mut nodes = Vec::new();
    let mut listed = Some(children);
    for section in recipe.layout().sections {
        let (dir, names) = match section.dir {
            None => (path.to_owned(), listed.take().unwrap_or_default()),
            Some(child) => {
                let dir = path::join(path, child);
                let names = lister.children(framework, &dir).await?.unwrap_or_default();
                (dir, names)
            }
        };
        nodes.extend(read_queue(framework, &dir, section.dir, section.queue, names).await?);
    }
    Ok(Report { path: path.to_owned(), recipe, description: recipe.describe(), nodes })
}

/// Reads every node of one directory (concurrently) and decodes the queue from those that
/// still exist: a node deleted since the listing is left out, and the roles follow.
async fn read_queue(
    framework: &Framework,
    dir: &str,
    section: Option<&'static str>,
    queue: Queue,
    names: Vec<String>,
) -> Result<Vec<NodeReport>, Error> {
    let read = join_all(names.iter().map(|name| read_node(framework, path::join(dir, name)))).await;
    let mut present = Vec::with_capacity(names.len());
    for (name, result) in names.into_iter().zip(read) {
        if let Some((stat, data)) = result? {
            present.push(Child::new(name, Some(stat), data));
        }
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Ok(queue.decode(present).into_iter().map(|node| report(dir, section, node, now_ms)).collect())
}

/// One decoded node as `zkr` shows it.
fn report(dir: &str, section: Option<&'static str>, node: Decoded, now_ms: i64) -> NodeReport {
    let (data, data_format) = match &node.data {
        Some(bytes) => render::data(bytes),
        None => (None, "unreadable"),
    };
    let (owner, ctime) = node.stat.map_or((0, 0), |stat| (stat.ephemeral_owner, stat.ctime));
    NodeReport {
        section,
        path: path::join(dir, &node.name),
        role: node.role,
        kind: node.kind,
        sequence: node.sequence,
        waits_on: node.waits_on,
        revocation_requested: node.revocation_requested,
        owner_session: (owner != 0).then(|| format!("{owner:#x}")),
        ctime_ms: ctime,
        age_ms: now_ms.saturating_sub(ctime).max(0),
        data,
        data_format,
        name: node.name,
    }
}

/// A node's stat and data; data `None` when the ACL forbids reading it (the stat needs no
/// permission); `None` when the node is gone.
pub async fn read_node(framework: &Framework, node: String) -> Result<Option<(Stat, Option<Vec<u8>>)>, Error> {
    match framework.get_data(&node).await {
        Ok((data, stat)) => Ok(Some((stat, Some(data)))),
        Err(e) if e.is_no_node() => Ok(None),
        Err(e) if e.is_no_auth() => Ok(framework.exists(&node).await?.map(|stat| (stat, None))),
        Err(e) => Err(e),
    }
}

/// The whole report as text: a heading, then one table per directory.
fn table(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}: {}", report.path, report.description);
    match report.recipe {
        Recipe::Empty => {}
        Recipe::Semaphore => {
            let leases: Vec<&NodeReport> = report.nodes.iter().filter(|n| n.section == Some(LEASE_PARENT)).collect();
            let locks: Vec<&NodeReport> = report.nodes.iter().filter(|n| n.section == Some(LOCK_PARENT)).collect();
            let waiting = locks.iter().filter(|n| n.role == Role::Waiter).count();
            let _ = writeln!(
                out,
                "\nleases: {} (each takes one permit; the limit is not stored in ZooKeeper)",
                leases.len()
            );
            out.push_str(&rows(&leases));
            let _ = writeln!(
                out,
                "\nlocks: the holder is taking a lease (it waits while every permit is taken); {waiting} waiting behind it"
            );
            out.push_str(&rows(&locks));
        }
        _ => {
            let nodes: Vec<&NodeReport> = report.nodes.iter().collect();
            let holders = nodes.iter().filter(|n| n.role == Role::Holder).count();
            let waiters = nodes.iter().filter(|n| n.role == Role::Waiter).count();
            let leases = nodes.iter().filter(|n| n.role == Role::Lease).count();
            let summary = match report.recipe {
                Recipe::Leases => format!("{leases} lease{}", plural(leases)),
                _ => format!("{holders} holder{}, {waiters} waiter{}", plural(holders), plural(waiters)),
            };
            let _ = writeln!(out, "{summary}\n");
            out.push_str(&rows(&nodes));
        }
    }
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Aligned columns: role, kind, sequence, owner session, age, data, node name.
fn rows(nodes: &[&NodeReport]) -> String {
    if nodes.is_empty() {
        return "  (none)\n".to_owned();
    }
    let lines: Vec<[String; 7]> = nodes
        .iter()
        .map(|n| {
            [
                n.role.id().to_owned(),
                n.kind.id().to_owned(),
                n.sequence.map_or_else(|| "-".to_owned(), |s| s.to_string()),
                n.owner_session.clone().unwrap_or_else(|| "persistent".to_owned()),
                render::age(n.age_ms),
                data_cell(n),
                n.name.clone(),
            ]
        })
        .collect();
    render::columns(&["ROLE", "KIND", "SEQ", "SESSION", "AGE", "DATA", "NODE"], &lines)
}

fn data_cell(node: &NodeReport) -> String {
    let shown = match (&node.data, node.data_format) {
        (None, _) => return "(no read permission)".to_owned(),
        (Some(d), _) if d.is_empty() => return "-".to_owned(),
        (Some(d), "hex") => format!("0x{d}"),
        (Some(d), _) => d.clone(),
    };
    if shown.chars().count() > DATA_WIDTH {
        let cut: String = shown.chars().take(DATA_WIDTH - 1).collect();
        format!("{cut}…")
    } else {
        shown
    }
}
