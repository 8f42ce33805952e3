//! A shared value as read: the bytes (or count) with the node version and zxid it was read at.

/// A value with the node version it was read at (Curator's `VersionedValue`), the argument of
/// a compare-and-set. Only the recipe makes one, from what it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedValue<T> {
    pub(super) version: i32,
    pub(super) zxid: i64,
    pub(super) value: T,
}

impl<T> VersionedValue<T> {
    pub(crate) fn new(version: i32, zxid: i64, value: T) -> Self {
        VersionedValue { version, zxid, value }
    }

    /// The node's version (`stat.version`) when it held this value; -1 before the node was
    /// first read.
    pub fn version(&self) -> i32 {
        self.version
    }

    /// The transaction id of the write that made this value (`stat.mzxid`); -1 before the node
    /// was first read. Values are ordered by it: unlike the version, it never wraps.
    pub fn zxid(&self) -> i64 {
        self.zxid
    }

    /// The value.
    pub fn value(&self) -> &T {
        &self.value
    }

    /// The value, by value.
    pub fn into_value(self) -> T {
        self.value
    }

    pub(crate) fn map<U>(self, f: impl FnOnce(T) -> U) -> VersionedValue<U> {
        VersionedValue { version: self.version, zxid: self.zxid, value: f(self.value) }
    }
}
