//! Ensemble tracking and reconfiguration against a real ensemble whose members are replaced:
//! clients given only the original members follow the ensemble (new sessions on the new
//! members, sessions moved off removed members with their locks kept), and reconfiguration's
//! typed refusals.

use crate::common;

use std::time::Duration;

use common::fixtures::{bounded, eventually, init_tracing, unique_path, wait_for_event, within};
use futures::{FutureExt, StreamExt};
use zk_recipes::testing::{expire_session, four_letter_word, FaultProxy, MemberRole, ProxyMode, TestingCluster};
use zk_recipes::zk::CreateMode;
use zk_recipes::{
    ConnectionState, ConnectionStateErrorPolicy, CuratorCache, DistributedBarrier, Ensemble, Error, FastPathFallback,
    Framework, FrameworkBuilder, InterProcessMutex, InterProcessSemaphore, MutexGuard, ReconfigRefusal, SemaphoreLease,
    SessionFailurePolicy, StateSnapshot, WaitStrategy,
};

/// Session timeout of the clients that must keep their sessions through the replacement: a
/// session moves after a round trip (2/5) of `Suspended` (tried again every tenth), before
/// `SessionOnly`'s `Lost` (11/20 after the disconnect): 4.5 s to spare, for an election among
/// the new members on a loaded machine.
const SESSION: Duration = Duration::from_secs(30);

/// Bound of the whole test: an ensemble of up to 5 JVMs started on a small machine.
const LIMIT: Duration = Duration::from_secs(300);

/// Bound on a JVM or the ensemble doing one thing (a member added, a reconfiguration).
const STEP: Duration = Duration::from_secs(60);

/// The member whose `cons` output lists `session_id`.
async fn member_serving(cluster: &TestingCluster, session_id: i64) -> Option<usize> {
    let needle = format!("sid=0x{session_id:x}");
    for i in (0..cluster.len()).filter(|&i| cluster.is_running(i)) {
        let cons = four_letter_word(&cluster.server_connect_string(i), "cons", Duration::from_secs(2)).await;
        if cons.is_ok_and(|cons| cons.contains(&needle)) {
            return Some(i);
        }
    }
    None
}

/// Waits until `fw` tracks a configuration with `ids` as members.
async fn tracks(fw: &Framework, ids: &[u64]) -> Ensemble {
    let mut ensembles = fw.ensemble_watch();
    let seen = within(
        STEP,
        "the tracked ensemble",
        ensembles
            .wait_for(|e| e.as_ref().is_some_and(|e| e.members().iter().map(|m| m.id()).collect::<Vec<_>>() == ids)),
    )
    .await
    .expect("framework open");
    seen.clone().expect("a configuration")
}

/// Every state event of `stream` so far (without waiting).
fn drain(stream: &mut zk_recipes::ConnectionStateStream) -> Vec<StateSnapshot> {
    let mut seen = Vec::new();
    while let Some(Some(event)) = stream.next().now_or_never() {
        seen.push(event);
    }
    seen
}

