//! Each recipe's layout: which directories it keeps, how its nodes are queued, and how a
//! directory is recognised as its.
//!
//! A recipe added to the crate describes its layout here (a [`Recipe`] variant, its
//! [`Layout`], and a [`Queue`] when its nodes queue in a new way); [`classify`](super::classify)
//! and the decoder then know it, and so does every tool built on them.

use super::driver::{Driver, ReadDriver, StandardDriver};
use super::kazoo::KAZOO_LOCK_NAME;
use super::names::{
    LATCH_NAME, LEASE_BASE_NAME, LEASE_PARENT, LOCK_NAME, LOCK_PARENT, QUEUE_ITEM_NAME, READY_NODE, READ_LOCK_NAME,
    SIMPLE_QUEUE_PREFIX, WRITE_LOCK_NAME,
};

/// A recipe, as its nodes show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Recipe {
    /// `lock-` nodes: one holder, the rest wait in order ([`InterProcessMutex`](crate::InterProcessMutex),
    /// a [`LeaderSelector`](crate::LeaderSelector)'s election).
    Mutex,
    /// `leases` and `locks` children ([`InterProcessSemaphore`](crate::InterProcessSemaphore),
    /// [`InterProcessSemaphoreMutex`](crate::InterProcessSemaphoreMutex)).
    Semaphore,
    /// `__READ__` and `__WRIT__` nodes in one queue ([`InterProcessReadWriteLock`](crate::InterProcessReadWriteLock)).
    ReadWrite,
    /// `latch-` nodes: the first leads ([`LeaderLatch`](crate::LeaderLatch)).
    LeaderLatch,
    /// `lease-` nodes: a semaphore's `leases` directory itself.
    Leases,
    /// `qn-` nodes: a [`SimpleDistributedQueue`](crate::SimpleDistributedQueue)'s items, raw
    /// bytes, taken in name order.
    SimpleQueue,
    /// `queue-` nodes: a Curator `DistributedQueue`'s items (or its id, priority or delay
    /// variant's), each in Curator's item framing ([`values::decode_queue_items`](super::values::decode_queue_items)).
    DistributedQueue,
    /// `queue-<uuid>` children: a [`QueueSharder`](crate::QueueSharder)'s shards, each a
    /// directory holding one distributed queue ([`queue_names::is_shard_name`](super::queue_names::is_shard_name)).
    QueueSharder,
    /// UUID-named ephemeral members and perhaps `ready`: a
    /// [`DistributedDoubleBarrier`](crate::DistributedDoubleBarrier).
    DoubleBarrier,
    /// `<uuid hex>__lock__<sequence>` nodes: kazoo's lock (under a
    /// [`NonBlockingLease`](crate::NonBlockingLease)'s path, and a
    /// [`SetPartitioner`](crate::SetPartitioner)'s `locks/<item>`), one holder, the rest
    /// waiting in sequence order ([`kazoo`](super::kazoo)).
    KazooLock,
    /// No children: nobody holds or waits (a lock directory between uses, or any other
    /// childless node).
    Empty,
}

/// How one recipe lays its nodes out under the path it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Layout {
    /// The recipe.
    pub recipe: Recipe,
    /// A stable lowercase identifier (`mutex`, `read-write`, ...), for machine-readable output.
    pub id: &'static str,
    /// The recipe and the Curator classes that make this layout, in words.
    pub description: &'static str,
    /// What marks a child of the path as this recipe's, for [`classify`](super::classify).
    pub signature: Signature,
    /// The directories holding its queues, in the order to show them.
    pub sections: &'static [Section],
}

/// What marks a child as one recipe's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Signature {
    /// Its name is one of these (fixed child directories).
    Named(&'static [&'static str]),
    /// Its name contains one of these markers.
    Contains(&'static [&'static str]),
    /// Its name is a UUID (`8-4-4-4-12` hex digits) or one of these.
    UuidOr(&'static [&'static str]),
    /// Its name is a queue shard's, `queue-<uuid>`.
    Shard,
    /// Nothing: the layout has no children.
    Childless,
}

