//! [`NonBlockingLease`] and [`MultiNonBlockingLease`].

use std::time::{Duration, SystemTime};

use zookeeper_client::CreateMode;

use crate::error::{Error, Result, ZkError};
use crate::framework::Framework;
use crate::locks::kazoo::KazooLock;
use crate::path;
use crate::protocol::kazoo::{decode_lease_record, encode_lease_record, format_utc, LEASE_HOLDER, LEASE_VERSION};

/// The last end a record can hold (`%Y` has four digits).
const LAST_END: Duration = Duration::from_secs(253_402_300_799); // 9999-12-31T23:59:59

/// The outcome of one attempt at a lease that needs no session (kazoo's
/// `NonBlockingLease`): either this identifier holds the path until [`end`](Self::end), or
/// another identifier still does.
///
/// An attempt takes kazoo's lock at the path (waiting for other attempts, which are short),
/// reads `<path>/lease_holder` and, when the lease is free, expired, or already this
/// identifier's, replaces the record with one that ends `duration` from now, then releases
/// the lock. Obtaining it again with the same identifier renews it. Nothing is held
/// afterwards: the lease outlives the session (and the process) until its end, which is
/// written in whole seconds, so a lease may end up to a second early; a duration under a
/// second, which could end the lease in the second it was obtained, is refused (except zero,
/// which gives the lease up). A record of another format version is never replaced (kazoo's
/// rule: an upgraded client takes over).
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use std::time::Duration;
/// use zk_recipes::NonBlockingLease;
///
/// let lease = NonBlockingLease::obtain(&fw, "/db_leases/hourly_cleanup", Duration::from_secs(70 * 60), "cleanup on host-a").await?;
/// if lease.obtained() {
///     // do_hourly_database_cleanup()
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "an attempt at a lease says whether it was obtained"]
pub struct NonBlockingLease {
    path: String,
    identifier: String,
    end: Option<SystemTime>,
}

impl NonBlockingLease {
    /// One attempt at the lease at `path` for `identifier`, for `duration` from now. Neither
    /// kazoo nor this crate has a release: the holder gives the lease up by renewing it for
    /// `Duration::ZERO` (it then ends now, and another identifier obtains it at once).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] (the root and `/zookeeper` too); [`Error::InvalidArgument`] for
    /// an empty identifier, a duration under one second other than zero (the end is written
    /// in whole seconds, so such a lease could end in the second it was obtained, free for
    /// another identifier at once), or an end past the year 9999; [`Error::CorruptData`] when
    /// the record is not kazoo's JSON (it is left as it is: kazoo fails on it too); a
    /// connection error the retry policy gave up on; the server's refusal.
    ///
    /// # Cancel safety
    /// A cancelled attempt leaves no lock node behind (it is deleted in the background). If
    /// it was cancelled after sending its write, the record may be written: the lease is then
    /// this identifier's without the caller knowing; attempting again tells.
    pub async fn obtain(framework: &Framework, path: &str, duration: Duration, identifier: &str) -> Result<Self> {
        Self::obtain_at(framework, path, duration, identifier, SystemTime::now()).await
    }

    /// [`obtain`](Self::obtain) with `now` as the current time (kazoo's `utcnow` argument):
    /// for tests, or a clock of the caller's.
    ///
    /// # Errors
    /// As [`obtain`](Self::obtain).
    ///
    /// # Cancel safety
    /// As [`obtain`](Self::obtain).
    pub async fn obtain_at(
        framework: &Framework,
        path: &str,
        duration: Duration,
        identifier: &str,
        now: SystemTime,
    ) -> Result<Self> {
        let end = check(framework, path, duration, identifier, now)?;
        attempt(framework, path, identifier, now, end).await
    }

    /// True when the lease is this identifier's until [`end`](Self::end).
    pub fn obtained(&self) -> bool {
        self.end.is_some()
    }

    /// When the lease ends, as written (whole seconds); `None` when it was not obtained.
    pub fn end(&self) -> Option<SystemTime> {
        self.end
    }

    /// The lease's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The identifier the attempt was made for.
    pub fn identifier(&self) -> &str {
        &self.identifier
    }
}

/// The end of a lease of `duration` from `now`, after checking the arguments (no I/O).
fn check(
    framework: &Framework,
    path: &str,
    duration: Duration,
    identifier: &str,
    now: SystemTime,
) -> Result<SystemTime> {
    path::validate_recipe_path(path)?;
    framework.full_path(path)?;
    if identifier.is_empty() {
        return Err(Error::InvalidArgument { name: "identifier", reason: "empty".into() });
    }
    // The end is written in whole seconds: under a second from now it may be the second
    // `now` is in, which the record compares as already ended. Zero ends the lease on purpose.
    if duration > Duration::ZERO && duration < Duration::from_secs(1) {
        return Err(Error::InvalidArgument {
            name: "duration",
            reason: format!("{duration:?} is under one second, the resolution of a lease's end (zero gives it up)"),
        });
    }
    let end = now.checked_add(duration).filter(|end| *end <= SystemTime::UNIX_EPOCH + LAST_END);
    end.ok_or_else(|| Error::InvalidArgument {
        name: "duration",
        reason: format!("{duration:?} from now ends after 9999-12-31T23:59:59, which a lease record cannot hold"),
    })
}

