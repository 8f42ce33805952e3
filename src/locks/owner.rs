//! Who owns a reentrant hold: the current Tokio task, or the thread outside any task.

use std::thread::ThreadId;

/// The identity reentrancy is keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Owner {
    Task(tokio::task::Id),
    Thread(ThreadId),
}

impl Owner {
    /// The caller's identity: its Tokio task, or its thread when not inside a task (for
    /// example the future passed to `Runtime::block_on`, as with `#[tokio::main]`).
    pub(crate) fn current() -> Owner {
        match tokio::task::try_id() {
            Some(id) => Owner::Task(id),
            None => Owner::Thread(std::thread::current().id()),
        }
    }
}
