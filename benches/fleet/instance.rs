//! One service instance of the fleet: its own `Framework` (session), its registration with
//! service discovery, its cache of the shared configuration node, and its entity locks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use zk_recipes::discovery::{JsonInstanceSerializer, ServiceDiscovery, ServiceInstance};
use zk_recipes::{CacheMode, ConnectionState, CuratorCache, Framework, InterProcessMutex};

/// The service every instance registers under.
pub(crate) const SERVICE: &str = "fleet";

/// What every instance shares: the paths, and the per-entity exclusion check.
pub(crate) struct Fleet {
    pub(crate) connect: String,
    pub(crate) session_timeout: Duration,
    /// Discovery's base path: registrations are `<services>/fleet/<id>`.
    pub(crate) services: String,
    /// The configuration node every instance's cache follows; its data is the configuration's
    /// generation in decimal.
    pub(crate) config: String,
    /// Entity `k`'s lock is `<entities>/<k>`.
    pub(crate) entities: String,
    /// Per entity: the instance of this process that holds its lock now, if any.
    pub(crate) held: Vec<Mutex<Option<Holder>>>,
    pub(crate) locks: LockCounts,
}

/// Who holds an entity's lock: a hold's number, and its instance's session as of the acquire.
#[derive(Clone)]
pub(crate) struct Holder {
    hold: u64,
    framework: Framework,
    epoch: u64,
}

impl Holder {
    /// Whether this holder's session ended after it acquired: its lock node went with the
    /// session, and another instance taking the lock is what the lock promises (the holder's
    /// guard reports the loss: `MutexGuard::lost`, `run`).
    pub(crate) fn session_ended(&self) -> bool {
        let now = self.framework.snapshot();
        now.epoch != self.epoch || now.state == ConnectionState::Lost
    }
}

/// What the entity locks came to, over the whole run.
#[derive(Default)]
pub(crate) struct LockCounts {
    pub(crate) acquired: AtomicU64,
    /// An acquire that gave up at its time bound.
    pub(crate) timed_out: AtomicU64,
    /// An acquire or release that failed (connection loss the retry policy gave up on, ...).
    pub(crate) failed: AtomicU64,
    /// Acquires that found the entity held by another instance, with that holder: two
    /// holders at once, unless the first one's session ended (judged at the end of the run).
    pub(crate) overlaps: Mutex<Vec<Holder>>,
    /// Numbers the holds.
    pub(crate) holds: AtomicU64,
}

/// The generation an instance's cache last showed it, and when.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen {
    pub(crate) generation: u64,
    pub(crate) at: Instant,
}

pub(crate) struct Instance {
    pub(crate) id: String,
    pub(crate) framework: Framework,
    discovery: Option<ServiceDiscovery>,
    pub(crate) cache: Option<Arc<CuratorCache>>,
    /// The generation its cache's node view last yielded.
    pub(crate) seen: watch::Receiver<Seen>,
    seen_sender: Option<watch::Sender<Seen>>,
    tasks: Vec<JoinHandle<()>>,
    rng: SplitMix,
}

