//! `zkr queue <path>`: a queue's items in the order consumers take them, decoded with the
//! protocol module: a `SimpleDistributedQueue`'s `qn-` nodes hold one raw item each, a
//! `DistributedQueue`'s `queue-` nodes one or more items in Curator's item framing, named and
//! ordered per variant (FIFO, id, priority, delay: `protocol::queue_names`).

use futures::future::join_all;
use serde::Serialize;
use zk_recipes::protocol::queue_names::{self, QueueOrder};
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

    /// The DistributedQueue variant, which orders the items and names what each node carries;
    /// told from the node names when not given (an id queue whose ids look like delay epochs
    /// needs it)
    #[arg(long, value_enum)]
    variant: Option<Variant>,
}

/// `--variant`: Curator's `DistributedQueue` and its three variants.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Variant {
    /// DistributedQueue: by sequence
    Fifo,
    /// DistributedIdQueue: by sequence, each node carrying an id
    Id,
    /// DistributedPriorityQueue: lowest priority first, then by sequence
    Priority,
    /// DistributedDelayQueue: by due time, none taken before it
    Delay,
}

impl Variant {
    fn order(self) -> QueueOrder {
        match self {
            Variant::Fifo => QueueOrder::Fifo,
            Variant::Id => QueueOrder::Id,
            Variant::Priority => QueueOrder::Priority,
            Variant::Delay => QueueOrder::Delay,
        }
    }
}

/// What `zkr queue` found; serialized as is by `--json`.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The queue path (without the namespace).
    pub path: String,
    /// `simple-queue`, `distributed-queue`, `queue-sharder` or `empty`.
    pub recipe: &'static str,
    pub description: &'static str,
    /// A distributed queue's variant, which orders `nodes`: `fifo`, `id`, `priority` or
    /// `delay`; null for a simple or empty queue.
    pub variant: Option<&'static str>,
    /// `detected` (from the node names) or `given` (`--variant`); null with `variant`.
    pub variant_source: Option<&'static str>,
    /// Item nodes (foreign children not counted).
    pub count: usize,
    /// Items in those nodes (a `DistributedQueue` node made by a multi-item put holds several).
    pub items: usize,
    /// The item node a consumer takes next.
    pub next: Option<String>,
    /// The item node created first, and its age.
    pub oldest: Option<String>,
    pub oldest_age_ms: Option<i64>,
    /// Every child in queue order (the variant's order, as Curator's consumer takes them);
    /// none for a sharder, whose items are in its shards.
    pub nodes: Vec<NodeReport>,
    /// A `QueueSharder`'s shards (its `queue-<uuid>` children), each read as a queue of its own,
    /// in name order; absent for a queue.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<Report>,
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
    /// A priority queue's item: the priority in its name (absent when the name has no
    /// priority code).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// An id queue's item: the id in its name (as Curator writes it, `/` and `|` made `_`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A delay queue's item: when it is due, milliseconds since the epoch (absent when its
    /// name has no epoch: due at once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due_ms: Option<u64>,
    /// The due time minus now (this machine's clock, as a consumer compares it with its own):
    /// negative when overdue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due_in_ms: Option<i64>,
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
    let report = read(&framework, &args.path, args.variant.map(Variant::order)).await;
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

