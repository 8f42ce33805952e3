//! Queues (Curator's `recipes.queue` package): [`SimpleDistributedQueue`], raw items as
//! persistent sequential `qn-` nodes under one path.
//!
//! ZooKeeper is no message broker, and Curator says so for every queue it offers: every item
//! is a node held in every server's memory, a node is at most the server's `jute.maxbuffer`
//! (1 MiB by default), and listing a parent with very many children can exceed that limit
//! itself. Keep queues short and items small.

mod simple;

pub use self::simple::SimpleDistributedQueue;
