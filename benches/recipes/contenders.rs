//! One contender (one session) of a workload, through one implementation.

use std::future::Future;
use std::time::{Duration, Instant};

use zk_recipes::testing::CountingProxy;
use zk_recipes::{Framework, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphore, LeaderLatch};

use crate::options::STALL;
use crate::raw::{RawMutex, RawReadWrite, RawSemaphore};
use crate::report::{BenchError, BenchResult, Exclusion, Tally};

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
    /// The experiment of [`raw::acquire_two_ahead`]: Curator's layout, a listing off the
    /// handoff's chain.
    RawTwoAhead(RawMutex),
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
    /// A read-write lock: each cycle takes the read or the write half, as `mix` says.
    ReadWrite {
        framework: Framework,
        lock: InterProcessReadWriteLock,
        mix: Mix,
        counter: Option<HalfCounter>,
    },
    RawReadWrite {
        raw: RawReadWrite,
        mix: Mix,
        counter: Option<HalfCounter>,
    },
    /// Each cycle a new mutex on the next of many lock paths (`{dir}/{n}`, `n` counted by
    /// every contender of the line together): acquired and released once, as a service that
    /// locks per entity does.
    ManyLocks {
        framework: Framework,
        dir: String,
        next: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    },
    /// A candidate of a leader election: each cycle a new `LeaderLatch` joins the queue,
    /// leads, and resigns at once (`close()`), as Curator's latch (which cannot restart) is
    /// used for a handoff.
    Latch {
        framework: Framework,
        path: String,
        id: String,
    },
}

/// One contender of a measured line, as the run loop drives it: a cycle (one op) repeated,
/// then closed. The lock contenders are [`Contender`]s; the other recipes' are in `values.rs`.
pub(crate) trait Cycle: Send + 'static {
    /// One op: for a lock, acquire, critical section, release.
    fn cycle(&mut self, exclusion: &Exclusion, hold: Duration) -> impl Future<Output = BenchResult<CycleTimes>> + Send;

    /// Ends the contender's session.
    fn close(self) -> impl Future<Output = BenchResult<()>> + Send;

    /// A read-write contender's requests per half, when counted.
    fn halves(&self) -> Option<(&Tally, &Tally)> {
        None
    }
}

impl Cycle for Contender {
    fn cycle(&mut self, exclusion: &Exclusion, hold: Duration) -> impl Future<Output = BenchResult<CycleTimes>> + Send {
        Contender::cycle(self, exclusion, hold)
    }

    fn close(self) -> impl Future<Output = BenchResult<()>> + Send {
        Contender::close(self)
    }

    fn halves(&self) -> Option<(&Tally, &Tally)> {
        Contender::halves(self)
    }
}

/// What one cycle took.
pub(crate) struct CycleTimes {
    pub(crate) acquire: Duration,
    pub(crate) cycle: Duration,
    /// For the read-write lock: whether the cycle wrote.
    pub(crate) write: Option<bool>,
}

/// The read-write workload's choice of half: a seeded generator (the same sequence for the
/// same `--seed` and contender), reading `read_pct` % of the time.
pub(crate) struct Mix {
    state: u64,
    read_pct: u32,
}

impl Mix {
    pub(crate) fn new(seed: u64, contender: usize, read_pct: u32) -> Mix {
        Mix { state: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (contender as u64 + 1), read_pct }
    }

    /// Whether the next cycle writes (splitmix64).
    fn next_write(&mut self) -> bool {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % 100 >= u64::from(self.read_pct)
    }
}

/// With `--count-ops`, a read-write contender's session goes through a proxy of its own, so
/// that each cycle's requests can be told apart as a read's or a write's.
pub(crate) struct HalfCounter {
    pub(crate) proxy: CountingProxy,
    pub(crate) reads: Tally,
    pub(crate) writes: Tally,
}

