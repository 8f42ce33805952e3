//! Guides: moving from Curator, using locks safely, securing them, and what the crate traces.
//!
//! These modules hold documentation only.
//!
//! | guide | read it when |
//! | --- | --- |
//! | [`curator_migration`] | you are moving a Curator (Java) service, class by class, or mixing both on the same locks |
//! | [`safety`] | a lock guards something that must not happen twice: what `lost()` promises, timeouts, fencing tokens |
//! | [`security`] | other clients share the ensemble: authentication (digest, SASL), ACLs and TLS |
//! | [`observability`] | you want to see what the recipes do: span and field names, metrics, background errors |
//! | [`server_versions`] | your servers are older than 3.6, or configured without persistent watches: which recipe uses which server feature, and what it does without |

#[doc = include_str!("docs/curator-migration.md")]
pub mod curator_migration {}

#[doc = include_str!("docs/safety.md")]
pub mod safety {}

#[doc = include_str!("docs/security.md")]
pub mod security {}

#[doc = include_str!("docs/observability.md")]
pub mod observability {}

#[doc = include_str!("docs/server-versions.md")]
pub mod server_versions {}
