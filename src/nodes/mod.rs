//! Nodes the framework keeps in existence: [`PersistentNode`] (one node of any mode, re-created
//! after deletes and new sessions) and [`GroupMember`] (Curator's group membership on top of it).

mod group;
#[cfg(feature = "discovery")]
pub(crate) use self::group::validate_name;
mod persistent;

pub use self::group::{GroupMember, MembershipEvent, MembershipEvents};
pub use self::persistent::{PersistentNode, PersistentNodeBuilder};
