// Interop test peer: drives real Apache Curator 5.x lock recipes from a line protocol on stdin.
//
// Used by the Rust integration tests (tests/common/curator.rs), which compile this file with
// javac and start it as `java -cp <dir>:<curator classpath> CuratorPeer <connect> <sessionMs>`.
//
// Protocol: one command per line on stdin, whitespace separated; one reply line per command on
// stdout, flushed. IDs are arbitrary tokens chosen by the caller. Every error reply is
// `error <KEY> <message>`, KEY being the command's first argument (or `-` when it has none).
//
//   mutex ID PATH                 -> ok            InterProcessMutex
//   semaphore ID PATH MAX         -> ok            InterProcessSemaphoreV2
//   semaphore_count ID PATH COUNT -> ok            InterProcessSemaphoreV2 sized by a started
//                                                  SharedCount(COUNT path, seed 1)
//   semmutex ID PATH              -> ok            InterProcessSemaphoreMutex
//   rwlock ID PATH                -> ok            InterProcessReadWriteLock; registers the halves
//                                                  as IDs `ID.read` and `ID.write`
//   revocable ID                  -> ok            makeRevocable (mutex / rw halves); when a revoke
//                                                  request arrives: async `revoke-requested ID`
//   revoke PATH                   -> ok            Revoker.attemptRevoke(client, PATH)
//   acquire ID [TIMEOUT_MS]       -> acquired ID | timeout ID | error ID msg
//   acquire_many ID N [TIMEOUT_MS]-> acquired ID | timeout ID | error ID msg   (semaphores)
//   release ID                    -> released ID | error ID msg
//   participants ID               -> participants ID <n> <node>...   (as getParticipantNodes
//                                    returns them: full paths for mutexes and rw halves, lease
//                                    node names for semaphores and semaphore mutexes; a
//                                    semaphore whose `leases` node does not exist has none)
//   lockpath ID                   -> lockpath ID <path>... | lockpath ID none
//   is_acquired ID                -> is_acquired ID true|false   (isAcquiredInThisProcess)
//   loop ID N LOGFILE HOLD_MS     -> loop-started ID; later async `loop-done ID <count>` or
//                                    `loop-error ID <msg>`
//   rwloop ID N LOGFILE HOLD_MS WRITE_PCT SEED
//                                 -> loop-started ID; like `loop` on the halves of rwlock ID,
//                                    each round taking ID.write with probability WRITE_PCT %
//                                    (java.util.Random(SEED)) and ID.read otherwise; the log
//                                    names the half (`enter java:ID.read ...`)
//   cache ID PATH                 -> cache ID initialized   (a CuratorCache on PATH, started; the
//                                    reply waits for its initialized())
//   cache_dump ID                 -> cache_dump ID <n> <path>:<version>:<hex data>...  (by path)
//   cache_close ID                -> cache_close ID
//   tree_write PATH N SEED        -> tree_write PATH <done>   (N random creates, set-datas and
//                                    deletes one or two levels below PATH, java.util.Random(SEED))
//   state                         -> state true|false   (ZookeeperClient.isConnected)
//   session                       -> session 0x<hex session id>
//   quit                          -> bye, then the process exits 0
//
// Leader election commands (LeaderLatch, LeaderSelector) are listed at the `Elections` class below;
// shared values, atomics, barriers and queues at the `Values` class; schema sets at the
// `Schemas` class.
//
// Asynchronous lines, interleaved with replies: `connection <STATE>`, `revoke-requested ID`,
// `loop-done ID N`, `loop-error ID msg`. Startup prints `ready` once connected.
//
// Threads: every ID has one worker thread (the two halves of an rwlock share one), and acquire,
// acquire_many, release, lockpath and loop run on it, in order. So InterProcessMutex's per-thread
// ownership and re-entrancy apply per ID, and a blocking acquire on one ID does not hold up the
// others. The other commands run directly on the stdin thread.
//
// End of stdin (the test process went away) closes the client and exits, like `quit`.

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Semaphore;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.CreateMode;

public final class CuratorPeer {
    private static final PrintStream OUT =
            new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
    private static final Object OUT_LOCK = new Object();

    private enum Kind {
        MUTEX,
        SEMAPHORE,
        SEMMUTEX
    }

    /** One recipe instance, addressed by its ID. */
    private static final class Handle {
        final String id;
        final String path;
        final Kind kind;
        final InterProcessMutex mutex;
        final InterProcessSemaphoreV2 semaphore;
        final InterProcessSemaphoreMutex semMutex;
        final ExecutorService worker;
        /** Semaphore leases, one entry per successful acquire, newest first. */
        final Deque<Collection<Lease>> leases = new ConcurrentLinkedDeque<>();

        Handle(String id, String path, Kind kind, InterProcessMutex mutex,
                InterProcessSemaphoreV2 semaphore, InterProcessSemaphoreMutex semMutex,
                ExecutorService worker) {
            this.id = id;
            this.path = path;
            this.kind = kind;
            this.mutex = mutex;
            this.semaphore = semaphore;
            this.semMutex = semMutex;
            this.worker = worker;
        }
    }

    private final CuratorFramework client;
    private final Map<String, Handle> handles = new ConcurrentHashMap<>();
    private final Elections elections;
    private final Caches caches;
    private final Discoveries discoveries;
    private final Groups groups;
    private final Values values;
    private final Typed typed;
    private final Schemas schemas;

    private CuratorPeer(CuratorFramework client) {
        this.client = client;
        this.elections = new Elections(client);
        this.caches = new Caches(client);
        this.discoveries = new Discoveries(client);
        this.groups = new Groups(client);
        this.values = new Values(client);
        this.typed = new Typed(client);
        this.schemas = new Schemas(client);
    }

    static void emit(String line) {
        synchronized (OUT_LOCK) {
            OUT.print(line);
            OUT.print('\n');
            OUT.flush();
        }
    }

