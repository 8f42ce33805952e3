//! A lock handle's place for its session's mirror of the lock directory: which mirror an
//! attempt waits on, none while the directory is crowded (until it calms down), and none for a
//! handle's first attempt unless one runs already.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use zookeeper_client::SessionState;

use super::dir_mirror::DirMirror;
use super::mirror_wait::{Run, CALM};
use crate::framework::{Framework, Session};
use crate::sync::Mutex;

/// A handle's place for its session's mirror of one directory, shared by the handle's clones
/// and replaced when the session changes. It does not keep the mirror: the attempts and the
/// holds that use it do (and the session's registry for a while after the last goes), so a
/// handle kept idle (one of many, per entity) holds no watch on the server.
#[derive(Debug, Default)]
pub(crate) struct MirrorSlot {
    slot: Mutex<Slot>,
    /// The handle has made an attempt already (see [`MirrorSlot::for_attempt`]).
    attempted: AtomicBool,
}

#[derive(Debug, Default)]
enum Slot {
    #[default]
    Empty,
    Mirror(Weak<DirMirror>),
    /// The directory is crowded: the handle waits the classic way (holding no mirror, so the
    /// session stops mirroring once its other handles do too) until [`CALM_LISTINGS`]
    /// listings in a row show it calm (so that the tail of a burst does not start mirrors
    /// that the next burst stops again); `calm` counts them.
    Crowded {
        calm: u32,
    },
}

/// Calm listings in a row after which a crowded directory is mirrored again.
const CALM_LISTINGS: u32 = 3;

impl MirrorSlot {
    /// A wait found the directory crowded (see `DirHost::crowded`): this handle waits the
    /// classic way from now on, and lets its mirror go, at once once no other handle of the
    /// session uses it (lingering, it would go on hearing every create and delete of the
    /// crowd).
    pub(crate) fn crowded(&self) {
        let previous = std::mem::replace(&mut *self.slot.lock(), Slot::Crowded { calm: 0 });
        if let Some(mirror) = match previous {
            Slot::Mirror(mirror) => mirror.upgrade(),
            _ => None,
        } {
            tracing::debug!(dir = %mirror.dir(), "the lock directory is crowded: waiting the classic way");
            mirror.let_go_without_linger();
        }
    }

    /// A classic wait listed `children` children: a crowded directory that has calmed down
    /// (listed at most [`CALM`] children [`CALM_LISTINGS`] times in a row) is mirrored again
    /// by the next attempt.
    pub(crate) fn listed(&self, children: usize) {
        let mut slot = self.slot.lock();
        if let Slot::Crowded { calm } = &mut *slot {
            *calm = if children <= CALM { *calm + 1 } else { 0 };
            if *calm >= CALM_LISTINGS {
                *slot = Slot::Empty;
            }
        }
    }

    /// Whether a mirror may serve this session at all: its server known to keep it exact
    /// (Apache ZooKeeper 3.6+, the watch not refused), not a read-only connection.
    fn servable(framework: &Framework, session: &Session) -> bool {
        let known = framework.server_features_now();
        let exact = known.is_some_and(|f| f.persistent_watches && f.exact_child_count);
        let read_only = session.client.state() == SessionState::ConnectedReadOnly;
        exact && !read_only && !framework.server_refuses_persistent_watches()
    }

    /// The mirror an attempt of this handle starts with: from the handle's second attempt on,
    /// the session's mirror of `dir`, started if none runs ([`for_session`](Self::for_session));
    /// at its first, only one that runs already (this handle's, another handle's, or one
    /// lingering after its last use). A lock used once (one of many, per entity) then costs no
    /// mirror at all: its acquire lists the directory with its create, and starts the mirror
    /// only when it must wait.
    pub(crate) fn for_attempt(&self, framework: &Framework, session: &Session, dir: &str) -> Option<Arc<DirMirror>> {
        if self.attempted.swap(true, Ordering::Relaxed) {
            self.for_session(framework, session, dir)
        } else {
            self.running(framework, session, dir)
        }
    }

    /// The session's mirror of `dir` if one runs already; none is started.
    fn running(&self, framework: &Framework, session: &Session, dir: &str) -> Option<Arc<DirMirror>> {
        if !Self::servable(framework, session) {
            return None;
        }
        let mut slot = self.slot.lock();
        match &*slot {
            Slot::Crowded { .. } => None,
            Slot::Mirror(mirror) => match mirror.upgrade() {
                Some(mirror) if mirror.epoch() == session.epoch && mirror.run() == Run::Running => Some(mirror),
                _ => self.find_running(&mut slot, session, dir),
            },
            Slot::Empty => self.find_running(&mut slot, session, dir),
        }
    }

    /// The session's running mirror of `dir` from its registry, if there is one.
    fn find_running(&self, slot: &mut Slot, session: &Session, dir: &str) -> Option<Arc<DirMirror>> {
        let mirror = Arc::new(DirMirror::running(session, dir)?);
        *slot = Slot::Mirror(Arc::downgrade(&mirror));
        Some(mirror)
    }

    /// The session's mirror of `dir` (a full server path), started if none runs, when the
    /// session's server is known to keep it exact (see `servable`); `None` means the classic
    /// wait.
    pub(crate) fn for_session(&self, framework: &Framework, session: &Session, dir: &str) -> Option<Arc<DirMirror>> {
        if !Self::servable(framework, session) {
            return None;
        }
        let mut slot = self.slot.lock();
        match &*slot {
            Slot::Crowded { .. } => return None,
            Slot::Mirror(mirror) => match mirror.upgrade() {
                Some(mirror) if mirror.epoch() == session.epoch && mirror.run() != Run::Ended => {
                    return (mirror.run() == Run::Running).then_some(mirror);
                }
                _ => {}
            },
            Slot::Empty => {}
        }
        let mirror = DirMirror::for_session(framework, session, dir);
        *slot = Slot::Mirror(Arc::downgrade(&mirror));
        (mirror.run() == Run::Running).then_some(mirror)
    }
}
