//! [`Fence`] for every holder of a lock node: the lock guards, the semaphore's lease and
//! mutex guard (a leadership term's is beside `Leadership`). Each fences with its own node at
//! any version (why: see [`Fence`]). Each also has `fenced_transaction` as its own method, so
//! it needs no import of the trait.

use crate::framework::{Fence, Framework, Transaction};
use crate::locks::{MutexGuard, ReadLockGuard, SemaphoreLease, SemaphoreMutexGuard, WriteLockGuard};

impl Fence for MutexGuard {
    fn fence_node(&self) -> (&str, i32) {
        (self.lock_path(), -1)
    }
}

impl Fence for ReadLockGuard {
    fn fence_node(&self) -> (&str, i32) {
        (self.lock_path(), -1)
    }
}

impl Fence for WriteLockGuard {
    fn fence_node(&self) -> (&str, i32) {
        (self.lock_path(), -1)
    }
}

impl Fence for SemaphoreLease {
    fn fence_node(&self) -> (&str, i32) {
        (self.lease_path(), -1)
    }
}

impl Fence for SemaphoreMutexGuard {
    fn fence_node(&self) -> (&str, i32) {
        (self.lock_path(), -1)
    }
}

impl MutexGuard {
    /// A transaction on `framework` that starts with a check of this lock node, so it fails
    /// on the server ([`Error::LockLost`](crate::Error::LockLost)) once the hold is lost; see
    /// [`Fence`]. The trait's method, callable without importing it.
    pub fn fenced_transaction<'a>(&self, framework: &'a Framework) -> Transaction<'a> {
        Fence::fenced_transaction(self, framework)
    }
}

impl ReadLockGuard {
    /// A transaction on `framework` that starts with a check of this lock node, so it fails
    /// on the server ([`Error::LockLost`](crate::Error::LockLost)) once the hold is lost; see
    /// [`Fence`]. The trait's method, callable without importing it.
    pub fn fenced_transaction<'a>(&self, framework: &'a Framework) -> Transaction<'a> {
        Fence::fenced_transaction(self, framework)
    }
}

impl WriteLockGuard {
    /// A transaction on `framework` that starts with a check of this lock node, so it fails
    /// on the server ([`Error::LockLost`](crate::Error::LockLost)) once the hold is lost; see
    /// [`Fence`]. The trait's method, callable without importing it.
    pub fn fenced_transaction<'a>(&self, framework: &'a Framework) -> Transaction<'a> {
        Fence::fenced_transaction(self, framework)
    }
}

impl SemaphoreLease {
    /// A transaction on `framework` that starts with a check of this lease node, so it fails
    /// on the server ([`Error::LockLost`](crate::Error::LockLost)) once the hold is lost; see
    /// [`Fence`]. The trait's method, callable without importing it.
    pub fn fenced_transaction<'a>(&self, framework: &'a Framework) -> Transaction<'a> {
        Fence::fenced_transaction(self, framework)
    }
}

impl SemaphoreMutexGuard {
    /// A transaction on `framework` that starts with a check of this lease node, so it fails
    /// on the server ([`Error::LockLost`](crate::Error::LockLost)) once the hold is lost; see
    /// [`Fence`]. The trait's method, callable without importing it.
    pub fn fenced_transaction<'a>(&self, framework: &'a Framework) -> Transaction<'a> {
        Fence::fenced_transaction(self, framework)
    }
}