impl Instance {
    /// Instance `index` with its session open (nothing else yet).
    pub(crate) async fn connect(fleet: &Fleet, index: usize, seed: u64) -> zk_recipes::Result<Instance> {
        let framework = Framework::builder(&fleet.connect).session_timeout(fleet.session_timeout).start().await?;
        let (seen_sender, seen) = watch::channel(Seen { generation: 0, at: Instant::now() });
        Ok(Instance {
            id: instance_id(index),
            framework,
            discovery: None,
            cache: None,
            seen,
            seen_sender: Some(seen_sender),
            tasks: Vec::new(),
            rng: SplitMix(seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        })
    }

    /// Registers the instance, starts its configuration cache (and the task that notes each
    /// generation it shows) and waits for the cache's first load.
    pub(crate) async fn attach(&mut self, fleet: &Fleet) -> zk_recipes::Result<()> {
        let Some(sender) = self.seen_sender.take() else { return Ok(()) }; // attached before
        let discovery = ServiceDiscovery::new(&self.framework, &fleet.services, JsonInstanceSerializer::new())?;
        let me = ServiceInstance::<serde_json::Value>::builder(SERVICE).id(&self.id).address("127.0.0.1").port(8080);
        discovery.register(&me.build()?).await?;
        self.discovery = Some(discovery);

        let cache =
            Arc::new(CuratorCache::builder(&self.framework, &fleet.config).mode(CacheMode::SingleNode).build()?);
        let mut values = cache.node_events(&fleet.config)?;
        self.tasks.push(tokio::spawn(async move {
            while let Some(value) = values.next().await {
                let Some(generation) = value.as_ref().and_then(|node| generation_of(node.data()?)) else { continue };
                let at = Instant::now();
                sender.send_if_modified(|seen| {
                    let newer = generation > seen.generation;
                    if newer {
                        *seen = Seen { generation, at };
                    }
                    newer
                });
            }
        }));
        cache.start().await?;
        cache.initialized().await?;
        self.cache = Some(cache);
        Ok(())
    }

    /// Starts taking a random entity's lock at random times, `every` apart on average, until
    /// `stop` turns true.
    pub(crate) fn start_locking(
        &mut self,
        fleet: &Arc<Fleet>,
        every: Duration,
        hold: Duration,
        stop: watch::Receiver<bool>,
    ) {
        if every.is_zero() {
            return;
        }
        let (framework, fleet, mut rng, mut stop) = (self.framework.clone(), fleet.clone(), self.rng.fork(), stop);
        let bound = fleet.session_timeout * 2;
        self.tasks.push(tokio::spawn(async move {
            loop {
                let pause = Duration::from_millis(rng.below(2 * every.as_millis() as u64 + 1));
                let entity = rng.below(fleet.held.len() as u64) as usize;
                tokio::select! {
                    _ = stop.wait_for(|stop| *stop) => break,
                    _ = async {
                        tokio::time::sleep(pause).await;
                        let _ = fleet.take_entity(&framework, entity, hold, bound).await;
                    } => {}
                }
            }
        }));
    }

    /// The generation this instance's cache holds now, if it is complete.
    pub(crate) fn complete_generation(&self, fleet: &Fleet) -> Option<u64> {
        complete_generation(self.cache.as_deref()?, &fleet.config)
    }

    /// A random entity, from this instance's own sequence.
    pub(crate) fn random_entity(&mut self, entities: usize) -> usize {
        self.rng.below(entities as u64) as usize
    }

    /// Stops its tasks, unregisters, closes its cache and ends its session. `false` when the
    /// unregistration failed (the node goes with the session anyway).
    pub(crate) async fn close(self) -> bool {
        for task in &self.tasks {
            task.abort();
        }
        let mut clean = true;
        if let Some(discovery) = &self.discovery {
            clean = discovery.close().await.is_ok();
        }
        if let Some(cache) = &self.cache {
            cache.close().await;
        }
        self.framework.close().await;
        clean
    }
}

impl Fleet {
    /// Takes entity `k`'s lock (waiting at most `bound`), holds it for `hold` and releases it,
    /// checking that no other instance of the fleet held it meanwhile. `Ok(false)` when the
    /// wait ran out.
    pub(crate) async fn take_entity(
        &self,
        framework: &Framework,
        k: usize,
        hold: Duration,
        bound: Duration,
    ) -> zk_recipes::Result<bool> {
        let counts = &self.locks;
        let mutex = InterProcessMutex::new(framework, &format!("{}/{k}", self.entities))?;
        let guard = match mutex.acquire_timeout(bound).await {
            Ok(Some(guard)) => guard,
            Ok(None) => {
                counts.timed_out.fetch_add(1, Ordering::Relaxed);
                return Ok(false);
            }
            Err(e) => {
                counts.failed.fetch_add(1, Ordering::Relaxed);
                return Err(e);
            }
        };
        let me = Holder {
            hold: counts.holds.fetch_add(1, Ordering::Relaxed),
            framework: framework.clone(),
            epoch: framework.snapshot().epoch,
        };
        if let Some(other) = lock(&self.held[k]).replace(me.clone()) {
            eprintln!("[fleet] entity {k}: acquired while another instance held it");
            lock(&counts.overlaps).push(other);
        }
        tokio::time::sleep(hold).await;
        {
            let mut holder = lock(&self.held[k]);
            if holder.as_ref().is_some_and(|h| h.hold == me.hold) {
                *holder = None;
            }
        }
        counts.acquired.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = guard.release().await {
            // The framework deletes the node in the background.
            counts.failed.fetch_add(1, Ordering::Relaxed);
            return Err(e);
        }
        Ok(true)
    }
}

/// The guarded value, also after a panic elsewhere while it was locked.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Instance `index`'s id in the registry.
pub(crate) fn instance_id(index: usize) -> String {
    format!("instance-{index:05}")
}

/// The configuration's data for `generation`.
pub(crate) fn generation_data(generation: u64) -> Vec<u8> {
    generation.to_string().into_bytes()
}

/// The generation `cache` holds at `config` now, if the cache is complete.
pub(crate) fn complete_generation(cache: &CuratorCache, config: &str) -> Option<u64> {
    if !cache.is_complete() {
        return None;
    }
    generation_of(cache.get(config)?.data()?)
}

fn generation_of(data: &[u8]) -> Option<u64> {
    std::str::from_utf8(data).ok()?.parse().ok()
}

/// SplitMix64: the instances' lock timing and entity choice, reproducible from `--seed`.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn fork(&mut self) -> SplitMix {
        SplitMix(self.next())
    }
}
