//! `FrameworkBuilder`: configuration, validated by `build()` without any I/O.

use std::fmt;
#[cfg(feature = "tls")]
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use zookeeper_client::Acl;

use super::security::{Security, SecurityOptions};
use super::session_failure::SessionFailurePolicy;
use super::state::ConnectionStateErrorPolicy;
use super::wait_strategy::WaitStrategy;
use super::Framework;
use crate::error::{Error, Result};
use crate::path;
use crate::retry::{ExponentialBackoffRetry, RetryPolicy};

/// Longest session or connection timeout accepted; anything longer is surely a unit mistake.
const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// Most state events a stream or listener may fall behind by. The event channel allocates
/// its whole capacity up front, so an absurd value would exhaust memory.
pub(crate) const MAX_EVENT_CAPACITY: usize = 1 << 16;

/// ZooKeeper's default `jute.maxbuffer`: the largest request frame a server accepts (it drops
/// the connection on a larger one).
pub(crate) const DEFAULT_MAX_REQUEST_BYTES: usize = 0xfffff;

/// Decides the ACL of every node the library creates (Curator's `ACLProvider`).
///
/// The path given is the full path on the server, namespace included.
pub trait AclProvider: fmt::Debug + Send + Sync + 'static {
    /// The ACL for a node created at `path`. Must not be empty: an empty list is refused
    /// with [`Error::InvalidArgument`] before the node is created.
    fn acl_for_path(&self, path: &str) -> Vec<Acl>;
}

/// The default provider: every node is open to everyone (`world:anyone`, all permissions),
/// as Curator's default.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAclProvider;

impl AclProvider for OpenAclProvider {
    fn acl_for_path(&self, _path: &str) -> Vec<Acl> {
        zookeeper_client::Acls::anyone_all().to_vec()
    }
}

/// A provider that gives the same ACL to every node (for example `digest` user ALL).
#[derive(Debug, Clone)]
pub struct FixedAclProvider(Vec<Acl>);

impl FixedAclProvider {
    /// Every node gets `acl`.
    pub fn new(acl: Vec<Acl>) -> Self {
        Self(acl)
    }
}

impl AclProvider for FixedAclProvider {
    fn acl_for_path(&self, _path: &str) -> Vec<Acl> {
        self.0.clone()
    }
}

/// Authentication data, sent on every connection of every session. Its bytes never appear in
/// `Debug` output or logs.
#[derive(Clone)]
pub(crate) struct AuthInfo {
    pub(crate) scheme: String,
    pub(crate) data: Vec<u8>,
}

impl fmt::Debug for AuthInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthInfo").field("scheme", &self.scheme).field("data", &"<redacted>").finish()
    }
}

/// Validated configuration, shared by the framework's tasks.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) connect_string: String,
    pub(crate) session_timeout: Duration,
    pub(crate) connection_timeout: Duration,
    pub(crate) retry_policy: Arc<dyn RetryPolicy>,
    pub(crate) namespace: Option<String>,
    pub(crate) can_be_read_only: bool,
    pub(crate) error_policy: ConnectionStateErrorPolicy,
    pub(crate) auth: Vec<AuthInfo>,
    pub(crate) acl_provider: Arc<dyn AclProvider>,
    pub(crate) event_capacity: usize,
    pub(crate) close_timeout: Duration,
    pub(crate) max_request_bytes: usize,
    pub(crate) fast_path: bool,
    pub(crate) wait_strategy: WaitStrategy,
    pub(crate) session_failure_policy: SessionFailurePolicy,
    pub(crate) security: Security,
    /// Gzip is the default of the data plane's writes and reads (`enable_compression`).
    pub(crate) compression: bool,
    pub(crate) ensemble_tracking: bool,
    pub(crate) client_hook: Option<ClientHook>,
    #[cfg(feature = "schema")]
    pub(crate) schema_set: Option<Arc<crate::schema::SchemaSet>>,
    pub(crate) metrics_name: Option<String>,
    pub(crate) metrics_path_labels: bool,
}