async fn attempt(
    fw: &Framework,
    path: &str,
    identifier: &str,
    now: SystemTime,
    end: SystemTime,
) -> Result<NonBlockingLease> {
    let lock = KazooLock::new(fw, path)?;
    let hold = lock.acquire(identifier.as_bytes(), None).await?.ok_or(Error::Closed)?;
    let holder_path = path::join(path, LEASE_HOLDER);
    let not_obtained = NonBlockingLease { path: path.to_owned(), identifier: identifier.to_owned(), end: None };
    let record = encode_lease_record(identifier, end);
    // The record is the recipe's layout: never compressed, whatever the framework's default.
    let replaced = match fw.get_data(&holder_path).plain().await {
        Ok((data, stat)) => {
            let current = decode_lease_record(&data).map_err(|e| Error::CorruptData {
                path: holder_path.clone(),
                expected: e.expected,
                reason: e.found,
            })?;
            if current.version != LEASE_VERSION {
                return Ok(not_obtained);
            }
            if current.end_time().is_none() {
                return Err(Error::CorruptData {
                    path: holder_path,
                    expected: "kazoo lease record",
                    reason: format!("an end of {:?}", current.end),
                });
            }
            // kazoo compares its clock, truncated to seconds by the format, with the end.
            let still_held = current.end.as_str() > format_utc(now).as_str();
            if current.holder != identifier && still_held {
                return Ok(not_obtained);
            }
            Some(stat.version)
        }
        Err(Error::ZooKeeper(ZkError::NoNode)) => None,
        Err(e) => return Err(e),
    };
    // kazoo replaces the record in one transaction (its delete and the create): there is no
    // moment without a record, whatever happens to this call between the two.
    let written = match replaced {
        Some(version) => {
            let replace = fw.transaction().delete(&holder_path).version(version);
            match replace.create(&holder_path, &record, CreateMode::Persistent).commit().await {
                Ok(_) => Ok(()),
                // Written or deleted meanwhile without the lock: not ours to replace.
                Err(Error::TransactionFailed { error: ZkError::BadVersion | ZkError::NoNode, .. }) => {
                    return Ok(not_obtained)
                }
                Err(e) => Err(e),
            }
        }
        None => fw.create(&holder_path).plain().data(&record).await.map(drop),
    };
    match written {
        Ok(()) => {}
        // A create sent again after a lost reply finds its own record.
        Err(Error::ZooKeeper(ZkError::NodeExists) | Error::OutcomeUnknown { .. }) => {
            match fw.get_data(&holder_path).plain().await {
                Ok((data, _)) if data == record => {}
                Ok(_) | Err(Error::ZooKeeper(ZkError::NoNode)) => return Ok(not_obtained),
                Err(e) => return Err(e),
            }
        }
        Err(e) => return Err(e),
    }
    drop(hold);
    let end = crate::protocol::kazoo::parse_utc(&format_utc(end));
    Ok(NonBlockingLease { end, ..not_obtained })
}

/// One of `count` leases (kazoo's `MultiNonBlockingLease`): attempts
/// [`NonBlockingLease`]s at `<path>/0`, `<path>/1`, ... in turn and stops at the first
/// obtained, so at most `count` identifiers hold one at a time.
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use std::time::Duration;
/// use zk_recipes::MultiNonBlockingLease;
///
/// let lease = MultiNonBlockingLease::obtain(&fw, 3, "/leases/reporters", Duration::from_secs(600), "host-b").await?;
/// if let Some(slot) = lease.slot() {
///     println!("reporting as {slot} of 3");
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "an attempt at a lease says whether it was obtained"]
pub struct MultiNonBlockingLease {
    obtained: Option<(usize, NonBlockingLease)>,
}

impl MultiNonBlockingLease {
    /// Attempts the leases at `<path>/0` ... `<path>/<count - 1>` for `identifier`, for
    /// `duration` from now, until one is obtained. An identifier that holds one renews it
    /// (unless an earlier one is free).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a `count` of 0; otherwise as
    /// [`NonBlockingLease::obtain`] (the first error ends the attempts).
    ///
    /// # Cancel safety
    /// As [`NonBlockingLease::obtain`].
    pub async fn obtain(
        framework: &Framework,
        count: usize,
        path: &str,
        duration: Duration,
        identifier: &str,
    ) -> Result<Self> {
        Self::obtain_at(framework, count, path, duration, identifier, SystemTime::now()).await
    }

    /// [`obtain`](Self::obtain) with `now` as the current time.
    ///
    /// # Errors
    /// As [`obtain`](Self::obtain).
    ///
    /// # Cancel safety
    /// As [`NonBlockingLease::obtain`].
    pub async fn obtain_at(
        framework: &Framework,
        count: usize,
        path: &str,
        duration: Duration,
        identifier: &str,
        now: SystemTime,
    ) -> Result<Self> {
        if count == 0 {
            return Err(Error::InvalidArgument { name: "count", reason: "at least one lease".into() });
        }
        path::validate_recipe_path(path)?;
        let end = check(framework, &path::join(path, "0"), duration, identifier, now)?;
        for slot in 0..count {
            let lease = attempt(framework, &path::join(path, &slot.to_string()), identifier, now, end).await?;
            if lease.obtained() {
                return Ok(MultiNonBlockingLease { obtained: Some((slot, lease)) });
            }
        }
        Ok(MultiNonBlockingLease { obtained: None })
    }

    /// True when one of the leases was obtained.
    pub fn obtained(&self) -> bool {
        self.obtained.is_some()
    }

    /// Which lease was obtained (`<path>/<slot>`).
    pub fn slot(&self) -> Option<usize> {
        self.obtained.as_ref().map(|(slot, _)| *slot)
    }

    /// The lease obtained.
    pub fn lease(&self) -> Option<&NonBlockingLease> {
        self.obtained.as_ref().map(|(_, lease)| lease)
    }
}