#[tokio::test]
async fn clients_given_the_original_members_follow_their_replacement() {
    init_tracing();
    bounded(LIMIT, async {
        let mut cluster = TestingCluster::builder().dynamic_reconfig(true).start().await.unwrap();
        cluster.settle(STEP).await.unwrap();
        let original = cluster.connect_string();
        let (scheme, auth) = cluster.superuser_auth().expect("a dynamic ensemble has a superuser");
        // A: given two original members through proxies (so that the session killer can cut
        // it off) and the third directly (a client follows the members only when it was
        // given one member's own address; one given only proxies keeps them); C: given all
        // three directly.
        let mut proxies = Vec::new();
        for i in 0..2 {
            proxies.push(FaultProxy::start(&cluster.server_connect_string(i)).await.unwrap());
        }
        let mut proxied = proxies.iter().map(FaultProxy::connect_string).collect::<Vec<_>>();
        proxied.push(cluster.server_connect_string(2));
        let proxied = proxied.join(",");
        let start = |connect: &str| {
            Framework::builder(connect).session_timeout(SESSION).error_policy(ConnectionStateErrorPolicy::SessionOnly)
        };
        let a = start(&proxied).build().unwrap();
        let mut a_events = a.state_changes();
        a.start().await.unwrap();
        let c = start(&original).build().unwrap();
        let mut c_events = c.state_changes();
        c.start().await.unwrap();
        let admin = Framework::builder(&original).session_timeout(SESSION).auth(&scheme, &auth).start().await.unwrap();

        // Both track the configuration; reconfiguration is the superuser's.
        let first = tracks(&c, &[1, 2, 3]).await;
        tracks(&a, &[1, 2, 3]).await;
        assert_eq!(c.connect_string(), first.connect_string());
        let refused = c.reconfig().leaving(["1"]).send().await;
        assert!(
            matches!(refused, Err(Error::ReconfigRefused { refusal: ReconfigRefusal::NotAuthorized })),
            "{refused:?}"
        );
        let empty = c.reconfig().send().await;
        assert!(matches!(empty, Err(Error::InvalidArgument { .. })), "{empty:?}");
        let mixed = admin.reconfig().joining(["server.9=127.0.0.1:1:2;3"]).members(["server.1=x:1:2;3"]).send().await;
        assert!(matches!(mixed, Err(Error::InvalidArgument { .. })), "{mixed:?}");

        // Locks held by both.
        let a_path = unique_path("ensemble", "a");
        let c_path = unique_path("ensemble", "c");
        let a_mutex = InterProcessMutex::new(&a, &a_path).unwrap();
        let c_mutex = InterProcessMutex::new(&c, &c_path).unwrap();
        let a_guard = a_mutex.acquire().await.unwrap();
        let c_guard = c_mutex.acquire().await.unwrap();
        let c_session = c.snapshot().session_id;

        // The ensemble grows to 5; the clients learn it.
        let four = cluster.add_server(MemberRole::Participant).await.unwrap();
        let five = cluster.add_server(MemberRole::Participant).await.unwrap();
        let grown = tracks(&c, &[1, 2, 3, 4, 5]).await;
        tracks(&a, &[1, 2, 3, 4, 5]).await;
        // A change conditioned on a configuration that is no longer current is refused.
        let stale = admin.reconfig().leaving(["1"]).from_config(first.version()).send().await;
        assert!(matches!(stale, Err(Error::ReconfigRefused { refusal: ReconfigRefusal::ConfigChanged })), "{stale:?}");

        // A's session is expired (the killer cuts it off at its proxies, which stay cut):
        // its next session can only be opened on the members it tracks, which it was never
        // given.
        let a_first = a.snapshot();
        for proxy in &proxies {
            proxy.set_mode(ProxyMode::BlackHole);
            proxy.drop_connections();
        }
        let info = a.zk_client().unwrap().session().clone();
        expire_session(&proxies[0], &original, info).await.unwrap();
        proxies[0].set_mode(ProxyMode::BlackHole);
        proxies[0].drop_connections();
        let (lost, _) = wait_for_event(&mut a_events, ConnectionState::Lost, SESSION * 2).await;
        assert_eq!((lost.session_id, lost.epoch), (a_first.session_id, 1));
        within(SESSION, "A's guard told of its expired session", a_guard.lost()).await;
        let (back, _) = wait_for_event(&mut a_events, ConnectionState::Reconnected, SESSION * 2).await;
        assert_eq!(back.epoch, 2);
        assert_ne!(back.session_id, a_first.session_id);
        assert_eq!(a.connect_string(), grown.connect_string());
        // The lost hold goes (the mutex is reentrant: kept, it would make this task's next
        // acquire a nested hold of the lost one); the lock is taken again on the new session.
        drop(a_guard);
        let a_guard = a_mutex.acquire().await.unwrap();

        // The original members are removed (by a superuser on the new members: a member
        // that leaves may drop its clients before it answers) and stopped.
        let new_members = [cluster.server_connect_string(four), cluster.server_connect_string(five)].join(",");
        let remover =
            Framework::builder(&new_members).session_timeout(SESSION).auth(&scheme, &auth).start().await.unwrap();
        // The leader leaves too: the election that follows drops every client, often before
        // the answer is sent. Its outcome is then unknown to the sender, and the tracked
        // configuration tells.
        let shrunk = match remover.reconfig().leaving(["1", "2", "3"]).send().await {
            Ok(shrunk) => shrunk,
            Err(error) if error.is_connection_error() => {
                tracks(&remover, &[cluster.server_id(four) as u64, cluster.server_id(five) as u64]).await
            }
            Err(error) => panic!("removing the original members: {error}"),
        };
        let ids: Vec<u64> = shrunk.members().iter().map(|m| m.id()).collect();
        assert_eq!(ids, [cluster.server_id(four) as u64, cluster.server_id(five) as u64]);
        for i in 0..3 {
            cluster.stop(i).await.unwrap();
        }

        // C, whose client knows only the removed members, moves its session to the new ones:
        // same session (now served by a new member), no Lost, its lock kept.
        let moved = within(SESSION, "C reconnected on the new members", async {
            let mut states = c.state_watch();
            loop {
                let snapshot = *states.borrow_and_update();
                if snapshot.state == ConnectionState::Lost
                    || snapshot.state.is_connected()
                        && member_serving(&cluster, c_session).await.is_some_and(|i| i == four || i == five)
                {
                    return snapshot;
                }
                let _ = tokio::time::timeout(Duration::from_millis(200), states.changed()).await;
            }
        })
        .await;
        assert_eq!((moved.state, moved.session_id, moved.epoch), (ConnectionState::Reconnected, c_session, 1));
        assert!(c_guard.is_held());
        assert!(c_guard.lost().now_or_never().is_none(), "C's guard reported its lock lost");
        c.create(&format!("{c_path}-alive")).mode(CreateMode::Ephemeral).await.unwrap();
        // A (on the new members since its new session) keeps its lock too.
        a.create(&format!("{a_path}-alive")).mode(CreateMode::Ephemeral).await.unwrap();
        assert!(a_guard.is_held());
        assert!(a_guard.lost().now_or_never().is_none(), "A's guard reported its lock lost");

        // Another framework on the new members cannot take either lock.
        let b = Framework::builder(&new_members).session_timeout(SESSION).start().await.unwrap();
        for path in [&a_path, &c_path] {
            let taken = InterProcessMutex::new(&b, path).unwrap().try_acquire().await.unwrap();
            assert!(taken.is_none(), "{path} taken while its holder's session lives");
        }

        // No Lost for a session the ensemble holds: C none, A only the expired one.
        let c_seen = drain(&mut c_events);
        assert!(c_seen.iter().all(|e| e.state != ConnectionState::Lost && e.epoch == 1), "{c_seen:?}");
        let a_seen = drain(&mut a_events);
        assert!(a_seen.iter().all(|e| e.state != ConnectionState::Lost && e.epoch == 2), "{a_seen:?}");

        c_guard.release().await.unwrap();
        a_guard.release().await.unwrap();
        let taken = InterProcessMutex::new(&b, &c_path).unwrap().try_acquire().await.unwrap();
        assert!(taken.is_some(), "the released lock is free");
        drop(taken);
        for fw in [&a, &b, &c, &admin, &remover] {
            fw.close().await;
        }
    })
    .await;
}