/// The user's adjustment of every session's client connector (see
/// [`FrameworkBuilder::configure_client`]).
#[derive(Clone)]
pub(crate) struct ClientHook(Arc<dyn Fn(zookeeper_client::Connector) -> zookeeper_client::Connector + Send + Sync>);

impl ClientHook {
    /// The connector as the hook leaves it.
    pub(crate) fn apply(&self, connector: zookeeper_client::Connector) -> zookeeper_client::Connector {
        (self.0)(connector)
    }
}

impl std::fmt::Debug for ClientHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientHook")
    }
}

/// Builds a [`Framework`]. Setters take and return the builder by value; `build()` validates
/// everything and does no I/O.
///
/// ```
/// use std::time::Duration;
/// use zk_recipes::Framework;
///
/// let framework = Framework::builder("127.0.0.1:2181")
///     .session_timeout(Duration::from_secs(10))
///     .namespace("app")
///     .build()
///     .expect("valid configuration");
/// # drop(framework);
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build()` or `start()`"]
pub struct FrameworkBuilder {
    connect_string: String,
    session_timeout: Duration,
    connection_timeout: Duration,
    retry_policy: Arc<dyn RetryPolicy>,
    namespace: Option<String>,
    can_be_read_only: bool,
    error_policy: ConnectionStateErrorPolicy,
    auth: Vec<AuthInfo>,
    acl_provider: Arc<dyn AclProvider>,
    event_capacity: usize,
    close_timeout: Duration,
    max_request_bytes: usize,
    fast_path: bool,
    wait_strategy: WaitStrategy,
    session_failure_policy: SessionFailurePolicy,
    security: SecurityOptions,
    compression: bool,
    ensemble_tracking: bool,
    client_hook: Option<ClientHook>,
    #[cfg(feature = "schema")]
    schema_set: Option<Arc<crate::schema::SchemaSet>>,
    metrics_name: Option<String>,
    metrics_path_labels: bool,
}

impl FrameworkBuilder {
    pub(crate) fn new(connect_string: &str) -> Self {
        Self {
            connect_string: connect_string.to_owned(),
            session_timeout: Duration::from_secs(60),
            connection_timeout: Duration::from_secs(15),
            retry_policy: Arc::new(ExponentialBackoffRetry::default()),
            namespace: None,
            can_be_read_only: false,
            error_policy: ConnectionStateErrorPolicy::default(),
            auth: Vec::new(),
            acl_provider: Arc::new(OpenAclProvider),
            event_capacity: 32,
            close_timeout: Duration::from_secs(5),
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            fast_path: true,
            wait_strategy: WaitStrategy::Mirror,
            session_failure_policy: SessionFailurePolicy::Retry,
            security: SecurityOptions::default(),
            compression: false,
            ensemble_tracking: true,
            client_hook: None,
            #[cfg(feature = "schema")]
            schema_set: None,
            metrics_name: None,
            metrics_path_labels: false,
        }
    }

    /// The session timeout to ask the server for (default 60 s, Curator's default; the server
    /// clamps it to between 2 and 20 ticks).
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// How long `start()` and a new session may take to connect (default 15 s).
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// The retry policy for operations that fail on connection loss (default
    /// [`ExponentialBackoffRetry::default`]).
    ///
    /// It also bounds how long an operation takes to fail in an outage: each attempt waits for
    /// its reply (or for the connection to be lost), then for the sleep the policy gives, and
    /// the session's expiry ends the tries only once the framework learns of it. Measured with
    /// the default policy, a 4 s session timeout and a network that answers nothing: a read
    /// failed with `SessionExpired` after 27-37 s. Use a policy with fewer retries, or
    /// [`RetryUntilElapsed`](crate::retry::RetryUntilElapsed), where a caller needs a tighter
    /// bound, or put a timeout around the call (each operation's docs say what a cancelled
    /// one may leave done).
    pub fn retry_policy(mut self, policy: impl RetryPolicy) -> Self {
        self.retry_policy = Arc::new(policy);
        self
    }

    /// Puts every path under `/<namespace>` on the client side (Curator's namespace). The
    /// namespace node is created as a container when first needed: by a create that makes
    /// missing parents, and by a create whose parents must exist and a transaction when they
    /// find it missing.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_owned());
        self
    }

    /// Adjusts the raw client's [`Connector`](zookeeper_client::Connector) before every
    /// session is opened (Curator's `zookeeperFactory` and `zkClientConfig`), for the client
    /// settings this builder does not offer: `with_connection_timeout` (the client's idle
    /// timeout before it concludes a connection is lost; default 2/5 of the session timeout),
    /// `with_server_version` (the protocol for a 3.4 server), `with_fail_eagerly`, or TLS
    /// options built by hand (`with_tls`, feature `tls`).
    ///
    /// `configure` is called once per session (the first one and every new session after
    /// `Lost`), after the framework's own settings (session timeout, read-only, auth) and
    /// before the ones it must decide itself, which win: the session to re-establish, and TLS
    /// and SASL when configured on this builder. Leave `with_session_timeout`,
    /// `with_readonly` and `with_detached` alone: the framework's states and its `close()`
    /// rely on its own choices (a detached session outlives `close()` until it expires).
    ///
    /// ```
    /// use std::time::Duration;
    /// use zk_recipes::Framework;
    ///
    /// let framework = Framework::builder("127.0.0.1:2181")
    ///     .configure_client(|connector| connector.with_connection_timeout(Duration::from_secs(2)))
    ///     .build()
    ///     .expect("valid configuration");
    /// # drop(framework);
    /// ```
    pub fn configure_client<F>(mut self, configure: F) -> Self
    where
        F: Fn(zookeeper_client::Connector) -> zookeeper_client::Connector + Send + Sync + 'static,
    {
        self.client_hook = Some(ClientHook(Arc::new(configure)));
        self
    }

    /// Checks every data-plane operation against `schemas` before it is sent (feature
    /// `schema`; Curator's `schemaSet`): see [`crate::schema`]. Default: no checks.
    #[cfg(feature = "schema")]
    pub fn schema_set(mut self, schemas: crate::schema::SchemaSet) -> Self {
        self.schema_set = Some(Arc::new(schemas));
        self
    }

    /// Accept connections to read-only servers (reported as `ReadOnly`).
    pub fn can_be_read_only(mut self, allow: bool) -> Self {
        self.can_be_read_only = allow;
        self
    }

    /// Which states make guards report their lock as lost (default `Standard`).
    pub fn error_policy(mut self, policy: ConnectionStateErrorPolicy) -> Self {
        self.error_policy = policy;
        self
    }

    /// Adds authentication (for example scheme `digest`, data `user:password`), sent on every
    /// connection of every session.
    pub fn auth(mut self, scheme: &str, data: &[u8]) -> Self {
        self.auth.push(AuthInfo { scheme: scheme.to_owned(), data: data.to_vec() });
        self
    }

    /// Decides the ACL of each node the library creates (default: open to everyone).
    pub fn acl_provider(mut self, provider: impl AclProvider) -> Self {
        self.acl_provider = Arc::new(provider);
        self
    }

    /// How many state events a slow stream or listener may fall behind before it skips to the
    /// current state (default 32, at most 65,536).
    pub fn event_capacity(mut self, capacity: usize) -> Self {
        self.event_capacity = capacity;
        self
    }

    /// How long `close()` waits for pending background deletes (default 5 s).
    pub fn close_timeout(mut self, timeout: Duration) -> Self {
        self.close_timeout = timeout;
        self
    }

    /// Whether an uncontended mutex may take its lock with the create alone (default on).
    ///
    /// A handle that just released a node it held alone learns from its next node's sequence
    /// number that nobody else created a node in between (ZooKeeper numbers a directory's
    /// children by counting its creates), and holds the lock without listing the directory: an
    /// acquire-release cycle costs two requests instead of three. A watch on the directory,
    /// set before the release, proves it was not deleted and re-created meanwhile (which would
    /// restart the count); the session, the release's reply and the number's range are
    /// checked too, and whenever one of them fails the acquire lists the directory as usual.
    /// Peers (Curator included) see ordinary lock nodes.
    ///
    /// It turns itself off on ZooKeeper 3.5 servers, which the framework recognises on each
    /// new session (see "Server versions" in the crate docs): 3.5 can revert a directory's
    /// child count when it replays a snapshot after a restart, and hand out a number twice
    /// (fixed in 3.6). Until the session's server is known, acquires take the usual way.
    /// `fast_path(false)` turns it off everywhere, for example during a rolling upgrade
    /// from 3.5 (a mixed ensemble is as old as its oldest member). The fast path serves
    /// [`WaitStrategy::PerWaiterWatch`] only: with the default, [`WaitStrategy::Mirror`], it is
    /// not used (the mirror takes an uncontended lock with the create alone too).
    pub fn fast_path(mut self, enabled: bool) -> Self {
        self.fast_path = enabled;
        self
    }

    /// How a waiting lock learns that the lock came its way (default
    /// [`WaitStrategy::Mirror`]; [`WaitStrategy::PerWaiterWatch`] is Curator's way): see
    /// [`WaitStrategy`].
    pub fn wait_strategy(mut self, strategy: WaitStrategy) -> Self {
        self.wait_strategy = strategy;
        self
    }

    /// Whether an operation whose session ended before it succeeded is retried on the next
    /// session (default [`SessionFailurePolicy::Retry`]) or fails with `SessionExpired`
    /// ([`SessionFailurePolicy::Fail`], Curator's `SessionFailedRetryPolicy`).
    pub fn session_failure_policy(mut self, policy: SessionFailurePolicy) -> Self {
        self.session_failure_policy = policy;
        self
    }

    /// The value of the `framework` label on every metric of this framework (default
    /// `default`): a name per framework when a process has several (the metrics and their
    /// labels are listed in the [observability guide](crate::guide::observability)). Metrics go to the
    /// recorder of the [`metrics`](https://docs.rs/metrics) facade installed when the framework
    /// (or the recipe handle) is built; without one they cost nothing.
    pub fn metrics_name(mut self, name: &str) -> Self {
        self.metrics_name = Some(name.to_owned());
        self
    }

    /// Whether recipe metrics carry a `path` label (the lock, cache or mirror path; default
    /// `false`: the `recipe` label only). A path label makes one series per path: turn it on
    /// only when the paths are few.
    pub fn metrics_path_labels(mut self, enabled: bool) -> Self {
        self.metrics_path_labels = enabled;
        self
    }

    /// The largest request the servers accept, in bytes: their `jute.maxbuffer` (default
    /// 1,048,575, ZooKeeper's default). A server drops the connection on a larger request, on
    /// every retry, which suspends every lock of the process; lock data, paths and
    /// [`create`](Framework::create)/[`set_data`](Framework::set_data) requests that would not
    /// fit are refused up front with [`Error::TooLarge`]. Set it to the servers' value when
    /// they use another.
    pub fn max_request_bytes(mut self, bytes: usize) -> Self {
        self.max_request_bytes = bytes;
        self
    }

    /// Makes gzip the default of this framework's data plane (Curator 5.8's
    /// `enableCompression()` with its `GzipCompressionProvider`): [`create`](Framework::create)
    /// and [`set_data`](Framework::set_data) compress what they write and
    /// [`get_data`](Framework::get_data) decompresses what it reads, unless the call says
    /// `uncompressed()` / `undecompressed()`; a [`transaction`](Framework::transaction) writes
    /// its bytes as given (compress them with [`protocol::gzip`](crate::protocol::gzip)).
    /// The typed nodes (`ModeledFramework` and its cache, feature `serde`) follow it. Peers
    /// that share a node must agree: a Curator 5.4 peer reads it with
    /// `getData().decompressed()`.
    ///
    /// The recipes of this crate (locks, caches, shared values, queues, ...) keep their nodes
    /// uncompressed, as Curator 5.4 to 5.7 do; a Curator 5.8 fleet that compresses every
    /// recipe's data with this option shares its typed nodes and data plane with this crate,
    /// not its recipes.
    #[doc(alias = "enableCompression")]
    pub fn enable_compression(mut self) -> Self {
        self.compression = true;
        self
    }

    /// Connects with TLS, trusting the CA certificates in the PEM file `path` (a bundle may
    /// hold several). Hosts of the connect string without a scheme then use TLS too; a
    /// `tcp://` host stays plain and a `tcp+tls://` host needs this option. The file is read
    /// by [`build`](Self::build), once: new sessions reuse what was read then.
    ///
    /// A ZooKeeper server speaks TLS on its `secureClientPort`, with
    /// `serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory` (the security
    /// guide, `guide::security`, has the server settings).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_ca_file(mut self, path: impl AsRef<Path>) -> Self {
        self.security.tls_ca_file = Some(path.as_ref().to_path_buf());
        self
    }

    /// Presents this client certificate (PEM, the chain from the client's certificate up)
    /// and its private key (PEM: PKCS#8, PKCS#1 or SEC1) to the servers: mutual TLS, which a
    /// server with `ssl.clientAuth=need` (its default) requires. Needs
    /// [`tls_ca_file`](Self::tls_ca_file). Read by [`build`](Self::build), which also checks
    /// that the key is the certificate's.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_client_identity(mut self, cert_file: impl AsRef<Path>, key_file: impl AsRef<Path>) -> Self {
        self.security.tls_identity = Some((cert_file.as_ref().to_path_buf(), key_file.as_ref().to_path_buf()));
        self
    }

    /// Whether a server's certificate must name the host it was reached by (default `true`,
    /// as ZooKeeper's `zookeeper.ssl.hostnameVerification`): a DNS name or IP address in its
    /// subject alternative names. With `false`, any certificate the CA signed is accepted
    /// from any host, so anyone holding one (another service's, say) can pose as the
    /// ensemble; use it only where each CA signs nothing but the ensemble's certificates.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_hostname_verification(mut self, verify: bool) -> Self {
        self.security.tls_hostname_verification = Some(verify);
        self
    }

    /// Authenticates every connection with SASL DIGEST-MD5 as `user` (a `user_<name>` entry
    /// of the servers' JAAS `DigestLoginModule`; the security guide, `guide::security`, has
    /// the server settings). The session's identity is then `sasl:<user>`, for ACLs. The
    /// password never appears in `Debug` output or logs. A wrong user or password ends the
    /// session at once: `start()` fails with the client's `AuthFailed`.
    #[cfg(feature = "sasl")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sasl")))]
    pub fn sasl_digest(mut self, user: &str, password: &str) -> Self {
        self.security.sasl_digest = Some((user.to_owned(), password.to_owned()));
        self
    }

    /// Whether the framework tracks the ensemble's membership (default `true`, as Curator's
    /// `ensembleTracker(true)`): it watches the configuration node `/zookeeper/config` and
    /// makes every new connection to the members it lists (see [`Framework::ensemble`]), so a
    /// client given the original servers follows an ensemble whose members are replaced.
    /// It follows the members only when some configuration names one of the hosts it was
    /// given (the members' own client addresses): a client given only other addresses (a
    /// proxy, a load balancer, NAT, DNS names of its own) keeps its connect string. Turn it
    /// off when clients given some member's address must still not reach the others by the
    /// addresses the servers advertise.
    ///
    /// A session whose client knows only servers that have left the ensemble is moved: as soon
    /// as it is `Suspended` (after a twentieth of the session timeout, so that a passing flap
    /// does not count), a second client attaches to the session through the current members
    /// (tried again every tenth of the session timeout while an election runs) and replaces
    /// the first. So is one `Suspended` for a quarter of the session timeout whose client was
    /// not given every member the ensemble names (its own servers may have left before it
    /// read the configuration that removed them). The session keeps its id and epoch;
    /// `Reconnected` follows. Locks, persistent watches, caches and mirrors carry on
    /// over it. The old client is kept (dropped, it would close the session at its next
    /// connection) until it gives up (7/5 of the session timeout after its last contact),
    /// or, when it reaches one of its own servers again (possible in the second case), until
    /// the framework gives the session up or closes; such a return takes the session's
    /// connection for a moment (the current client's next write finds the session moved and
    /// reconnects). A request still queued on the old client waits until that client gives
    /// up, then goes again through the session's client (a lock's release among them: its
    /// node is deleted, never taken as gone with a session that lives). A one-shot watch set
    /// through [`get_data(..).watch()`](crate::GetData::watch) and the like ends at the move
    /// with `ConnectionLoss` (read again); an acquire waiting on its predecessor's node
    /// (`WaitStrategy::PerWaiterWatch`, or a crowded directory) or on a semaphore's leases
    /// looks again through the new client and keeps its place. A raw client from
    /// `zk_client()` taken before the move stays the old client, and ends with it.
    pub fn ensemble_tracking(mut self, track: bool) -> Self {
        self.ensemble_tracking = track;
        self
    }

    /// Authenticates every connection with SASL GSSAPI (Kerberos) as the process's Kerberos
    /// identity, to the servers' principal `<service>/<host>` (ZooKeeper's default service
    /// name is `zookeeper`; `host` defaults to each server's host as the connect string names
    /// it, as the Java client's `zookeeper.sasl.client.username` and host canonicalization off).
    /// The session's identity is then `sasl:<principal>`, for ACLs.
    ///
    /// The credentials are the system GSSAPI library's (MIT Kerberos): its configuration
    /// (`KRB5_CONFIG`), and a ticket cache (`KRB5CCNAME`, from `kinit`) or a client keytab
    /// (`KRB5_CLIENT_KTNAME`), from the process environment. A login the KDC or the server
    /// refuses (a wrong or stale keytab, no ticket) ends the session: `start()` fails with the
    /// client's `AuthFailed`.
    #[cfg(feature = "sasl-gssapi")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sasl-gssapi")))]
    pub fn sasl_gssapi(mut self, service: &str, host: Option<&str>) -> Self {
        self.security.sasl_gssapi = Some((service.to_owned(), host.map(str::to_owned)));
        self
    }

    /// Validates the configuration and builds a framework that is not yet connected.
    ///
    /// # Errors
    /// [`Error::InvalidConnectString`] (also for a `tcp+tls://` host when the crate was built
    /// without its `tls` feature), [`Error::InvalidPath`] (namespace) or
    /// [`Error::InvalidArgument`] (zero or absurd timeouts, an event capacity of zero or above
    /// 65,536, a request limit below 1 KiB, a retry policy that refuses its settings, TLS
    /// files that cannot be read or hold no usable certificate or key, a client key that is
    /// not the client certificate's, TLS options without a CA bundle).
    pub fn build(self) -> Result<Framework> {
        validate_connect_string(&self.connect_string)?;
        let security = self.security.load(&self.connect_string)?;
        validate_timeout("session_timeout", self.session_timeout)?;
        validate_timeout("connection_timeout", self.connection_timeout)?;
        validate_timeout("close_timeout", self.close_timeout)?;
        if !(1..=MAX_EVENT_CAPACITY).contains(&self.event_capacity) {
            return Err(Error::invalid_argument(
                "event_capacity",
                format!("must be between 1 and {MAX_EVENT_CAPACITY}, got {}", self.event_capacity),
            ));
        }
        if self.max_request_bytes < 1024 {
            return Err(Error::invalid_argument("max_request_bytes", "must be at least 1024"));
        }
        self.retry_policy.validate()?;
        let namespace = self.namespace.as_deref().map(path::normalize_namespace).transpose()?;
        for auth in &self.auth {
            if auth.scheme.is_empty() {
                return Err(Error::invalid_argument("auth", "scheme is empty"));
            }
        }
        Ok(Framework::from_config(Config {
            connect_string: self.connect_string,
            session_timeout: self.session_timeout,
            connection_timeout: self.connection_timeout,
            retry_policy: self.retry_policy,
            namespace,
            can_be_read_only: self.can_be_read_only,
            error_policy: self.error_policy,
            auth: self.auth,
            acl_provider: self.acl_provider,
            event_capacity: self.event_capacity,
            close_timeout: self.close_timeout,
            max_request_bytes: self.max_request_bytes,
            fast_path: self.fast_path,
            wait_strategy: self.wait_strategy,
            session_failure_policy: self.session_failure_policy,
            security,
            compression: self.compression,
            ensemble_tracking: self.ensemble_tracking,
            client_hook: self.client_hook,
            #[cfg(feature = "schema")]
            schema_set: self.schema_set,
            metrics_name: self.metrics_name,
            metrics_path_labels: self.metrics_path_labels,
        }))
    }

    /// Builds and connects: `build()?.start().await`.
    ///
    /// # Errors
    /// As [`build`](Self::build) and [`Framework::start`].
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled start leaves nothing running (the half-made session closes).
    pub async fn start(self) -> Result<Framework> {
        let framework = self.build()?;
        framework.start().await?;
        Ok(framework)
    }
}

