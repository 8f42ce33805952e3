//! The one engine under the three atomic types (Curator's `DistributedAtomicValue`): a try is
//! a read and a versioned write (or a create when the node is missing); tries repeat under
//! the retry policy, then, if configured, under the promoted lock. A try whose handle knows
//! the node's bytes and version from its own last reply, unchanged since by what a persistent
//! watch reports, skips the read ([`known`](super::known) says why that is exact).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::known::Knowledge;
use super::result::{AtomicStats, AtomicValue, PromotedToLock};
use crate::error::{Error, Result, ZkError};
use crate::framework::Framework;
use crate::locks::InterProcessMutex;
use crate::path;
use crate::retry::{RetryPolicy, MIN_SLEEP};
use crate::shared::versioned::{create_value, set_versioned, Cas, Create};

/// The bytes of one node (`None` when it does not exist).
pub(crate) type Bytes = Option<Vec<u8>>;

/// What a try computes the new bytes with; an error (a node that is not a number) ends the
/// operation.
pub(crate) type MakeValue<'a> = dyn FnMut(&Bytes) -> Result<Vec<u8>> + Send + 'a;

#[derive(Debug)]
struct Promotion {
    mutex: InterProcessMutex,
    max_lock_time: Option<Duration>,
    retry: Arc<dyn RetryPolicy>,
}

#[derive(Debug)]
pub(crate) struct Engine {
    framework: Framework,
    path: String,
    /// `path` with the framework's namespace, as the watch needs it.
    full_path: String,
    retry: Arc<dyn RetryPolicy>,
    promotion: Option<Promotion>,
    knowledge: Knowledge,
}

/// One try's outcome: the bytes before and the bytes written (or tried).
struct Try {
    succeeded: bool,
    pre: Bytes,
    post: Vec<u8>,
}

