//! The names recipes give their nodes, and the keys those nodes are ordered by.

use crate::path;

/// The mutex's node name (Curator's `InterProcessMutex` `LOCK_NAME`): nodes are
/// `<protected prefix>lock-<sequence>`. A `LeaderSelector` and a semaphore's internal `locks`
/// mutex use it too.
pub const LOCK_NAME: &str = "lock-";

/// The leader latch's node name (Curator's `LeaderLatch` `LOCK_NAME`).
pub const LATCH_NAME: &str = "latch-";

/// The read-write lock's reader node name (Curator's `READ_LOCK_NAME`); 8 characters, as the
/// writer's.
pub const READ_LOCK_NAME: &str = "__READ__";

/// The read-write lock's writer node name (Curator's `WRITE_LOCK_NAME`).
pub const WRITE_LOCK_NAME: &str = "__WRIT__";

/// A semaphore's lease node name (Curator's `InterProcessSemaphoreV2` `LEASE_BASE_NAME`).
pub const LEASE_BASE_NAME: &str = "lease-";

/// The child of a semaphore's path holding its internal mutex (Curator's `LOCK_PARENT`).
pub const LOCK_PARENT: &str = "locks";

/// The child of a semaphore's path holding its lease nodes (Curator's `LEASE_PARENT`).
pub const LEASE_PARENT: &str = "leases";

/// The node a double barrier's last arriving member creates under the barrier's path to let
/// every member in (Curator's `DistributedDoubleBarrier` `READY_NODE`); the other children
/// are the members, one ephemeral node each, named by a random UUID.
pub const READY_NODE: &str = "ready";

/// The name of a `SimpleDistributedQueue` item (Curator's `PREFIX`): items are persistent
/// sequential nodes `qn-<sequence>` under the queue's path, taken in name order.
pub const SIMPLE_QUEUE_PREFIX: &str = "qn-";

/// The name of a `DistributedQueue` item (Curator's `QUEUE_ITEM_NAME`): `queue-<sequence>`.
pub const QUEUE_ITEM_NAME: &str = "queue-";

/// The name of a migration's metadata node (curator-x-async's `MigrationManager`):
/// `<metadata path>/<set id>/meta-<sequence>`, persistent sequential, holding the
/// migration's fingerprint.
pub const MIGRATION_META_NAME: &str = "meta-";

/// The data a revoker writes into a lock node to ask its holder to let go (Curator's
/// `Revoker.REVOKE_MESSAGE`): the ten ASCII bytes `__REVOKE__`, written whatever the version.
pub const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// The read-write lock's sort key (Curator's `SortingLockInternalsDriver.fixForSorting`, which
/// ignores the node name it is given): the text after the last `__READ__`, then after the last
/// `__WRIT__` in that. Readers and writers therefore share one queue, ordered by sequence. A
/// downgrade's read node carries its write node's sequence and ties with it; the stable sort
/// keeps ties in listing order.
pub fn read_write_sort_key(name: &str) -> &str {
    path::sort_key(path::sort_key(name, READ_LOCK_NAME), WRITE_LOCK_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_curators() {
        assert_eq!(READ_LOCK_NAME.len(), WRITE_LOCK_NAME.len());
        assert_eq!(REVOKE_MESSAGE, [0x5F, 0x5F, 0x52, 0x45, 0x56, 0x4F, 0x4B, 0x45, 0x5F, 0x5F]);
    }

    #[test]
    fn read_write_sort_keys_follow_curator() {
        assert_eq!(read_write_sort_key("_c_x-__READ__0000000007"), "0000000007");
        assert_eq!(read_write_sort_key("_c_x-__WRIT__0000000007"), "0000000007");
        // no marker: the whole name (sorts after every sequence starting with a digit)
        assert_eq!(read_write_sort_key("_c_x-lock-0000000001"), "_c_x-lock-0000000001");
        // the last marker wins, __READ__ first and then __WRIT__ in what is left
        assert_eq!(read_write_sort_key("a__WRIT__b__READ__0000000003"), "0000000003");
        assert_eq!(read_write_sort_key("a__READ__b__WRIT__0000000003"), "0000000003");
    }
}