async fn read(framework: &Framework, path: &str, variant: Option<QueueOrder>) -> Result<Report, ReadError> {
    let children = framework.get_children(path).await?;
    let recipe = protocol::classify(&children);
    if recipe == Some(Recipe::QueueSharder) {
        return read_shards(framework, path, children, variant).await;
    }
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
    let order = framed.then(|| variant.unwrap_or_else(|| QueueOrder::detect(&names(&present))));
    let decoded = match order {
        Some(order) => order.decode(present),
        None => queue.decode(present),
    };
    let nodes: Vec<NodeReport> = decoded
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
            let item = node.kind == Kind::Item;
            let due_ms = match order {
                Some(QueueOrder::Delay) if item && queue_names::id_of(&node.name).is_some() => {
                    Some(queue_names::delay_epoch_of(&node.name))
                }
                _ => None,
            };
            NodeReport {
                position: i + 1,
                priority: match order {
                    Some(QueueOrder::Priority) if item => queue_names::priority_of(&node.name),
                    _ => None,
                },
                id: match order {
                    Some(QueueOrder::Id) if item => queue_names::id_of(&node.name).map(str::to_owned),
                    _ => None,
                },
                due_in_ms: due_ms.map(|due| i64::try_from(due).unwrap_or(i64::MAX).saturating_sub(now)),
                due_ms,
                path: path::join(path, &node.name),
                name: node.name,
                kind,
                sequence: node.sequence,
                payloads,
                raw,
                error,
                ctime_ms: ctime,
                age_ms: now.saturating_sub(ctime).max(0),
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
        variant: order.filter(|_| recipe == Recipe::DistributedQueue).map(QueueOrder::id),
        variant_source: order.filter(|_| recipe == Recipe::DistributedQueue).map(|_| {
            if variant.is_some() {
                "given"
            } else {
                "detected"
            }
        }),
        count: nodes.iter().filter(is_item).count(),
        items: nodes.iter().map(|n| n.payloads.len()).sum(),
        next: nodes.iter().find(is_item).map(|n| n.name.clone()),
        oldest: oldest.map(|n| n.name.clone()),
        oldest_age_ms: oldest.map(|n| n.age_ms),
        nodes,
        shards: Vec::new(),
    })
}

/// A sharder's report: each `queue-<uuid>` shard read as a queue (a shard deleted since the
/// listing is left out), the counts summed; no one item is next across shards.
async fn read_shards(
    framework: &Framework,
    path: &str,
    mut children: Vec<String>,
    variant: Option<QueueOrder>,
) -> Result<Report, ReadError> {
    children.retain(|name| queue_names::is_shard_name(name));
    children.sort();
    let shard_paths: Vec<String> = children.iter().map(|name| path::join(path, name)).collect();
    let read = join_all(shard_paths.iter().map(|shard| Box::pin(read(framework, shard, variant)))).await;
    let mut shards = Vec::with_capacity(read.len());
    for shard in read {
        match shard {
            Ok(shard) => shards.push(shard),
            Err(ReadError::Zk(e)) if e.is_no_node() => {}
            Err(e) => return Err(e),
        }
    }
    let oldest = shards.iter().filter(|s| s.oldest.is_some()).max_by_key(|s| s.oldest_age_ms);
    let recipe = Recipe::QueueSharder;
    Ok(Report {
        path: path.to_owned(),
        recipe: recipe.id(),
        description: recipe.describe(),
        variant: None,
        variant_source: None,
        count: shards.iter().map(|s| s.count).sum(),
        items: shards.iter().map(|s| s.items).sum(),
        next: None,
        oldest: oldest.and_then(|s| Some(path::join(&s.path, s.oldest.as_deref()?))),
        oldest_age_ms: oldest.and_then(|s| s.oldest_age_ms),
        nodes: Vec::new(),
        shards,
    })
}

fn names(children: &[Child]) -> Vec<&str> {
    children.iter().map(|c| &c.name[..]).collect()
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
    if let (Some(variant), Some(source)) = (report.variant, report.variant_source) {
        out.push_str(&format!("; {variant} order ({source})"));
    }
    out.push_str("\n\n");
    if report.recipe == Recipe::QueueSharder.id() {
        out.push_str(&format!("{} shard{}\n\n", report.shards.len(), plural(report.shards.len())));
        for shard in &report.shards {
            out.push_str(&table(shard));
            out.push('\n');
        }
        return out;
    }
    if report.nodes.is_empty() {
        out.push_str("  (none)\n");
        return out;
    }
    // The variant's own column, before NODE.
    let extra = match report.variant {
        Some("priority") => Some("PRIORITY"),
        Some("id") => Some("ID"),
        Some("delay") => Some("DUE"),
        _ => None,
    };
    let rows: Vec<Vec<String>> = report
        .nodes
        .iter()
        .map(|n| {
            let mut row = vec![
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
            ];
            if extra.is_some() {
                row.insert(5, variant_cell(n));
            }
            row
        })
        .collect();
    let mut header = vec!["#", "KIND", "ITEMS", "SEQ", "AGE", "NODE", "DATA"];
    if let Some(extra) = extra {
        header.insert(5, extra);
    }
    out.push_str(&render::columns(&header, &rows));
    out
}