#[tokio::test]
async fn an_ensemble_without_dynamic_reconfiguration_refuses_it() {
    bounded(LIMIT, async {
        let cluster = TestingCluster::start().await.unwrap();
        let fw = Framework::builder(&cluster.connect_string()).session_timeout(SESSION).start().await.unwrap();
        let refused = fw.reconfig().leaving(["3"]).send().await;
        assert!(matches!(refused, Err(Error::ReconfigRefused { refusal: ReconfigRefusal::Disabled })), "{refused:?}");
        // Its members' client ports are not in the configuration: the configured connect
        // string stays in use.
        assert_eq!(fw.connect_string(), cluster.connect_string());
        fw.close().await;
    })
    .await;
}

/// A session the framework moved to the ensemble's current members lives on with its new
/// client, while the client it left, cut off from every server it knows, gives the session up
/// by itself (7/5 of the session timeout after it last heard from a server) and answers every
/// request still queued on it with `SessionExpired`. A lock released while the client was cut
/// off queued its delete there: that answer is no proof the node went with its session. The
/// delete must go through the session's new client; taken as done, it left the node in place
/// for as long as the session lives, and every later contender queued behind it. Waiters
/// watching the node ahead of them through the old client look again through the new one, in
/// their place in the queue (they used to hear nothing until the old client gave up, and then
/// queued again at the back); a one-shot watch set through it ends at once with
/// `ConnectionLoss` (it used to end at that moment with `SessionExpired`), so a barrier's
/// waiter reads again through the new client.
#[tokio::test]
async fn locks_of_a_moved_session_are_released_and_waited_for_through_its_new_client() {
    init_tracing();
    bounded(LIMIT, async {
        const SESSION: Duration = MOVED_SESSION;
        let mut moving = Moving::start(TestingCluster::builder()).await;
        let fw = moving.moving_client(Framework::builder).await;
        let observer = moving.fourth_member_client().await;

        let path = unique_path("ensemble", "moved-release");
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let guard = mutex.acquire().await.unwrap();
        let node = guard.lock_path().to_owned();
        // A second lock, whose guard is dropped instead: its delete goes to the reaper.
        let dropped_path = unique_path("ensemble", "moved-drop");
        let dropped = InterProcessMutex::new(&fw, &dropped_path).unwrap().acquire().await.unwrap();
        let dropped_node = dropped.lock_path().to_owned();
        // Two more locks, held elsewhere, each with a waiter queued behind it: one waiting on
        // its session's mirror (the default), one watching the node ahead (Curator's way).
        let classic =
            moving.moving_client(|given| Framework::builder(given).wait_strategy(WaitStrategy::PerWaiterWatch)).await;
        let queues = [
            ("on the mirror", queue_behind(&observer, &fw, "moved-wait-mirror").await),
            ("watching the node ahead", queue_behind(&observer, &classic, "moved-wait-classic").await),
        ];
        let (lease_held, lease_waiter, lease_node) = lease_behind(&observer, &classic, "moved-wait-lease").await;
        // A one-shot watch, and a barrier's waiter (which waits on one).
        let watched = unique_path("ensemble", "moved-watch");
        fw.create(&watched).await.unwrap();
        let (_, watch) = fw.exists(&watched).watch().await.unwrap();
        let watch = tokio::spawn(watch.changed());
        let barrier_path = unique_path("ensemble", "moved-barrier");
        // Set through the waiter's own session, so that its first read sees it.
        let barrier = DistributedBarrier::new(&fw, &barrier_path).unwrap();
        barrier.set().await.unwrap();
        let barrier_waiter = tokio::spawn(async move { barrier.wait().await });
        // Waiting, with its watch set (a read still queued on the old client when it is cut
        // off waits for that client to give up: a request in flight may still be applied).
        eventually(SESSION, "the barrier's watch set", || async {
            for i in (0..moving.cluster.len()).filter(|&i| moving.cluster.is_running(i)) {
                let wchp =
                    four_letter_word(&moving.cluster.server_connect_string(i), "wchp", Duration::from_secs(2)).await;
                if wchp.is_ok_and(|w| w.lines().any(|l| l.trim() == barrier_path)) {
                    return Ok(());
                }
            }
            Err("no watch on the barrier yet".to_owned())
        })
        .await;
        // A mutex taken alone until the create alone takes it (the fast path): its next acquire
        // may do the same, trusting the directory watch armed before its last delete.
        let fast_path = unique_path("ensemble", "moved-fast");
        // A persistent directory: an empty lock directory is a container the servers may reap
        // between two holds, and its watch firing rightly turns the fast path down.
        classic.create(&fast_path).await.unwrap();
        let fast = InterProcessMutex::new(&classic, &fast_path).unwrap();
        for _ in 0..3 {
            fast.acquire().await.unwrap().release().await.unwrap();
        }
        let fast_before = fast.fast_path_stats();
        assert_eq!(fast_before.hits, 1, "the fast path in use before the move: {fast_before:?}");
        let classic_session = classic.snapshot().session_id;
        let mut classic_events = classic.state_changes();
        let session = fw.snapshot().session_id;
        let mut events = fw.state_changes();

        // Cut off. The guard is told at `Suspended`, and its release queues the delete on the
        // cut-off client.
        moving.cut_off().await;
        wait_for_event(&mut events, ConnectionState::Suspended, SESSION).await;
        within(SESSION, "the guard told of the suspended connection", guard.lost()).await;
        let release = tokio::spawn(guard.release());
        drop(dropped);

        // The session moves: same session, same epoch, on the members the ensemble names.
        let (back, seen) = wait_for_event(&mut events, ConnectionState::Reconnected, SESSION * 2).await;
        assert_eq!((back.session_id, back.epoch), (session, 1), "{seen:?}");
        let (back, seen) = wait_for_event(&mut classic_events, ConnectionState::Reconnected, SESSION * 2).await;
        assert_eq!((back.session_id, back.epoch), (classic_session, 1), "{seen:?}");
        // Meanwhile someone else deletes the empty directory, makes it again and takes the lock
        // there; its child count starts over, and two more creates bring the next suffix to
        // the one this handle's create alone expects (its last hold's plus one).
        observer.sync(&fast_path).await.unwrap();
        let _ = observer.delete(&fast_path).await; // unless the server reaped it already
        let other = InterProcessMutex::new(&observer, &fast_path).unwrap().acquire().await.unwrap();
        for i in 0..2 {
            let filler = format!("{fast_path}/filler-{i}");
            observer.create(&filler).await.unwrap();
            observer.delete(&filler).await.unwrap();
        }
        // The watch armed before the last delete was the old client's, which hears nothing
        // now: it proves nothing, and the create alone does not take the lock (it used to,
        // while another process held it).
        let taken = fast.try_acquire().await.unwrap();
        assert!(taken.is_none(), "the lock taken by the create alone while {} holds it", other.lock_path());
        drop(taken);
        other.release().await.unwrap();
        let fast_after = fast.fast_path_stats();
        assert_eq!(fast_after.hits, fast_before.hits, "{fast_before:?} -> {fast_after:?}");
        assert_eq!(
            fast_after.fallbacks_for(FastPathFallback::WatchFired),
            fast_before.fallbacks_for(FastPathFallback::WatchFired) + 1,
            "{fast_before:?} -> {fast_after:?}"
        );
        // The waiters' watches were set through the clients the sessions left, which give up
        // only at 7/5 of the session timeout from the cut: each waiter looks again through
        // its session's new client, keeps its place in the queue, and takes the lock as soon
        // as it is free.
        // The watch was set through the old client: it ends at once, telling the caller to read
        // again (it used to wait for the old client to give up, and then said `SessionExpired`
        // of a session that lives on).
        let ended = within(SESSION / 2, "the one-shot watch ends", watch).await.expect("the watch task");
        assert!(matches!(ended, Err(Error::ZooKeeper(zk_recipes::zk::Error::ConnectionLoss))), "{ended:?}");
        // The barrier's waiter reads again through the new client and sees the barrier go.
        DistributedBarrier::new(&observer, &barrier_path).unwrap().remove().await.unwrap();
        let waited = within(SESSION / 2, "the barrier's waiter", barrier_waiter).await;
        waited.expect("the waiter task").expect("the barrier's wait");
        for (how, (held_elsewhere, waiter, waiting_node)) in queues {
            held_elsewhere.release().await.unwrap();
            let taken = within(SESSION / 2, &format!("the waiter {how} takes the freed lock"), waiter).await;
            let taken = taken.expect("the waiter task").expect("the waiter's acquire");
            assert_eq!(taken.lock_path(), waiting_node, "the waiter {how} kept its node");
            taken.release().await.unwrap();
        }
        // A semaphore's waiter watches the leases: the same, through the new client.
        lease_held.release().await.unwrap();
        let lease = within(SESSION / 2, "the semaphore's waiter takes the freed lease", lease_waiter).await;
        let lease = lease.expect("the waiter task").expect("the waiter's acquire");
        assert_eq!(lease.lease_path(), lease_node, "the semaphore's waiter kept its lease node");
        lease.release().await.unwrap();
        // The release ends once the client it queued on gives up (7/5 of the timeout), and
        // the node is gone while its session lives on.
        within(SESSION * 3, "the release", release).await.expect("the release task").expect("the release");
        assert!(fw.exists(&node).await.unwrap().is_none(), "{node} left in place by a released guard");
        let now = fw.snapshot();
        assert_eq!((now.session_id, now.epoch, now.state.is_connected()), (session, 1, true));
        let taken = InterProcessMutex::new(&observer, &path).unwrap().try_acquire().await.unwrap();
        assert!(taken.is_some(), "the released lock is free");
        drop(taken);
        // The dropped guard's delete, queued on the same client, goes through the new one too.
        eventually(SESSION, "the dropped guard's node deleted", || async {
            match observer.exists(&dropped_node).await.unwrap() {
                None => Ok(()),
                Some(_) => Err(format!("{dropped_node} left in place by a dropped guard")),
            }
        })
        .await;
        // The ensemble changes again: the moved sessions' frameworks hear of it (their
        // configuration watches were the old clients', and are set again through the new ones).
        let five = moving.cluster.add_server(MemberRole::Participant).await.unwrap();
        let ids: Vec<u64> = (0..=five).map(|i| moving.cluster.server_id(i) as u64).collect();
        tracks(&fw, &ids).await;
        tracks(&classic, &ids).await;
        for fw in [&fw, &classic, &observer] {
            fw.close().await;
        }
    })
    .await;
}

