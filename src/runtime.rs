//! The Tokio runtime a recipe's background task runs on: the caller's, taken when the recipe
//! starts (from a synchronous constructor too).

use tokio::runtime::Handle;

use crate::error::{Error, Result};

/// The caller's runtime, for `caller` (the method named in the refusal) to spawn its task on.
///
/// # Errors
/// [`Error::InvalidArgument`] outside a Tokio runtime.
pub(crate) fn current(caller: &'static str) -> Result<Handle> {
    Handle::try_current().map_err(|_| Error::invalid_argument(caller, "must be called inside a Tokio runtime"))
}
