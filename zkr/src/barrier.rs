//! `zkr barrier <path>`: whether a `DistributedBarrier` is set (its node exists), or a
//! `DistributedDoubleBarrier`'s members and its `ready` node, decoded with the protocol
//! module's layouts.

use futures::future::join_all;
use serde::Serialize;
use zk_recipes::protocol::{self, values::ValueLayout, Child, Kind, Queue, Recipe};
use zk_recipes::{path, Framework};

use crate::connect::Options;
use crate::exit::{Code, Failure};
use crate::locks::read_node;
use crate::render;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The barrier's path, as given to the recipe (e.g. /barriers/start)
    path: String,

    /// Read the path as a double barrier even when it has no children (a set
    /// DistributedBarrier and a double barrier nobody is in look the same)
    #[arg(long)]
    double: bool,

    /// Print JSON instead of a table
    #[arg(long)]
    json: bool,
}

/// What `zkr barrier` found; serialized as is by `--json` (the fields of the other kind left
/// out).
#[derive(Debug, Serialize)]
pub struct Report {
    /// The barrier path (without the namespace).
    pub path: String,
    /// `barrier` (a DistributedBarrier) or `double-barrier`.
    pub kind: &'static str,
    pub description: &'static str,
    /// Whether the path exists.
    pub exists: bool,
    /// A barrier: set while its node exists (waiters wait until it is removed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set: Option<bool>,
    /// A set barrier's data (Curator writes the setter's address; it means nothing), text or
    /// lowercase hex.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_format: Option<&'static str>,
    /// A double barrier: whether `ready` exists (the members that entered were let in).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// A double barrier: its members, in name order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<Member>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member_count: Option<usize>,
    /// A double barrier: children that are neither members nor `ready`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub foreign: Option<Vec<String>>,
    /// Creation time of the node (the set barrier, or `ready`), milliseconds since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ctime_ms: Option<i64>,
    /// Now minus that creation time, never below zero.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub age_ms: Option<i64>,
}

/// One member of a double barrier.
#[derive(Debug, Serialize)]
pub struct Member {
    /// The member's node name (a UUID).
    pub name: String,
    /// The session that owns the (ephemeral) node, `0x...`.
    pub owner_session: Option<String>,
    pub ctime_ms: i64,
    pub age_ms: i64,
}

