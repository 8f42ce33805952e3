//! [`CachedAtomicNumber`] ([`CachedAtomicLong`], [`CachedAtomicInteger`]): a counter that
//! reserves blocks of values from a [`DistributedAtomicNumber`] and hands them out locally.

use tokio::sync::Mutex;

use super::number::{AtomicNumber, DistributedAtomicNumber};
use super::result::AtomicValue;
use crate::error::{Error, Result};

/// Unique numbers from a shared counter, one request per block of `cache_factor` of them
/// (Curator's `CachedAtomicLong` and `CachedAtomicInteger`).
///
/// [`next`](Self::next) hands out the values of the block it reserved last, one by one, and
/// reserves the next block with the counter's [`add(cache_factor)`](DistributedAtomicNumber::add)
/// once the block is used up: the node holds the end of the last block reserved by anyone,
/// 8 big-endian bytes for a long and 4 for an integer, as a [`DistributedAtomicNumber`] (and
/// Curator's `CachedAtomicLong`, `DistributedAtomicLong` and `DistributedAtomicInteger`)
/// read and write it. Processes of any language that count on the same node, in blocks or
/// one by one, never get the same value; the values of a block a process did not use up (it
/// stopped, or its reservation's outcome was unknown) are never handed out by anyone, so the
/// sequence has gaps, and values are not handed out in the order of the processes' calls.
///
/// A value handed out is its `pre_value`, the number the counter would have held before an
/// increment that produced it; `post_value` is one more (as Curator's).
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use std::time::Duration;
/// use zk_recipes::retry::RetryNTimes;
/// use zk_recipes::{CachedAtomicLong, DistributedAtomicLong};
///
/// let counter = DistributedAtomicLong::new(&fw, "/ids", RetryNTimes::new(10, Duration::from_millis(10)))?;
/// let ids = CachedAtomicLong::new(counter, 100)?;
/// let id = ids.next().await?; // one request per 100 ids
/// if id.succeeded() {
///     println!("my id: {}", id.pre_value());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CachedAtomicNumber<N: AtomicNumber> {
    counter: DistributedAtomicNumber<N>,
    cache_factor: u32,
    block: Mutex<Option<Block<N>>>,
}

/// The block reserved last: its first value and how many of them were handed out.
#[derive(Debug, Clone, Copy)]
struct Block<N> {
    start: N,
    used: u32,
}

/// Curator's `CachedAtomicLong`: see [`CachedAtomicNumber`].
pub type CachedAtomicLong = CachedAtomicNumber<i64>;

/// Curator's `CachedAtomicInteger`: see [`CachedAtomicNumber`].
pub type CachedAtomicInteger = CachedAtomicNumber<i32>;

impl<N: AtomicNumber> CachedAtomicNumber<N> {
    /// Hands out the values of `counter` in blocks of `cache_factor`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `cache_factor` is 0 or does not fit in `N` (more than
    /// `i32::MAX` for an integer).
    pub fn new(counter: DistributedAtomicNumber<N>, cache_factor: u32) -> Result<Self> {
        if cache_factor == 0 || N::from_u32(cache_factor).is_none() {
            return Err(Error::InvalidArgument {
                name: "cache_factor",
                reason: format!("{cache_factor} is not a block size: at least 1, at most the number type's maximum"),
            });
        }
        Ok(CachedAtomicNumber { counter, cache_factor, block: Mutex::new(None) })
    }

    /// The next value: from the block reserved last, or from a new block reserved with one
    /// [`add`](DistributedAtomicNumber::add) of `cache_factor` when it is used up (or none was
    /// reserved yet).
    ///
    /// When the reservation did not succeed (the counter's retry policy gave up under
    /// contention) the result has [`succeeded`](AtomicValue::succeeded) false and values
    /// 0; the next call tries again. The stats are the reservation's, or the defaults when
    /// the value came from the block. Calls from several tasks take turns (Curator's
    /// `next()` is not thread-safe; this one is): a reservation is made by one of them for all.
    ///
    /// # Errors
    /// As the counter's [`add`](DistributedAtomicNumber::add):
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) when a connection loss leaves it
    /// unknown whether the block was reserved (its values are then skipped: calling again
    /// reserves another block, so no value is ever handed out twice);
    /// [`Error::CorruptData`](crate::Error::CorruptData) when the node holds no number of
    /// `N`'s size; the server's refusal; a connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// Cancel-safe for the values: a value is handed out only by a call that returns it. A
    /// call cancelled while it reserves a block may have reserved it on the server (once at
    /// most); its values are then skipped, never handed out, and the next call reserves
    /// another block.
    pub async fn next(&self) -> Result<AtomicValue<N>> {
        let mut block = self.block.lock().await;
        let mut stats = Default::default();
        let current = match *block {
            Some(current) if current.used < self.cache_factor => current,
            _ => {
                *block = None;
                let reserved = self.counter.add(self.factor()).await?;
                if !reserved.succeeded() {
                    let zero = N::from_u32(0).unwrap_or(N::ONE.minus(N::ONE));
                    return Ok(AtomicValue::new(false, zero, zero, *reserved.stats()));
                }
                stats = *reserved.stats();
                Block { start: *reserved.pre_value(), used: 0 }
            }
        };
        let value = current.start.plus(N::from_u32(current.used).unwrap_or(N::ONE));
        *block = Some(Block { start: current.start, used: current.used + 1 });
        Ok(AtomicValue::new(true, value, value.plus(N::ONE), stats))
    }

    /// How many values a block holds.
    pub fn cache_factor(&self) -> u32 {
        self.cache_factor
    }

    /// The counter the blocks are reserved from.
    pub fn counter(&self) -> &DistributedAtomicNumber<N> {
        &self.counter
    }

    /// The counter's path.
    pub fn path(&self) -> &str {
        self.counter.path()
    }

    /// The values of the current block not handed out yet (0 before the first reservation);
    /// a snapshot, `None` while a call holds the block to reserve or hand out.
    pub fn remaining(&self) -> Option<u32> {
        let block = self.block.try_lock().ok()?;
        Some(block.map_or(0, |b| self.cache_factor - b.used))
    }

    fn factor(&self) -> N {
        // Checked in `new`.
        N::from_u32(self.cache_factor).unwrap_or(N::ONE)
    }
}
