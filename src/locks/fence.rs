//! [`Fence`] for every holder of a lock node: the lock guards, the semaphore's lease and
//! mutex guard (a leadership term's is beside `Leadership`). Each fences with its own node at
//! any version (why: see [`Fence`]).

use crate::framework::Fence;
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
