//! [`ServiceProvider`]: one instance of a service picked from a [`ServiceCache`] by a
//! strategy (built in, or an [`InstanceStrategy`] of the caller's), leaving out disabled
//! instances, those noted as failing and those the caller's filters refuse (Curator's
//! `ServiceProvider`, `ProviderStrategy`, `DownInstancePolicy` and `InstanceFilter`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;

use super::cache::ServiceCache;
use super::instance::ServiceInstance;

/// How a provider picks among the instances (Curator's strategies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ProviderStrategy {
    /// The next one each time (Curator's default).
    #[default]
    RoundRobin,
    /// Any one at random.
    Random,
    /// The same one as long as it is among the instances; otherwise one by round robin.
    Sticky,
}

/// When an instance noted failing is left out (Curator's `DownInstancePolicy`): from
/// `error_threshold` errors on, for `timeout` after the first error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownInstancePolicy {
    /// How long an instance's errors count, from its first error.
    pub timeout: Duration,
    /// How many errors leave an instance out.
    pub error_threshold: usize,
}

impl Default for DownInstancePolicy {
    /// Curator's defaults: 30 seconds, 2 errors.
    fn default() -> Self {
        DownInstancePolicy { timeout: Duration::from_secs(30), error_threshold: 2 }
    }
}

/// A strategy of the caller's (Curator's `ProviderStrategy` interface): picks one of the
/// instances a provider offers, `None` for none.
///
/// ```
/// use std::sync::Arc;
/// use zk_recipes::discovery::{InstanceStrategy, ServiceInstance};
///
/// /// The instance on the lowest port.
/// struct LowestPort;
///
/// impl<T> InstanceStrategy<T> for LowestPort {
///     fn pick(&self, instances: &[Arc<ServiceInstance<T>>]) -> Option<Arc<ServiceInstance<T>>> {
///         instances.iter().min_by_key(|i| i.port).cloned()
///     }
/// }
/// ```
pub trait InstanceStrategy<T>: Send + Sync {
    /// One of `instances` (never empty: a provider with no instance does not ask).
    fn pick(&self, instances: &[Arc<ServiceInstance<T>>]) -> Option<Arc<ServiceInstance<T>>>;
}

/// A filter on the instances a provider offers (Curator's `InstanceFilter`).
type Filter<T> = Arc<dyn Fn(&ServiceInstance<T>) -> bool + Send + Sync>;

enum Strategy<T> {
    Builtin(ProviderStrategy),
    Custom(Arc<dyn InstanceStrategy<T>>),
}

impl<T> std::fmt::Debug for Strategy<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Strategy::Builtin(s) => s.fmt(f),
            Strategy::Custom(_) => f.write_str("Custom"),
        }
    }
}

struct Down<T> {
    instance: ServiceInstance<T>,
    first: Instant,
    errors: usize,
}

/// Picks one instance of a service (Curator's `ServiceProvider`).
pub struct ServiceProvider<T = serde_json::Value> {
    cache: ServiceCache<T>,
    strategy: Strategy<T>,
    policy: DownInstancePolicy,
    filters: Vec<Filter<T>>,
    counter: AtomicUsize,
    sticky: Mutex<Option<ServiceInstance<T>>>,
    down: Mutex<Vec<Down<T>>>,
}

impl<T> std::fmt::Debug for ServiceProvider<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceProvider")
            .field("strategy", &self.strategy)
            .field("policy", &self.policy)
            .field("filters", &self.filters.len())
            .finish_non_exhaustive()
    }
}

impl<T: DeserializeOwned + Clone + PartialEq> ServiceProvider<T> {
    /// A provider on `cache` (started or not: an unstarted cache has no instances).
    pub fn new(cache: ServiceCache<T>, strategy: ProviderStrategy, policy: DownInstancePolicy) -> Self {
        Self::with(cache, Strategy::Builtin(strategy), policy)
    }

    /// A provider whose picks are `strategy`'s (Curator's `providerStrategy(custom)`).
    pub fn with_strategy(
        cache: ServiceCache<T>,
        strategy: impl InstanceStrategy<T> + 'static,
        policy: DownInstancePolicy,
    ) -> Self {
        Self::with(cache, Strategy::Custom(Arc::new(strategy)), policy)
    }

