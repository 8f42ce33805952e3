//! `zkr services [<name>]`: the instances registered with curator-x-discovery's layout
//! (`<base>/<name>/<id>`, the instance's JSON), whichever side wrote them.

use serde_json::Value;
use zk_recipes::discovery::{JsonInstanceSerializer, ServiceDiscovery, ServiceInstance};

use crate::connect::Options;
use crate::exit::{Code, Failure};
use crate::render;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// One service's instances (default: every service under the base)
    name: Option<String>,
    /// The discovery base path (Curator's `basePath`)
    #[arg(long, default_value = "/services")]
    base: String,
    /// One JSON array of instances (the fields of Curator's JSON, `enabled` included)
    #[arg(long)]
    json: bool,
}

pub async fn run(options: &Options, args: Args) -> Result<(), Failure> {
    let connect = options.connect_string();
    zk_recipes::path::validate_recipe_path(&args.base)
        .map_err(|e| Failure::from_error(e, "checking the base path", connect))?;
    let framework = options.build(connect)?;
    options.start(&framework, connect).await?;
    // A raw payload: `@class` and all, as the registering side wrote it.
    let discovery: ServiceDiscovery<Value> =
        ServiceDiscovery::new(&framework, &args.base, JsonInstanceSerializer::new())
            .map_err(|e| Failure::from_error(e, "checking the base path", connect))?;
    // A base (or a service) that is not there is a missing path, as for every reading
    // subcommand, not an empty answer.
    let mut needed = vec![args.base.clone()];
    needed.extend(args.name.as_deref().map(|name| zk_recipes::path::join(&args.base, name)));
    for path in needed {
        match framework.exists(&path).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                framework.close().await;
                return Err(Failure::new(Code::Missing, format!("{path}: no such node")));
            }
            Err(e) => {
                framework.close().await;
                return Err(Failure::from_error(e, &format!("reading {path}"), connect));
            }
        }
    }
    let found = list(&framework, &discovery, &args.base, args.name.as_deref()).await;
    framework.close().await;
    let (instances, unreadable) =
        found.map_err(|e| Failure::from_error(e, &format!("reading {}", args.base), connect))?;
    for path in unreadable {
        eprintln!("zkr: skipped {path}: not an instance's JSON");
    }
    if args.json {
        let with_enabled = JsonInstanceSerializer::new().with_enabled_field();
        let values: Vec<Value> = instances
            .iter()
            .filter_map(|i| with_enabled.serialize(i).ok())
            .filter_map(|bytes| serde_json::from_slice(&bytes).ok())
            .collect();
        println!("{}", serde_json::to_string_pretty(&values).unwrap_or_else(|_| "[]".into()));
    } else {
        print!("{}", table(&instances));
    }
    Ok(())
}

/// The instances of `name` (or of every service), and the paths of instance nodes that do not
/// hold an instance's JSON (the library leaves those out of a query).
async fn list(
    framework: &zk_recipes::Framework,
    discovery: &ServiceDiscovery<Value>,
    base: &str,
    name: Option<&str>,
) -> zk_recipes::Result<(Vec<ServiceInstance>, Vec<String>)> {
    let names = match name {
        Some(name) => vec![name.to_owned()],
        None => discovery.query_for_names().await?,
    };
    let (mut instances, mut unreadable) = (Vec::new(), Vec::new());
    for name in names {
        let found = discovery.query_for_instances(&name).await?;
        let dir = zk_recipes::path::join(base, &name);
        let mut ids = match framework.get_children(&dir).await {
            Ok(ids) => ids,
            Err(e) if e.is_no_node() => Vec::new(),
            Err(e) => return Err(e),
        };
        ids.sort();
        for id in ids {
            if !found.iter().any(|i| i.id == id) {
                unreadable.push(zk_recipes::path::join(&dir, &id));
            }
        }
        instances.extend(found);
    }
    Ok((instances, unreadable))
}

fn table(instances: &[ServiceInstance]) -> String {
    if instances.is_empty() {
        return "no instances\n".to_owned();
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let header = ["NAME", "ID", "ADDRESS", "PORT", "SSL", "TYPE", "ENABLED", "AGE", "PAYLOAD"].map(str::to_owned);
    let opt = |p: Option<u16>| p.map_or("-".to_owned(), |p| p.to_string());
    let rows: Vec<[String; 9]> = instances
        .iter()
        .map(|i| {
            [
                render::cell(&i.name),
                render::cell(&i.id),
                i.address.as_deref().map_or_else(|| "-".into(), render::cell),
                opt(i.port),
                opt(i.ssl_port),
                i.service_type.as_str().to_owned(),
                i.enabled.to_string(),
                render::age(now.saturating_sub(i.registration_time_utc)),
                i.payload.as_ref().map_or("-".to_owned(), Value::to_string),
            ]
        })
        .collect();
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(rows.iter()) {
        let cells: Vec<String> = row.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}