/// Whether `name` has a UUID's form: 36 characters, hex digits with `-` at 8, 13, 18, 23.
fn is_uuid(name: &str) -> bool {
    name.len() == 36
        && name.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

impl Signature {
    /// Whether `child` (a name) carries this signature.
    pub fn matches(self, child: &str) -> bool {
        match self {
            Signature::Named(names) => names.contains(&child),
            Signature::Contains(markers) => markers.iter().any(|m| child.contains(m)),
            Signature::UuidOr(names) => names.contains(&child) || is_uuid(child),
            Signature::Shard => super::queue_names::is_shard_name(child),
            Signature::Childless => false,
        }
    }
}

/// One directory of a layout and the queue its children form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section {
    /// The directory, as a child of the recipe's path; `None` for the path itself.
    pub dir: Option<&'static str>,
    /// How its children are ordered and admitted.
    pub queue: Queue,
}

/// The ordering and admission rule of one directory of nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Queue {
    /// The first holds, the others wait, each on the one ahead of it (Curator's
    /// `StandardLockInternalsDriver`, one lease).
    Mutex,
    /// The first leads, the others wait, each on the one ahead of it.
    LeaderLatch,
    /// Every node is a lease: the semaphore admits by count, not by position.
    Leases,
    /// A writer holds at the front; a reader holds when no writer sorts ahead of it.
    ReadWrite,
    /// Queue items (`qn-` for a simple queue, `queue-` for a distributed one), in the order
    /// consumers take them, the first next: `qn-` items in plain name order, `queue-` items
    /// in the order of the variant their names tell ([`QueueOrder::detect`](super::queue_names::QueueOrder::detect)).
    Items(&'static str),
    /// A double barrier's members (by UUID, in name order) and its `ready` node.
    Members,
    /// kazoo's lock: the lowest sequence (compared as text) holds, the others wait, each on
    /// the one ahead of it.
    KazooLock,
}

const MUTEX: Layout = Layout {
    recipe: Recipe::Mutex,
    id: "mutex",
    description: "mutex (InterProcessMutex, or a LeaderSelector's)",
    signature: Signature::Contains(&[LOCK_NAME]),
    sections: &[Section { dir: None, queue: Queue::Mutex }],
};

const SEMAPHORE: Layout = Layout {
    recipe: Recipe::Semaphore,
    id: "semaphore",
    description: "semaphore (InterProcessSemaphoreV2 or InterProcessSemaphoreMutex)",
    signature: Signature::Named(&[LEASE_PARENT, LOCK_PARENT]),
    sections: &[
        Section { dir: Some(LEASE_PARENT), queue: Queue::Leases },
        Section { dir: Some(LOCK_PARENT), queue: Queue::Mutex },
    ],
};

const READ_WRITE: Layout = Layout {
    recipe: Recipe::ReadWrite,
    id: "read-write",
    description: "read-write lock (InterProcessReadWriteLock)",
    signature: Signature::Contains(&[READ_LOCK_NAME, WRITE_LOCK_NAME]),
    sections: &[Section { dir: None, queue: Queue::ReadWrite }],
};

const LEADER_LATCH: Layout = Layout {
    recipe: Recipe::LeaderLatch,
    id: "leader-latch",
    description: "leader latch (LeaderLatch)",
    signature: Signature::Contains(&[LATCH_NAME]),
    sections: &[Section { dir: None, queue: Queue::LeaderLatch }],
};

const LEASES: Layout = Layout {
    recipe: Recipe::Leases,
    id: "leases",
    description: "a semaphore's leases",
    signature: Signature::Contains(&[LEASE_BASE_NAME]),
    sections: &[Section { dir: None, queue: Queue::Leases }],
};

const SIMPLE_QUEUE: Layout = Layout {
    recipe: Recipe::SimpleQueue,
    id: "simple-queue",
    description: "simple queue (SimpleDistributedQueue)",
    signature: Signature::Contains(&[SIMPLE_QUEUE_PREFIX]),
    sections: &[Section { dir: None, queue: Queue::Items(SIMPLE_QUEUE_PREFIX) }],
};