/// A node's priority, id or due time (`2026-12-02T01:59:03.123Z (in 4.2s)`, `(overdue by
/// 1.2s)`); `-` when it has none (a foreign node, a delay queue's item due at once).
fn variant_cell(node: &NodeReport) -> String {
    if let Some(priority) = node.priority {
        return priority.to_string();
    }
    if let Some(id) = &node.id {
        return id.clone();
    }
    match (node.due_ms, node.due_in_ms) {
        (Some(due), Some(due_in)) => {
            let utc = render::utc(i64::try_from(due).unwrap_or(i64::MAX));
            if due_in > 0 {
                format!("{utc} (in {})", render::age(due_in))
            } else {
                format!("{utc} (overdue by {})", render::age(-due_in))
            }
        }
        _ => "-".to_owned(),
    }
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
            priority: None,
            id: None,
            due_ms: None,
            due_in_ms: None,
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
            variant: Some("fifo"),
            variant_source: Some("detected"),
            nodes: vec![node(1, "framed", &["a"]), node(2, "framed", &["b", ""])],
            shards: Vec::new(),
        };
        let text = table(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "/q: distributed queue");
        assert_eq!(
            lines[1],
            "2 nodes, 3 items; next queue-0000000001; oldest queue-0000000001 (1.2s); fifo order (detected)"
        );
        assert_eq!(lines[3], "#  KIND    ITEMS  SEQ  AGE   NODE              DATA");
        assert_eq!(lines[4], "1  framed  1      1    1.2s  queue-0000000001  a");
        assert_eq!(lines[5], "2  framed  2      2    1.2s  queue-0000000002  b | \"\"");
    }

    #[test]
    fn a_variant_adds_its_column_before_the_node() {
        let mut due = node(1, "framed", &["x"]);
        (due.due_ms, due.due_in_ms) = (Some(1_700_000_000_123), Some(4_200));
        let mut overdue = node(2, "framed", &["y"]);
        (overdue.due_ms, overdue.due_in_ms) = (Some(1_700_000_000_000), Some(-1_200));
        let mut report = Report {
            path: "/q".into(),
            recipe: "distributed-queue",
            description: "distributed queue",
            count: 3,
            items: 2,
            next: Some("queue-0000000001".into()),
            oldest: None,
            oldest_age_ms: None,
            variant: Some("delay"),
            variant_source: Some("given"),
            nodes: vec![due, overdue, node(3, "foreign", &[])],
            shards: Vec::new(),
        };
        let text = table(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].ends_with("; delay order (given)"), "{lines:?}");
        assert!(lines[3].starts_with("#  KIND     ITEMS  SEQ  AGE   DUE "), "{lines:?}");
        assert!(lines[4].contains(" 1.2s  2023-11-14T22:13:20.123Z (in 4.2s)   "), "{lines:?}");
        assert!(lines[5].contains(" 2023-11-14T22:13:20.000Z (overdue by 1.2s)  queue-0000000002"), "{lines:?}");
        report.variant = Some("priority");
        for n in &mut report.nodes {
            (n.due_ms, n.due_in_ms) = (None, None);
        }
        report.nodes[0].priority = Some(-3);
        let text = table(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[3].contains(" AGE   PRIORITY  NODE "), "{lines:?}");
        assert!(lines[4].contains(" 1.2s  -3        queue-0000000001 "), "{lines:?}");
        assert!(lines[5].contains(" 1.2s  -         queue-0000000002 "), "{lines:?}");
    }
}
