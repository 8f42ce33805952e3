//! `zkr`: who holds a ZooKeeper lock, and the zk-recipes demo.
//!
//! `zkr locks <path>` decodes the children of any lock recipe's path (zk-recipes and Apache
//! Curator write the same nodes) into holders, waiters and leases; `zkr revoke <node>` asks a
//! holder to let go (Curator's revocation message); `zkr demo` runs the two classic lock
//! scenarios and checks them; `zkr watch`, `zkr services`, `zkr counter`, `zkr barrier` and
//! `zkr queue` show a subtree's changes, registered service instances, a counter's value, a
//! barrier's state and a queue's items; `zkr get` shows one node's data, decompressed and
//! indented.

mod barrier;
mod connect;
mod counter;
mod decode;
mod demo;
mod exit;
mod get;
mod locks;
mod queue;
mod render;
mod revoke;
mod services;
mod watch;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::connect::Options;
use crate::exit::Failure;

/// The exit codes, as `--help` shows them (kept in step with [`exit::Code`]).
const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  any other failure (an unexpected ZooKeeper error)
  2  bad arguments: usage, or an invalid path, connect string, duration, --digest, --sasl
     or TLS file
  3  ZooKeeper unreachable: no connection within --connection-timeout, or it was lost
  4  the path (the lock directory) does not exist
  5  authentication or authorization failure: the node's ACL refuses this client (see --digest)
  6  the path exists but is not what the subcommand reads (a lock directory, a counter,
     a barrier or a queue)
  7  zkr demo: a check failed (two holders at once, unpaired lines, too many leases)";

/// Inspect ZooKeeper recipes (zk-recipes and Apache Curator alike): locks, a subtree's changes,
/// service instances, counters, barriers, queues and a node's data; and run the zk-recipes demo.
#[derive(Debug, Parser)]
#[command(name = "zkr", version, after_help = EXIT_CODES, term_width = 100)]
struct Cli {
    /// ZooKeeper connect string, host:port[,host:port...][/chroot] [default: 127.0.0.1:2181;
    /// `zkr demo` starts an embedded server instead]
    #[arg(long, env = "ZK_CONNECT", global = true, help_heading = "Connection", value_name = "HOSTS")]
    connect: Option<String>,

    /// Curator namespace: every path is taken under /<NAMESPACE>
    #[arg(long, global = true, help_heading = "Connection")]
    namespace: Option<String>,

    /// Session timeout to ask the server for (e.g. 10s, 500ms, 1m)
    #[arg(long, global = true, help_heading = "Connection", value_parser = parse_duration, default_value = "10s", value_name = "DURATION")]
    session_timeout: Duration,

    /// How long to wait for a connection before giving up (exit code 3)
    #[arg(long, global = true, help_heading = "Connection", value_parser = parse_duration, default_value = "15s", value_name = "DURATION")]
    connection_timeout: Duration,

    /// Digest authentication as user:password, sent on connect (never printed)
    #[arg(long, env = "ZK_DIGEST", hide_env_values = true, global = true, help_heading = "Connection", value_parser = parse_digest, value_name = "USER:PASSWORD")]
    digest: Option<String>,

    /// TLS: the CA bundle (PEM) that signed the servers' certificates; hosts without a scheme
    /// then use TLS too (the servers' secureClientPort)
    #[arg(long, env = "ZK_TLS_CA", global = true, help_heading = "Connection", value_name = "PEM_FILE")]
    tls_ca: Option<PathBuf>,

    /// Mutual TLS: this client certificate (PEM), with --tls-key and --tls-ca
    #[arg(long, env = "ZK_TLS_CERT", global = true, help_heading = "Connection", requires_all = ["tls_key", "tls_ca"], value_name = "PEM_FILE")]
    tls_cert: Option<PathBuf>,

