//! `zkr queue <path>`: a queue's items in the order consumers take them, decoded with the
//! protocol module: a `SimpleDistributedQueue`'s `qn-` nodes hold one raw item each, a
//! `DistributedQueue`'s `queue-` nodes one or more items in Curator's item framing.

use futures::future::join_all;
use serde::Serialize;
use zk_recipes::protocol::values::decode_queue_items;
use zk_recipes::protocol::{self, Child, Kind, Queue, Recipe, SIMPLE_QUEUE_PREFIX};
use zk_recipes::{path, Framework};

use crate::connect::Options;
use crate::exit::{Code, Failure};
use crate::locks::read_node;
use crate::render;

/// Longest data shown in a table cell (JSON has it all).
const DATA_WIDTH: usize = 40;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The queue's path, as given to the recipe (e.g. /queues/jobs)
    path: String,

    /// Print JSON instead of a table
    #[arg(long)]
    json: bool,
}

/// What `zkr queue` found; serialized as is by `--json`.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The queue path (without the namespace).
    pub path: String,
    /// `simple-queue`, `distributed-queue` or `empty`.
    pub recipe: &'static str,
    pub description: &'static str,
    /// Item nodes (foreign children not counted).
    pub count: usize,
    /// Items in those nodes (a `DistributedQueue` node made by a multi-item put holds several).
    pub items: usize,
    /// The item node a consumer takes next.
    pub next: Option<String>,
    /// The item node created first, and its age.
    pub oldest: Option<String>,
    pub oldest_age_ms: Option<i64>,
    /// Every child in queue order (plain name order, as Curator takes them).
    pub nodes: Vec<NodeReport>,
}

/// One child of the queue.
#[derive(Debug, Serialize)]
pub struct NodeReport {
    /// 1 for the node taken next.
    pub position: usize,
    pub name: String,
    pub path: String,
    /// `simple` (one raw item), `framed` (Curator's item framing), `corrupt` (a `queue-` node
    /// whose bytes are not that framing), `unreadable` (its ACL refuses reading) or `foreign`
    /// (not the queue's).
    pub kind: &'static str,
    /// The sequence number ZooKeeper appended.
    pub sequence: Option<i64>,
    /// The items it holds (none for a corrupt or foreign node), each as text when printable
    /// UTF-8, else lowercase hex.
    pub payloads: Vec<Payload>,
    /// A corrupt or foreign node's data, as it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<Payload>,
    /// Why a `corrupt` node does not decode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Creation time, milliseconds since the epoch (server clock).
    pub ctime_ms: i64,
    /// Now (this machine's clock) minus the creation time, never below zero.
    pub age_ms: i64,
}

/// One item.
#[derive(Debug, Serialize)]
pub struct Payload {
    pub data: String,
    /// `text` or `hex`.
    pub data_format: &'static str,
}

pub async fn run(options: &Options, args: Args) -> Result<(), Failure> {
    let connect = options.connect_string();
    path::validate(&args.path).map_err(|e| Failure::from_error(e, "checking the path", connect))?;
    let framework = options.build(connect)?;
    options.start(&framework, connect).await?;
    let report = read(&framework, &args.path).await;
    framework.close().await;
    let report = report.map_err(|e| match e {
        ReadError::Zk(e) => Failure::from_error(e, &format!("reading the queue {}", args.path), connect),
        ReadError::NotAQueue(recipe) => Failure::new(
            Code::WrongLayout,
            format!(
                "{} is not a queue: its children are {}",
                args.path,
                recipe.map_or("no recipe's nodes".to_owned(), |r| format!("a {}", r.describe()))
            ),
        ),
    })?;
    if args.json {
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        print!("{}", table(&report));
    }
    Ok(())
}

enum ReadError {
    Zk(zk_recipes::Error),
    NotAQueue(Option<Recipe>),
}

impl From<zk_recipes::Error> for ReadError {
    fn from(e: zk_recipes::Error) -> Self {
        ReadError::Zk(e)
    }
}

