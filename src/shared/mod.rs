//! Values shared by a fleet (Curator's `recipes.shared` package): [`SharedValue`] (bytes) and
//! [`SharedCount`] (a 4-byte count), each one persistent node kept current locally, with
//! compare-and-set on the node's version and change notification.

mod count;
mod follow;
mod mirror;
pub(crate) mod node_watch;
#[cfg(feature = "serde")]
mod typed;
mod value;
mod version;
pub(crate) mod versioned;

pub use self::count::{SharedCount, SharedCountChanges};
#[cfg(feature = "serde")]
pub use self::typed::{TypedSharedValue, TypedSharedValueChanges};
pub use self::value::{SharedValue, SharedValueChanges};
pub use self::version::VersionedValue;
