//! Barriers (Curator's `recipes.barriers` package): [`DistributedBarrier`] holds workers until
//! its node is removed; [`DistributedDoubleBarrier`] starts a group together once enough
//! members have entered and lets them go together once all have left.

mod barrier;
mod double;

pub use self::barrier::DistributedBarrier;
pub use self::double::DistributedDoubleBarrier;

use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::framework::OneshotWatch;

/// Waits for `watch`'s event, until `deadline` if there is one. False when the deadline
/// passed. A watch that ended with its session counts as an event (the caller reads again);
/// a closed framework is an error.
async fn wake(watch: OneshotWatch, deadline: Option<Instant>) -> Result<bool> {
    let event = match deadline {
        None => watch.changed().await,
        Some(deadline) => match tokio::time::timeout_at(deadline, watch.changed()).await {
            Ok(event) => event,
            Err(_) => return Ok(false),
        },
    };
    match event {
        Err(Error::Closed) => Err(Error::Closed),
        _ => Ok(true),
    }
}
