//! Building a [`CuratorCache`]: what it covers, what it keeps, how it decodes.

use std::sync::Arc;

use super::handle::{CuratorCache, Settings};
use super::mode::CacheMode;
use crate::error::{Error, Result};
use crate::framework::Framework;
use crate::mirror::driver::Decode;
use crate::protocol::gzip;

impl CuratorCache<Vec<u8>> {
    /// A builder for a cache of `path` (and, by default, everything below it).
    pub fn builder(framework: &Framework, path: &str) -> CuratorCacheBuilder<Vec<u8>> {
        CuratorCacheBuilder::new(framework, path)
    }
}

/// Builds a [`CuratorCache`]; see [`CuratorCache::builder`].
pub struct CuratorCacheBuilder<T = Vec<u8>> {
    pub(super) framework: Framework,
    pub(super) path: String,
    pub(super) mode: CacheMode,
    pub(super) stats_only: bool,
    pub(super) decode: Decode<T>,
    /// Gunzip each node's bytes before the decoder (Curator's `COMPRESSED_DATA`).
    pub(super) decompressed: bool,
    pub(super) max_reads_in_flight: usize,
    pub(super) event_capacity: usize,
}

impl<T> std::fmt::Debug for CuratorCacheBuilder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CuratorCacheBuilder")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .field("stats_only", &self.stats_only)
            .field("decompressed", &self.decompressed)
            .field("max_reads_in_flight", &self.max_reads_in_flight)
            .finish_non_exhaustive()
    }
}

/// Reads in flight at most, by default, during a load or a resync: enough to keep one
/// connection busy (requests are pipelined on it) without queueing a whole large subtree's
/// reads on the server at once.
pub(super) const DEFAULT_READS_IN_FLIGHT: usize = 64;

/// Events a stream or listener may fall behind, by default, before it gets
/// [`CacheEvent::Lagged`](crate::CacheEvent::Lagged) instead.
const DEFAULT_EVENT_CAPACITY: usize = 10_000;

impl CuratorCacheBuilder<Vec<u8>> {
    pub(super) fn new(framework: &Framework, path: &str) -> Self {
        CuratorCacheBuilder {
            framework: framework.clone(),
            path: path.to_owned(),
            mode: CacheMode::Tree,
            stats_only: false,
            decode: Arc::new(|_, bytes| Some(bytes)),
            decompressed: false,
            max_reads_in_flight: DEFAULT_READS_IN_FLIGHT,
            event_capacity: DEFAULT_EVENT_CAPACITY,
        }
    }
}

impl<T: Send + Sync + 'static> CuratorCacheBuilder<T> {
    /// Which nodes to hold (default [`CacheMode::Tree`]).
    pub fn mode(mut self, mode: CacheMode) -> Self {
        self.mode = mode;
        self
    }

    /// Keep stats only, no data (Curator's `CuratorCacheStorage.dataNotCached()`). Nodes are
    /// then read with `exists` (and listings), so data never crosses the network; unlike
    /// Curator, events carry no data either.
    pub fn stats_only(mut self) -> Self {
        self.stats_only = true;
        self
    }

    /// Gunzip each node's data when read, before the [`decoder`](Self::decoder) (Curator's
    /// `CuratorCache.Options.COMPRESSED_DATA`), for nodes written compressed (Curator's
    /// `compressed()` creates and sets, [`protocol::gzip`](crate::protocol::gzip)). Empty data
    /// (a directory created without data) is passed on empty; other data that is not gzip, or
    /// that inflates past [`gzip::MAX_DECOMPRESSED`], leaves the node cached with its stat and no data,
    /// as a decoder's refusal does (logged at `warn`).
    #[doc(alias = "COMPRESSED_DATA")]
    pub fn decompressed(mut self) -> Self {
        self.decompressed = true;
        self
    }

    /// Decode each node's bytes once, when read, into what the cache keeps and hands out. A
    /// node whose bytes the decoder refuses is cached with its stat and no data (and the
    /// refusal is logged at `warn`).
    pub fn decoder<U, E, F>(self, decoder: F) -> CuratorCacheBuilder<U>
    where
        F: Fn(Vec<u8>) -> std::result::Result<U, E> + Send + Sync + 'static,
        E: std::fmt::Display,
    {
        let decode: Decode<U> = Arc::new(move |path, bytes| match decoder(bytes) {
            Ok(value) => Some(value),
            Err(e) => {
                tracing::warn!(path, error = %e, "cache: the decoder refused the node's data; caching its stat only");
                None
            }
        });
        CuratorCacheBuilder {
            framework: self.framework,
            path: self.path,
            mode: self.mode,
            stats_only: self.stats_only,
            decode,
            decompressed: self.decompressed,
            max_reads_in_flight: self.max_reads_in_flight,
            event_capacity: self.event_capacity,
        }
    }

    /// How many reads a load or a resync keeps in flight at most (default 64), all pipelined
    /// on the framework's one connection. The reads that follow events are not counted here:
    /// they go out as the events arrive, at most two in flight per node.
    pub fn max_reads_in_flight(mut self, reads: usize) -> Self {
        self.max_reads_in_flight = reads;
        self
    }

    /// How many events each stream and listener may fall behind (default 10,000) before its
    /// queue is dropped and it gets [`CacheEvent::Lagged`](crate::CacheEvent::Lagged), with the
    /// whole cache, instead: a consumer that stalls costs at most this much memory.
    pub fn event_capacity(mut self, events: usize) -> Self {
        self.event_capacity = events;
        self
    }

    /// Checks the settings; does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a path that is not a valid absolute path;
    /// [`Error::InvalidArgument`] for zero reads in flight or a zero event capacity.
    pub fn build(self) -> Result<CuratorCache<T>> {
        if self.max_reads_in_flight == 0 {
            return Err(Error::invalid_argument("max_reads_in_flight", "must be at least 1"));
        }
        if self.event_capacity == 0 {
            return Err(Error::invalid_argument("event_capacity", "must be at least 1"));
        }
        let full = self.framework.full_path(&self.path)?;
        let Self { framework, path, mode, stats_only, mut decode, decompressed, max_reads_in_flight, event_capacity } =
            self;
        if decompressed {
            let inner = decode;
            decode = Arc::new(move |path, bytes| match gzip::decompress(&bytes) {
                Ok(plain) => inner(path, plain),
                // Nothing to inflate: a directory created without data.
                Err(_) if bytes.is_empty() => inner(path, bytes),
                Err(e) => {
                    tracing::warn!(path, error = %e, "cache: the node's data is not gzip; caching its stat only");
                    None
                }
            });
        }
        let settings =
            Settings { path, full, mode, stats_only, decode, concurrency: max_reads_in_flight, event_capacity };
        Ok(CuratorCache::from_settings(framework, settings))
    }
}