fn validate_timeout(name: &'static str, timeout: Duration) -> Result<()> {
    if timeout.is_zero() {
        Err(Error::invalid_argument(name, "must be greater than zero"))
    } else if timeout > MAX_TIMEOUT {
        Err(Error::invalid_argument(name, format!("{timeout:?} is longer than the 24 h limit")))
    } else {
        Ok(())
    }
}

/// Checks `host[:port][,host[:port]...][/chroot]`, hosts optionally as `[ipv6]` and with a
/// `tcp://` or `tcp+tls://` scheme, as zookeeper-client accepts them.
pub(crate) fn validate_connect_string(connect_string: &str) -> Result<()> {
    let fail = |reason: String| Err(Error::InvalidConnectString { connect_string: connect_string.to_owned(), reason });
    if connect_string.trim().is_empty() {
        return fail("connect string is empty".into());
    }
    if connect_string.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return fail("connect string contains whitespace or control characters".into());
    }
    let hosts_part = chroot_start(connect_string);
    let (hosts, chroot) = connect_string.split_at(hosts_part);
    if !chroot.is_empty() && chroot != "/" {
        // The server's own `/zookeeper` is no place for an application's nodes.
        if let Err(Error::InvalidPath { reason, .. }) = path::validate_recipe_path(chroot) {
            return fail(format!("chroot {chroot:?}: {reason}"));
        }
    }
    for host in hosts.split(',') {
        if let Err(reason) = validate_host(host) {
            return fail(reason);
        }
    }
    Ok(())
}

