//! `zkr counter <path>`: a counter node's value, decoded with the protocol module's value
//! layouts (a `SharedCount` or `DistributedAtomicInteger` holds 4 big-endian bytes, a
//! `DistributedAtomicLong` 8), with its version (what a compare-and-set compares).

use serde::Serialize;
use zk_recipes::protocol::values::{DecodedValue, ValueLayout};
use zk_recipes::Framework;

use crate::connect::Options;
use crate::exit::{Code, Failure};
use crate::render;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The counter's path, as given to the recipe (e.g. /counters/hits)
    path: String,

    /// Decode as this layout instead of by the node's length: shared-count, atomic-integer,
    /// atomic-long, shared-value or atomic-value
    #[arg(long, value_parser = parse_layout, value_name = "LAYOUT")]
    layout: Option<ValueLayout>,

    /// Print JSON instead of a table
    #[arg(long)]
    json: bool,
}

/// What `zkr counter` found; serialized as is by `--json`.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The counter path (without the namespace).
    pub path: String,
    /// The layouts the bytes were decoded as (two when the format is shared: 4 bytes are a
    /// `shared-count` or an `atomic-integer`), most specific first.
    pub layouts: Vec<&'static str>,
    /// The Curator classes of those layouts, in words.
    pub description: String,
    /// The node's length in bytes.
    pub bytes: usize,
    /// The decoded number; `None` for a raw value layout.
    pub value: Option<i64>,
    /// The node's data version: what `try_set` / a compare-and-set compares.
    pub version: i32,
    /// The node's data, lowercase hex.
    pub data_hex: String,
    /// Last change, milliseconds since the epoch (server clock).
    pub mtime_ms: i64,
    /// Now (this machine's clock) minus the last change, never below zero.
    pub changed_ms_ago: i64,
}

pub async fn run(options: &Options, args: Args) -> Result<(), Failure> {
    let connect = options.connect_string();
    zk_recipes::path::validate(&args.path).map_err(|e| Failure::from_error(e, "checking the path", connect))?;
    let framework = options.build(connect)?;
    options.start(&framework, connect).await?;
    let report = read(&framework, &args.path, args.layout).await;
    framework.close().await;
    let report = report.map_err(|e| e.into_failure(&args.path, connect))?;
    if args.json {
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        print!("{}", table(&report));
    }
    Ok(())
}

fn parse_layout(text: &str) -> Result<ValueLayout, String> {
    ValueLayout::from_id(text)
        .filter(|layout| *layout != ValueLayout::Barrier)
        .ok_or_else(|| "expected shared-count, atomic-integer, atomic-long, shared-value or atomic-value".to_owned())
}

/// Why reading failed.
#[derive(Debug)]
pub enum ReadError {
    Zk(zk_recipes::Error),
    /// The bytes fit no counter layout (or not the one asked for).
    NotACounter(String),
}

impl ReadError {
    fn into_failure(self, path: &str, connect: &str) -> Failure {
        match self {
            ReadError::Zk(e) => Failure::from_error(e, &format!("reading {path}"), connect),
            ReadError::NotACounter(why) => Failure::new(Code::WrongLayout, format!("{path} is not a counter: {why}")),
        }
    }
}

async fn read(framework: &Framework, path: &str, layout: Option<ValueLayout>) -> Result<Report, ReadError> {
    let (data, stat) = framework.get_data(path).await.map_err(ReadError::Zk)?;
    // An empty node reads as an atomic's 0, as Curator reads it; one with children is a
    // directory (no counter has children), unless a layout was asked for.
    if layout.is_none() && data.is_empty() && stat.num_children > 0 {
        return Err(ReadError::NotACounter(format!(
            "it is empty and has children ({}): a directory; --layout reads it anyway",
            stat.num_children
        )));
    }
    let layouts: Vec<ValueLayout> = match layout {
        Some(layout) => vec![layout],
        None => ValueLayout::counters_of_length(data.len()).to_vec(),
    };
    let Some(first) = layouts.first() else {
        return Err(ReadError::NotACounter(format!(
            "it holds {} bytes (a SharedCount or DistributedAtomicInteger holds 4, a DistributedAtomicLong 8); \
             --layout shared-value reads raw bytes",
            data.len()
        )));
    };
    let value = match first.decode(&data) {
        Ok(DecodedValue::Number(n)) => Some(n),
        Ok(_) => None,
        Err(e) => return Err(ReadError::NotACounter(format!("as {}: {e}", first.id()))),
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    Ok(Report {
        path: path.to_owned(),
        layouts: layouts.iter().map(|l| l.id()).collect(),
        description: layouts.iter().map(|l| l.describe()).collect::<Vec<_>>().join(" or "),
        bytes: data.len(),
        value,
        version: stat.version,
        data_hex: data.iter().map(|b| format!("{b:02x}")).collect(),
        mtime_ms: stat.mtime,
        changed_ms_ago: now.saturating_sub(stat.mtime).max(0),
    })
}

/// The report as aligned `field  value` lines under a heading.
fn table(report: &Report) -> String {
    let value = match report.value {
        Some(n) => n.to_string(),
        None => render::data(&hex_bytes(&report.data_hex)).0.unwrap_or_default(),
    };
    let rows = [
        ("LAYOUT", report.layouts.join(" or ")),
        ("VALUE", value),
        ("VERSION", report.version.to_string()),
        ("BYTES", format!("{} (0x{})", report.bytes, report.data_hex)),
        ("CHANGED", format!("{} ago", render::age(report.changed_ms_ago))),
    ];
    let mut out = format!("{}: counter, {}\n\n", report.path, report.description);
    out.push_str(&render::fields(&rows));
    out
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len() / 2).filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(layouts: Vec<&'static str>, value: Option<i64>, hex: &str) -> Report {
        Report {
            path: "/c".into(),
            layouts,
            description: "d".into(),
            bytes: hex.len() / 2,
            value,
            version: 3,
            data_hex: hex.into(),
            mtime_ms: 0,
            changed_ms_ago: 1500,
        }
    }

    #[test]
    fn the_table_names_the_layout_value_and_version() {
        let text = table(&report(vec!["atomic-long"], Some(42), "000000000000002a"));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "/c: counter, d");
        assert_eq!(lines[2], "LAYOUT   atomic-long");
        assert_eq!(lines[3], "VALUE    42");
        assert_eq!(lines[4], "VERSION  3");
        assert_eq!(lines[5], "BYTES    8 (0x000000000000002a)");
        assert_eq!(lines[6], "CHANGED  1.5s ago");
        let raw = table(&report(vec!["shared-value"], None, "6869"));
        assert!(raw.contains("VALUE    hi\n"), "{raw}");
    }

    #[test]
    fn layouts_parse_by_id() {
        assert_eq!(parse_layout("atomic-long"), Ok(ValueLayout::AtomicLong));
        assert!(parse_layout("barrier").is_err());
        assert!(parse_layout("long").is_err());
    }
}