async fn read(framework: &Framework, path: &str) -> Result<Report, ReadError> {
    let children = framework.get_children(path).await?;
    let recipe = protocol::classify(&children);
    let queue = match recipe {
        Some(recipe @ (Recipe::SimpleQueue | Recipe::DistributedQueue)) => recipe.layout().sections[0].queue,
        Some(Recipe::Empty) => Queue::Items(SIMPLE_QUEUE_PREFIX),
        other => return Err(ReadError::NotAQueue(other)),
    };
    let read = join_all(children.iter().map(|name| read_node(framework, path::join(path, name)))).await;
    let mut present = Vec::new();
    for (name, result) in children.into_iter().zip(read) {
        if let Some((stat, data)) = result? {
            present.push(Child::new(name, Some(stat), data));
        }
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let framed = queue != Queue::Items(SIMPLE_QUEUE_PREFIX);
    let nodes: Vec<NodeReport> = queue
        .decode(present)
        .into_iter()
        .enumerate()
        .map(|(i, node)| {
            let (kind, payloads, error) = match (node.kind, &node.data) {
                (Kind::Item, None) => ("unreadable", Vec::new(), None),
                (Kind::Item, Some(data)) if framed => match decode_queue_items(data) {
                    Ok(items) => ("framed", items.iter().map(|i| payload(i)).collect(), None),
                    Err(e) => ("corrupt", Vec::new(), Some(e.to_string())),
                },
                (Kind::Item, Some(data)) => ("simple", vec![payload(data)], None),
                _ => ("foreign", Vec::new(), None),
            };
            let raw = match kind {
                "corrupt" | "foreign" => node.data.as_deref().map(payload),
                _ => None,
            };
            let ctime = node.stat.map_or(0, |s| s.ctime);
            NodeReport {
                position: i + 1,
                path: path::join(path, &node.name),
                name: node.name,
                kind,
                sequence: node.sequence,
                payloads,
                raw,
                error,
                ctime_ms: ctime,
                age_ms: (now - ctime).max(0),
            }
        })
        .collect();
    let is_item = |n: &&NodeReport| n.kind != "foreign";
    let oldest = nodes.iter().filter(is_item).min_by_key(|n| n.ctime_ms);
    let recipe = recipe.unwrap_or(Recipe::Empty);
    Ok(Report {
        path: path.to_owned(),
        recipe: recipe.id(),
        description: recipe.describe(),
        count: nodes.iter().filter(is_item).count(),
        items: nodes.iter().map(|n| n.payloads.len()).sum(),
        next: nodes.iter().find(is_item).map(|n| n.name.clone()),
        oldest: oldest.map(|n| n.name.clone()),
        oldest_age_ms: oldest.map(|n| n.age_ms),
        nodes,
    })
}

fn payload(bytes: &[u8]) -> Payload {
    let (data, data_format) = render::data(bytes);
    Payload { data: data.unwrap_or_default(), data_format }
}

fn table(report: &Report) -> String {
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let mut out = format!("{}: {}\n", report.path, report.description);
    out.push_str(&format!(
        "{} node{}, {} item{}",
        report.count,
        plural(report.count),
        report.items,
        plural(report.items)
    ));
    if let Some(next) = &report.next {
        out.push_str(&format!("; next {next}"));
    }
    if let (Some(oldest), Some(age)) = (&report.oldest, report.oldest_age_ms) {
        out.push_str(&format!("; oldest {oldest} ({})", render::age(age)));
    }
    out.push_str("\n\n");
    if report.nodes.is_empty() {
        out.push_str("  (none)\n");
        return out;
    }
    let rows: Vec<[String; 7]> = report
        .nodes
        .iter()
        .map(|n| {
            [
                n.position.to_string(),
                n.kind.to_owned(),
                match n.kind {
                    "corrupt" | "foreign" | "unreadable" => "-".to_owned(),
                    _ => n.payloads.len().to_string(),
                },
                n.sequence.map_or_else(|| "-".to_owned(), |s| s.to_string()),
                render::age(n.age_ms),
                n.name.clone(),
                data_cell(n),
            ]
        })
        .collect();
    out.push_str(&render::columns(&["#", "KIND", "ITEMS", "SEQ", "AGE", "NODE", "DATA"], &rows));
    out
}

fn data_cell(node: &NodeReport) -> String {
    let shown: Vec<String> = node
        .payloads
        .iter()
        .chain(node.raw.as_ref())
        .map(|p| match p.data_format {
            "hex" => format!("0x{}", p.data),
            _ if p.data.is_empty() => "\"\"".to_owned(),
            _ => p.data.clone(),
        })
        .collect();
    let text = if shown.is_empty() { "-".to_owned() } else { shown.join(" | ") };
    if text.chars().count() > DATA_WIDTH {
        let cut: String = text.chars().take(DATA_WIDTH - 1).collect();
        format!("{cut}…")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(position: usize, kind: &'static str, payloads: &[&str]) -> NodeReport {
        NodeReport {
            position,
            name: format!("queue-000000000{position}"),
            path: String::new(),
            kind,
            sequence: Some(position as i64),
            payloads: payloads.iter().map(|p| Payload { data: (*p).to_owned(), data_format: "text" }).collect(),
            raw: None,
            error: None,
            ctime_ms: 0,
            age_ms: 1_200,
        }
    }

    #[test]
    fn the_table_counts_nodes_and_items_and_shows_each_in_order() {
        let report = Report {
            path: "/q".into(),
            recipe: "distributed-queue",
            description: "distributed queue",
            count: 2,
            items: 3,
            next: Some("queue-0000000001".into()),
            oldest: Some("queue-0000000001".into()),
            oldest_age_ms: Some(1_200),
            nodes: vec![node(1, "framed", &["a"]), node(2, "framed", &["b", ""])],
        };
        let text = table(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "/q: distributed queue");
        assert_eq!(lines[1], "2 nodes, 3 items; next queue-0000000001; oldest queue-0000000001 (1.2s)");
        assert_eq!(lines[3], "#  KIND    ITEMS  SEQ  AGE   NODE              DATA");
        assert_eq!(lines[4], "1  framed  1      1    1.2s  queue-0000000001  a");
        assert_eq!(lines[5], "2  framed  2      2    1.2s  queue-0000000002  b | \"\"");
    }
}
