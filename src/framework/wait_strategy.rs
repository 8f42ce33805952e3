//! How a mutex waiter learns that the node ahead of it is gone.

/// How a waiting mutex learns that the lock came its way: a watch per waiter on the node
/// ahead of it (Curator's way, the default), or one mirror of the lock directory per session.
///
/// With [`Mirror`](WaitStrategy::Mirror), each session keeps, for each mutex directory it
/// uses, one persistent recursive watch on the directory and one listing of it, shared by
/// every handle and waiter of the session, kept while any of them is alive and added again
/// after every reconnect. A waiter then decides from the mirror instead of listing the
/// directory and watching its predecessor: a contended acquire-release cycle costs the create
/// and the delete (two requests instead of four or five), and a handoff costs no request
/// whatever the length of the queue. The price is on the server: every create and delete in
/// the directory is sent to every session that mirrors it, the acting one included (see
/// the lock module's "Waiting on a mirror" for the cost model and the crossover).
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
    /// Each waiter lists the directory and watches the node ahead of it (Curator's way; the
    /// default).
    #[default]
    PerWaiterWatch,
    /// Each session keeps one mirror of each mutex directory it uses, and waiters decide
    /// from it.
    Mirror,
}