    /// Mutual TLS: the client certificate's private key (PEM), with --tls-cert
    #[arg(
        long,
        env = "ZK_TLS_KEY",
        global = true,
        help_heading = "Connection",
        requires = "tls_cert",
        value_name = "PEM_FILE"
    )]
    tls_key: Option<PathBuf>,

    /// SASL DIGEST-MD5 login as user:password (a JAAS DigestLoginModule user; never printed)
    #[arg(long, env = "ZK_SASL", hide_env_values = true, global = true, help_heading = "Connection", value_parser = parse_digest, value_name = "USER:PASSWORD")]
    sasl: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show the holders and waiters of a lock path, whoever created them
    ///
    /// Decodes mutexes (InterProcessMutex, a LeaderSelector's), semaphores
    /// (InterProcessSemaphoreV2, InterProcessSemaphoreMutex: their leases/ and locks/),
    /// read-write locks (__READ__/__WRIT__) and leader latches (latch-), created by zk-recipes or
    /// by Apache Curator, in Curator's order. Per node: role, kind, sequence, owner session, age,
    /// data and name.
    #[command(after_help = EXIT_CODES)]
    Locks(locks::Args),

    /// Ask the holder of a lock node to release it (Curator's revocation)
    ///
    /// Writes Curator's revocation message, the 10 bytes __REVOKE__, to the node; a holder that
    /// made its lock revocable is told and lets go when it chooses. A node that no longer exists
    /// is not an error.
    #[command(after_help = EXIT_CODES)]
    Revoke(revoke::Args),

    /// Run the two classic lock scenarios and check them
    ///
    /// Five workers take turns on one mutex (strictly paired `worker N start` / `worker N end`
    /// lines), then fifteen workers share a three-lease semaphore (never more than three at
    /// once). Checks both, prints a summary, exits 7 on a violation. Starts an embedded
    /// ZooKeeper server unless --connect (or ZK_CONNECT) is given.
    #[command(after_help = EXIT_CODES)]
    Demo(demo::Args),

    /// Print the changes of a subtree as they happen (a CuratorCache's events)
    ///
    /// Loads the node and its descendants (or, with --mode, the node alone or its direct
    /// children), prints a `created` line for each node and `initialized`, then one line per
    /// change: created, changed (with the version before), deleted. After a reconnect or a new
    /// session the cache re-reads the subtree and prints the differences. Ends on Ctrl-C, or
    /// with --count / --for.
    #[command(after_help = EXIT_CODES)]
    Watch(watch::Args),
    /// Show the service instances registered with curator-x-discovery's layout
    ///
    /// Reads <base>/<name>/<id> (default base /services), whichever side (Curator or
    /// zk-recipes) registered them: name, id, address, ports, type, enabled, age and payload.
    #[command(after_help = EXIT_CODES)]
    Services(services::Args),

    /// Show a counter's value: a SharedCount, DistributedAtomicInteger or DistributedAtomicLong
    ///
    /// Decodes the node's bytes by their length (4 big-endian bytes: a SharedCount or a
    /// DistributedAtomicInteger, one format; 8: a DistributedAtomicLong; none: an atomic's 0),
    /// or as --layout says, and shows the value, the data version (what try_set compares), the
    /// bytes and when it last changed. Another length exits 6.
    #[command(after_help = EXIT_CODES)]
    Counter(counter::Args),

    /// Show a barrier's state: a DistributedBarrier set or not, a double barrier's members
    ///
    /// A DistributedBarrier is set while its node exists. A DistributedDoubleBarrier's path holds
    /// one ephemeral node per member that entered (named by a UUID) and `ready` once enough
    /// entered: shows ready, the member count and each member's session and age. A path with no
    /// children reads as a set barrier unless --double.
    #[command(after_help = EXIT_CODES)]
    Barrier(barrier::Args),

    /// Show a queue's items in the order consumers take them
    ///
    /// Reads a SimpleDistributedQueue (qn- nodes, one raw item each) or a DistributedQueue
    /// (queue- nodes in Curator's item framing, several items per node after a multi-item put):
    /// per node its position, kind (simple, framed, corrupt, unreadable, foreign), items,
    /// sequence, age and data; the node and item counts, the next node and the oldest.
    ///
    /// A DistributedQueue's variant is told from its node names (queue-|<id>|<seq> an id queue,
    /// queue-|<epoch hex>|<seq> a delay queue, queue-<priority code><seq> a priority queue) or
    /// given with --variant. It orders the nodes as its consumer takes them (an id queue by
    /// sequence, a priority queue lowest first, a delay queue by due time) and adds a column:
    /// ID, PRIORITY, or DUE (UTC, and due in or overdue by, from this machine's clock).
    ///
    /// A QueueSharder's path (queue-<uuid> children) is shown shard by shard, each as a queue.
    #[command(after_help = EXIT_CODES)]
    Queue(queue::Args),

    /// Show a node's data, decoded: gzip decompressed, JSON indented
    ///
    /// Data in gzip (Curator's compressed() and a compressed ModelSpec, its
    /// GzipCompressionProvider) is shown decompressed and said to be gzip; a JSON object or
    /// array (a typed node, a service instance) is indented, its fields in their order; other
    /// UTF-8 text as is; anything else in hex. With the node's version (what a compare-and-set
    /// compares), its number of children, its owner session when ephemeral and when it last
    /// changed.
    #[command(after_help = EXIT_CODES)]
    Get(get::Args),
}