/// A cache on servers without persistent watches (the watch manager ZooKeeper 3.5 has, as far
/// as `addWatch` goes) emulates its watch with one-shot watches. When its session moves to
/// another client after a reconfiguration, those watches stay on the client it left, which
/// hears nothing more: the cache sets them again through the new client at once and follows
/// changes made after the move (it used to stay stale until the old client gave up, and then
/// waited for a new session that never came). Operations queued on the old client while it
/// was cut off: a read goes again through the new client at the move (it used to wait for the
/// old client to give up), and a write under `SessionFailurePolicy::Fail` goes through once the
/// old client gives up (it used to fail with `SessionExpired` for a session that lives on).
#[tokio::test]
async fn a_moved_sessions_cache_and_queued_operations_go_through_its_new_client() {
    init_tracing();
    bounded(LIMIT, async {
        const SESSION: Duration = MOVED_SESSION;
        let without_persistent_watches = TestingCluster::builder()
            .system_property("zookeeper.watchManagerName", "org.apache.zookeeper.server.watch.WatchManagerOptimized");
        let mut moving = Moving::start(without_persistent_watches).await;
        let fw = moving.moving_client(Framework::builder).await;
        let strict = moving
            .moving_client(|given| Framework::builder(given).session_failure_policy(SessionFailurePolicy::Fail))
            .await;
        let writer = moving.fourth_member_client().await;

        let root = unique_path("ensemble", "moved-cache");
        writer.create(&root).await.unwrap();
        writer.create(&format!("{root}/a")).data(b"0").await.unwrap();
        let written = format!("{root}/written");
        writer.create(&written).data(b"0").await.unwrap();
        let cache = CuratorCache::builder(&fw, &root).build().unwrap();
        let mut events = cache.events();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        assert!(cache.get(&format!("{root}/a")).is_some());
        let session = fw.snapshot().session_id;
        let mut states = fw.state_changes();
        let strict_session = strict.snapshot().session_id;
        let mut strict_states = strict.state_changes();

        // Cut off: the sessions move to the members the ensemble names.
        moving.cut_off().await;
        wait_for_event(&mut states, ConnectionState::Suspended, SESSION).await;
        wait_for_event(&mut strict_states, ConnectionState::Suspended, SESSION).await;
        // Queued on the clients that are cut off.
        let read = tokio::spawn({
            let (fw, a) = (fw.clone(), format!("{root}/a"));
            async move { fw.get_data(&a).await }
        });
        let write = tokio::spawn({
            let (strict, written) = (strict.clone(), written.clone());
            async move { strict.set_data(&written, b"1").await }
        });
        let (back, seen) = wait_for_event(&mut states, ConnectionState::Reconnected, SESSION * 2).await;
        assert_eq!((back.session_id, back.epoch), (session, 1), "{seen:?}");
        let (back, seen) = wait_for_event(&mut strict_states, ConnectionState::Reconnected, SESSION * 2).await;
        assert_eq!((back.session_id, back.epoch), (strict_session, 1), "{seen:?}");
        let (data, _) = within(SESSION / 2, "the read queued on the old client", read)
            .await
            .expect("the read task")
            .expect("the read, through the new client");
        assert_eq!(data, b"0");

        // A change and a new node after the move reach the cache well before the old client
        // gives up (7/5 of the session timeout after the cut, at least one timeout from now).
        let a = format!("{root}/a");
        writer.set_data(&a, b"1").await.unwrap();
        writer.create(&format!("{root}/b")).await.unwrap();
        within(SESSION / 2, "the change and the new node after the move", async {
            while !(cache.get(&a).is_some_and(|d| d.stat().version == 1) && cache.get(&format!("{root}/b")).is_some()) {
                events.next().await.expect("the cache's events");
            }
        })
        .await;
        // The write waits for the old client to give up (7/5 of the session timeout after the
        // cut), then goes through the new one: the session lives on, so it is not
        // `SessionExpired`, even under `Fail`.
        let wrote = within(SESSION * 2, "the write queued on the old client", write).await.expect("the write task");
        assert!(wrote.is_ok(), "{wrote:?}");
        assert_eq!(writer.get_data(&written).await.unwrap().0, b"1");
        // And once the old client has given up (its watches and reads end then), the cache
        // still follows the session on its new client.
        writer.set_data(&a, b"2").await.unwrap();
        within(SESSION / 2, "a change after the old client gave up", async {
            while !cache.get(&a).is_some_and(|d| d.stat().version == 2) {
                events.next().await.expect("the cache's events");
            }
        })
        .await;
        let now = fw.snapshot();
        assert_eq!((now.session_id, now.epoch, now.state.is_connected()), (session, 1, true));
        cache.close().await;
        for fw in [&fw, &strict, &writer] {
            fw.close().await;
        }
    })
    .await;
}

