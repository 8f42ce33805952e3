//! Time-bounded leases that need no session (kazoo's `recipe.lease`): [`NonBlockingLease`]
//! reserves a path for one identifier until a point in time, [`MultiNonBlockingLease`] one of
//! `count` such paths. An attempt never waits for the lease: it is obtained or not.
//!
//! The record is kazoo's, byte for byte (`<path>/lease_holder`, JSON with the holder's
//! identifier and the end as UTC `%Y-%m-%dT%H:%M:%S`; see
//! [`protocol::kazoo`](crate::protocol::kazoo)), read and written under kazoo's lock at
//! `<path>` (`<uuid hex>__lock__<sequence>` nodes), so Python services on kazoo and Rust
//! services share leases. The end is computed from the local clock, as kazoo does: clients'
//! clocks must roughly agree.

mod non_blocking;

pub use self::non_blocking::{MultiNonBlockingLease, NonBlockingLease};
