//! `zkr get <path>`: one node's data, decoded: gzip (Curator's `GzipCompressionProvider`, what
//! `compressed()` and a compressed `ModelSpec` write) decompressed with the protocol module's
//! gzip reader, JSON (a typed node's, a service instance's) pretty-printed, other text as is,
//! anything else in hex; with its version, children and last change.

use serde::Serialize;
use zk_recipes::protocol::gzip;
use zk_recipes::Framework;

use crate::connect::Options;
use crate::exit::Failure;
use crate::render;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The node's path (e.g. /config/app)
    path: String,

    /// Print JSON instead of a table
    #[arg(long)]
    json: bool,
}

/// What `zkr get` found; serialized as is by `--json`.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The node's path (without the namespace).
    pub path: String,
    /// The node's data version: what a compare-and-set compares.
    pub version: i32,
    /// The data's length as stored, in bytes.
    pub stored_bytes: usize,
    /// `gzip` when the data was one gzip member and is shown decompressed; `null` otherwise.
    pub compression: Option<&'static str>,
    /// Why data that starts with gzip's magic bytes did not decompress (it is shown as stored).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gzip_error: Option<String>,
    /// The length of the data shown (after decompression), in bytes.
    pub bytes: usize,
    /// `json` (an object or array), `text` (UTF-8) or `hex`.
    pub data_format: &'static str,
    /// The data (decompressed): text as written (JSON not re-indented here), or lowercase hex.
    pub data: String,
    pub num_children: i32,
    /// The owner session of an ephemeral node.
    pub ephemeral_owner: Option<String>,
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
    let report = read(&framework, &args.path).await;
    framework.close().await;
    let report = report.map_err(|e| Failure::from_error(e, &format!("reading {}", args.path), connect))?;
    if args.json {
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        print!("{}", table(&report));
    }
    Ok(())
}

async fn read(framework: &Framework, path: &str) -> Result<Report, zk_recipes::Error> {
    // As stored: zkr's framework does not decompress by default.
    let (stored, stat) = framework.get_data(path).await?;
    let (data, compression, gzip_error) = if gzip::is_gzip(&stored) {
        match gzip::decompress(&stored) {
            Ok(data) => (data, Some("gzip"), None),
            Err(e) => (stored.clone(), None, Some(e.found)),
        }
    } else {
        (stored.clone(), None, None)
    };
    let (text, data_format) = decode(&data);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    Ok(Report {
        path: path.to_owned(),
        version: stat.version,
        stored_bytes: stored.len(),
        compression,
        gzip_error,
        bytes: data.len(),
        data_format,
        data: text,
        num_children: stat.num_children,
        ephemeral_owner: (stat.ephemeral_owner != 0).then(|| format!("{:#x}", stat.ephemeral_owner)),
        mtime_ms: stat.mtime,
        changed_ms_ago: now.saturating_sub(stat.mtime).max(0),
    })
}

/// The data as `(text, "json")`, `(text, "text")` (UTF-8 whose only control characters are
/// line breaks and tabs) or `(hex, "hex")`.
fn decode(bytes: &[u8]) -> (String, &'static str) {
    match std::str::from_utf8(bytes) {
        Ok(text) if render::pretty_json(text).is_some() => (text.to_owned(), "json"),
        Ok(text) if !text.chars().any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t')) => {
            (text.to_owned(), "text")
        }
        _ => (bytes.iter().map(|b| format!("{b:02x}")).collect(), "hex"),
    }
}

/// The report as a heading, aligned `field  value` lines, and the data below them (JSON
/// indented).
fn table(report: &Report) -> String {
    let format = match report.data_format {
        "json" => "JSON",
        "text" => "text",
        _ => "binary, shown in hex",
    };
    let mut size = format!("{} bytes", report.bytes);
    if report.compression.is_some() {
        size = format!("gzip-compressed, {size} ({} stored)", report.stored_bytes);
    }
    let mut out = format!("{}: {format}, {size}\n", report.path);
    if let Some(why) = &report.gzip_error {
        out.push_str(&format!("(gzip's magic bytes, but not gzip: {why})\n"));
    }
    out.push('\n');
    let mut rows = vec![("VERSION", report.version.to_string()), ("CHILDREN", report.num_children.to_string())];
    if let Some(owner) = &report.ephemeral_owner {
        rows.push(("EPHEMERAL", format!("owner session {owner}")));
    }
    rows.push(("CHANGED", format!("{} ago", render::age(report.changed_ms_ago))));
    out.push_str(&render::fields(&rows));
    if !report.data.is_empty() {
        out.push('\n');
        match render::pretty_json(&report.data).filter(|_| report.data_format == "json") {
            Some(pretty) => out.push_str(&pretty),
            None => out.push_str(&report.data),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(data: &str, data_format: &'static str, compression: Option<&'static str>) -> Report {
        Report {
            path: "/n".into(),
            version: 2,
            stored_bytes: 30,
            compression,
            gzip_error: None,
            bytes: data.len(),
            data_format,
            data: data.into(),
            num_children: 0,
            ephemeral_owner: None,
            mtime_ms: 0,
            changed_ms_ago: 1500,
        }
    }

    #[test]
    fn data_is_json_text_or_hex() {
        assert_eq!(decode(br#"{"a":1}"#), (r#"{"a":1}"#.to_owned(), "json"));
        assert_eq!(decode(b"a\nb"), ("a\nb".to_owned(), "text"));
        assert_eq!(decode(b"42"), ("42".to_owned(), "text"), "a bare number is text");
        assert_eq!(decode(b"{broken"), ("{broken".to_owned(), "text"));
        assert_eq!(decode(&[0, 0xff]), ("00ff".to_owned(), "hex"));
    }

    #[test]
    fn the_table_says_gzip_and_indents_json() {
        let text = table(&report(r#"{"id":1,"tags":["a"]}"#, "json", Some("gzip")));
        assert_eq!(
            text,
            "/n: JSON, gzip-compressed, 21 bytes (30 stored)\n\nVERSION   2\nCHILDREN  0\nCHANGED   1.5s ago\n\n\
             {\n  \"id\": 1,\n  \"tags\": [\n    \"a\"\n  ]\n}\n"
        );
        let plain = table(&report("hello", "text", None));
        assert!(plain.starts_with("/n: text, 5 bytes\n"), "{plain}");
        assert!(plain.ends_with("\n\nhello\n"), "{plain}");
    }
}