/// Session timeout of the clients whose sessions move: long enough for the move (2/5 of it
/// `Suspended`, then an attach through the current members) to finish well before the
/// framework's own `Lost`, on a loaded machine.
const MOVED_SESSION: Duration = Duration::from_secs(15);

/// A 3-member dynamic ensemble grown to four, and the connect string of clients whose sessions
/// move when cut off: they are given a follower's own address (a client follows the ensemble
/// only when it was given one member's address) and the other two original members through
/// proxies, so that they can be cut off from all three while the ensemble keeps its quorum;
/// the fourth member, which they were not given, is where their sessions move.
struct Moving {
    cluster: TestingCluster,
    proxies: Vec<FaultProxy>,
    direct: usize,
    given: String,
    four: usize,
    /// The server ids of the four members.
    ids: Vec<u64>,
}

impl Moving {
    async fn start(builder: zk_recipes::testing::TestingClusterBuilder) -> Moving {
        let mut cluster = builder.dynamic_reconfig(true).start().await.unwrap();
        cluster.settle(STEP).await.unwrap();
        let leader = cluster.leader().await.expect("a leader");
        let direct = (0..3).find(|&i| i != leader).expect("a follower");
        let mut proxies = Vec::new();
        for i in (0..3).filter(|&i| i != direct) {
            proxies.push(FaultProxy::start(&cluster.server_connect_string(i)).await.unwrap());
        }
        let mut given = proxies.iter().map(FaultProxy::connect_string).collect::<Vec<_>>();
        given.push(cluster.server_connect_string(direct));
        let four = cluster.add_server(MemberRole::Participant).await.unwrap();
        let ids = (0..4).map(|i| cluster.server_id(i) as u64).collect();
        Moving { cluster, proxies, direct, given: given.join(","), four, ids }
    }