fn main() -> ExitCode {
    // A reader that goes (`zkr watch --json | head -3`) ends zkr as it ends any Unix tool,
    // rather than a panic at the next print.
    #[cfg(unix)]
    // SAFETY: sets a signal's disposition to its default before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with status 0; usage errors exit 2.
            let _ = e.print();
            return if e.use_stderr() { exit::Code::Usage.into() } else { ExitCode::SUCCESS };
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return Failure::other(format!("cannot start the async runtime: {e}")).report(),
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    let options = Options {
        connect: cli.connect,
        namespace: cli.namespace,
        session_timeout: cli.session_timeout,
        connection_timeout: cli.connection_timeout,
        digest: cli.digest,
        tls_ca: cli.tls_ca,
        tls_cert: cli.tls_cert,
        tls_key: cli.tls_key,
        sasl: cli.sasl,
    };
    match cli.command {
        Command::Locks(args) => locks::run(&options, args).await,
        Command::Revoke(args) => revoke::run(&options, args).await,
        Command::Demo(args) => demo::run(&options, args).await,
        Command::Watch(args) => watch::run(&options, args).await,
        Command::Services(args) => services::run(&options, args).await,
        Command::Counter(args) => counter::run(&options, args).await,
        Command::Barrier(args) => barrier::run(&options, args).await,
        Command::Queue(args) => queue::run(&options, args).await,
        Command::Get(args) => get::run(&options, args).await,
    }
}

/// `10s`, `500ms`, `1.5s`, `2m`, `1h`; a bare number is seconds. Must be more than zero.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().map_err(|_| format!("{text:?} is not a duration (e.g. 10s, 500ms, 2m)"))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("unknown unit {unit:?} in {text:?} (use ms, s, m or h)")),
    };
    let duration = Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))?;
    if duration.is_zero() {
        return Err("must be more than zero".to_owned());
    }
    Ok(duration)
}

/// `user:password` for the digest scheme (ZooKeeper's `addauth digest user:password`).
fn parse_digest(text: &str) -> Result<String, String> {
    match text.split_once(':') {
        Some((user, _)) if !user.is_empty() => Ok(text.to_owned()),
        _ => Err("expected user:password".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        for bad in ["", "abc", "10x", "0s", "-1s", "1e3s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn digests() {
        assert_eq!(parse_digest("alice:secret"), Ok("alice:secret".to_owned()));
        assert_eq!(parse_digest("alice:"), Ok("alice:".to_owned()));
        assert!(parse_digest("alice").is_err());
        assert!(parse_digest(":secret").is_err());
    }

    #[test]
    fn the_cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
