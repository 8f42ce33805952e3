//! [`ServiceProvider`]: one instance of a service picked from a [`ServiceCache`] by a
//! strategy, leaving out disabled instances and those noted as failing (Curator's
//! `ServiceProvider`, `ProviderStrategy` and `DownInstancePolicy`).

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

struct Down<T> {
    instance: ServiceInstance<T>,
    first: Instant,
    errors: usize,
}

/// Picks one instance of a service (Curator's `ServiceProvider`).
pub struct ServiceProvider<T = serde_json::Value> {
    cache: ServiceCache<T>,
    strategy: ProviderStrategy,
    policy: DownInstancePolicy,
    counter: AtomicUsize,
    sticky: Mutex<Option<ServiceInstance<T>>>,
    down: Mutex<Vec<Down<T>>>,
}

impl<T> std::fmt::Debug for ServiceProvider<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceProvider")
            .field("strategy", &self.strategy)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl<T: DeserializeOwned + Clone + PartialEq> ServiceProvider<T> {
    /// A provider on `cache` (started or not: an unstarted cache has no instances).
    pub fn new(cache: ServiceCache<T>, strategy: ProviderStrategy, policy: DownInstancePolicy) -> Self {
        ServiceProvider {
            cache,
            strategy,
            policy,
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

    /// The instances a pick chooses from: enabled, not down (shared handles on the cache's
    /// parsed instances).
    pub fn all_instances(&self) -> Vec<Arc<ServiceInstance<T>>> {
        let mut down = self.down.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        down.retain(|d| now.duration_since(d.first) < self.policy.timeout);
        self.cache
            .instances()
            .iter()
            .filter(|i| i.enabled)
            .filter(|i| !down.iter().any(|d| d.errors >= self.policy.error_threshold && &d.instance == i.as_ref()))
            .cloned()
            .collect()
    }

    /// One instance by the strategy, `None` when there is none.
    pub fn instance(&self) -> Option<ServiceInstance<T>> {
        let instances = self.all_instances();
        if instances.is_empty() {
            return None;
        }
        match self.strategy {
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
