//! A mirror shared by everyone on one session: one host and one driver task per (session,
//! key), kept while some handle holds it and [`LINGER`] after the last one goes, so that a
//! recipe made afresh for each use (a new latch per term, say) finds it still running instead
//! of paying one `addWatch` and one listing each time.

use std::any::Any;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::AbortHandle;

use crate::framework::Session;
use crate::sync::Mutex;

/// How long a shared mirror outlives its last handle.
pub(crate) const LINGER: Duration = Duration::from_secs(2);

/// A handle on a session's shared mirror; its task stops [`LINGER`] after the last handle is
/// dropped, unless a new handle comes first.
pub(crate) struct Shared<H: Send + Sync + 'static> {
    core: Arc<Core<H>>,
}

/// What the session's registry shares: the host, and its task (none when it has none), which
/// stops when this goes.
struct Core<H: Send + Sync + 'static> {
    host: Arc<H>,
    life: Arc<Life>,
    task: Option<AbortHandle>,
}

impl<H: Send + Sync + 'static> Drop for Core<H> {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// What the handles and the task share of the mirror's life.
#[derive(Default)]
struct Life {
    /// Handles alive.
    handles: AtomicUsize,
    /// While no handle is alive: the core itself, kept for [`LINGER`] by the task.
    keep: Mutex<Kept>,
    /// Told by the last handle's drop.
    unused: Notify,
    /// The mirror is let go as soon as its last handle goes, without lingering (see
    /// [`Shared::let_go_without_linger`]); a new handle clears it.
    hasty: AtomicBool,
}

#[derive(Default)]
struct Kept {
    core: Option<Arc<dyn Any + Send + Sync>>,
    /// The task is over: nothing is kept any more (it would never be let go).
    task_over: bool,
}

impl<H: Send + Sync + 'static> Shared<H> {
    /// The session's live mirror under `key` for which `usable` holds, or a new one: `start`
    /// makes its host and, if it is to run, the driver's future (spawned here, ended when the
    /// mirror is let go).
    pub(crate) fn get_or_start<F>(
        session: &Session,
        key: &str,
        usable: impl FnOnce(&H) -> bool,
        start: impl FnOnce() -> (Arc<H>, Option<F>),
    ) -> Shared<H>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let make = || {
            let (host, driver) = start();
            let life = Arc::new(Life::default());
            let task = driver.map(|driver| tokio::spawn(run(life.clone(), driver)).abort_handle());
            Arc::new(Core { host, life, task })
        };
        let core = session.shared.get_or_make(key, |core: &Core<H>| usable(&core.host), make);
        core.life.handles.fetch_add(1, Ordering::AcqRel);
        core.life.hasty.store(false, Ordering::Release);
        Shared { core }
    }

    /// The session's live mirror under `key`, if there is one for which `usable` holds (none
    /// is started).
    pub(crate) fn get(session: &Session, key: &str, usable: impl FnOnce(&H) -> bool) -> Option<Shared<H>> {
        let core = session.shared.get::<Core<H>>(key).filter(|core| usable(&core.host))?;
        core.life.handles.fetch_add(1, Ordering::AcqRel);
        core.life.hasty.store(false, Ordering::Release);
        Some(Shared { core })
    }

    /// Lets the mirror go as soon as its last handle goes, instead of [`LINGER`] later: for a
    /// mirror that costs more than it saves (a crowded lock directory, whose every create and
    /// delete the server sends to every session that mirrors it). A handle taken afterwards
    /// keeps it as usual.
    pub(crate) fn let_go_without_linger(&self) {
        self.core.life.hasty.store(true, Ordering::Release);
    }

    /// The mirror's host.
    pub(crate) fn host(&self) -> &Arc<H> {
        &self.core.host
    }
}

impl<H: Send + Sync + 'static> Drop for Shared<H> {
    /// The last handle hands the mirror to its task, which keeps it for [`LINGER`]; nothing
    /// here waits or spawns.
    fn drop(&mut self) {
        let life = &self.core.life;
        if life.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            let mut kept = life.keep.lock();
            if !kept.task_over && self.core.task.is_some() {
                kept.core = Some(self.core.clone() as Arc<dyn Any + Send + Sync>);
                life.unused.notify_one();
            }
        }
    }
}

impl<H: Send + Sync + 'static> std::fmt::Debug for Shared<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("handles", &self.core.life.handles.load(Ordering::Relaxed)).finish()
    }
}

/// The task: the driver, until it ends or the mirror is let go.
async fn run(life: Arc<Life>, driver: impl Future<Output = ()>) {
    tokio::select! {
        () = driver => {}
        () = linger(&life) => {}
    }
    // Last: letting the kept mirror go may stop this very task.
    let kept = {
        let mut kept = life.keep.lock();
        kept.task_over = true;
        kept.core.take()
    };
    drop(kept);
}

/// Keeps the mirror [`LINGER`] after its last handle went, then lets it go (which stops the
/// task, unless a handle came back meanwhile and holds it).
async fn linger(life: &Life) {
    loop {
        life.unused.notified().await;
        if !life.hasty.load(Ordering::Acquire) {
            tokio::time::sleep(LINGER).await;
        }
        // With a handle back, it holds the mirror; without, this lets it go.
        let kept = life.keep.lock().core.take();
        drop(kept);
    }
}
