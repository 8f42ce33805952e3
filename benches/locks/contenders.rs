//! One contender (one session) of a workload, through one implementation.

use std::time::{Duration, Instant};

use zk_recipes::{Framework, InterProcessMutex, InterProcessSemaphore, LeaderLatch};

use crate::options::STALL;
use crate::raw::{RawMutex, RawSemaphore};
use crate::report::{BenchError, BenchResult, Exclusion};

/// How a zk-recipes mutex guard is given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReleaseStyle {
    /// `guard.release().await` (reports errors; what the docs show).
    Await,
    /// `drop(guard)`: the delete goes out on the session at once, the reply goes to the reaper.
    Drop,
}

/// One contender (one session) of a workload, through one implementation.
pub(crate) enum Contender {
    Mutex {
        framework: Framework,
        mutex: InterProcessMutex,
        release: ReleaseStyle,
    },
    Semaphore {
        framework: Framework,
        semaphore: InterProcessSemaphore,
    },
    RawMutex(RawMutex),
    /// create, then delete; with `listed`, a getChildren is sent right behind the create.
    RawCreateDelete {
        raw: RawMutex,
        listed: bool,
    },
    /// The previous delete, the create and a getChildren back to back: one round trip.
    RawMutexPipelined {
        raw: RawMutex,
        pending_delete: Option<String>,
    },
    RawSemaphore(RawSemaphore),
    /// A candidate of a leader election: each cycle a new `LeaderLatch` joins the queue,
    /// leads, and resigns at once (`close()`), as Curator's latch (which cannot restart) is
    /// used for a handoff.
    Latch {
        framework: Framework,
        path: String,
        id: String,
    },
}

/// What one cycle took.
pub(crate) struct CycleTimes {
    pub(crate) acquire: Duration,
    pub(crate) cycle: Duration,
}

impl Contender {
    /// Acquire, run the critical section, release.
    pub(crate) async fn cycle(&mut self, exclusion: &Exclusion, hold: Duration) -> BenchResult<CycleTimes> {
        let started = Instant::now();
        match self {
            Contender::Mutex { mutex, release, .. } => {
                let guard = stall_guard(mutex.acquire()).await??;
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                match release {
                    ReleaseStyle::Await => guard.release().await?,
                    ReleaseStyle::Drop => drop(guard),
                }
                Ok(CycleTimes { acquire, cycle: started.elapsed() })
            }
            Contender::Semaphore { semaphore, .. } => {
                let lease = stall_guard(semaphore.acquire()).await??;
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                lease.release().await?;
                Ok(CycleTimes { acquire, cycle: started.elapsed() })
            }
            Contender::RawMutex(raw) => {
                let node = stall_guard(raw.acquire()).await??;
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                raw.client.delete(&node, None).await?;
                Ok(CycleTimes { acquire, cycle: started.elapsed() })
            }
            Contender::RawCreateDelete { raw, listed } => {
                let node = if *listed { raw.create_listed().await? } else { raw.create().await? };
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                raw.client.delete(&node, None).await?;
                Ok(CycleTimes { acquire, cycle: started.elapsed() })
            }
            Contender::RawMutexPipelined { raw, pending_delete } => {
                // The previous cycle's delete goes out right before this cycle's create and
                // getChildren, and the replies are awaited together: one round trip per cycle.
                let node = match pending_delete.take() {
                    Some(previous) => {
                        let delete = raw.client.delete(&previous, None);
                        let (deleted, created) = futures::join!(delete, raw.create_listed());
                        deleted?;
                        created?
                    }
                    None => raw.create_listed().await?,
                };
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                *pending_delete = Some(node);
                Ok(CycleTimes { acquire, cycle: started.elapsed() })
            }
            Contender::Latch { framework, path, id } => {
                let latch = LeaderLatch::new(framework, path, id)?;
                latch.start()?;
                stall_guard(latch.await_leadership()).await??;
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                latch.close().await?;
                Ok(CycleTimes { acquire, cycle: started.elapsed() })
            }
            Contender::RawSemaphore(raw) => {
                let lease = stall_guard(raw.acquire()).await??;
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                raw.client.delete(&lease, None).await?;
                Ok(CycleTimes { acquire, cycle: started.elapsed() })
            }
        }
    }

    pub(crate) async fn close(self) -> BenchResult<()> {
        match self {
            Contender::Mutex { framework, .. }
            | Contender::Semaphore { framework, .. }
            | Contender::Latch { framework, .. } => framework.close().await,
            Contender::RawMutexPipelined { raw, pending_delete } => {
                if let Some(node) = pending_delete {
                    raw.client.delete(&node, None).await?;
                }
            }
            Contender::RawMutex(_) | Contender::RawCreateDelete { .. } | Contender::RawSemaphore(_) => {}
        }
        Ok(())
    }
}

async fn stall_guard<F: std::future::Future>(future: F) -> BenchResult<F::Output> {
    tokio::time::timeout(STALL, future)
        .await
        .map_err(|_| BenchError::Failed(format!("an acquire stalled for more than {STALL:?}")))
}