    /// A framework given `given` (as `builder` makes it, with [`MOVED_SESSION`]), once it
    /// tracks the four members.
    async fn moving_client(&self, builder: impl FnOnce(&str) -> FrameworkBuilder) -> Framework {
        let fw = builder(&self.given).session_timeout(MOVED_SESSION).start().await.unwrap();
        tracks(&fw, &self.ids).await;
        fw
    }

    /// A framework on the fourth member alone: it is not cut off.
    async fn fourth_member_client(&self) -> Framework {
        Framework::builder(&self.cluster.server_connect_string(self.four))
            .session_timeout(MOVED_SESSION)
            .start()
            .await
            .unwrap()
    }

    /// Cuts the clients off: the proxies drop everything and the direct member stops (three of
    /// four keep the quorum). A session suspended for 2/5 of its timeout moves.
    async fn cut_off(&mut self) {
        for proxy in &self.proxies {
            proxy.set_mode(ProxyMode::BlackHole);
            proxy.drop_connections();
        }
        self.cluster.stop(self.direct).await.unwrap();
    }
}

/// A lock at a fresh path (named after `name`) held through `holder`, and a task of `waiter`
/// queued behind it: the holder's guard, the waiting task, and the path of the waiter's node.
async fn queue_behind(
    holder: &Framework,
    waiter: &Framework,
    name: &str,
) -> (MutexGuard, tokio::task::JoinHandle<zk_recipes::Result<MutexGuard>>, String) {
    let path = unique_path("ensemble", name);
    let held = InterProcessMutex::new(holder, &path).unwrap().acquire().await.unwrap();
    let queued = InterProcessMutex::new(waiter, &path).unwrap();
    let task = tokio::spawn(async move { queued.acquire().await });
    let node = waiting_node(holder, &path, held.lock_path()).await;
    (held, task, node)
}

