//! `TypedSharedValue`: a [`SharedValue`] whose bytes a [`Codec`] encodes (JSON by default).

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};

use super::value::SharedValue;
use super::version::VersionedValue;
use crate::error::{Error, Result};
use crate::framework::Framework;
use crate::modeled::{Codec, DecodeFailure, JsonCodec};

/// A value shared by a fleet, typed: a [`SharedValue`] (same node, same compare-and-set,
/// same following) whose bytes `C` encodes, JSON by default ([`JsonCodec`], as Curator's
/// `JacksonModelSerializer` writes it). The node is not compressed, as Curator's
/// `SharedValue` does not compress.
///
/// Bytes that do not decode (a peer with another version of the model) are an error of the
/// read ([`Error::CorruptData`], naming the version), and an item of
/// [`changes`](Self::changes), never the end of the stream: the next value that decodes is
/// read as usual.
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use serde::{Deserialize, Serialize};
/// use zk_recipes::TypedSharedValue;
///
/// #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
/// struct Limits { max_connections: u32 }
///
/// let limits = TypedSharedValue::new(&fw, "/config/limits", Limits { max_connections: 100 })?;
/// limits.start().await?;
/// let seen = limits.versioned_value()?;
/// let raised = Limits { max_connections: seen.value().max_connections * 2 };
/// if !limits.try_set(&seen, &raised).await? {
///     // someone else changed it first
/// }
/// # Ok(()) }
/// ```
pub struct TypedSharedValue<T, C = JsonCodec> {
    inner: SharedValue,
    codec: Arc<C>,
    model: std::marker::PhantomData<fn() -> T>,
}

impl<T, C> fmt::Debug for TypedSharedValue<T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedSharedValue").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl<T> TypedSharedValue<T, JsonCodec>
where
    JsonCodec: Codec<T>,
{
    /// A typed shared value at `path`, JSON-encoded, created with `seed` if the node does not
    /// exist. Does no I/O.
    ///
    /// # Errors
    /// As [`SharedValue::new`]; [`Error::InvalidArgument`] for a seed the codec refuses.
    pub fn new(framework: &Framework, path: &str, seed: T) -> Result<Self> {
        Self::with_codec(framework, path, seed, JsonCodec)
    }
}

impl<T, C: Codec<T>> TypedSharedValue<T, C> {
    /// A typed shared value at `path` encoded by `codec`.
    ///
    /// # Errors
    /// As [`SharedValue::new`]; [`Error::InvalidArgument`] for a seed the codec refuses.
    pub fn with_codec(framework: &Framework, path: &str, seed: T, codec: C) -> Result<Self> {
        let bytes = encode(&codec, &seed)?;
        Ok(TypedSharedValue {
            inner: SharedValue::new(framework, path, bytes)?,
            codec: Arc::new(codec),
            model: std::marker::PhantomData,
        })
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// As [`SharedValue::start`].
    ///
    /// # Errors
    /// As [`SharedValue::start`].
    ///
    /// # Cancel safety
    /// As [`SharedValue::start`].
    pub async fn start(&self) -> Result<()> {
        self.inner.start().await
    }

    /// Stops following the node (the same as dropping the value).
    pub fn close(&self) {
        self.inner.close();
    }

    /// The current value.
    ///
    /// # Errors
    /// [`Error::CorruptData`] when the node's current bytes do not decode.
    pub fn value(&self) -> Result<T> {
        self.versioned_value().map(VersionedValue::into_value)
    }

    /// The current value with the version it was read at, for [`try_set`](Self::try_set).
    ///
    /// # Errors
    /// [`Error::CorruptData`] when the node's current bytes do not decode.
    pub fn versioned_value(&self) -> Result<VersionedValue<T>> {
        let raw = self.inner.versioned_value();
        let value = decode(&*self.codec, self.inner.path(), &raw).map_err(|failure| Error::CorruptData {
            path: failure.path,
            expected: self.codec.name(),
            reason: format!("version {}: {}", failure.version, failure.error),
        })?;
        Ok(raw.map(|_| value))
    }

    /// Writes `value` whatever the node holds (Curator's `setValue`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a value the codec refuses; as [`SharedValue::set`].
    ///
    /// # Cancel safety
    /// A cancelled write may still happen on the server.
    pub async fn set(&self, value: &T) -> Result<()> {
        self.inner.set(&encode(&*self.codec, value)?).await
    }

    /// Writes `value` only if the node is still at the version `previous` was read at
    /// (Curator's `trySetValue`): true when written; false when the node moved on.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a value the codec refuses; as [`SharedValue::try_set`].
    ///
    /// # Cancel safety
    /// A cancelled write may still happen on the server.
    pub async fn try_set(&self, previous: &VersionedValue<T>, value: &T) -> Result<bool> {
        let bytes = encode(&*self.codec, value)?;
        let raw = self.inner.versioned_value();
        if raw.zxid() != previous.zxid() || raw.version() != previous.version() {
            return Ok(false);
        }
        self.inner.try_set(&raw, &bytes).await
    }

    /// Every new value from now on, decoded: a value that does not decode is an `Err` item
    /// (path, version, error), and the stream goes on. It ends when the value is dropped.
    pub fn changes(&self) -> TypedSharedValueChanges<T>
    where
        T: Send + 'static,
    {
        let (codec, path) = (Arc::clone(&self.codec), self.inner.path().to_owned());
        let inner = self.inner.changes().map(move |raw| decode(&*codec, &path, &raw).map(|value| raw.map(|_| value)));
        TypedSharedValueChanges { inner: inner.boxed() }
    }
}

fn encode<T, C: Codec<T>>(codec: &C, value: &T) -> Result<Vec<u8>> {
    codec.encode(value).map_err(|e| Error::invalid_argument("value", format!("cannot encode: {e}")))
}

fn decode<T, C: Codec<T> + ?Sized>(
    codec: &C,
    path: &str,
    raw: &VersionedValue<Vec<u8>>,
) -> std::result::Result<T, DecodeFailure> {
    codec.decode(raw.value()).map_err(|e| DecodeFailure::new(path, raw.version(), raw.zxid(), e.to_string()))
}

/// The decoded values of a [`TypedSharedValue`] as they change.
#[must_use = "streams do nothing unless polled"]
pub struct TypedSharedValueChanges<T> {
    inner: BoxStream<'static, std::result::Result<VersionedValue<T>, DecodeFailure>>,
}

impl<T> fmt::Debug for TypedSharedValueChanges<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedSharedValueChanges").finish_non_exhaustive()
    }
}

impl<T> Stream for TypedSharedValueChanges<T> {
    type Item = std::result::Result<VersionedValue<T>, DecodeFailure>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}
