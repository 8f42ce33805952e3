//! Critical sections that stop when the hold is lost: the one `run` behind every guard's,
//! lease's and leadership term's `run`, and its typed error.

use std::future::Future;

use crate::error::Error;

/// The hold (a lock, a lease, a term of leadership) was lost before a critical section
/// finished: its `run` stopped the section and dropped its future.
///
/// "Lost" is what the hold's `lost()` means: the connection is `Suspended` or `Lost` as the
/// framework's error policy counts them, a new session replaced the hold's, or its node was
/// deleted. It converts into [`Error::LockLost`], so `?` works in a function returning
/// [`crate::Result`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("lock lost: {} is no longer held; the critical section was stopped", .path.as_deref().unwrap_or("a lock of the multi-lock"))]
pub struct LockLost {
    path: Option<String>,
}

impl LockLost {
    /// The node of the hold that was lost (namespace stripped): a lock or lease node, or a
    /// leader node. `None` for a [`MultiLockGuard`](crate::MultiLockGuard), which does not
    /// tell which of its locks went.
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }
}

impl From<LockLost> for Error {
    fn from(lost: LockLost) -> Self {
        Error::LockLost { path: lost.path.unwrap_or_else(|| "(a lock of a multi-lock)".to_owned()) }
    }
}

/// Runs `work` until it finishes or `lost` completes, whichever comes first; `lost` is polled
/// first, so work never starts (and is never polled again) once the hold is known lost.
/// `work` is dropped when the hold is lost, and with the returned future when that is dropped.
pub(crate) async fn run_until_lost<F: Future>(
    lost: impl Future<Output = ()>,
    work: F,
    path: impl FnOnce() -> Option<String>,
) -> Result<F::Output, LockLost> {
    tokio::select! {
        biased;
        () = lost => Err(LockLost { path: path() }),
        output = work => Ok(output),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_never_starts_once_lost() {
        let started = std::sync::atomic::AtomicBool::new(false);
        let work = async { started.store(true, std::sync::atomic::Ordering::SeqCst) };
        let lost = run_until_lost(async {}, work, || Some("/l/n".into())).await.unwrap_err();
        assert!(!started.load(std::sync::atomic::Ordering::SeqCst));
        assert_eq!(lost.path(), Some("/l/n"));
        assert!(lost.to_string().contains("lock lost: /l/n"));
        assert!(Error::from(lost).is_lock_lost());
    }

    #[tokio::test]
    async fn finished_work_is_returned() {
        let out = run_until_lost(std::future::pending(), async { 7 }, || None).await;
        assert_eq!(out, Ok(7));
        let multi = LockLost { path: None };
        assert!(multi.to_string().contains("multi-lock"));
    }
}
