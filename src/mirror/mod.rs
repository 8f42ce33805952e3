//! The mirror: an in-memory copy of a ZooKeeper subtree (path -> stat and, optionally, data),
//! kept current by one persistent watch and re-read after any gap.
//!
//! - [`state`]: the pure logic. Watch events, resyncs and read replies go in; the
//!   differences it applied ([`Change`]) and the reads it wants sent come out. It knows
//!   whether it is complete as of the last event applied ([`Status`]).
//! - [`view`]: what the driver drives, as a trait; the mirror above is one view, a lock
//!   directory's view (in `locks/`) the other.
//! - [`driver`]: the task that feeds a session watch's items (`watch/session.rs`: events in
//!   server order, `Interrupted` when the connection breaks, `Resync` each time the watch is
//!   in place again) and the replies of the reads (sent on the watch's own session: a load's a
//!   bounded number at a time, an event's at once) to a view held by a host.
//!
//! Wire facts the design rests on: a persistent recursive watch delivers created, deleted
//! and data-changed events for the root and every descendant, never children-changed; a
//! session's replies and events come in one ordered stream, so a read reply follows the
//! events of every change the read could see; events during a disconnection are lost, and
//! zookeeper-client 0.11 does not re-register persistent watches after a reconnect, so the
//! session watch adds itself again.

pub(crate) mod driver;
pub(crate) mod shared;
pub(crate) mod state;
pub(crate) mod tree;
pub(crate) mod view;

#[cfg(test)]
mod model_tests;

pub(crate) use self::state::{Change, EventKind, Mirror, Op, Reads, Reply, Request, Scope, Status};
pub(crate) use self::tree::Item;
pub(crate) use self::view::View;
