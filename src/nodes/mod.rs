//! Nodes the framework keeps in existence: [`PersistentNode`] (one node of any mode, re-created
//! after deletes and new sessions), [`PersistentTtlNode`] (a node that outlives its process
//! for a TTL) and [`GroupMember`] (Curator's group membership on top of them).

mod group;
mod persistent;
mod ttl;

pub(crate) use self::group::validate_name;
pub use self::group::{GroupMember, MembershipEvent, MembershipEvents};
pub use self::persistent::{PersistentNode, PersistentNodeBuilder};
pub use self::ttl::{PersistentTtlNode, PersistentTtlNodeBuilder};