/// Where the chroot starts: the first `/` that is not part of a `scheme://`.
pub(crate) fn chroot_start(s: &str) -> usize {
    let mut search_from = 0;
    while let Some(i) = s[search_from..].find('/') {
        let at = search_from + i;
        if s[..at].ends_with(':') && s[at..].starts_with("//") {
            search_from = at + 2;
            continue;
        }
        return at;
    }
    s.len()
}

fn validate_host(host: &str) -> std::result::Result<(), String> {
    let host = host.strip_prefix("tcp://").or_else(|| host.strip_prefix("tcp+tls://")).unwrap_or(host);
    if host.is_empty() {
        return Err("empty host entry".into());
    }
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let end = rest.find(']').ok_or_else(|| format!("unclosed '[' in host {host:?}"))?;
        let after = &rest[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(format!("unexpected text after ']' in host {host:?}")),
        };
        (&rest[..end], port)
    } else {
        match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    if name.is_empty() {
        return Err(format!("empty host name in {host:?}"));
    }
    // A DNS name is at most 253 characters (an IPv6 address far fewer).
    if name.len() > 253 {
        return Err(format!("host name of {} characters (at most 253)", name.len()));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':')) {
        return Err(format!("invalid host name {name:?}"));
    }
    if let Some(port) = port {
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => return Err(format!("invalid port {port:?} in host {host:?}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_strings() {
        for ok in [
            "127.0.0.1:2181",
            "localhost",
            "a:1,b:2,c:3",
            "a:1,b:2/chroot/x",
            "[::1]:2181",
            "tcp://h1:2181,tcp+tls://h2:2281/app",
            "zk-1.example.com:2181",
            "a:1/zookeeper-app",
        ] {
            assert!(validate_connect_string(ok).is_ok(), "{ok}");
        }
        let long_name = format!("{}:2181", "h".repeat(254));
        for bad in [
            "",
            "  ",
            "a:",
            "a:0",
            "a:70000",
            "a:x",
            ",a:1",
            "a:1,",
            "a b:1",
            "a:1/x/",
            "[::1",
            "h\0:1",
            "a:1//x",
            "a:1/zookeeper",
            "a:1/zookeeper/app",
            &long_name,
        ] {
            assert!(
                matches!(validate_connect_string(bad), Err(Error::InvalidConnectString { .. })),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn builder_rejects_bad_input() {
        let b = || FrameworkBuilder::new("127.0.0.1:2181");
        assert!(matches!(b().session_timeout(Duration::ZERO).build(), Err(Error::InvalidArgument { .. })));
        assert!(matches!(
            b().connection_timeout(Duration::from_secs(365 * 24 * 3600)).build(),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(matches!(b().event_capacity(0).build(), Err(Error::InvalidArgument { .. })));
        assert!(matches!(b().event_capacity(usize::MAX).build(), Err(Error::InvalidArgument { .. })));
        assert!(b().event_capacity(MAX_EVENT_CAPACITY).build().is_ok());
        assert!(matches!(b().max_request_bytes(10).build(), Err(Error::InvalidArgument { .. })));
        let spinning = crate::retry::RetryForever::new(Duration::ZERO);
        assert!(matches!(b().retry_policy(spinning).build(), Err(Error::InvalidArgument { name: "retry_policy", .. })));
        for ns in ["/ns/", "a//b", "", "a\0b", "/a/../b"] {
            assert!(matches!(b().namespace(ns).build(), Err(Error::InvalidPath { .. })), "{ns:?}");
        }
        assert!(matches!(FrameworkBuilder::new("").build(), Err(Error::InvalidConnectString { .. })));
        assert!(b().namespace("app").build().is_ok());
    }

    #[test]
    fn auth_is_redacted() {
        let b = FrameworkBuilder::new("h:1").auth("digest", b"user:secret-password");
        let shown = format!("{b:?}");
        assert!(!shown.contains("secret-password"), "{shown}");
        assert!(shown.contains("<redacted>"));
    }

    #[cfg(feature = "sasl")]
    #[test]
    fn sasl_password_is_redacted() {
        let b = FrameworkBuilder::new("h:1").sasl_digest("alice", "secret-password");
        let framework = b.clone().build().unwrap();
        for shown in [format!("{b:?}"), format!("{:?}", framework.config())] {
            assert!(!shown.contains("secret-password") && shown.contains("alice"), "{shown}");
        }
    }
}
