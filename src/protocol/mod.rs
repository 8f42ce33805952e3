//! The recipes' protocol, in one place: the names their nodes carry, the directories they
//! keep, the keys their queues are sorted by, and a pure decoder that tells from a directory's
//! children which recipe made them and who holds and who waits, by the same drivers the
//! recipes acquire with. Everything here is Curator 5.x's wire format, so it reads Curator's
//! nodes as well as this crate's.
//!
//! ```
//! use zk_recipes::protocol::{self, Queue, Recipe, Role};
//!
//! let children = ["_c_9b0a1c2d-3e4f-4a6b-8d6a-3f1c2b9e4e1f-lock-0000000008", "_c_3f1c2b9e-8d6a-4e1f-9b0a-1c2d3e4f5a6b-lock-0000000007"];
//! assert_eq!(protocol::classify(&children), Some(Recipe::Mutex));
//! let queue = Queue::Mutex.decode(children);
//! assert_eq!(queue[0].sequence, Some(7));
//! assert_eq!(queue[0].role, Role::Holder);
//! assert_eq!((queue[1].role, queue[1].waits_on.as_deref()), (Role::Waiter, Some(children[1])));
//! ```
//!
//! A node name is `[_c_<uuid>-]<name><sequence>`: Curator's protected prefix (see
//! [`is_protected`]), the recipe's node name ([`LOCK_NAME`], [`READ_LOCK_NAME`], ...), and the
//! parent's 10-digit counter. A queue is ordered by the text after the **last** occurrence of
//! its node name ([`sort_key`]; the whole name when it does not occur), compared as plain
//! strings with a stable sort; children that are no recipe's are ordered and counted too,
//! because Curator counts them.
//!
//! Each recipe's [`Layout`] names its directories and the [`Queue`] each holds;
//! [`classify`] recognises a directory by the layouts' [`Signature`]s, and
//! [`Queue::decode`] orders a directory's [`Child`]ren and gives each its [`Role`].

mod decode;
pub mod kazoo;
// Who holds a lock, by Curator's rules: the lock recipes acquire by it, the decoder reads
// directories by it.
pub(crate) mod driver;
pub mod gzip;
mod layout;
pub(crate) mod names;
pub mod queue_names;
pub mod values;

pub use self::decode::{classify, Child, Decoded, Kind, Role};
pub use self::layout::{service_instance_path, Layout, Queue, Recipe, RegistrationLayout, Section, Signature};
pub use self::names::{
    read_write_sort_key, LATCH_NAME, LEASE_BASE_NAME, LEASE_PARENT, LOCK_NAME, LOCK_PARENT, MIGRATION_META_NAME,
    QUEUE_ITEM_NAME, READY_NODE, READ_LOCK_NAME, REVOKE_MESSAGE, SIMPLE_QUEUE_PREFIX, WRITE_LOCK_NAME,
};
/// Protected names and sequence numbers, which every recipe's nodes share (defined with the
/// other name handling in [`path`](crate::path)).
pub use crate::path::{is_protected, sequence, sort_key, strip_protected, PROTECTED_PREFIX_LEN};