const DISTRIBUTED_QUEUE: Layout = Layout {
    recipe: Recipe::DistributedQueue,
    id: "distributed-queue",
    description:
        "distributed queue (DistributedQueue, DistributedIdQueue, DistributedPriorityQueue or DistributedDelayQueue)",
    signature: Signature::Contains(&[QUEUE_ITEM_NAME]),
    sections: &[Section { dir: None, queue: Queue::Items(QUEUE_ITEM_NAME) }],
};

const QUEUE_SHARDER: Layout = Layout {
    recipe: Recipe::QueueSharder,
    id: "queue-sharder",
    description: "queue sharder (QueueSharder): each queue-<uuid> child is a shard holding one distributed queue",
    signature: Signature::Shard,
    // The shards are directories of their own, each read as a distributed queue.
    sections: &[],
};

const DOUBLE_BARRIER: Layout = Layout {
    recipe: Recipe::DoubleBarrier,
    id: "double-barrier",
    description: "double barrier (DistributedDoubleBarrier)",
    signature: Signature::UuidOr(&[READY_NODE]),
    sections: &[Section { dir: None, queue: Queue::Members }],
};

const KAZOO_LOCK: Layout = Layout {
    recipe: Recipe::KazooLock,
    id: "kazoo-lock",
    description: "kazoo lock (kazoo's Lock; NonBlockingLease, SetPartitioner items)",
    signature: Signature::Contains(&[KAZOO_LOCK_NAME]),
    sections: &[Section { dir: None, queue: Queue::KazooLock }],
};

const EMPTY: Layout = Layout {
    recipe: Recipe::Empty,
    id: "empty",
    description: "no children: nobody holds or waits",
    signature: Signature::Childless,
    sections: &[],
};

impl Recipe {
    /// Every recipe, in the order [`classify`](super::classify) breaks ties in: the more
    /// specific signature first (a semaphore's fixed directories, then the read-write markers,
    /// which no other recipe's names contain, ..., the mutex's `lock-` last).
    pub const ALL: &'static [Recipe] = &[
        Recipe::Semaphore,
        Recipe::ReadWrite,
        Recipe::LeaderLatch,
        Recipe::Leases,
        Recipe::SimpleQueue,
        Recipe::QueueSharder,
        Recipe::DistributedQueue,
        Recipe::DoubleBarrier,
        Recipe::KazooLock,
        Recipe::Mutex,
        Recipe::Empty,
    ];

    /// Its layout.
    pub fn layout(self) -> &'static Layout {
        match self {
            Recipe::Mutex => &MUTEX,
            Recipe::Semaphore => &SEMAPHORE,
            Recipe::ReadWrite => &READ_WRITE,
            Recipe::LeaderLatch => &LEADER_LATCH,
            Recipe::Leases => &LEASES,
            Recipe::SimpleQueue => &SIMPLE_QUEUE,
            Recipe::DistributedQueue => &DISTRIBUTED_QUEUE,
            Recipe::QueueSharder => &QUEUE_SHARDER,
            Recipe::DoubleBarrier => &DOUBLE_BARRIER,
            Recipe::KazooLock => &KAZOO_LOCK,
            Recipe::Empty => &EMPTY,
        }
    }

    /// The layout's stable identifier (`mutex`, `semaphore`, `read-write`, `leader-latch`,
    /// `leases`, `simple-queue`, `distributed-queue`, `queue-sharder`, `double-barrier`,
    /// `kazoo-lock`, `empty`).
    pub fn id(self) -> &'static str {
        self.layout().id
    }

    /// The recipe and the Curator classes that make this layout, in words.
    pub fn describe(self) -> &'static str {
        self.layout().description
    }
}