impl Engine {
    pub(crate) fn new(
        framework: &Framework,
        path: &str,
        retry: Arc<dyn RetryPolicy>,
        promoted: Option<PromotedToLock>,
    ) -> Result<Engine> {
        path::validate_recipe_path(path)?;
        // As a framework's own policy: a zero sleep would retry in a busy loop.
        retry.validate()?;
        if let Some(p) = &promoted {
            p.retry_policy.validate()?;
        }
        let promotion = match promoted {
            None => None,
            Some(p) => Some(Promotion {
                mutex: InterProcessMutex::new(framework, &p.lock_path)?,
                max_lock_time: p.max_lock_time,
                retry: p.retry_policy,
            }),
        };
        Ok(Engine {
            framework: framework.clone(),
            path: path.to_owned(),
            full_path: framework.full_path(path)?,
            retry,
            promotion,
            knowledge: Knowledge::default(),
        })
    }

    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// The node's bytes now (`None` when it does not exist).
    pub(crate) async fn read(&self) -> Result<Bytes> {
        match self.framework.get_data(&self.path).plain().await {
            Ok((data, _)) => Ok(Some(data)),
            Err(Error::ZooKeeper(ZkError::NoNode)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// One read (unless the handle knows the node) and versioned write (or create).
    async fn try_once(&self, make: &mut MakeValue<'_>, operation: &'static str) -> Result<Try> {
        let read = match self.knowledge.current(&self.framework, &self.full_path).await {
            Some(known) => Some((known.data, known.version)),
            None => match self.framework.get_data(&self.path).plain().await {
                Ok((data, stat)) => {
                    self.knowledge.learned(&data, &stat);
                    Some((data, stat.version))
                }
                Err(Error::ZooKeeper(ZkError::NoNode)) => None,
                Err(e) => return Err(e),
            },
        };
        let pre = read.as_ref().map(|(data, _)| data.clone());
        let post = make(&pre)?;
        let succeeded = match read {
            None => matches!(create_value(&self.framework, &self.path, &post, operation).await?, Create::Created),
            // A version that wrapped to -1 cannot be compared and set; someone must write once
            // more (Curator would write unconditionally here).
            Some((_, -1)) => {
                self.knowledge.forget();
                false
            }
            Some((_, version)) => match set_versioned(&self.framework, &self.path, &post, version, operation).await {
                Ok(Cas::Written(stat)) => {
                    self.knowledge.learned(&post, &stat);
                    true
                }
                Ok(Cas::Conflict) => {
                    self.knowledge.forget();
                    false
                }
                Err(e) => {
                    self.knowledge.forget();
                    return Err(e);
                }
            },
        };
        Ok(Try { succeeded, pre, post })
    }

    /// Tries under `policy` until one succeeds or the policy gives up; counts into `tries`.
    async fn tries(
        &self,
        make: &mut MakeValue<'_>,
        policy: &dyn RetryPolicy,
        tries: &mut u32,
        operation: &'static str,
    ) -> Result<Try> {
        let started = Instant::now();
        let mut retry = 0;
        loop {
            *tries += 1;
            let attempt = self.try_once(make, operation).await?;
            if attempt.succeeded {
                return Ok(attempt);
            }
            match policy.next_delay(retry, started.elapsed()) {
                Some(delay) => {
                    tokio::time::sleep(delay.max(MIN_SLEEP)).await;
                    retry = retry.saturating_add(1);
                }
                None => return Ok(attempt),
            }
        }
    }

    /// Curator's `trySet`/`increment`/...: optimistic tries, then the promoted lock's.
    pub(crate) async fn modify(&self, make: &mut MakeValue<'_>, operation: &'static str) -> Result<AtomicValue<Bytes>> {
        let mut stats = AtomicStats::default();
        let started = Instant::now();
        let attempt = self.tries(make, &*self.retry, &mut stats.optimistic_tries, operation).await?;
        stats.optimistic_time = started.elapsed();
        if attempt.succeeded {
            return Ok(AtomicValue::new(true, attempt.pre, Some(attempt.post), stats));
        }
        let Some(promotion) = &self.promotion else {
            return Ok(AtomicValue::new(false, attempt.pre, Some(attempt.post), stats));
        };
        let started = Instant::now();
        let guard = match promotion.max_lock_time {
            None => Some(promotion.mutex.acquire().await?),
            // Zero is one try, as Curator's `acquire(0, unit)` is.
            Some(limit) if limit.is_zero() => promotion.mutex.try_acquire().await?,
            Some(limit) => promotion.mutex.acquire_timeout(limit).await?,
        };
        let Some(guard) = guard else {
            stats.promoted_time = started.elapsed();
            return Ok(AtomicValue::new(false, attempt.pre, Some(attempt.post), stats));
        };
        let result = self.tries(make, &*promotion.retry, &mut stats.promoted_lock_tries, operation).await;
        let released = guard.release().await;
        stats.promoted_time = started.elapsed();
        let attempt = result?;
        if let Err(e) = released {
            tracing::warn!(path = %self.path, error = %e, "atomic value: releasing the promoted lock failed");
        }
        Ok(AtomicValue::new(attempt.succeeded, attempt.pre, Some(attempt.post), stats))
    }

    /// Curator's `compareAndSet`: one read; written (versioned) only when the node holds
    /// exactly `expected`; a missing node fails.
    pub(crate) async fn compare_and_set(&self, expected: &[u8], new: &[u8]) -> Result<AtomicValue<Bytes>> {
        let stats = AtomicStats { optimistic_tries: 1, ..AtomicStats::default() };
        let started = Instant::now();
        let (data, stat) = match self.framework.get_data(&self.path).plain().await {
            Ok(read) => read,
            Err(Error::ZooKeeper(ZkError::NoNode)) => return Ok(AtomicValue::new(false, None, None, stats)),
            Err(e) => return Err(e),
        };
        let mut succeeded = false;
        if data == expected && stat.version != -1 {
            let written = set_versioned(&self.framework, &self.path, new, stat.version, "compare_and_set").await?;
            succeeded = matches!(written, Cas::Written(_));
        }
        let stats = AtomicStats { optimistic_time: started.elapsed(), ..stats };
        let post = if succeeded { Some(new.to_vec()) } else { Some(data.clone()) };
        Ok(AtomicValue::new(succeeded, Some(data), post, stats))
    }

    /// Curator's `initialize`: creates the node with `value`; false when it exists.
    pub(crate) async fn initialize(&self, value: &[u8]) -> Result<bool> {
        Ok(matches!(create_value(&self.framework, &self.path, value, "initialize").await?, Create::Created))
    }

    /// Curator's `forceSet`: an unconditional write; a missing node is created.
    pub(crate) async fn force_set(&self, value: &[u8]) -> Result<()> {
        loop {
            match self.framework.set_data(&self.path, value).plain().await {
                Ok(_) => return Ok(()),
                Err(Error::ZooKeeper(ZkError::NoNode)) => {}
                Err(e) => return Err(e),
            }
            match self.framework.create(&self.path).plain().data(value).await {
                // A create sent again after a connection loss found a node: write over it.
                Ok(_) => return Ok(()),
                Err(Error::ZooKeeper(ZkError::NodeExists)) | Err(Error::OutcomeUnknown { .. }) => {}
                Err(e) => return Err(e),
            }
        }
    }
}