pub async fn run(options: &Options, args: Args) -> Result<(), Failure> {
    let connect = options.connect_string();
    path::validate(&args.path).map_err(|e| Failure::from_error(e, "checking the path", connect))?;
    let framework = options.build(connect)?;
    options.start(&framework, connect).await?;
    let report = read(&framework, &args.path, args.double).await;
    framework.close().await;
    let report = report.map_err(|e| match e {
        ReadError::Zk(e) => Failure::from_error(e, &format!("reading {}", args.path), connect),
        ReadError::NotABarrier(children) => Failure::new(
            Code::WrongLayout,
            format!(
                "{} is not a barrier: its children ({}) are neither double barrier members nor ready",
                args.path,
                shown(&children)
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
    NotABarrier(Vec<String>),
}

impl From<zk_recipes::Error> for ReadError {
    fn from(e: zk_recipes::Error) -> Self {
        ReadError::Zk(e)
    }
}

fn shown(children: &[String]) -> String {
    let mut sorted = children.to_vec();
    sorted.sort();
    let more = if sorted.len() > 5 { ", ..." } else { "" };
    format!("{}{more}", sorted.iter().take(5).cloned().collect::<Vec<_>>().join(", "))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

async fn read(framework: &Framework, path: &str, double: bool) -> Result<Report, ReadError> {
    let barrier = ValueLayout::Barrier;
    let empty = Report {
        path: path.to_owned(),
        kind: barrier.id(),
        description: barrier.describe(),
        exists: false,
        set: None,
        data: None,
        data_format: None,
        ready: None,
        members: None,
        member_count: None,
        foreign: None,
        ctime_ms: None,
        age_ms: None,
    };
    let node = match framework.get_data(path).await {
        Ok(node) => Some(node),
        Err(e) if e.is_no_node() => None,
        Err(e) => return Err(e.into()),
    };
    let children = match node {
        None => Vec::new(),
        Some(_) => match framework.get_children(path).await {
            Ok(children) => children,
            Err(e) if e.is_no_node() => Vec::new(),
            Err(e) => return Err(e.into()),
        },
    };
    let recipe = protocol::classify(&children);
    let as_double = match recipe {
        Some(Recipe::DoubleBarrier) => true,
        Some(Recipe::Empty) => double,
        _ => return Err(ReadError::NotABarrier(children)),
    };
    if !as_double {
        let Some((data, stat)) = node else { return Ok(Report { set: Some(false), ..empty }) };
        let (data, format) = render::data(&data);
        return Ok(Report {
            exists: true,
            set: Some(true),
            data,
            data_format: Some(format),
            ctime_ms: Some(stat.ctime),
            age_ms: Some((now_ms() - stat.ctime).max(0)),
            ..empty
        });
    }
    let read = join_all(children.iter().map(|name| read_node(framework, path::join(path, name)))).await;
    let mut present = Vec::new();
    for (name, result) in children.into_iter().zip(read) {
        if let Some((stat, data)) = result? {
            present.push(Child::new(name, Some(stat), data));
        }
    }
    let (mut members, mut foreign, mut ready) = (Vec::new(), Vec::new(), None);
    let now = now_ms();
    for node in Queue::Members.decode(present) {
        let (owner, ctime) = node.stat.map_or((0, 0), |stat| (stat.ephemeral_owner, stat.ctime));
        match node.kind {
            Kind::Member => members.push(Member {
                owner_session: (owner != 0).then(|| format!("{owner:#x}")),
                ctime_ms: ctime,
                age_ms: now.saturating_sub(ctime).max(0),
                name: node.name,
            }),
            Kind::Ready => ready = Some(ctime),
            _ => foreign.push(node.name),
        }
    }
    let layout = Recipe::DoubleBarrier.layout();
    Ok(Report {
        kind: layout.id,
        description: layout.description,
        exists: node.is_some(),
        ready: Some(ready.is_some()),
        member_count: Some(members.len()),
        members: Some(members),
        foreign: Some(foreign),
        ctime_ms: ready,
        age_ms: ready.map(|t| now.saturating_sub(t).max(0)),
        ..empty
    })
}

fn table(report: &Report) -> String {
    let mut out = format!("{}: {}\n\n", report.path, report.description);
    let age = |ms: Option<i64>| ms.map_or_else(String::new, |ms| format!(" ({} ago)", render::age(ms)));
    if let Some(set) = report.set {
        let state =
            if set { format!("set{}", age(report.age_ms)) } else { "not set (no node: waiters pass)".to_owned() };
        let mut rows = vec![("BARRIER", state)];
        if let (Some(data), Some(format)) = (&report.data, report.data_format) {
            let shown = match format {
                "hex" => format!("0x{data}"),
                _ if data.is_empty() => "-".to_owned(),
                _ => data.clone(),
            };
            rows.push(("DATA", shown));
        }
        out.push_str(&render::fields(&rows));
        return out;
    }
    let members = report.members.as_deref().unwrap_or_default();
    let ready = if report.ready == Some(true) { format!("yes{}", age(report.age_ms)) } else { "no".to_owned() };
    let mut rows = vec![("READY", ready), ("MEMBERS", members.len().to_string())];
    if let Some(foreign) = report.foreign.as_ref().filter(|f| !f.is_empty()) {
        rows.push(("FOREIGN", foreign.join(", ")));
    }
    out.push_str(&render::fields(&rows));
    if !members.is_empty() {
        out.push('\n');
        let lines: Vec<[String; 3]> = members
            .iter()
            .map(|m| {
                [m.owner_session.clone().unwrap_or_else(|| "persistent".into()), render::age(m.age_ms), m.name.clone()]
            })
            .collect();
        out.push_str(&render::columns(&["SESSION", "AGE", "MEMBER"], &lines));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_double_barrier_table_lists_ready_and_members() {
        let report = Report {
            path: "/b".into(),
            kind: "double-barrier",
            description: "double barrier (DistributedDoubleBarrier)",
            exists: true,
            set: None,
            data: None,
            data_format: None,
            ready: Some(false),
            members: Some(vec![Member {
                name: "3f1c2b9e-8d6a-4e1f-9b0a-1c2d3e4f5a6b".into(),
                owner_session: Some("0x1".into()),
                ctime_ms: 0,
                age_ms: 2_000,
            }]),
            member_count: Some(1),
            foreign: Some(vec![]),
            ctime_ms: None,
            age_ms: None,
        };
        let text = table(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "/b: double barrier (DistributedDoubleBarrier)");
        assert_eq!(lines[2], "READY    no");
        assert_eq!(lines[3], "MEMBERS  1");
        assert_eq!(lines[5], "SESSION  AGE   MEMBER");
        assert_eq!(lines[6], "0x1      2.0s  3f1c2b9e-8d6a-4e1f-9b0a-1c2d3e4f5a6b");
    }
}