    /// This provider offering only the instances `filter` accepts, besides its other filters
    /// (Curator's `additionalFilter`).
    pub fn with_filter(mut self, filter: impl Fn(&ServiceInstance<T>) -> bool + Send + Sync + 'static) -> Self {
        self.filters.push(Arc::new(filter));
        self
    }

    fn with(cache: ServiceCache<T>, strategy: Strategy<T>, policy: DownInstancePolicy) -> Self {
        ServiceProvider {
            cache,
            strategy,
            policy,
            filters: Vec::new(),
            counter: AtomicUsize::new(0),
            sticky: Mutex::new(None),
            down: Mutex::new(Vec::new()),
        }
    }

    /// The cache underneath.
    pub fn cache(&self) -> &ServiceCache<T> {
        &self.cache
    }

    /// Closes the provider (Curator's `ServiceProvider.close()`): closes its cache, which it
    /// owns. The instances held then stay readable but no longer follow the registry.
    ///
    /// # Cancel safety
    /// As [`ServiceCache::close`].
    pub async fn close(&self) {
        self.cache.close().await;
    }

    /// The instances a pick chooses from: enabled, not down, accepted by every filter (shared
    /// handles on the cache's parsed instances).
    pub fn all_instances(&self) -> Vec<Arc<ServiceInstance<T>>> {
        let instances = self.cache.instances();
        let up: Vec<Arc<ServiceInstance<T>>> = {
            let mut down = self.down.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            down.retain(|d| now.duration_since(d.first) < self.policy.timeout);
            let is_down = |i: &ServiceInstance<T>| {
                down.iter().any(|d| d.errors >= self.policy.error_threshold && &d.instance == i)
            };
            instances.iter().filter(|i| i.enabled && !is_down(i)).cloned().collect()
        };
        // The caller's filters run without the provider's lock: one may call back into it
        // (`note_error`, `all_instances`).
        up.into_iter().filter(|i| self.filters.iter().all(|f| f(i))).collect()
    }

    /// One instance by the strategy, `None` when there is none.
    pub fn instance(&self) -> Option<ServiceInstance<T>> {
        let instances = self.all_instances();
        if instances.is_empty() {
            return None;
        }
        let strategy = match &self.strategy {
            Strategy::Builtin(strategy) => *strategy,
            Strategy::Custom(custom) => return custom.pick(&instances).map(|i| ServiceInstance::clone(&i)),
        };
        match strategy {
            ProviderStrategy::RoundRobin => Some(self.round_robin(&instances)),
            ProviderStrategy::Random => Some(ServiceInstance::clone(&instances[random_below(instances.len())])),
            ProviderStrategy::Sticky => {
                let mut sticky = self.sticky.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(current) = sticky.as_ref().filter(|c| instances.iter().any(|i| i.as_ref() == *c)) {
                    return Some(current.clone());
                }
                let picked = self.round_robin(&instances);
                *sticky = Some(picked.clone());
                Some(picked)
            }
        }
    }

    /// Notes that `instance` failed (Curator's `noteError`): from the policy's threshold on it
    /// is left out until the policy's timeout after its first error. Local to this provider.
    pub fn note_error(&self, instance: &ServiceInstance<T>) {
        let mut down = self.down.lock().unwrap_or_else(|e| e.into_inner());
        // Errors older than the policy's timeout are forgiven first (Curator's `add` purges
        // first): an error after the timeout starts a new count.
        let now = Instant::now();
        down.retain(|d| now.duration_since(d.first) < self.policy.timeout);
        match down.iter_mut().find(|d| &d.instance == instance) {
            Some(d) => d.errors += 1,
            None => down.push(Down { instance: instance.clone(), first: Instant::now(), errors: 1 }),
        }
    }

    fn round_robin(&self, instances: &[Arc<ServiceInstance<T>>]) -> ServiceInstance<T> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        ServiceInstance::clone(&instances[n % instances.len()])
    }
}

/// A number below `n` from the UUID generator's randomness (no further dependency).
fn random_below(n: usize) -> usize {
    (uuid::Uuid::new_v4().as_u128() % n as u128) as usize
}