    static String describe(Throwable e) {
        String msg = e.getClass().getSimpleName() + ": " + e.getMessage();
        return msg.replace('\r', ' ').replace('\n', ' ');
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: CuratorPeer <connect string> <session timeout ms>");
            System.exit(2);
        }
        String connect = args[0];
        int sessionMs = Integer.parseInt(args[1]);
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(sessionMs)
                .connectionTimeoutMs(Math.min(15_000, sessionMs))
                .retryPolicy(new ExponentialBackoffRetry(200, 10))
                .build();
        client.getConnectionStateListenable().addListener((c, state) -> emit("connection " + state));
        client.start();
        if (!client.blockUntilConnected(45, TimeUnit.SECONDS)) {
            emit("error - could not connect to " + connect);
            System.err.println("CuratorPeer: could not connect to " + connect);
            halt(client, 2);
        }
        emit("ready");
        new CuratorPeer(client).run();
    }

    private void run() throws Exception {
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] t = line.split("\\s+");
            String key = t.length > 1 ? t[1] : "-";
            try {
                if (!dispatch(t)) {
                    break;
                }
            } catch (Throwable e) {
                emit("error " + key + " " + describe(e));
            }
        }
        halt(client, 0);
    }

    /** Closes the client (bounded: it may be unreachable) and exits without shutdown hooks. */
    private static void halt(CuratorFramework client, int status) {
        Thread closer = new Thread(() -> {
            try {
                client.close();
            } catch (Throwable ignored) {
                // exiting anyway
            }
        });
        closer.setDaemon(true);
        closer.start();
        try {
            closer.join(3_000);
        } catch (InterruptedException ignored) {
            // exiting anyway
        }
        synchronized (OUT_LOCK) {
            OUT.flush();
        }
        System.err.flush();
        Runtime.getRuntime().halt(status);
    }

    private static void need(String[] t, int min, String usage) {
        if (t.length < min) {
            throw new IllegalArgumentException("usage: " + usage);
        }
    }

    private static ExecutorService newWorker(String name) {
        return Executors.newSingleThreadExecutor(r -> {
            Thread th = new Thread(r, "peer-" + name);
            th.setDaemon(true);
            return th;
        });
    }

    private void register(Handle h) {
        if (handles.putIfAbsent(h.id, h) != null) {
            throw new IllegalArgumentException("duplicate id " + h.id);
        }
    }

    private Handle handle(String id) {
        Handle h = handles.get(id);
        if (h == null) {
            throw new IllegalArgumentException("unknown id " + id);
        }
        return h;
    }

    /** Runs an ID operation on that ID's worker thread; errors become `error ID msg`. */
    private interface Op {
        void run() throws Exception;
    }

    private static void onWorker(Handle h, Op op) {
        h.worker.execute(() -> {
            try {
                op.run();
            } catch (Throwable e) {
                emit("error " + h.id + " " + describe(e));
            }
        });
    }

    private boolean dispatch(String[] t) throws Exception {
        if (elections.dispatch(t) || caches.dispatch(t) || values.dispatch(t) || discoveries.dispatch(t)
                || groups.dispatch(t) || typed.dispatch(t) || schemas.dispatch(t)) {
            return true;
        }
        switch (t[0]) {
            case "mutex": {
                need(t, 3, "mutex ID PATH");
                checkFree(t[1]);
                register(new Handle(t[1], t[2], Kind.MUTEX, new InterProcessMutex(client, t[2]),
                        null, null, newWorker(t[1])));
                emit("ok");
                return true;
            }
            case "semaphore": {
                need(t, 4, "semaphore ID PATH MAX");
                checkFree(t[1]);
                InterProcessSemaphoreV2 s =
                        new InterProcessSemaphoreV2(client, t[2], Integer.parseInt(t[3]));
                register(new Handle(t[1], t[2], Kind.SEMAPHORE, null, s, null, newWorker(t[1])));
                emit("ok");
                return true;
            }
            case "semaphore_count": {
                need(t, 4, "semaphore_count ID PATH COUNTPATH");
                checkFree(t[1]);
                org.apache.curator.framework.recipes.shared.SharedCount count =
                        new org.apache.curator.framework.recipes.shared.SharedCount(client, t[3], 1);
                count.start();
                InterProcessSemaphoreV2 s = new InterProcessSemaphoreV2(client, t[2], count);
                register(new Handle(t[1], t[2], Kind.SEMAPHORE, null, s, null, newWorker(t[1])));
                emit("ok");
                return true;
            }
            case "semmutex": {
                need(t, 3, "semmutex ID PATH");
                checkFree(t[1]);
                register(new Handle(t[1], t[2], Kind.SEMMUTEX, null, null,
                        new InterProcessSemaphoreMutex(client, t[2]), newWorker(t[1])));
                emit("ok");
                return true;
            }
            case "rwlock": {
                need(t, 3, "rwlock ID PATH");
                String read = t[1] + ".read";
                String write = t[1] + ".write";
                checkFree(read);
                checkFree(write);
                InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, t[2]);
                ExecutorService worker = newWorker(t[1]);
                register(new Handle(read, t[2], Kind.MUTEX, rw.readLock(), null, null, worker));
                register(new Handle(write, t[2], Kind.MUTEX, rw.writeLock(), null, null, worker));
                emit("ok");
                return true;
            }
            case "revocable": {
                need(t, 2, "revocable ID");
                Handle h = handle(t[1]);
                if (h.kind != Kind.MUTEX) {
                    throw new IllegalArgumentException(t[1] + " is not revocable (not a mutex)");
                }
                String id = h.id;
                h.mutex.makeRevocable(m -> emit("revoke-requested " + id));
                emit("ok");
                return true;
            }
            case "revoke": {
                need(t, 2, "revoke PATH");
                Revoker.attemptRevoke(client, t[1]);
                emit("ok");
                return true;
            }
            case "acquire": {
                need(t, 2, "acquire ID [TIMEOUT_MS]");
                Handle h = handle(t[1]);
                Long timeout = t.length > 2 ? Long.valueOf(t[2]) : null;
                onWorker(h, () -> emit((acquire(h, 1, timeout) ? "acquired " : "timeout ") + h.id));
                return true;
            }
            case "acquire_many": {
                need(t, 3, "acquire_many ID N [TIMEOUT_MS]");
                Handle h = handle(t[1]);
                int n = Integer.parseInt(t[2]);
                Long timeout = t.length > 3 ? Long.valueOf(t[3]) : null;
                onWorker(h, () -> emit((acquire(h, n, timeout) ? "acquired " : "timeout ") + h.id));
                return true;
            }
            case "release": {
                need(t, 2, "release ID");
                Handle h = handle(t[1]);
                onWorker(h, () -> {
                    release(h);
                    emit("released " + h.id);
                });
                return true;
            }
            case "lockpath": {
                need(t, 2, "lockpath ID");
                Handle h = handle(t[1]);
                onWorker(h, () -> {
                    List<String> paths = lockPaths(h);
                    emit("lockpath " + h.id + " " + (paths.isEmpty() ? "none" : String.join(" ", paths)));
                });
                return true;
            }
            case "participants": {
                need(t, 2, "participants ID");
                Handle h = handle(t[1]);
                Collection<String> nodes;
                switch (h.kind) {
                    case MUTEX:
                        nodes = h.mutex.getParticipantNodes();
                        break;
                    case SEMAPHORE:
                        nodes = leaseNames(h.semaphore);
                        break;
                    default:
                        // InterProcessSemaphoreMutex is a one-lease SemaphoreV2 with no accessor.
                        nodes = leaseNames(new InterProcessSemaphoreV2(client, h.path, 1));
                        break;
                }
                StringBuilder sb = new StringBuilder("participants ").append(h.id).append(' ')
                        .append(nodes.size());
                for (String n : nodes) {
                    sb.append(' ').append(n);
                }
                emit(sb.toString());
                return true;
            }
            case "is_acquired": {
                need(t, 2, "is_acquired ID");
                Handle h = handle(t[1]);
                boolean held;
                switch (h.kind) {
                    case MUTEX:
                        held = h.mutex.isAcquiredInThisProcess();
                        break;
                    case SEMAPHORE:
                        held = !h.leases.isEmpty();
                        break;
                    default:
                        held = h.semMutex.isAcquiredInThisProcess();
                        break;
                }
                emit("is_acquired " + h.id + " " + held);
                return true;
            }
            case "loop": {
                need(t, 5, "loop ID N LOGFILE HOLD_MS");
                Handle h = handle(t[1]);
                int n = Integer.parseInt(t[2]);
                String file = t[3];
                long holdMs = Long.parseLong(t[4]);
                emit("loop-started " + h.id);
                h.worker.execute(() -> runLoop(h, n, file, holdMs));
                return true;
            }
            case "rwloop": {
                need(t, 7, "rwloop ID N LOGFILE HOLD_MS WRITE_PCT SEED");
                Handle read = handle(t[1] + ".read");
                Handle write = handle(t[1] + ".write");
                int n = Integer.parseInt(t[2]);
                String file = t[3];
                long holdMs = Long.parseLong(t[4]);
                int writePct = Integer.parseInt(t[5]);
                java.util.Random random = new java.util.Random(Long.parseLong(t[6]));
                String id = t[1];
                emit("loop-started " + id);
                // The halves share one worker thread: each round takes one, drawn here.
                read.worker.execute(() -> runRounds(id,
                        () -> random.nextInt(100) < writePct ? write : read, n, file, holdMs));
                return true;
            }
            case "state":
                emit("state " + client.getZookeeperClient().isConnected());
                return true;
            case "session":
                emit("session 0x"
                        + Long.toHexString(client.getZookeeperClient().getZooKeeper().getSessionId()));
                return true;
            case "quit":
                emit("bye");
                return false;
            default:
                throw new IllegalArgumentException("unknown command " + t[0]);
        }
    }

    /** SemaphoreV2.getParticipantNodes, except that a missing `leases` node means no lease. */
    private static Collection<String> leaseNames(InterProcessSemaphoreV2 s) throws Exception {
        try {
            return s.getParticipantNodes();
        } catch (KeeperException.NoNodeException e) {
            return new ArrayList<>();
        }
    }

    private void checkFree(String id) {
        if (handles.containsKey(id)) {
            throw new IllegalArgumentException("duplicate id " + id);
        }
    }

    /** Acquires one hold (n leases for a semaphore); false on timeout. Runs on h's worker. */
    private static boolean acquire(Handle h, int n, Long timeoutMs) throws Exception {
        if (n != 1 && h.kind != Kind.SEMAPHORE) {
            throw new IllegalArgumentException(h.id + " is not a semaphore");
        }
        switch (h.kind) {
            case MUTEX:
                if (timeoutMs == null) {
                    h.mutex.acquire();
                    return true;
                }
                return h.mutex.acquire(timeoutMs, TimeUnit.MILLISECONDS);
            case SEMMUTEX:
                if (timeoutMs == null) {
                    h.semMutex.acquire();
                    return true;
                }
                return h.semMutex.acquire(timeoutMs, TimeUnit.MILLISECONDS);
            default: {
                Collection<Lease> got = timeoutMs == null
                        ? h.semaphore.acquire(n)
                        : h.semaphore.acquire(n, timeoutMs, TimeUnit.MILLISECONDS);
                if (got == null) {
                    return false;
                }
                h.leases.addFirst(got);
                return true;
            }
        }
    }

    /** Releases one hold (for a semaphore: the leases of the newest acquire). */
    private static void release(Handle h) throws Exception {
        switch (h.kind) {
            case MUTEX:
                h.mutex.release();
                return;
            case SEMMUTEX:
                h.semMutex.release();
                return;
            default: {
                Collection<Lease> got = h.leases.pollFirst();
                if (got == null) {
                    throw new IllegalStateException("no lease held by " + h.id);
                }
                h.semaphore.returnAll(got);
            }
        }
    }

    /** Full paths of the nodes this ID holds (for a mutex: the calling worker thread's node). */
    private static List<String> lockPaths(Handle h) throws Exception {
        List<String> out = new ArrayList<>();
        switch (h.kind) {
            case MUTEX: {
                // getLockPath is protected and per thread; this runs on the ID's worker thread.
                Method m = InterProcessMutex.class.getDeclaredMethod("getLockPath");
                m.setAccessible(true);
                Object p = m.invoke(h.mutex);
                if (p != null) {
                    out.add((String) p);
                }
                break;
            }
            case SEMMUTEX: {
                Field f = InterProcessSemaphoreMutex.class.getDeclaredField("lease");
                f.setAccessible(true);
                Lease lease = (Lease) f.get(h.semMutex);
                if (lease != null) {
                    out.add(leasePath(h, lease));
                }
                break;
            }
            default:
                for (Collection<Lease> held : h.leases) {
                    for (Lease lease : held) {
                        out.add(leasePath(h, lease));
                    }
                }
                break;
        }
        return out;
    }

    private static String leasePath(Handle h, Lease lease) {
        String base = h.path.endsWith("/") ? h.path.substring(0, h.path.length() - 1) : h.path;
        return base + "/leases/" + lease.getNodeName();
    }

    /** N times: acquire, log enter, hold, log exit, release. Each line is one append write. */
    private static void runLoop(Handle h, int n, String file, long holdMs) {
        runRounds(h.id, () -> h, n, file, holdMs);
    }

    /**
     * N rounds on the handle `pick` gives for each: acquire, log enter, hold, log exit,
     * release. Each line is one append write; `loop-done ID N` or `loop-error ID msg` at the end.
     */
    private static void runRounds(String id, java.util.function.Supplier<Handle> pick, int n, String file,
            long holdMs) {
        int count = 0;
        try (FileOutputStream log = new FileOutputStream(file, true)) {
            for (int i = 0; i < n; i++) {
                Handle h = pick.get();
                acquire(h, 1, null);
                try {
                    log.write(("enter java:" + h.id + " " + System.nanoTime() + "\n")
                            .getBytes(StandardCharsets.UTF_8));
                    if (holdMs > 0) {
                        Thread.sleep(holdMs);
                    }
                    log.write(("exit java:" + h.id + "\n").getBytes(StandardCharsets.UTF_8));
                } finally {
                    release(h);
                }
                count++;
            }
            emit("loop-done " + id + " " + count);
        } catch (Throwable e) {
            emit("loop-error " + id + " " + describe(e) + " (after " + count + ")");
        }
    }

    /**
     * Leader election commands. Every reply starts with the command's verb and its ID, so the
     * Rust side matches them like other keyed replies; `-` stands for an empty participant id.
     *
     *   latch ID PATH PID [silent|notify [LOGFILE]]  -> latch ID ok      LeaderLatch(PATH, PID, mode);
     *                                  async `latch-event ID leader|notleader` on every change, and
     *                                  with LOGFILE `enter java:ID <nanos>` / `exit java:ID` lines
     *   latch_start ID                 -> latch_start ID ok
     *   latch_close ID [silent|notify] -> latch_close ID ok
     *   latch_has ID                   -> latch_has ID true|false          (hasLeadership)
     *   latch_await ID MS              -> latch_await ID true|false        (await(MS), on a worker)
     *   latch_participants ID          -> latch_participants ID <n> <pid>=<isLeader>...
     *   latch_leader ID                -> latch_leader ID <pid> <isLeader> (getLeader)
     *   latch_path ID                  -> latch_path ID <ourPath>|none
     *   latch_loop ID PATH PID N LOGFILE HOLD_MS -> latch_loop ID started; N times on a worker:
     *                                  new latch, start, await, log enter, hold, log exit, close;
     *                                  then async `latch-loop-done ID N` or `latch-loop-error ID msg`
     *   selector ID PATH PID [auto]    -> selector ID ok   LeaderSelector (listener adapter: an error
     *                                  state cancels leadership); takeLeadership emits async
     *                                  `selector-leader ID`, waits for selector_resign, then emits
     *                                  `selector-done ID returned|interrupted`
     *   selector_start ID              -> selector_start ID ok
     *   selector_resign ID             -> selector_resign ID ok            (the leader returns)
     *   selector_requeue ID            -> selector_requeue ID true|false
     *   selector_interrupt ID          -> selector_interrupt ID ok         (interruptLeadership)
     *   selector_has ID                -> selector_has ID true|false
     *   selector_participants ID       -> selector_participants ID <n> <pid>=<isLeader>...
     *   selector_leader ID             -> selector_leader ID <pid> <isLeader>
     *   selector_close ID              -> selector_close ID ok
     *   selector_loop ID PATH PID N LOGFILE HOLD_MS -> selector_loop ID started; a selector whose
     *                                  leader logs enter, holds, logs exit and returns, requeued after
     *                                  each term, closed after N terms (once its node is gone): async
     *                                  `selector-loop-done ID N`
     */
    /** The CuratorCache commands (see the protocol at the top). */
    private static final class Caches {
        private final CuratorFramework client;
        private final Map<String, CuratorCache> caches = new ConcurrentHashMap<>();

        Caches(CuratorFramework client) {
            this.client = client;
        }

        private CuratorCache cache(String id) {
            CuratorCache c = caches.get(id);
            if (c == null) {
                throw new IllegalArgumentException("unknown cache " + id);
            }
            return c;
        }

        private static String hex(byte[] data) {
            StringBuilder out = new StringBuilder();
            if (data != null) {
                for (byte b : data) {
                    out.append(String.format("%02x", b));
                }
            }
            return out.toString();
        }

        /** Handles a cache command; false when `t[0]` is not one. */
        boolean dispatch(String[] t) throws Exception {
            switch (t[0]) {
                case "cache": {
                    need(t, 3, "cache ID PATH");
                    CuratorCache cache = CuratorCache.build(client, t[2]);
                    CountDownLatch initialized = new CountDownLatch(1);
                    cache.listenable().addListener(
                            CuratorCacheListener.builder().forInitialized(initialized::countDown).build());
                    caches.put(t[1], cache);
                    cache.start();
                    if (!initialized.await(30, TimeUnit.SECONDS)) {
                        throw new IllegalStateException("cache " + t[1] + " not initialized within 30 s");
                    }
                    emit("cache " + t[1] + " initialized");
                    return true;
                }
                case "cache_dump": {
                    need(t, 2, "cache_dump ID");
                    TreeMap<String, String> nodes = new TreeMap<>();
                    for (ChildData d : (Iterable<ChildData>) cache(t[1]).stream()::iterator) {
                        nodes.put(d.getPath(), d.getStat().getVersion() + ":" + hex(d.getData()));
                    }
                    StringBuilder line = new StringBuilder("cache_dump " + t[1] + " " + nodes.size());
                    nodes.forEach((path, value) -> line.append(' ').append(path).append(':').append(value));
                    emit(line.toString());
                    return true;
                }
                case "cache_close": {
                    need(t, 2, "cache_close ID");
                    cache(t[1]).close();
                    caches.remove(t[1]);
                    emit("cache_close " + t[1]);
                    return true;
                }
                case "tree_write": {
                    need(t, 4, "tree_write PATH N SEED");
                    String root = t[1];
                    int n = Integer.parseInt(t[2]);
                    Random random = new Random(Long.parseLong(t[3]));
                    String[] names = {"a", "b", "c", "d"};
                    int done = 0;
                    for (int i = 0; i < n; i++) {
                        String path = root + "/" + names[random.nextInt(4)];
                        if (random.nextBoolean()) {
                            path += "/" + names[random.nextInt(4)];
                        }
                        byte[] data = ("j" + i).getBytes(StandardCharsets.UTF_8);
                        try {
                            switch (random.nextInt(3)) {
                                case 0:
                                    client.create().creatingParentContainersIfNeeded().forPath(path, data);
                                    break;
                                case 1:
                                    client.setData().forPath(path, data);
                                    break;
                                default:
                                    client.delete().forPath(path);
                                    break;
                            }
                            done++;
                        } catch (KeeperException.NoNodeException | KeeperException.NodeExistsException
                                | KeeperException.NotEmptyException e) {
                            // the random history asked for something the tree does not allow now
                        }
                    }
                    emit("tree_write " + root + " " + done);
                    return true;
                }
                default:
                    return false;
            }
        }
    }

    /**
     * Shared values, atomics, barriers and queues. Every command replies `<verb> ID ...` (or
     * `error ID msg`) from a thread of its own, so commands that wait do not hold up the others.
     *
     *   count_incr ID PATH N          -> count_incr ID done <tries>   SharedCount(seed 0): N
     *                                    increments by trySetCount loops
     *   count_get ID PATH             -> count_get ID <count>         SharedCount.getCount
     *   count_set ID PATH N           -> count_set ID ok              SharedCount.setCount
     *   atomic_incr ID PATH N         -> atomic_incr ID done <tries>  DistributedAtomicLong
     *                                    (RetryNTimes(1000, 1)): N increments, each succeeded
     *   atomic_get ID PATH            -> atomic_get ID <value>
     *   cached_next ID PATH FACTOR N  -> cached_next ID <v1> <v2> ... CachedAtomicLong over a
     *                                    DistributedAtomicLong (RetryNTimes(1000, 1)): the N
     *                                    values next() handed out, each succeeded
     *   barrier_set ID PATH           -> barrier_set ID ok            DistributedBarrier
     *   barrier_remove ID PATH        -> barrier_remove ID ok
     *   barrier_wait ID PATH MS       -> barrier_wait ID true|false
     *   dbarrier ID PATH N            -> dbarrier ID ok               DistributedDoubleBarrier
     *   dbarrier_enter ID MS          -> dbarrier_enter ID true|false
     *   dbarrier_leave ID MS          -> dbarrier_leave ID true|false
     *   squeue_offer ID PATH TEXT     -> squeue_offer ID ok           SimpleDistributedQueue
     *   squeue_take ID PATH MS        -> squeue_take ID <text>|none   (poll with a timeout)
     *   dqueue_put ID PATH TEXT...    -> dqueue_put ID ok             DistributedQueue<String> (UTF-8),
     *                                    producer only, not in the background; several TEXTs
     *                                    are one putMulti
     *   dqueue_consume ID PATH LOCK|- [hold]
     *                                 -> dqueue_consume ID ok; then per item, async
     *                                    `dqueue-item ID <text>`; LOCK is the lock path (`-`:
     *                                    none); `hold` never returns from consumeMessage
     *   pqueue_put ID PATH PRIORITY TEXT...
     *                                 -> pqueue_put ID ok             DistributedPriorityQueue<String>,
     *                                    producer only; several TEXTs are one putMulti
     *   pqueue_consume ID PATH LOCK|- -> pqueue_consume ID ok; then per item, async
     *                                    `pqueue-item ID <text>` (minItemsBeforeRefresh 1)
     *   delayq_put ID PATH EPOCH_MS TEXT...
     *                                 -> delayq_put ID ok             DistributedDelayQueue<String>,
     *                                    producer only; several TEXTs are one putMulti
     *   delayq_consume ID PATH LOCK|- -> delayq_consume ID ok; then per item, async
     *                                    `delayq-item ID <currentTimeMillis at consume> <text>`
     *   idqueue_put ID PATH ITEMID TEXT
     *                                 -> idqueue_put ID ok            DistributedIdQueue<String>
     *   idqueue_remove ID PATH ITEMID -> idqueue_remove ID <count>    (a producer-only id queue)
     *   sharder ID PATH LEADERPATH THRESHOLD CHECK_MS MAX
     *                                 -> sharder ID ok                QueueSharder of producer-only
     *                                    DistributedQueue<String>s, started
     *   sharder_paths ID -            -> sharder_paths ID <path>...   getQueuePaths(), sorted
     *   sharder_put ID TEXT           -> sharder_put ID ok            getQueue().put(TEXT)
     */
    private static final class Values {
        private final CuratorFramework client;
        private final Map<String, org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier> doubles =
                new ConcurrentHashMap<>();
        private final Map<String, org.apache.curator.framework.recipes.queue.QueueSharder<String,
                org.apache.curator.framework.recipes.queue.DistributedQueue<String>>> sharders = new ConcurrentHashMap<>();
        private final ExecutorService workers = Executors.newCachedThreadPool(r -> {
            Thread th = new Thread(r, "peer-values");
            th.setDaemon(true);
            return th;
        });

        Values(CuratorFramework client) {
            this.client = client;
        }

        private void async(String reply, Op op) {
            String id = reply.split(" ")[1];
            workers.execute(() -> {
                try {
                    op.run();
                } catch (Throwable e) {
                    emit("error " + id + " " + describe(e));
                }
            });
        }

        boolean dispatch(String[] t) throws Exception {
            switch (t[0]) {
                case "count_incr": case "count_get": case "count_set": case "atomic_incr": case "atomic_get":
                case "cached_next":
                case "barrier_set": case "barrier_remove": case "barrier_wait":
                case "dbarrier": case "dbarrier_enter": case "dbarrier_leave":
                case "squeue_offer": case "squeue_take": case "dqueue_put": case "dqueue_consume":
                case "pqueue_put": case "pqueue_consume": case "delayq_put": case "delayq_consume":
                case "idqueue_put": case "idqueue_remove":
                case "sharder": case "sharder_paths": case "sharder_put":
                    break;
                default:
                    return false;
            }
            need(t, 3, t[0] + " ID ...");
            String reply = t[0] + " " + t[1];
            switch (t[0]) {
                case "count_incr": {
                    need(t, 4, "count_incr ID PATH N");
                    int n = Integer.parseInt(t[3]);
                    async(reply, () -> {
                        try (org.apache.curator.framework.recipes.shared.SharedCount count =
                                new org.apache.curator.framework.recipes.shared.SharedCount(client, t[2], 0)) {
                            count.start();
                            long tries = 0;
                            for (int i = 0; i < n; i++) {
                                while (true) {
                                    tries++;
                                    org.apache.curator.framework.recipes.shared.VersionedValue<Integer> seen =
                                            count.getVersionedValue();
                                    if (count.trySetCount(seen, seen.getValue() + 1)) {
                                        break;
                                    }
                                }
                            }
                            emit(reply + " done " + tries);
                        }
                    });
                    return true;
                }
                case "count_get":
                    async(reply, () -> {
                        try (org.apache.curator.framework.recipes.shared.SharedCount count =
                                new org.apache.curator.framework.recipes.shared.SharedCount(client, t[2], 0)) {
                            count.start();
                            emit(reply + " " + count.getCount());
                        }
                    });
                    return true;
                case "count_set": {
                    need(t, 4, "count_set ID PATH N");
                    int n = Integer.parseInt(t[3]);
                    async(reply, () -> {
                        try (org.apache.curator.framework.recipes.shared.SharedCount count =
                                new org.apache.curator.framework.recipes.shared.SharedCount(client, t[2], 0)) {
                            count.start();
                            count.setCount(n);
                            emit(reply + " ok");
                        }
                    });
                    return true;
                }
                case "atomic_incr": {
                    need(t, 4, "atomic_incr ID PATH N");
                    int n = Integer.parseInt(t[3]);
                    async(reply, () -> {
                        org.apache.curator.framework.recipes.atomic.DistributedAtomicLong counter =
                                new org.apache.curator.framework.recipes.atomic.DistributedAtomicLong(
                                        client, t[2], new org.apache.curator.retry.RetryNTimes(1000, 1));
                        long tries = 0;
                        for (int i = 0; i < n; i++) {
                            org.apache.curator.framework.recipes.atomic.AtomicValue<Long> v = counter.increment();
                            if (!v.succeeded()) {
                                throw new IllegalStateException("increment " + i + " did not succeed");
                            }
                            tries += v.getStats().getOptimisticTries();
                        }
                        emit(reply + " done " + tries);
                    });
                    return true;
                }
                case "cached_next": {
                    need(t, 5, "cached_next ID PATH FACTOR N");
                    int factor = Integer.parseInt(t[3]);
                    int n = Integer.parseInt(t[4]);
                    async(reply, () -> {
                        org.apache.curator.framework.recipes.atomic.CachedAtomicLong cached =
                                new org.apache.curator.framework.recipes.atomic.CachedAtomicLong(
                                        new org.apache.curator.framework.recipes.atomic.DistributedAtomicLong(
                                                client, t[2], new org.apache.curator.retry.RetryNTimes(1000, 1)),
                                        factor);
                        StringBuilder values = new StringBuilder(reply);
                        for (int i = 0; i < n; i++) {
                            org.apache.curator.framework.recipes.atomic.AtomicValue<Long> v = cached.next();
                            if (!v.succeeded()) {
                                throw new IllegalStateException("next " + i + " did not succeed");
                            }
                            values.append(' ').append(v.preValue());
                        }
                        emit(values.toString());
                    });
                    return true;
                }
                case "atomic_get":
                    async(reply, () -> emit(reply + " " + new org.apache.curator.framework.recipes.atomic.DistributedAtomicLong(
                            client, t[2], new org.apache.curator.retry.RetryNTimes(0, 1)).get().postValue()));
                    return true;
                case "barrier_set":
                    async(reply, () -> {
                        new org.apache.curator.framework.recipes.barriers.DistributedBarrier(client, t[2]).setBarrier();
                        emit(reply + " ok");
                    });
                    return true;
                case "barrier_remove":
                    async(reply, () -> {
                        new org.apache.curator.framework.recipes.barriers.DistributedBarrier(client, t[2]).removeBarrier();
                        emit(reply + " ok");
                    });
                    return true;
                case "barrier_wait": {
                    need(t, 4, "barrier_wait ID PATH MS");
                    long ms = Long.parseLong(t[3]);
                    async(reply, () -> emit(reply + " " + new org.apache.curator.framework.recipes.barriers.DistributedBarrier(
                            client, t[2]).waitOnBarrier(ms, TimeUnit.MILLISECONDS)));
                    return true;
                }
                case "dbarrier": {
                    need(t, 4, "dbarrier ID PATH N");
                    if (doubles.putIfAbsent(t[1], new org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier(
                            client, t[2], Integer.parseInt(t[3]))) != null) {
                        throw new IllegalArgumentException("duplicate double barrier " + t[1]);
                    }
                    emit(reply + " ok");
                    return true;
                }
                case "dbarrier_enter": case "dbarrier_leave": {
                    org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier b = doubles.get(t[1]);
                    if (b == null) {
                        throw new IllegalArgumentException("unknown double barrier " + t[1]);
                    }
                    long ms = Long.parseLong(t[2]);
                    boolean enter = t[0].equals("dbarrier_enter");
                    async(reply, () -> emit(reply + " "
                            + (enter ? b.enter(ms, TimeUnit.MILLISECONDS) : b.leave(ms, TimeUnit.MILLISECONDS))));
                    return true;
                }
                case "squeue_offer": {
                    need(t, 4, "squeue_offer ID PATH TEXT");
                    async(reply, () -> {
                        new org.apache.curator.framework.recipes.queue.SimpleDistributedQueue(client, t[2])
                                .offer(t[3].getBytes(StandardCharsets.UTF_8));
                        emit(reply + " ok");
                    });
                    return true;
                }
                case "squeue_take": {
                    need(t, 4, "squeue_take ID PATH MS");
                    long ms = Long.parseLong(t[3]);
                    async(reply, () -> {
                        byte[] item = new org.apache.curator.framework.recipes.queue.SimpleDistributedQueue(client, t[2])
                                .poll(ms, TimeUnit.MILLISECONDS);
                        emit(reply + " " + (item == null ? "none" : new String(item, StandardCharsets.UTF_8)));
                    });
                    return true;
                }
                case "sharder": {
                    need(t, 7, "sharder ID PATH LEADERPATH THRESHOLD CHECK_MS MAX");
                    org.apache.curator.framework.recipes.queue.QueueSharderPolicies policies =
                            org.apache.curator.framework.recipes.queue.QueueSharderPolicies.builder()
                                    .newQueueThreshold(Integer.parseInt(t[4]))
                                    .thresholdCheckMs(Integer.parseInt(t[5]))
                                    .maxQueues(Integer.parseInt(t[6])).build();
                    async(reply, () -> {
                        org.apache.curator.framework.recipes.queue.QueueSharder<String,
                                org.apache.curator.framework.recipes.queue.DistributedQueue<String>> sharder =
                                new org.apache.curator.framework.recipes.queue.QueueSharder<>(client,
                                        (c, path) -> org.apache.curator.framework.recipes.queue.QueueBuilder.builder(
                                                c, null, STRINGS, path).putInBackground(false).buildQueue(),
                                        t[2], t[3], policies);
                        sharder.start();
                        sharders.put(t[1], sharder);
                        emit(reply + " ok");
                    });
                    return true;
                }
                case "sharder_paths":
                    async(reply, () -> {
                        List<String> paths = new ArrayList<>(sharders.get(t[1]).getQueuePaths());
                        java.util.Collections.sort(paths);
                        emit(reply + (paths.isEmpty() ? "" : " " + String.join(" ", paths)));
                    });
                    return true;
                case "sharder_put": {
                    need(t, 3, "sharder_put ID TEXT");
                    async(reply, () -> {
                        org.apache.curator.framework.recipes.queue.DistributedQueue<String> q = sharders.get(t[1]).getQueue();
                        q.put(t[2]);
                        emit(reply + " ok");
                    });
                    return true;
                }
                case "dqueue_put": {
                    need(t, 4, "dqueue_put ID PATH TEXT...");
                    async(reply, () -> {
                        org.apache.curator.framework.recipes.queue.DistributedQueue<String> q =
                                org.apache.curator.framework.recipes.queue.QueueBuilder.builder(
                                        client, null, STRINGS, t[2]).putInBackground(false).buildQueue();
                        q.start();
                        if (t.length == 4) {
                            q.put(t[3]);
                        } else {
                            org.apache.curator.framework.recipes.queue.MultiItem<String> items =
                                    new org.apache.curator.framework.recipes.queue.MultiItem<String>() {
                                        private int next = 3;

                                        @Override
                                        public String nextItem() {
                                            return next < t.length ? t[next++] : null;
                                        }
                                    };
                            q.putMulti(items);
                        }
                        q.close();
                        emit(reply + " ok");
                    });
                    return true;
                }
                case "dqueue_consume": {
                    need(t, 4, "dqueue_consume ID PATH LOCK|- [hold]");
                    String id = t[1];
                    boolean hold = t.length > 4 && t[4].equals("hold");
                    org.apache.curator.framework.recipes.queue.QueueConsumer<String> consumer =
                            new org.apache.curator.framework.recipes.queue.QueueConsumer<String>() {
                                @Override
                                public void consumeMessage(String message) throws Exception {
                                    emit("dqueue-item " + id + " " + message);
                                    if (hold) {
                                        Thread.sleep(Long.MAX_VALUE);
                                    }
                                }

                                @Override
                                public void stateChanged(CuratorFramework c,
                                        org.apache.curator.framework.state.ConnectionState s) {
                                    // not registered by DistributedQueue (CURATOR-336)
                                }
                            };
                    org.apache.curator.framework.recipes.queue.QueueBuilder<String> builder =
                            org.apache.curator.framework.recipes.queue.QueueBuilder.builder(
                                    client, consumer, STRINGS, t[2]);
                    if (!t[3].equals("-")) {
                        builder = builder.lockPath(t[3]);
                    }
                    org.apache.curator.framework.recipes.queue.DistributedQueue<String> q = builder.buildQueue();
                    q.start();
                    emit(reply + " ok");
                    return true;
                }
                case "pqueue_put": case "delayq_put": {
                    need(t, 5, t[0] + " ID PATH PRIORITY|EPOCH_MS TEXT...");
                    org.apache.curator.framework.recipes.queue.MultiItem<String> items = multiItem(t, 4);
                    async(reply, () -> {
                        org.apache.curator.framework.recipes.queue.QueueBuilder<String> b =
                                org.apache.curator.framework.recipes.queue.QueueBuilder.builder(
                                        client, null, STRINGS, t[2]).putInBackground(false);
                        if (t[0].equals("pqueue_put")) {
                            org.apache.curator.framework.recipes.queue.DistributedPriorityQueue<String> q =
                                    b.buildPriorityQueue(1);
                            q.start();
                            q.putMulti(items, Integer.parseInt(t[3]));
                            q.close();
                        } else {
                            org.apache.curator.framework.recipes.queue.DistributedDelayQueue<String> q =
                                    b.buildDelayQueue();
                            q.start();
                            q.putMulti(items, Long.parseLong(t[3]));
                            q.close();
                        }
                        emit(reply + " ok");
                    });
                    return true;
                }
                case "pqueue_consume": case "delayq_consume": {
                    need(t, 4, t[0] + " ID PATH LOCK|-");
                    String id = t[1];
                    boolean delay = t[0].equals("delayq_consume");
                    org.apache.curator.framework.recipes.queue.QueueConsumer<String> consumer =
                            new org.apache.curator.framework.recipes.queue.QueueConsumer<String>() {
                                @Override
                                public void consumeMessage(String message) {
                                    emit(delay ? "delayq-item " + id + " " + System.currentTimeMillis() + " " + message
                                            : "pqueue-item " + id + " " + message);
                                }

                                @Override
                                public void stateChanged(CuratorFramework c,
                                        org.apache.curator.framework.state.ConnectionState s) {
                                    // not registered by the queues (CURATOR-336)
                                }
                            };
                    org.apache.curator.framework.recipes.queue.QueueBuilder<String> b =
                            org.apache.curator.framework.recipes.queue.QueueBuilder.builder(
                                    client, consumer, STRINGS, t[2]);
                    if (!t[3].equals("-")) {
                        b = b.lockPath(t[3]);
                    }
                    if (delay) {
                        b.buildDelayQueue().start();
                    } else {
                        b.buildPriorityQueue(1).start();
                    }
                    emit(reply + " ok");
                    return true;
                }
                case "idqueue_put": case "idqueue_remove": {
                    need(t, t[0].equals("idqueue_put") ? 5 : 4, t[0] + " ID PATH ITEMID [TEXT]");
                    async(reply, () -> {
                        org.apache.curator.framework.recipes.queue.DistributedIdQueue<String> q =
                                org.apache.curator.framework.recipes.queue.QueueBuilder.builder(
                                        client, null, STRINGS, t[2]).putInBackground(false).buildIdQueue();
                        q.start();
                        String result = "ok";
                        if (t[0].equals("idqueue_put")) {
                            q.put(t[4], t[3]);
                        } else {
                            result = Integer.toString(q.remove(t[3]));
                        }
                        q.close();
                        emit(reply + " " + result);
                    });
                    return true;
                }
                default:
                    return false;
            }
        }

        /** The TEXTs from `t[from]` on, as Curator's MultiItem. */
        private static org.apache.curator.framework.recipes.queue.MultiItem<String> multiItem(String[] t, int from) {
            return new org.apache.curator.framework.recipes.queue.MultiItem<String>() {
                private int next = from;

                @Override
                public String nextItem() {
                    return next < t.length ? t[next++] : null;
                }
            };
        }

        private static final org.apache.curator.framework.recipes.queue.QueueSerializer<String> STRINGS =
                new org.apache.curator.framework.recipes.queue.QueueSerializer<String>() {
                    @Override
                    public byte[] serialize(String item) {
                        return item.getBytes(StandardCharsets.UTF_8);
                    }

                    @Override
                    public String deserialize(byte[] bytes) {
                        return new String(bytes, StandardCharsets.UTF_8);
                    }
                };
    }

    /**
     * curator-x-discovery commands (a `ServiceDiscovery<Map>` per base path, Curator's default
     * serializer; a payload is a `LinkedHashMap` with one `description`):
     *   disc_register BASE NAME ID ADDRESS PORT DESCRIPTION -> disc_register BASE ID ok
     *   disc_query BASE NAME  -> disc_query BASE <n> then per instance, by id,
     *                            id|address|port|sslPort|description|registrationTimeUTC|serviceType|enabled|uri
     *   disc_cache BASE NAME  -> disc_cache BASE <n> then the lines of disc_query, from a ServiceCache
     *                            (made and started on first use, kept until disc_close)
     *   disc_provider BASE NAME STRATEGY K
     *                         -> disc_provider BASE <n> <line>... picked <id>,...   (a ServiceProvider,
     *                            STRATEGY round_robin|random|sticky, made and started on first use:
     *                            its getAllInstances as disc_query lines, then K getInstance() ids)
     *   disc_close BASE       -> disc_close BASE ok   (also closes that BASE's caches and providers)
     * and on a `ServiceDiscovery<Object>` per base path (Curator's default serializer, any payload):
     *   disc_register_payload BASE NAME ID KIND VALUE -> disc_register_payload BASE ID ok
     *       KIND: long, int, double, string, bool, list (VALUE split on commas), map (one `v`)
     *   disc_payloads BASE NAME -> disc_payloads BASE <n> then per instance, by id, id|class|value
     */
    private static final class Discoveries {
        private final CuratorFramework client;
        private final Map<String, org.apache.curator.x.discovery.ServiceDiscovery<Map>> registries =
                new ConcurrentHashMap<>();

        private final Map<String, org.apache.curator.x.discovery.ServiceCache<Map>> caches = new ConcurrentHashMap<>();
        private final Map<String, org.apache.curator.x.discovery.ServiceProvider<Map>> providers =
                new ConcurrentHashMap<>();

        private final Map<String, org.apache.curator.x.discovery.ServiceDiscovery<Object>> anyPayload =
                new ConcurrentHashMap<>();

        Discoveries(CuratorFramework client) {
            this.client = client;
        }

        private org.apache.curator.x.discovery.ServiceDiscovery<Object> anyPayloadRegistry(String base) throws Exception {
            org.apache.curator.x.discovery.ServiceDiscovery<Object> d = anyPayload.get(base);
            if (d == null) {
                d = org.apache.curator.x.discovery.ServiceDiscoveryBuilder.builder(Object.class)
                        .client(client)
                        .basePath(base)
                        .serializer(new org.apache.curator.x.discovery.details.JsonInstanceSerializer<>(Object.class))
                        .build();
                d.start();
                anyPayload.put(base, d);
            }
            return d;
        }

        private static Object payloadOf(String kind, String value) {
            switch (kind) {
                case "long":
                    return Long.parseLong(value);
                case "int":
                    return Integer.parseInt(value);
                case "double":
                    return Double.parseDouble(value);
                case "string":
                    return value;
                case "bool":
                    return Boolean.parseBoolean(value);
                case "list":
                    return new ArrayList<>(java.util.Arrays.asList(value.split(",")));
                case "map": {
                    Map<String, Object> map = new java.util.LinkedHashMap<>();
                    map.put("v", value);
                    return map;
                }
                default:
                    throw new IllegalArgumentException("unknown payload kind " + kind);
            }
        }

        private static String line(org.apache.curator.x.discovery.ServiceInstance<Map> i) {
            Object description = i.getPayload() == null ? null : i.getPayload().get("description");
            String uri = i.getUriSpec() == null ? "null" : i.getUriSpec().build(i);
            return i.getId() + "|" + i.getAddress() + "|" + i.getPort() + "|" + i.getSslPort()
                    + "|" + description + "|" + i.getRegistrationTimeUTC() + "|" + i.getServiceType()
                    + "|" + i.isEnabled() + "|" + uri;
        }

        /** The instances as `<n> <line>...`, by line. */
        private static String lines(Collection<org.apache.curator.x.discovery.ServiceInstance<Map>> instances) {
            List<String> sorted = new ArrayList<>();
            instances.forEach(i -> sorted.add(line(i)));
            java.util.Collections.sort(sorted);
            StringBuilder out = new StringBuilder().append(sorted.size());
            sorted.forEach(l -> out.append(' ').append(l));
            return out.toString();
        }

        private org.apache.curator.x.discovery.ServiceDiscovery<Map> registry(String base) throws Exception {
            org.apache.curator.x.discovery.ServiceDiscovery<Map> d = registries.get(base);
            if (d == null) {
                d = org.apache.curator.x.discovery.ServiceDiscoveryBuilder.builder(Map.class)
                        .client(client)
                        .basePath(base)
                        .serializer(new org.apache.curator.x.discovery.details.JsonInstanceSerializer<>(Map.class))
                        .build();
                d.start();
                registries.put(base, d);
            }
            return d;
        }

        /** Handles a discovery command; false when `t[0]` is not one. */
        boolean dispatch(String[] t) throws Exception {
            switch (t[0]) {
                case "disc_register": {
                    need(t, 7, "disc_register BASE NAME ID ADDRESS PORT DESCRIPTION");
                    Map<String, Object> payload = new java.util.LinkedHashMap<>();
                    payload.put("description", t[6]);
                    org.apache.curator.x.discovery.ServiceInstance<Map> instance =
                            org.apache.curator.x.discovery.ServiceInstance.<Map>builder()
                                    .name(t[2])
                                    .id(t[3])
                                    .address(t[4])
                                    .port(Integer.parseInt(t[5]))
                                    .payload(payload)
                                    .uriSpec(new org.apache.curator.x.discovery.UriSpec("{scheme}://{address}:{port}/api"))
                                    .build();
                    registry(t[1]).registerService(instance);
                    emit("disc_register " + t[1] + " " + t[3] + " ok");
                    return true;
                }
                case "disc_register_payload": {
                    need(t, 6, "disc_register_payload BASE NAME ID KIND VALUE");
                    org.apache.curator.x.discovery.ServiceInstance<Object> instance =
                            org.apache.curator.x.discovery.ServiceInstance.<Object>builder()
                                    .name(t[2])
                                    .id(t[3])
                                    .payload(payloadOf(t[4], t[5]))
                                    .build();
                    anyPayloadRegistry(t[1]).registerService(instance);
                    emit("disc_register_payload " + t[1] + " " + t[3] + " ok");
                    return true;
                }
                case "disc_payloads": {
                    need(t, 3, "disc_payloads BASE NAME");
                    TreeMap<String, String> lines = new TreeMap<>();
                    for (org.apache.curator.x.discovery.ServiceInstance<Object> i :
                            anyPayloadRegistry(t[1]).queryForInstances(t[2])) {
                        Object p = i.getPayload();
                        lines.put(i.getId(), i.getId() + "|" + (p == null ? "null" : p.getClass().getName()) + "|" + p);
                    }
                    StringBuilder line = new StringBuilder("disc_payloads " + t[1] + " " + lines.size());
                    lines.values().forEach(l -> line.append(' ').append(l));
                    emit(line.toString());
                    return true;
                }
                case "disc_query": {
                    need(t, 3, "disc_query BASE NAME");
                    TreeMap<String, String> lines = new TreeMap<>();
                    for (org.apache.curator.x.discovery.ServiceInstance<Map> i : registry(t[1]).queryForInstances(t[2])) {
                        Object description = i.getPayload() == null ? null : i.getPayload().get("description");
                        String uri = i.getUriSpec() == null ? "null" : i.getUriSpec().build(i);
                        lines.put(i.getId(), i.getId() + "|" + i.getAddress() + "|" + i.getPort() + "|" + i.getSslPort()
                                + "|" + description + "|" + i.getRegistrationTimeUTC() + "|" + i.getServiceType()
                                + "|" + i.isEnabled() + "|" + uri);
                    }
                    StringBuilder line = new StringBuilder("disc_query " + t[1] + " " + lines.size());
                    lines.values().forEach(l -> line.append(' ').append(l));
                    emit(line.toString());
                    return true;
                }
                case "disc_cache": {
                    need(t, 3, "disc_cache BASE NAME");
                    String key = t[1] + " " + t[2];
                    org.apache.curator.x.discovery.ServiceCache<Map> cache = caches.get(key);
                    if (cache == null) {
                        cache = registry(t[1]).serviceCacheBuilder().name(t[2]).build();
                        cache.start();
                        caches.put(key, cache);
                    }
                    emit("disc_cache " + t[1] + " " + lines(cache.getInstances()));
                    return true;
                }
                case "disc_provider": {
                    need(t, 5, "disc_provider BASE NAME STRATEGY K");
                    String key = t[1] + " " + t[2] + " " + t[3];
                    org.apache.curator.x.discovery.ServiceProvider<Map> provider = providers.get(key);
                    if (provider == null) {
                        org.apache.curator.x.discovery.ProviderStrategy<Map> strategy;
                        switch (t[3]) {
                            case "round_robin":
                                strategy = new org.apache.curator.x.discovery.strategies.RoundRobinStrategy<>();
                                break;
                            case "random":
                                strategy = new org.apache.curator.x.discovery.strategies.RandomStrategy<>();
                                break;
                            case "sticky":
                                strategy = new org.apache.curator.x.discovery.strategies.StickyStrategy<>(
                                        new org.apache.curator.x.discovery.strategies.RoundRobinStrategy<>());
                                break;
                            default:
                                throw new IllegalArgumentException("unknown strategy " + t[3]);
                        }
                        provider = registry(t[1]).serviceProviderBuilder().serviceName(t[2]).providerStrategy(strategy).build();
                        provider.start();
                        providers.put(key, provider);
                    }
                    List<String> picked = new ArrayList<>();
                    for (int k = Integer.parseInt(t[4]); k > 0; k--) {
                        org.apache.curator.x.discovery.ServiceInstance<Map> i = provider.getInstance();
                        picked.add(i == null ? "none" : i.getId());
                    }
                    emit("disc_provider " + t[1] + " " + lines(provider.getAllInstances()) + " picked "
                            + String.join(",", picked));
                    return true;
                }
                case "disc_close": {
                    need(t, 2, "disc_close BASE");
                    for (String k : new ArrayList<>(providers.keySet())) {
                        if (k.startsWith(t[1] + " ")) {
                            providers.remove(k).close();
                        }
                    }
                    for (String k : new ArrayList<>(caches.keySet())) {
                        if (k.startsWith(t[1] + " ")) {
                            caches.remove(k).close();
                        }
                    }
                    org.apache.curator.x.discovery.ServiceDiscovery<Map> d = registries.remove(t[1]);
                    if (d != null) {
                        d.close();
                    }
                    org.apache.curator.x.discovery.ServiceDiscovery<Object> any = anyPayload.remove(t[1]);
                    if (any != null) {
                        any.close();
                    }
                    emit("disc_close " + t[1] + " ok");
                    return true;
                }
                default:
                    return false;
            }
        }
    }

    /**
     * Schema sets (Curator's `org.apache.curator.framework.schema`), each on a client of its own
     * built with `schemaSet(new SchemaSetLoader(json, null).toSchemaSet(USE_DEFAULT))`:
     *   schema ID JSON_FILE USE_DEFAULT -> schema ID ok           (connected)
     *   schema_op ID OP PATH [DATA]     -> schema_op ID ok | schema_op ID violation <message>
     *                                      | schema_op ID failed <KeeperException code>
     *       OP: create_persistent, create_ephemeral, create_persistent_sequential,
     *           create_ephemeral_sequential, create_container, set, delete, get, get_watched,
     *           exists, exists_watched, children, children_watched, tx_check and tx_delete
     *           (a transaction of that one operation)
     *   schema_close ID                 -> schema_close ID ok
     */
    private static final class Schemas {
        private final CuratorFramework client;
        private final Map<String, CuratorFramework> clients = new ConcurrentHashMap<>();

        Schemas(CuratorFramework client) {
            this.client = client;
        }

        /** Handles a schema command; false when `t[0]` is not one. */
        boolean dispatch(String[] t) throws Exception {
            switch (t[0]) {
                case "schema": {
                    need(t, 4, "schema ID JSON_FILE USE_DEFAULT");
                    String json = new String(
                            java.nio.file.Files.readAllBytes(java.nio.file.Paths.get(t[2])), StandardCharsets.UTF_8);
                    org.apache.curator.framework.schema.SchemaSet set =
                            new org.apache.curator.framework.schema.SchemaSetLoader(json, null)
                                    .toSchemaSet(Boolean.parseBoolean(t[3]));
                    CuratorFramework schemed = CuratorFrameworkFactory.builder()
                            .connectString(client.getZookeeperClient().getCurrentConnectionString())
                            .retryPolicy(new ExponentialBackoffRetry(200, 10))
                            .schemaSet(set)
                            .build();
                    schemed.start();
                    if (!schemed.blockUntilConnected(30, TimeUnit.SECONDS)) {
                        schemed.close();
                        throw new IllegalStateException("schema client did not connect");
                    }
                    clients.put(t[1], schemed);
                    emit("schema " + t[1] + " ok");
                    return true;
                }
                case "schema_op": {
                    need(t, 4, "schema_op ID OP PATH [DATA]");
                    CuratorFramework c = clients.get(t[1]);
                    if (c == null) {
                        throw new IllegalArgumentException("unknown schema client " + t[1]);
                    }
                    String path = t[3];
                    byte[] data = (t.length > 4 ? t[4] : "").getBytes(StandardCharsets.UTF_8);
                    try {
                        switch (t[2]) {
                            case "create_persistent": c.create().withMode(CreateMode.PERSISTENT).forPath(path, data); break;
                            case "create_ephemeral": c.create().withMode(CreateMode.EPHEMERAL).forPath(path, data); break;
                            case "create_persistent_sequential":
                                c.create().withMode(CreateMode.PERSISTENT_SEQUENTIAL).forPath(path, data);
                                break;
                            case "create_ephemeral_sequential":
                                c.create().withMode(CreateMode.EPHEMERAL_SEQUENTIAL).forPath(path, data);
                                break;
                            case "create_container": c.create().withMode(CreateMode.CONTAINER).forPath(path, data); break;
                            case "set": c.setData().forPath(path, data); break;
                            case "delete": c.delete().forPath(path); break;
                            case "tx_check": c.transaction().forOperations(c.transactionOp().check().forPath(path)); break;
                            case "tx_delete": c.transaction().forOperations(c.transactionOp().delete().forPath(path)); break;
                            case "get": c.getData().forPath(path); break;
                            case "get_watched": c.getData().watched().forPath(path); break;
                            case "exists": c.checkExists().forPath(path); break;
                            case "exists_watched": c.checkExists().watched().forPath(path); break;
                            case "children": c.getChildren().forPath(path); break;
                            case "children_watched": c.getChildren().watched().forPath(path); break;
                            default: throw new IllegalArgumentException("unknown schema op " + t[2]);
                        }
                        emit("schema_op " + t[1] + " ok");
                    } catch (org.apache.curator.framework.schema.SchemaViolation e) {
                        emit("schema_op " + t[1] + " violation " + describe(e));
                    } catch (KeeperException e) {
                        emit("schema_op " + t[1] + " failed " + e.code());
                    }
                    return true;
                }
                case "schema_close": {
                    need(t, 2, "schema_close ID");
                    CuratorFramework c = clients.remove(t[1]);
                    if (c != null) {
                        c.close();
                    }
                    emit("schema_close " + t[1] + " ok");
                    return true;
                }
                default:
                    return false;
            }
        }
    }

    /**
     * GroupMember commands (Curator's `org.apache.curator.framework.recipes.nodes.GroupMember`):
     *   group ID PATH MEMBER PAYLOAD -> group ID ok          (started)
     *   group_members ID             -> group_members ID <n> member=payload... (sorted by member)
     *   group_close ID               -> group_close ID ok
     * and PersistentTtlNode (`org.apache.curator.framework.recipes.nodes.PersistentTtlNode`):
     *   ttl ID PATH TTL_MS DATA      -> ttl ID ok                (started, Curator's defaults)
     *   ttl_close ID                 -> ttl_close ID ok
     */
    private static final class Groups {
        private final CuratorFramework client;
        private final Map<String, org.apache.curator.framework.recipes.nodes.GroupMember> groups =
                new ConcurrentHashMap<>();
        private final Map<String, org.apache.curator.framework.recipes.nodes.PersistentTtlNode> ttlNodes =
                new ConcurrentHashMap<>();

        Groups(CuratorFramework client) {
            this.client = client;
        }

        /** Handles a group command; false when `t[0]` is not one. */
        boolean dispatch(String[] t) throws Exception {
            switch (t[0]) {
                case "group": {
                    need(t, 5, "group ID PATH MEMBER PAYLOAD");
                    org.apache.curator.framework.recipes.nodes.GroupMember member =
                            new org.apache.curator.framework.recipes.nodes.GroupMember(
                                    client, t[2], t[3], t[4].getBytes(StandardCharsets.UTF_8));
                    member.start();
                    groups.put(t[1], member);
                    emit("group " + t[1] + " ok");
                    return true;
                }
                case "group_members": {
                    need(t, 2, "group_members ID");
                    org.apache.curator.framework.recipes.nodes.GroupMember member = groups.get(t[1]);
                    if (member == null) {
                        throw new IllegalArgumentException("unknown group " + t[1]);
                    }
                    TreeMap<String, String> members = new TreeMap<>();
                    member.getCurrentMembers().forEach((k, v) -> members.put(k, new String(v, StandardCharsets.UTF_8)));
                    StringBuilder line = new StringBuilder("group_members " + t[1] + " " + members.size());
                    members.forEach((k, v) -> line.append(' ').append(k).append('=').append(v));
                    emit(line.toString());
                    return true;
                }
                case "ttl": {
                    need(t, 5, "ttl ID PATH TTL_MS DATA");
                    org.apache.curator.framework.recipes.nodes.PersistentTtlNode node =
                            new org.apache.curator.framework.recipes.nodes.PersistentTtlNode(
                                    client, t[2], Long.parseLong(t[3]), t[4].getBytes(StandardCharsets.UTF_8));
                    node.start();
                    ttlNodes.put(t[1], node);
                    emit("ttl " + t[1] + " ok");
                    return true;
                }
                case "ttl_close": {
                    need(t, 2, "ttl_close ID");
                    org.apache.curator.framework.recipes.nodes.PersistentTtlNode node = ttlNodes.remove(t[1]);
                    if (node != null) {
                        node.close();
                    }
                    emit("ttl_close " + t[1] + " ok");
                    return true;
                }
                case "group_close": {
                    need(t, 2, "group_close ID");
                    org.apache.curator.framework.recipes.nodes.GroupMember member = groups.remove(t[1]);
                    if (member != null) {
                        member.close();
                    }
                    emit("group_close " + t[1] + " ok");
                    return true;
                }
                default:
                    return false;
            }
        }
    }

    private static final class Elections {
        private final CuratorFramework client;
        private final Map<String, LeaderLatch> latches = new ConcurrentHashMap<>();
        /** The log file of each latch that logs, and the latches whose exit is logged already. */
        private final Map<String, String> latchLogs = new ConcurrentHashMap<>();
        private final Set<String> exitLogged = ConcurrentHashMap.newKeySet();
        private final Map<String, LeaderSelector> selectors = new ConcurrentHashMap<>();
        private final Map<String, Semaphore> resign = new ConcurrentHashMap<>();
        private final ExecutorService workers = Executors.newCachedThreadPool(r -> {
            Thread th = new Thread(r, "peer-election");
            th.setDaemon(true);
            return th;
        });

        Elections(CuratorFramework client) {
            this.client = client;
        }

        private static String pid(String id) {
            return id.isEmpty() ? "-" : id;
        }

        private static void append(String file, String line) {
            try (FileOutputStream log = new FileOutputStream(file, true)) {
                log.write((line + "\n").getBytes(StandardCharsets.UTF_8));
            } catch (Exception e) {
                emit("error - log " + describe(e));
            }
        }

        private static String list(Collection<Participant> ps) {
            StringBuilder sb = new StringBuilder().append(ps.size());
            for (Participant p : ps) {
                sb.append(' ').append(pid(p.getId())).append('=').append(p.isLeader());
            }
            return sb.toString();
        }

        private LeaderLatch latch(String id) {
            LeaderLatch l = latches.get(id);
            if (l == null) {
                throw new IllegalArgumentException("unknown latch " + id);
            }
            return l;
        }

        private LeaderSelector selector(String id) {
            LeaderSelector s = selectors.get(id);
            if (s == null) {
                throw new IllegalArgumentException("unknown selector " + id);
            }
            return s;
        }

        private static LeaderLatch.CloseMode mode(String word) {
            return "notify".equals(word) ? LeaderLatch.CloseMode.NOTIFY_LEADER : LeaderLatch.CloseMode.SILENT;
        }

        /** Handles an election command; false when `t[0]` is not one. */
        boolean dispatch(String[] t) throws Exception {
            if (!t[0].startsWith("latch") && !t[0].startsWith("selector")) {
                return false;
            }
            need(t, 2, t[0] + " ID ...");
            String id = t[1];
            String reply = t[0] + " " + id;
            switch (t[0]) {
                case "latch": {
                    need(t, 4, "latch ID PATH PID [silent|notify [LOGFILE]]");
                    LeaderLatch l = new LeaderLatch(client, t[2], t[3], mode(t.length > 4 ? t[4] : "silent"));
                    String log = t.length > 5 ? t[5] : null;
                    l.addListener(new LeaderLatchListener() {
                        @Override
                        public void isLeader() {
                            if (log != null) {
                                exitLogged.remove(id);
                                append(log, "enter java:" + id + " " + System.nanoTime());
                            }
                            emit("latch-event " + id + " leader");
                        }

                        @Override
                        public void notLeader() {
                            if (log != null && exitLogged.add(id)) {
                                append(log, "exit java:" + id);
                            }
                            emit("latch-event " + id + " notleader");
                        }
                    });
                    if (latches.putIfAbsent(id, l) != null) {
                        throw new IllegalArgumentException("duplicate latch " + id);
                    }
                    if (log != null) {
                        latchLogs.put(id, log);
                    }
                    emit(reply + " ok");
                    return true;
                }
                case "latch_start":
                    latch(id).start();
                    emit(reply + " ok");
                    return true;
                case "latch_close":
                    // A leader that resigns stops acting first. Curator's close() deletes the
                    // node before it calls notLeader() (on its own thread, later still), so an
                    // exit logged only there can come after the next leader's enter.
                    if (latchLogs.containsKey(id) && latch(id).hasLeadership() && exitLogged.add(id)) {
                        append(latchLogs.get(id), "exit java:" + id);
                    }
                    if (t.length > 2) {
                        latch(id).close(mode(t[2]));
                    } else {
                        latch(id).close();
                    }
                    emit(reply + " ok");
                    return true;
                case "latch_has":
                    emit(reply + " " + latch(id).hasLeadership());
                    return true;
                case "latch_await": {
                    need(t, 3, "latch_await ID MS");
                    LeaderLatch l = latch(id);
                    long ms = Long.parseLong(t[2]);
                    workers.execute(() -> {
                        try {
                            emit(reply + " " + l.await(ms, TimeUnit.MILLISECONDS));
                        } catch (Throwable e) {
                            emit("error " + id + " " + describe(e));
                        }
                    });
                    return true;
                }
                case "latch_participants":
                    emit(reply + " " + list(latch(id).getParticipants()));
                    return true;
                case "latch_leader": {
                    Participant p = latch(id).getLeader();
                    emit(reply + " " + pid(p.getId()) + " " + p.isLeader());
                    return true;
                }
                case "latch_path": {
                    String p = latch(id).getOurPath();
                    emit(reply + " " + (p == null ? "none" : p));
                    return true;
                }
                case "latch_loop": {
                    need(t, 7, "latch_loop ID PATH PID N LOGFILE HOLD_MS");
                    String path = t[2];
                    String participant = t[3];
                    int n = Integer.parseInt(t[4]);
                    String log = t[5];
                    long holdMs = Long.parseLong(t[6]);
                    emit(reply + " started");
                    workers.execute(() -> {
                        int count = 0;
                        try {
                            for (int i = 0; i < n; i++) {
                                LeaderLatch l = new LeaderLatch(client, path, participant);
                                l.start();
                                try {
                                    l.await();
                                    append(log, "enter java:" + id + " " + System.nanoTime());
                                    if (holdMs > 0) {
                                        Thread.sleep(holdMs);
                                    }
                                    append(log, "exit java:" + id);
                                } finally {
                                    l.close();
                                }
                                count++;
                            }
                            emit("latch-loop-done " + id + " " + count);
                        } catch (Throwable e) {
                            emit("latch-loop-error " + id + " " + describe(e) + " (after " + count + ")");
                        }
                    });
                    return true;
                }
                case "selector": {
                    need(t, 4, "selector ID PATH PID [auto]");
                    Semaphore permits = new Semaphore(0);
                    LeaderSelector s = new LeaderSelector(client, t[2], new LeaderSelectorListenerAdapter() {
                        @Override
                        public void takeLeadership(CuratorFramework c) {
                            emit("selector-leader " + id);
                            try {
                                permits.acquire();
                                emit("selector-done " + id + " returned");
                            } catch (InterruptedException e) {
                                emit("selector-done " + id + " interrupted");
                                Thread.currentThread().interrupt();
                            }
                        }
                    });
                    s.setId(t[3]);
                    if (t.length > 4 && "auto".equals(t[4])) {
                        s.autoRequeue();
                    }
                    if (selectors.putIfAbsent(id, s) != null) {
                        throw new IllegalArgumentException("duplicate selector " + id);
                    }
                    resign.put(id, permits);
                    emit(reply + " ok");
                    return true;
                }
                case "selector_start":
                    selector(id).start();
                    emit(reply + " ok");
                    return true;
                case "selector_resign":
                    selector(id);
                    resign.get(id).release();
                    emit(reply + " ok");
                    return true;
                case "selector_requeue":
                    emit(reply + " " + selector(id).requeue());
                    return true;
                case "selector_interrupt":
                    selector(id).interruptLeadership();
                    emit(reply + " ok");
                    return true;
                case "selector_has":
                    emit(reply + " " + selector(id).hasLeadership());
                    return true;
                case "selector_participants":
                    emit(reply + " " + list(selector(id).getParticipants()));
                    return true;
                case "selector_leader": {
                    Participant p = selector(id).getLeader();
                    emit(reply + " " + pid(p.getId()) + " " + p.isLeader());
                    return true;
                }
                case "selector_close":
                    selector(id).close();
                    emit(reply + " ok");
                    return true;
                case "selector_loop": {
                    need(t, 7, "selector_loop ID PATH PID N LOGFILE HOLD_MS");
                    String participant = t[3];
                    int n = Integer.parseInt(t[4]);
                    String log = t[5];
                    long holdMs = Long.parseLong(t[6]);
                    Semaphore terms = new Semaphore(0);
                    LeaderSelector s = new LeaderSelector(client, t[2], new LeaderSelectorListenerAdapter() {
                        @Override
                        public void takeLeadership(CuratorFramework c) throws Exception {
                            append(log, "enter java:" + id + " " + System.nanoTime());
                            if (holdMs > 0) {
                                Thread.sleep(holdMs);
                            }
                            append(log, "exit java:" + id);
                            terms.release();
                        }
                    });
                    s.setId(participant);
                    if (selectors.putIfAbsent(id, s) != null) {
                        throw new IllegalArgumentException("duplicate selector " + id);
                    }
                    emit(reply + " started");
                    s.start();
                    // Requeued by hand (not autoRequeue) so that after the last term nothing runs
                    // and close() interrupts no release in progress.
                    workers.execute(() -> {
                        try {
                            for (int i = 0; i < n; i++) {
                                terms.acquire();
                                while (i + 1 < n && !s.requeue()) {
                                    Thread.sleep(1);
                                }
                            }
                            while (s.getParticipants().stream().anyMatch(p -> p.getId().equals(participant))) {
                                Thread.sleep(5); // the last term's node is still being deleted
                            }
                            s.close();
                            emit("selector-loop-done " + id + " " + n);
                        } catch (Throwable e) {
                            emit("selector-loop-error " + id + " " + describe(e));
                        }
                    });
                    return true;
                }
                default:
                    throw new IllegalArgumentException("unknown command " + t[0]);
            }
        }
    }

    /**
     * Compression and typed-node commands (Curator's GzipCompressionProvider through
     * `compressed()`/`decompressed()`, and the JSON curator-x-async's JacksonModelSerializer
     * writes: a default `ObjectMapper` with FAIL_ON_UNKNOWN_PROPERTIES off). HEX is the data in
     * lower-case hex (`-` for none):
     *   gzip_create PATH HEX  -> gzip_create PATH ok     (create().creatingParentContainersIfNeeded()
     *                                                    .compressed(), or setData().compressed() when
     *                                                    the node exists)
     *   gzip_get PATH         -> gzip_get PATH <hex>     (getData().decompressed())
     *   raw_get PATH          -> raw_get PATH <hex>      (getData(), the bytes as stored)
     *   jackson_write PATH ID ITEM_HEX QTY PRICE EXPRESS TAGS NOTE_HEX
     *                         -> jackson_write PATH <hex of the JSON written>   (an `Order`: TAGS
     *                            comma-separated or `-`, NOTE_HEX `-` for null; created with parent
     *                            containers, or set when the node exists)
     *   jackson_read PATH     -> jackson_read PATH id|item_hex|qty|price|express|tags|note_hex
     */
    private static final class Typed {
        private final CuratorFramework client;
        private final com.fasterxml.jackson.databind.ObjectMapper mapper =
                new com.fasterxml.jackson.databind.ObjectMapper();

        Typed(CuratorFramework client) {
            this.client = client;
            mapper.configure(com.fasterxml.jackson.databind.DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);
        }

        /** The model of the typed-node interop tests: public fields, in this order. */
        public static final class Order {
            public long id;
            public String item;
            public int quantity;
            public double price;
            public boolean express;
            public List<String> tags;
            public String note;
        }

        private static byte[] unhex(String hex) {
            if (hex.equals("-")) {
                return new byte[0];
            }
            byte[] out = new byte[hex.length() / 2];
            for (int i = 0; i < out.length; i++) {
                out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
            }
            return out;
        }

        private static String hex(byte[] data) {
            StringBuilder out = new StringBuilder();
            for (byte b : data) {
                out.append(String.format("%02x", b));
            }
            return out.length() == 0 ? "-" : out.toString();
        }

        private static String utf8Hex(String text) {
            return text == null ? "-" : hex(text.getBytes(StandardCharsets.UTF_8));
        }

        /** Handles a typed-node command; false when `t[0]` is not one. */
        boolean dispatch(String[] t) throws Exception {
            switch (t[0]) {
                case "gzip_create": {
                    need(t, 3, "gzip_create PATH HEX");
                    byte[] data = unhex(t[2]);
                    if (client.checkExists().forPath(t[1]) == null) {
                        client.create().compressed().creatingParentContainersIfNeeded().forPath(t[1], data);
                    } else {
                        client.setData().compressed().forPath(t[1], data);
                    }
                    emit("gzip_create " + t[1] + " ok");
                    return true;
                }
                case "gzip_get":
                    need(t, 2, "gzip_get PATH");
                    emit("gzip_get " + t[1] + " " + hex(client.getData().decompressed().forPath(t[1])));
                    return true;
                case "raw_get":
                    need(t, 2, "raw_get PATH");
                    emit("raw_get " + t[1] + " " + hex(client.getData().forPath(t[1])));
                    return true;
                case "jackson_write": {
                    need(t, 9, "jackson_write PATH ID ITEM_HEX QTY PRICE EXPRESS TAGS NOTE_HEX");
                    Order order = new Order();
                    order.id = Long.parseLong(t[2]);
                    order.item = new String(unhex(t[3]), StandardCharsets.UTF_8);
                    order.quantity = Integer.parseInt(t[4]);
                    order.price = Double.parseDouble(t[5]);
                    order.express = Boolean.parseBoolean(t[6]);
                    order.tags = t[7].equals("-") ? new ArrayList<>() : java.util.Arrays.asList(t[7].split(","));
                    order.note = t[8].equals("-") ? null : new String(unhex(t[8]), StandardCharsets.UTF_8);
                    byte[] json = mapper.writerFor(Order.class).writeValueAsBytes(order);
                    if (client.checkExists().forPath(t[1]) == null) {
                        client.create().creatingParentContainersIfNeeded().forPath(t[1], json);
                    } else {
                        client.setData().forPath(t[1], json);
                    }
                    emit("jackson_write " + t[1] + " " + hex(json));
                    return true;
                }
                case "jackson_read": {
                    need(t, 2, "jackson_read PATH");
                    Order o = mapper.readerFor(Order.class).readValue(client.getData().forPath(t[1]));
                    emit("jackson_read " + t[1] + " " + o.id + "|" + utf8Hex(o.item) + "|" + o.quantity + "|"
                            + o.price + "|" + o.express + "|" + (o.tags == null || o.tags.isEmpty() ? "-" : String.join(",", o.tags))
                            + "|" + utf8Hex(o.note));
                    return true;
                }
                default:
                    return false;
            }
        }
    }
}
