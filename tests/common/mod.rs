//! Helpers shared by the integration tests (each test binary includes this with `mod common;`).

pub mod curator;
pub mod election;
pub mod fixtures;
pub mod timing;