impl Queue {
    /// The node names of this queue (a read-write queue has two).
    pub fn names(self) -> &'static [&'static str] {
        match self {
            Queue::Mutex => &[LOCK_NAME],
            Queue::LeaderLatch => &[LATCH_NAME],
            Queue::Leases => &[LEASE_BASE_NAME],
            Queue::ReadWrite => &[READ_LOCK_NAME, WRITE_LOCK_NAME],
            Queue::Items(SIMPLE_QUEUE_PREFIX) => &[SIMPLE_QUEUE_PREFIX],
            Queue::Items(_) => &[QUEUE_ITEM_NAME],
            Queue::Members => &[READY_NODE],
            Queue::KazooLock => &[KAZOO_LOCK_NAME],
        }
    }

    /// The recipe's own driver for this queue: its sort key, and for a lock its predicate.
    pub(crate) fn driver(self) -> &'static dyn Driver {
        const LEASES: StandardDriver = StandardDriver { lock_name: LEASE_BASE_NAME, max_leases: usize::MAX };
        match self {
            Queue::Mutex => &StandardDriver::MUTEX,
            Queue::LeaderLatch => &StandardDriver::LATCH,
            Queue::Leases => &LEASES,
            Queue::ReadWrite => &ReadDriver,
            Queue::KazooLock => &StandardDriver { lock_name: KAZOO_LOCK_NAME, max_leases: 1 },
            // Not a lock: decoded and sorted without a driver (see `sort_key`).
            Queue::Items(_) | Queue::Members => &StandardDriver::MUTEX,
        }
    }

    /// Curator's sort key: the text after the last node name (the whole name when it does
    /// not occur); for a read-write queue, after the last `__READ__` and then after the last
    /// `__WRIT__`, so both kinds share one queue; for queue items and barrier members, the
    /// whole name (a `DistributedQueue`'s and its priority variant's order; the id and delay
    /// variants order by [`QueueOrder::compare`](super::queue_names::QueueOrder::compare)).
    /// Keys compare as plain strings.
    pub fn sort_key(self, name: &str) -> &str {
        match self {
            Queue::Items(_) | Queue::Members => name,
            _ => self.driver().sort_key(name),
        }
    }
}

/// The layout of a recipe whose node names are the caller's (a member id, a service name), so
/// that no signature tells its directories apart: described for tools, not classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegistrationLayout {
    /// A stable lowercase identifier.
    pub id: &'static str,
    /// The node's path, with the caller's parts in braces.
    pub path: &'static str,
    /// Its node mode and data, in words.
    pub description: &'static str,
}

impl RegistrationLayout {
    /// Curator's `PersistentNode` ([`PersistentNode`](crate::PersistentNode)).
    pub const PERSISTENT_NODE: RegistrationLayout = RegistrationLayout {
        id: "persistent-node",
        path: "{path}, or {parent}/_c_{uuid}-{name} when protected, with {seq10} for the sequential modes",
        description: "one node of the mode asked for, the caller's data; a re-create reuses the exact name \
                      (a sequential node keeps its sequence number); parents are containers",
    };
    /// Curator's `GroupMember` ([`GroupMember`](crate::GroupMember)).
    pub const GROUP_MEMBER: RegistrationLayout = RegistrationLayout {
        id: "group-member",
        path: "{membership path}/{member id}",
        description: "an ephemeral node per member, unprotected, the member's payload as data; parents are containers",
    };
    /// curator-x-discovery's `ServiceDiscovery` (feature `discovery`).
    pub const SERVICE_INSTANCE: RegistrationLayout = RegistrationLayout {
        id: "service-instance",
        path: "{base}/{service name}/{instance id}",
        description: "the instance's JSON (JsonInstanceSerializer); ephemeral for DYNAMIC, persistent for STATIC \
                      and PERMANENT; {base} and {base}/{name} are containers",
    };

    /// Every registration layout.
    pub const ALL: &'static [RegistrationLayout] =
        &[RegistrationLayout::PERSISTENT_NODE, RegistrationLayout::GROUP_MEMBER, RegistrationLayout::SERVICE_INSTANCE];
}

/// The path of instance `id` of service `name` under the discovery base `base`
/// (curator-x-discovery's default `DiscoveryPathConstructor`).
pub fn service_instance_path(base: &str, name: &str, id: &str) -> String {
    crate::path::join(&crate::path::join(base, name), id)
}