impl HalfCounter {
    pub(crate) fn new(proxy: CountingProxy) -> HalfCounter {
        HalfCounter { proxy, reads: Tally::default(), writes: Tally::default() }
    }
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
                Ok(CycleTimes { acquire, cycle: started.elapsed(), write: None })
            }
            Contender::Semaphore { semaphore, .. } => {
                let lease = stall_guard(semaphore.acquire()).await??;
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                lease.release().await?;
                Ok(CycleTimes { acquire, cycle: started.elapsed(), write: None })
            }
            Contender::RawMutex(raw) => {
                let node = stall_guard(raw.acquire()).await??;
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                raw.client.delete(&node, None).await?;
                Ok(CycleTimes { acquire, cycle: started.elapsed(), write: None })
            }
            Contender::RawTwoAhead(raw) => {
                let node = stall_guard(crate::raw::acquire_two_ahead(raw)).await??;
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                raw.client.delete(&node, None).await?;
                Ok(CycleTimes { acquire, cycle: started.elapsed(), write: None })
            }
            Contender::RawCreateDelete { raw, listed } => {
                let node = if *listed { raw.create_listed().await? } else { raw.create().await? };
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                raw.client.delete(&node, None).await?;
                Ok(CycleTimes { acquire, cycle: started.elapsed(), write: None })
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
                Ok(CycleTimes { acquire, cycle: started.elapsed(), write: None })
            }
            Contender::ManyLocks { framework, dir, next } => {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let mutex = InterProcessMutex::new(framework, &format!("{dir}/{n}"))?;
                let guard = stall_guard(mutex.acquire()).await??;
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                guard.release().await?;
                Ok(CycleTimes { acquire, cycle: started.elapsed(), write: None })
            }
            Contender::Latch { framework, path, id } => {
                let latch = LeaderLatch::new(framework, path, id)?;
                latch.start()?;
                stall_guard(latch.await_leadership()).await??;
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                latch.close().await?;
                Ok(CycleTimes { acquire, cycle: started.elapsed(), write: None })
            }
            Contender::RawSemaphore(raw) => {
                let lease = stall_guard(raw.acquire()).await??;
                let acquire = started.elapsed();
                exclusion.critical_section(hold).await?;
                raw.client.delete(&lease, None).await?;
                Ok(CycleTimes { acquire, cycle: started.elapsed(), write: None })
            }
            Contender::ReadWrite { lock, mix, counter, .. } => {
                let write = mix.next_write();
                let before = counter.as_ref().map(|c| c.proxy.counts());
                let started = Instant::now();
                let acquire = if write {
                    let guard = stall_guard(lock.write_lock().acquire()).await??;
                    let acquire = started.elapsed();
                    exclusion.read_write_section(true, hold).await?;
                    guard.release().await?;
                    acquire
                } else {
                    let guard = stall_guard(lock.read_lock().acquire()).await??;
                    let acquire = started.elapsed();
                    exclusion.read_write_section(false, hold).await?;
                    guard.release().await?;
                    acquire
                };
                let cycle = started.elapsed();
                count_half(counter, before, write);
                Ok(CycleTimes { acquire, cycle, write: Some(write) })
            }
            Contender::RawReadWrite { raw, mix, counter } => {
                let write = mix.next_write();
                let before = counter.as_ref().map(|c| c.proxy.counts());
                let started = Instant::now();
                let node = stall_guard(raw.acquire(write)).await??;
                let acquire = started.elapsed();
                exclusion.read_write_section(write, hold).await?;
                raw.client.delete(&node, None).await?;
                let cycle = started.elapsed();
                count_half(counter, before, write);
                Ok(CycleTimes { acquire, cycle, write: Some(write) })
            }
        }
    }

    /// A read-write contender's requests per half, when counted.
    pub(crate) fn halves(&self) -> Option<(&Tally, &Tally)> {
        match self {
            Contender::ReadWrite { counter: Some(c), .. } | Contender::RawReadWrite { counter: Some(c), .. } => {
                Some((&c.reads, &c.writes))
            }
            _ => None,
        }
    }

    pub(crate) async fn close(self) -> BenchResult<()> {
        match self {
            Contender::Mutex { framework, .. }
            | Contender::Semaphore { framework, .. }
            | Contender::ReadWrite { framework, .. } => framework.close().await,
            Contender::Latch { framework, .. } | Contender::ManyLocks { framework, .. } => framework.close().await,
            Contender::RawMutexPipelined { raw, pending_delete } => {
                if let Some(node) = pending_delete {
                    raw.client.delete(&node, None).await?;
                }
            }
            Contender::RawMutex(_)
            | Contender::RawCreateDelete { .. }
            | Contender::RawTwoAhead(_)
            | Contender::RawSemaphore(_)
            | Contender::RawReadWrite { .. } => {}
        }
        Ok(())
    }
}

/// Adds one cycle's requests (since `before`) to its half's tally.
fn count_half(counter: &mut Option<HalfCounter>, before: Option<zk_recipes::testing::RequestCounts>, write: bool) {
    if let (Some(counter), Some(before)) = (counter.as_mut(), before) {
        let spent = counter.proxy.counts().since(&before);
        if write {
            counter.writes.add(&spent);
        } else {
            counter.reads.add(&spent);
        }
    }
}

pub(crate) async fn stall_guard<F: std::future::Future>(future: F) -> BenchResult<F::Output> {
    tokio::time::timeout(STALL, future)
        .await
        .map_err(|_| BenchError::Failed(format!("an acquire stalled for more than {STALL:?}")))
}