/// A one-lease semaphore at a fresh path (named after `name`) whose lease is held through
/// `holder`, and a task of `waiter` queued for it: the holder's lease, the waiting task, and the
/// path of the waiter's lease node.
async fn lease_behind(
    holder: &Framework,
    waiter: &Framework,
    name: &str,
) -> (SemaphoreLease, tokio::task::JoinHandle<zk_recipes::Result<SemaphoreLease>>, String) {
    let path = unique_path("ensemble", name);
    let held = InterProcessSemaphore::new(holder, &path, 1).unwrap().acquire().await.unwrap();
    let queued = InterProcessSemaphore::new(waiter, &path, 1).unwrap();
    let task = tokio::spawn(async move { queued.acquire().await });
    let node = waiting_node(holder, &format!("{path}/leases"), held.lease_path()).await;
    (held, task, node)
}

/// The path of the one node in `dir` besides the held node `held`, once a waiter has made it.
async fn waiting_node(fw: &Framework, dir: &str, held: &str) -> String {
    eventually(Duration::from_secs(30), "the waiter queued", || async {
        let children = fw.get_children(dir).await.map_err(|e| e.to_string())?;
        let others: Vec<String> = children.into_iter().filter(|c| !held.ends_with(c.as_str())).collect();
        match &others[..] {
            [node] => Ok(format!("{dir}/{node}")),
            _ => Err(format!("{others:?}")),
        }
    })
    .await
}
