//! Dividing a set of items among a group (kazoo's `recipe.partitioner`): [`SetPartitioner`].
//!
//! Members join a party (`<path>/party/<uuid hex>-<identifier>`, ephemeral); once the party
//! has been stable for a while, each member computes its share of the items from the sorted
//! members and takes kazoo's lock on each of its items (`<path>/locks/<item>`), and then
//! holds them until the party changes. The layout is kazoo's, so Python and Rust members can
//! share one partitioned set.

mod set_partitioner;

pub use self::set_partitioner::{PartitionFunc, PartitionState, SetPartitioner, SetPartitionerBuilder};
