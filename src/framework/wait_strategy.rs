//! How a lock waiter learns that the node ahead of it is gone.

/// How a waiting lock learns that the lock came its way: one mirror of the lock directory per
/// session (the default), or a watch per waiter on the node ahead of it (Curator's way).
///
/// With [`Mirror`](WaitStrategy::Mirror), each session keeps, for each lock directory it
/// uses (an [`InterProcessMutex`](crate::InterProcessMutex)'s, both halves of an
/// [`InterProcessReadWriteLock`](crate::InterProcessReadWriteLock), the internal lock of an
/// [`InterProcessSemaphore`](crate::InterProcessSemaphore), a
/// [`LeaderLatch`](crate::LeaderLatch)'s or [`LeaderSelector`](crate::LeaderSelector)'s
/// election, and the semaphore's lease directory), one persistent recursive watch on the directory and one listing of it, shared by
/// every handle and waiter of the session, kept while any of them is alive and added again
/// after every reconnect. A waiter then decides from the mirror instead of listing the
/// directory and watching its predecessor: a contended acquire-release cycle costs the create
/// and the delete (two requests instead of four or five), and a handoff costs no request
/// whatever the length of the queue. A holder learns from the same mirror that its node was
/// deleted (its guard's `lost()` and `is_held()`, no watch and no request of its own), and a
/// revocable holder reads its node once per data change instead of keeping a data watch. A
/// semaphore counts its leases on its mirror of the lease directory. The price is on the
/// server: every create and delete in the directory is sent to every session that mirrors
/// it, the acting one included.
///
/// # Cost model
/// Per contended acquire-release cycle, with `S` sessions mirroring the directory:
///
/// | | requests | notifications sent |
/// | --- | --- | --- |
/// | `Mirror` | 2 (create, delete) | `2S`: each create and each delete reaches every mirroring session |
/// | `PerWaiterWatch` | 4-5 (create, listing, watch on the predecessor, listing after the wake-up, delete); a mutex waiter two or more places back 7 (below) | 1; a mutex waiter two or more places back 3 |
///
/// Fixed costs of a mirror: one `addWatch` and one listing per session and directory, again
/// after every reconnect (after a leader change every mirroring session lists at once). On
/// ZooKeeper 3.8 a notification was measured at 7-11 µs of server CPU and a small read at
/// 41-86 µs, so the mirror costs the server less up to roughly 5-15 mirroring sessions per
/// directory, and saves one or two round trips per handoff whatever their number. The price
/// beyond that is on the server's serial write path: each write into a mirrored directory
/// holds its apply thread about 10 µs per mirroring session (0.6 ms at 64 sessions), which
/// delays every write on that server. So a mirror suits a directory used by a handful of
/// sessions, and the default does not keep one where it would not:
///
/// - **Crowded directories wait the classic way.** When a session's listing shows more than 12
///   nodes in the directory per node of its own (a lock shared by dozens of sessions), its
///   waiters there wait on the node ahead as `PerWaiterWatch` does, and the session's mirror
///   lets go at once (without the linger described below, in which it would go on hearing
///   every change of the crowd); after three listings in a row show at most 6 nodes per node
///   of its own, it mirrors again. Measured per cycle, 2 sessions: 2 requests and 4
///   notifications; 16 to 64 sessions: 7 requests in 4 round trips and 3 notifications
///   (a mirror at 16 costs about 32 notifications, at 64 about 128).
/// - **A mutex waiter two or more places back lists before its turn.** Curator's waiter lists
///   the children after the node ahead is deleted, so every handoff of a queue waits for a
///   listing after the holder's delete. A waiter of a one-holder lock (a mutex, the internal
///   lock of a semaphore, a leader latch or selector; either strategy) with two or more
///   nodes ahead also watches the node ahead of the node ahead, and its own node, in the same
///   round trip; when that node goes (usually: it held the lock and let go), it lists the
///   children while the node ahead holds, keeping its watches. The listing then shows only
///   the holder ahead, and the holder's deletion alone hands it the lock: every node ahead
///   of ours was created before it, so the nodes ahead only go, and our own node's watch,
///   quiet on the same connection, proves our node still exists (the shortcut the waiter
///   right behind the holder always took). Nodes deleted without having held (waits given
///   up) only make it list again, and a node two ahead the session may not read (`NoAuth`)
///   leaves Curator's wait. It costs two requests and two notifications more per cycle than
///   Curator's wait, and saves that listing's round trip on every handoff.
/// - **A lock taken free costs no mirror.** A handle's first acquire uses a mirror only if one
///   already runs; when none does, its create goes with a listing of the directory behind it
///   (one round trip), and only an acquire that must wait starts the session's mirror (its
///   first listing is sent after the create's reply, so it shows the waiter's node). A
///   service that locks one path per entity (per order, per tenant) pays no watch and no
///   mirror per path.
///
/// Measured on one server (2 cores, `mutex-contended`, one task per session, no hold, medians
/// of 3 rounds against a JIT-warmed Curator 5.4 in the same run), the default ran at 1.56x
/// and 1.60x the per-waiter watch with 2 and 4 sessions per lock (its mirror) and at
/// 1.01-1.05x from 8 to 128 (from 13 sessions on, the directory counts as crowded and it
/// waits as the per-waiter watch does); with the listing before its turn, the default ran at
/// 1.74x Curator's rate with 8 sessions, 2.01x with 16 and 2.03x with 32 in one sitting, and
/// at 1.68x, 1.77x and 1.61x in another (1.68x and 1.86x at 64 and 128); the sweep's tables
/// and commands are in `benches/README.md`. With 4 sessions, the mirror also ran
/// the read-write lock at 2.3-3.0x and the semaphore (3 leases) at 1.5-1.6x Curator's rate
/// (1.85-2.0x with
/// [`InterProcessSemaphore::pipelined_admission`](crate::InterProcessSemaphore::pipelined_admission)).
/// Choose `PerWaiterWatch` to wait as Curator does everywhere (with the listing before its
/// turn described above, which Curator's waiter does not send).
///
/// A mirror lives while some handle of the session uses the directory, and 2 s after the
/// last one goes, so that a recipe made afresh for every acquire (a new latch per term, say)
/// finds it still running instead of paying one `addWatch` and one listing each time; in
/// those 2 s the session still hears every change in the directory.
///
/// # Safety
/// A mirror decides only as a listing would: its watch is added before its listing (events
/// that arrive before the listing's reply are replayed on it); a disconnection invalidates it
/// until the watch is added again and the directory listed again; a waiter decides only once
/// its own node is in the mirror (every change ordered before its create has then been
/// applied); and when its node came in by an event, the creates counted since the listing must
/// equal the node's sequence number + 1 (a server sends no event for a node the session may not
/// read, and on 3.6-3.8 a one-shot watch of the same session on the directory silences create
/// events: a missed create fails this count, and the directory is listed again). A waiter that
/// waits behind one predecessor for a whole session timeout checks it with one unwatched
/// `exists` (a node the session may not read sends no deletion event either). Do not set a
/// watched read on a mutex's directory through [`Framework::zk_client`](crate::Framework::zk_client)
/// of a framework that mirrors it: it costs the mirror a listing per acquire.
///
/// The mirror is used only where it is known to be exact: an Apache ZooKeeper 3.6-3.9
/// server, recognised on each new session, that accepted the watch. On ZooKeeper 3.5, when
/// the server refuses the watch (a server configured with the optimized watch manager), or
/// while the server is not known yet, acquires wait the classic way. With the mirror on, the
/// uncontended fast path's watch on the directory is not used (a one-shot watch on the
/// directory beside the recursive one would silence its create events on ZooKeeper 3.6-3.8);
/// the mirror takes an uncontended lock with the create alone too.
///
/// ```
/// use zk_recipes::{Framework, WaitStrategy};
///
/// let framework = Framework::builder("127.0.0.1:2181")
///     .wait_strategy(WaitStrategy::Mirror)
///     .build()
///     .expect("valid configuration");
/// # drop(framework);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WaitStrategy {
    /// Each waiter lists the directory and watches the node ahead of it (Curator's way).
    PerWaiterWatch,
    /// Each session keeps one mirror of each lock directory it uses, and waiters decide
    /// from it (the default).
    #[default]
    Mirror,
}
