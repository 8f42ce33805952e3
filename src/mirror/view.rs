//! What the driver drives: a view of a watched subtree, as pure logic. Watch events,
//! interruptions, resyncs and read replies go in; the reads it wants sent come out.
//!
//! Two views implement it: the cache's [`Mirror`](super::Mirror) (a subtree's nodes, stats
//! and data) and a lock directory's view (its children's names, the creates counted since the
//! listing, and when a decision may rest on it).

use super::state::{EventKind, Mirror, Reply, Request, Status};

pub(crate) trait View: Send + 'static {
    /// What the view keeps of a node's data.
    type Data: Send + Sync + 'static;

    /// A watch event on `rel` (relative to the root), in the order the session received it.
    fn event(&mut self, kind: EventKind, rel: &str);

    /// Events may be missing from here on (the connection broke).
    fn interrupt(&mut self);

    /// The watch is being added (again): read what the view keeps again. Replies of earlier
    /// reads are of no use from now on.
    fn resync(&mut self);

    /// The watch whose add the last [`resync`](Self::resync) read behind is in place.
    fn watch_confirmed(&mut self) {}

    /// The server refused the watch: no event will come.
    fn refused(&mut self) {
        self.interrupt();
    }

    /// The reply to `request`.
    fn reply(&mut self, request: &Request, reply: Reply<Self::Data>);

    /// The reads to send, in order.
    fn take_requests(&mut self) -> Vec<Request>;

    /// Whether a resync is wanted without the watch asking (a read failed).
    fn needs_resync(&self) -> bool;

    /// Whether the watch itself is to be added again, at once, before the resync (the view
    /// found it may have been silenced); asking clears the wish.
    fn take_rearm(&mut self) -> bool {
        false
    }

    /// Whether events may have been missed and no resync is under way.
    fn is_incomplete(&self) -> bool;
}

impl<T: Send + Sync + 'static> View for Mirror<T> {
    type Data = T;

    fn event(&mut self, kind: EventKind, rel: &str) {
        Mirror::event(self, kind, rel);
    }

    fn interrupt(&mut self) {
        Mirror::interrupt(self);
    }

    fn resync(&mut self) {
        Mirror::resync(self);
    }

    fn reply(&mut self, request: &Request, reply: Reply<T>) {
        Mirror::reply(self, request, reply);
    }

    fn take_requests(&mut self) -> Vec<Request> {
        Mirror::take_requests(self)
    }

    fn needs_resync(&self) -> bool {
        Mirror::needs_resync(self)
    }

    fn is_incomplete(&self) -> bool {
        self.status() == Status::Incomplete
    }
}
