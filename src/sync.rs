//! The crate's one in-process mutex: `std::sync::Mutex` with poisoning ignored.
//!
//! Every critical section in this crate only moves small values in and out of a map or an
//! option, so a panic elsewhere cannot leave the data half-updated: a poisoned lock is still
//! safe to use, and refusing it would only turn one panic into many.

/// A `std::sync::Mutex` whose `lock` never fails.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(std::sync::Mutex::new(value))
    }

    /// The value, through exclusive access (no locking), ignoring poisoning.
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.0.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Locks, ignoring poisoning.
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_still_locks() {
        let shared = std::sync::Arc::new(Mutex::new(1));
        let clone = shared.clone();
        let _ = std::thread::spawn(move || {
            let _guard = clone.lock();
            panic!("poison it");
        })
        .join();
        *shared.lock() += 1;
        assert_eq!(*shared.lock(), 2);
    }
}
