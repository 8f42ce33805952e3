//! Typed nodes (Curator's `curator-x-async` modeled API, feature `serde`): a [`ZPath`]
//! template with named parameters, a [`ModelSpec`] (path, codec, create options), typed
//! operations ([`ModeledFramework`]) and a typed cache ([`ModeledCache`]) that keeps the last
//! value of each node that decoded.
//!
//! Values are JSON through serde by default ([`JsonCodec`]), byte for byte what Curator's
//! `JacksonModelSerializer` writes for the same record; any other encoding is a [`Codec`].

mod cache;
mod codec;
mod framework;
mod spec;
mod zpath;

pub use self::cache::{CachedModel, DecodeFailure, ModeledCache, ModeledCacheEvent, ModeledCacheEvents};
pub use self::codec::{Codec, CodecError, JsonCodec};
pub use self::framework::{ModeledFramework, ZNode};
pub use self::spec::ModelSpec;
pub use self::zpath::ZPath;
