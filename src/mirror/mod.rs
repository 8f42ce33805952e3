//! The mirror: an in-memory copy of a ZooKeeper subtree (path -> stat and, optionally, data),
//! kept current by one persistent watch and re-read after any gap.
//!
//! - [`state`]: the pure logic. Watch events, resyncs and read replies go in; the
//!   differences it applied ([`Change`]) and the reads it wants sent come out. It knows
//!   whether it is complete as of the last event applied ([`Status`]).
//! - [`source`]: the watch on the server, as a stream of [`SourceItem`]s: events in server
//!   order, `Interrupted` when the connection breaks, `Resync` each time the watch was added
//!   again (after a reconnect or on a new session).
//! - [`driver`]: the task that feeds the source's items and the replies of the reads (sent
//!   on the framework's session: a load's a bounded number at a time, an event's at once) to
//!   a mirror held by a host.
//!
//! Wire facts the design rests on: a persistent recursive watch delivers created, deleted
//! and data-changed events for the root and every descendant, never children-changed; a
//! session's replies and events come in one ordered stream, so a read reply follows the
//! events of every change the read could see; events during a disconnection are lost, and
//! zookeeper-client 0.11 does not re-register persistent watches after a reconnect, so the
//! source adds its watch again itself.

pub(crate) mod driver;
pub(crate) mod source;
pub(crate) mod state;
pub(crate) mod tree;

#[cfg(test)]
mod model_tests;

pub(crate) use self::state::{Change, Mirror, Reads, Scope, Status};
pub(crate) use self::tree::Item;
