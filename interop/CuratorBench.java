// Benchmark peer: runs one workload of benches/recipes/ through Apache Curator 5.x, so that the
// benchmark can measure Curator in the same run, against the same server, with the same
// workload (see benches/README.md, "Curator").
//
// Usage (benches/recipes/ compiles this file with javac and runs it once per workload):
//
//   java -cp <classes>:<curator classpath> CuratorBench CONNECT WORKLOAD CYCLES WARMUP CLIENTS
//       MAX_LEASES BASE_PATH [hold-ms=N] [warm-solo=N] [warm-contended=N] [jit-warmup-ms=N]
//       [label=TEXT] [srvr=HOST:PORT[,..]] [read-pct=P] [seed=N]
//
//   WORKLOAD    mutex-uncontended | mutex-contended | semaphore | many-waiters | rwlock | leader-handoff
//               | cache-load | cache-events | counter-increment | shared-count-cas | queue-throughput
//               | discovery-register | discovery-query | cached-counter | queue-sharded | typed-cas
//   CYCLES      measured cycles: mutex-uncontended: in total (the bench's --iters); others: per
//               session (--cycles); many-waiters splits them over the session's 8 threads,
//               rounded up, as the Rust bench does
//   WARMUP      unmeasured cycles before them, counted the same way (--warmup, --warmup-cycles)
//   CLIENTS     sessions (one CuratorFramework each) for the contended workloads; ignored by
//               mutex-uncontended (one session)
//   MAX_LEASES  semaphore leases (used by `semaphore` only)
//   BASE_PATH   the lock's path (the recipe creates it, as containers)
//   hold-ms     time in the critical section (default 0: no hold)
//   warm-solo   JIT warm-up, first phase: unmeasured uncontended cycles per session (default
//               8000), each contender on a lock of its own (BASE_PATH-solo-<n>), all sessions at
//               once; many-waiters splits them over the session's threads, rounded up
//   warm-contended  JIT warm-up, second phase: unmeasured cycles per session on the measured
//               lock (default 300), split as CYCLES are
//   jit-warmup-ms  JIT warm-up, third phase: more contended cycles until this long has passed
//               since the first phase began (default 0: none)
//               The JIT warm-up is counted in cycles, not time: a time-based warm-up under
//               contention (5 s was used) gives fewer cycles, so less compiled code, the slower
//               the machine is at that moment, and uncontended cycles exercise the request paths
//               several times faster than contended ones. With only the Rust bench's warmup (20
//               cycles per session) the measured part ran at about half of Curator's speed.
//   label       copied into the JSON line
//   srvr        the servers to ask for `srvr` and `mntr` (request and fsync counts); without it none are printed
//   read-pct    rwlock: the share of cycles that take the read lock (default 80)
//   seed        rwlock: seed of the read/write choice (default 1); each thread draws from
//               java.util.Random(seed * 1000003 + thread index)
//   cache-nodes cache-load: nodes below BASE_PATH (the bench creates the tree; default 10000)
//   event-nodes, event-passes, event-batch, writes-in-flight  cache-events: nodes, writes per
//               node, writes per request (a multi of set-data above 1), and the writer's
//               requests in flight (defaults 1000, 10, 1, 32)
//   external-writer  cache-events: 1 = the measured round's writes come from the bench
//               (see below); 0 (default) = from this process's own writer
//   retries, retry-sleep-ms  counter-increment, cached-counter: the DistributedAtomicLong's RetryNTimes (10, 1)
//   cache-factor  cached-counter: the CachedAtomicLong's cacheFactor (default 100)
//   instances, cache-queries  discovery-query: instances registered (1000), measured
//               ServiceCache.getInstances() calls (500); CYCLES and WARMUP are its queries
//   queue-shards  queue-sharded: the shards made under BASE_PATH before the sharders start (4)
//
// counter-increment, shared-count-cas: the lock workloads' contenders and warm-up phases with a
// counter in place of the lock: an "acquire" is DistributedAtomicLong.increment() until it
// succeeded (with RetryNTimes(retries, retry-sleep-ms); a call whose policy gave up is made
// again), or trySetCount(getVersionedValue(), n + 1) on a started SharedCount until true; no
// critical section. At the end every counter (the solo ones too) must hold the increments
// reported applied (exit 3 otherwise). cached-counter: as counter-increment, an "acquire" being
// CachedAtomicLong.next() (one per session over its DistributedAtomicLong, cacheFactor
// cache-factor) until it succeeded; warm-solo and warm-contended count blocks (each phase hands
// out cache-factor times as many values), so the JIT sees as many reservations as
// counter-increment's warm-up makes increments. At the end no value was handed out twice, and
// every counter holds whole blocks, at least as many values as were handed out (exit 3
// otherwise). discovery-register: one session, as mutex-uncontended,
// registerService then unregisterService of one dynamic instance. typed-cas: one session, as
// mutex-uncontended, what curator-x-async's ModeledFramework with a JacksonModelSerializer does
// for readAsZNode() then update(model, version) (curator-x-async is not packaged; its calls
// underneath): getData().storingStatIn(stat) read with a Jackson ObjectReader for a small
// `Config` record (FAIL_ON_UNKNOWN_PROPERTIES off, as JacksonModelSerializer), its revision + 1,
// setData().withVersion(stat version) of ObjectWriter's bytes; read again after a
// BadVersionException. At the end the record's revision must be the writes applied (exit 3).
//
// queue-throughput: a consumer's DistributedQueue on one session, a producer-only one
// (putInBackground(false): a put returns once its node exists) on another; warm-solo +
// warm-contended items in passes of CYCLES, WARMUP items, the measured CYCLES items ("curator"),
// then a measured pass through a producer with the default background puts
// ("curator-background"). Each item must arrive once (exit 3 otherwise).
//
// queue-sharded: queue-shards persistent queue-<uuid> nodes made under BASE_PATH, then two
// QueueSharders on them (leader path BASE_PATH-leader, Curator's default policies but at most
// queue-shards shards, so none is added): the consumer's on one session, whose allocator builds
// each shard's DistributedQueue with the consumer (a consumer per shard, as Curator runs them),
// and the producer's on another, whose allocator builds producer-only queues with
// putInBackground(false); every put is getQueue().put(item). Items go through as for
// queue-throughput (JIT warm-up passes, WARMUP, the measured CYCLES: "curator"), without a
// background line. Each item must arrive once (exit 3 otherwise).
//
// discovery-query: `instances` registered through one session's ServiceDiscovery; on another,
// queryForInstances until warm-solo + warm-contended instances were read, WARMUP queries, the
// measured CYCLES ("curator"); then a started ServiceCache (waited for until it holds every
// instance), warm-solo + warm-contended + WARMUP getInstances() calls, the measured
// cache-queries ("curator-cache").
//
// cache-load: one CuratorFramework; a CuratorCache of BASE_PATH (CuratorCache.build, default
// options) started and awaited until its initialized() callback, with a listener recording when
// each node's CREATED came. Before it, loads of fresh caches (at least 3, and until
// jit-warmup-ms have passed), each closed. Memory: the heap in use after System.gc() with the
// measured cache held, minus before it was built, per cached node. ops = nodes loaded; latency
// = when each node arrived, from the start. The end: the cache equals a fresh read of the tree.
//
// cache-events: event-nodes nodes under BASE_PATH (data "0"), a CuratorCache of BASE_PATH on one
// session, and on a second session's raw ZooKeeper handle an asynchronous writer that sets
// every node's data event-passes times in turn, writes-in-flight at a time (the Rust line's
// writer is the raw Rust client, the same way). ops = CHANGED events delivered; secs = from
// the first write to the event of every node's last version; latency per write = from its
// reply to the first event of its version or a later one. Before it, whole rounds (fresh
// cache, every pass written) for at least 3 rounds and until jit-warmup-ms have passed. The
// end: the cache equals a fresh read, and each node's versions in events only ever increased
// (exit 3 otherwise). With external-writer=1 the warm-up rounds are the same, and then the
// measured round prints "READY <base>" (every node is at version base), writes nothing, and
// once every node's version base+event-passes has arrived prints each event as
// "E <node index> <version - base> <wall-clock µs>" and a JSON line with ops; the bench,
// whose writer made the round's writes, computes the line's times.
//
// Per session one CuratorFramework and one recipe object (InterProcessMutex,
// InterProcessSemaphoreV2 or InterProcessReadWriteLock), used as a Curator user would:
// acquire() / release(), acquire() / lease.close(), and readLock() or writeLock() acquire() /
// release() (rwlock: the half drawn per cycle). leader-handoff: per cycle a new LeaderLatch (a
// closed latch cannot start again): start(), await(), critical section, close() (the leader
// resigns at once). Every thread: warm-solo cycles on a lock of its own, warm-contended
// cycles on the measured lock, more of them until jit-warmup-ms have passed, WARMUP cycles, then
// all threads meet and start the measured cycles together. A cycle is acquire, critical section, release; the critical section
// counts the holders in a shared AtomicInteger (more than 1, or MAX_LEASES, or for rwlock a
// writer beside anyone, is a violation) and
// yields the thread once so that other contenders run while this one counts as a holder.
//
// Output: one JSON line on stdout, with the fields of the Rust bench's lines and
// "impl":"curator"; latency = the acquire+release cycle for mutex-uncontended, the acquire
// otherwise; nearest-rank percentiles; warmup excluded. Diagnostics on stderr.
//
// Exit codes: 0 fine; 1 a failure (ZooKeeper error, no connection, an acquire stalled for 60 s);
// 2 bad arguments; 3 exclusion violated.

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;

public final class CuratorBench {
    /** An acquire that takes longer than this fails the run (exit code 1), as in the Rust bench. */
    private static final long STALL_NANOS = TimeUnit.SECONDS.toNanos(60);
    /** many-waiters: threads per session, sharing the session's InterProcessMutex. */
    private static final int WAITERS_PER_SESSION = 8;
    /** jit-warmup-ms when not given. */
    private static final long DEFAULT_JIT_WARMUP_MS = 0;
    /** warm-solo when not given: uncontended JIT warm-up cycles per session. */
    private static final int DEFAULT_WARM_SOLO = 8000;
    /** warm-contended when not given: contended JIT warm-up cycles per session. */
    private static final int DEFAULT_WARM_CONTENDED = 300;

    /** What an acquire gives back: how to release it. */
    private interface Held {
        void release() throws Exception;

        /** rwlock: whether this is the write lock (the others count every holder alike). */
        default boolean writer() {
            return false;
        }
    }

    /** An rwlock hold: the half taken and how to release it. */
    private static Held rwHeld(InterProcessMutex half, boolean writer) {
        return new Held() {
            @Override
            public void release() throws Exception {
                half.release();
            }

            @Override
            public boolean writer() {
                return writer;
            }
        };
    }

    /** One way of taking the lock (a session's recipe object). */
    private interface Lock {
        Held acquire() throws Exception;
    }

    /** Makes the workload's recipe object for one session, on a path. */
    private interface Recipe {
        /** `index` numbers the objects made (the rwlock's read/write generator is seeded with it). */
        Lock make(CuratorFramework client, String path, int index) throws Exception;
    }

    /** More holders at once than the recipe admits. */
    private static final class Violation extends Exception {
        private static final long serialVersionUID = 1L;

        Violation(String message) {
            super(message);
        }
    }

    /** The shared holder count of one run. */
    private static final class Exclusion {
        /** rwlock: a writer counts as this many holders, a reader as one. */
        static final int WRITER = 1 << 20;
        final int max;
        final boolean readWrite;
        final AtomicInteger holders = new AtomicInteger();
        final AtomicBoolean violated = new AtomicBoolean();

        Exclusion(int max, boolean readWrite) {
            this.max = max;
            this.readWrite = readWrite;
        }

        void criticalSection(long holdMs, boolean writer) throws Violation, InterruptedException {
            int weight = readWrite && writer ? WRITER : 1;
            int before = holders.getAndAdd(weight);
            if (readWrite ? (writer && before != 0) || before >= WRITER : before >= max) {
                violated.set(true);
                throw new Violation(readWrite
                        ? "a writer beside another holder (count " + (before + weight) + ")"
                        : (before + 1) + " holders at once, at most " + max + " allowed");
            }
            Thread.yield();
            if (holdMs > 0) {
                Thread.sleep(holdMs);
            }
            holders.addAndGet(-weight);
        }
    }

    /** One contending thread. */
    private static final class Contender implements Runnable {
        final Lock lock;
        /** A lock of this contender's own, for the uncontended JIT warm-up. */
        final Lock solo;
        final Exclusion exclusion;
        /** A private holder count for `solo` (it is uncontended, but checked all the same). */
        final Exclusion soloExclusion;
        final CyclicBarrier start;
        final int warmSolo;
        final int warmContended;
        /** System.nanoTime() until which contended JIT warm-up cycles go on (after warmContended). */
        final long jitWarmupUntil;
        final int warmup;
        final long[] samples;
        final boolean cycleLatency;
        final long holdMs;
        /** System.nanoTime() when the acquire in progress began, 0 when none is (stall watchdog). */
        final AtomicLong acquiringSince = new AtomicLong();
        volatile long endedAt;
        volatile int done;
        volatile Throwable failure;

        Contender(Lock lock, Lock solo, Exclusion exclusion, Exclusion soloExclusion, CyclicBarrier start,
                int warmSolo, int warmContended, long jitWarmupUntil, int warmup, int cycles,
                boolean cycleLatency, long holdMs) {
            this.lock = lock;
            this.solo = solo;
            this.exclusion = exclusion;
            this.soloExclusion = soloExclusion;
            this.start = start;
            this.warmSolo = warmSolo;
            this.warmContended = warmContended;
            this.jitWarmupUntil = jitWarmupUntil;
            this.warmup = warmup;
            this.samples = new long[cycles];
            this.cycleLatency = cycleLatency;
            this.holdMs = holdMs;
        }

        /** Acquire, critical section, release; returns the latency sample in nanoseconds. */
        long cycle() throws Exception {
            return cycle(lock, exclusion);
        }

        long cycle(Lock lock, Exclusion exclusion) throws Exception {
            long started = System.nanoTime();
            acquiringSince.set(started);
            Held held = lock.acquire();
            long acquired = System.nanoTime();
            acquiringSince.set(0);
            try {
                // Counters and discovery have no critical section (null).
                if (exclusion != null) {
                    exclusion.criticalSection(holdMs, held.writer());
                }
            } finally {
                held.release();
            }
            return cycleLatency ? System.nanoTime() - started : acquired - started;
        }

        @Override
        public void run() {
            Throwable failed = null;
            try {
                for (int i = 0; i < warmSolo; i++) {
                    cycle(solo, soloExclusion);
                }
                for (int i = 0; i < warmContended; i++) {
                    cycle();
                }
                while (System.nanoTime() - jitWarmupUntil < 0) {
                    cycle();
                }
                for (int i = 0; i < warmup; i++) {
                    cycle();
                }
            } catch (Throwable e) {
                failed = e;
            }
            // Everyone meets here, even after a failure, so that no one is left waiting.
            try {
                start.await();
            } catch (Throwable e) {
                failed = failed != null ? failed : e;
            }
            try {
                if (failed == null) {
                    for (int i = 0; i < samples.length; i++) {
                        samples[i] = cycle();
                        done = i + 1;
                    }
                }
            } catch (Throwable e) {
                failed = e;
            }
            endedAt = System.nanoTime();
            failure = failed;
        }
    }

    public static void main(String[] args) throws Exception {
        // Curator and ZooKeeper log at info level through slf4j-simple otherwise.
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        if (System.getProperty("org.slf4j.simpleLogger.log.org.apache.zookeeper") == null) {
            System.setProperty("org.slf4j.simpleLogger.log.org.apache.zookeeper", "error");
        }
        if (args.length < 7) {
            usage("expected at least 7 arguments, got " + args.length);
        }
        String connect = args[0];
        String workload = args[1];
        int cycles = number(args[2], "CYCLES", 1);
        int warmup = number(args[3], "WARMUP", 0);
        int clients = number(args[4], "CLIENTS", 1);
        int maxLeases = number(args[5], "MAX_LEASES", 1);
        String path = args[6];
        long holdMs = 0;
        long jitWarmupMs = DEFAULT_JIT_WARMUP_MS;
        int warmSolo = DEFAULT_WARM_SOLO;
        int warmContended = DEFAULT_WARM_CONTENDED;
        String label = "";
        String srvr = null;
        int readPct = 80;
        long seed = 1;
        int cacheNodes = 10000;
        int eventNodes = 1000;
        int eventPasses = 10;
        int writesInFlight = 32;
        int eventBatch = 1;
        boolean externalWriter = false;
        int retries = 10;
        int retrySleepMs = 1;
        int instances = 1000;
        int cacheQueries = 500;
        int queueShards = 4;
        for (int i = 7; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            String key = eq < 0 ? args[i] : args[i].substring(0, eq);
            String value = eq < 0 ? "" : args[i].substring(eq + 1);
            switch (key) {
                case "hold-ms":
                    holdMs = number(value, "hold-ms", 0);
                    break;
                case "jit-warmup-ms":
                    jitWarmupMs = number(value, "jit-warmup-ms", 0);
                    break;
                case "warm-solo":
                    warmSolo = number(value, "warm-solo", 0);
                    break;
                case "warm-contended":
                    warmContended = number(value, "warm-contended", 0);
                    break;
                case "label":
                    label = value;
                    break;
                case "srvr":
                    srvr = value.isEmpty() ? null : value;
                    break;
                case "read-pct":
                    readPct = number(value, "read-pct", 0);
                    break;
                case "seed":
                    seed = number(value, "seed", 0);
                    break;
                case "cache-nodes":
                    cacheNodes = number(value, "cache-nodes", 1);
                    break;
                case "event-nodes":
                    eventNodes = number(value, "event-nodes", 1);
                    break;
                case "event-passes":
                    eventPasses = number(value, "event-passes", 1);
                    break;
                case "writes-in-flight":
                    writesInFlight = number(value, "writes-in-flight", 1);
                    break;
                case "event-batch":
                    eventBatch = number(value, "event-batch", 1);
                    break;
                case "external-writer":
                    externalWriter = number(value, "external-writer", 0) != 0;
                    break;
                case "retries":
                    retries = number(value, "retries", 0);
                    break;
                case "retry-sleep-ms":
                    retrySleepMs = number(value, "retry-sleep-ms", 1);
                    break;
                case "instances":
                    instances = number(value, "instances", 1);
                    break;
                case "cache-queries":
                    cacheQueries = number(value, "cache-queries", 1);
                    break;
                case "cache-factor":
                    RecipeBench.cacheFactor = number(value, "cache-factor", 1);
                    break;
                case "queue-shards":
                    queueShards = number(value, "queue-shards", 1);
                    break;
                default:
                    usage("unknown option " + args[i]);
            }
        }

        if (workload.equals("cache-load") || workload.equals("cache-events")) {
            CuratorFramework client =
                    CuratorFrameworkFactory.newClient(connect, new ExponentialBackoffRetry(1000, 3));
            client.start();
            List<CuratorFramework> one = List.of(client);
            if (!client.blockUntilConnected(60, TimeUnit.SECONDS)) {
                fail(one, 1, "could not connect to " + connect);
            }
            // cache-events: the writer has a session of its own, as in the Rust line.
            CuratorFramework writer = client;
            if (workload.equals("cache-events")) {
                writer = CuratorFrameworkFactory.newClient(connect, new ExponentialBackoffRetry(1000, 3));
                writer.start();
                one = List.of(client, writer);
                if (!writer.blockUntilConnected(60, TimeUnit.SECONDS)) {
                    fail(one, 1, "could not connect to " + connect);
                }
            }
            String line;
            try {
                line = workload.equals("cache-load")
                        ? CacheBench.load(client, path, jitWarmupMs, label)
                        : CacheBench.events(client, writer, path, eventNodes, eventPasses, eventBatch, writesInFlight, jitWarmupMs,
                                externalWriter, label);
            } catch (Violation e) {
                fail(one, 3, "CACHE DIVERGED FROM THE SERVER: " + e.getMessage());
                return;
            } catch (Throwable e) {
                fail(one, 1, describe(e));
                return;
            }
            closeAll(one);
            System.out.println(line);
            System.out.flush();
            System.exit(0);
        }

        if (workload.equals("queue-throughput") || workload.equals("queue-sharded")
                || workload.equals("discovery-query")) {
            List<CuratorFramework> two = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                CuratorFramework client =
                        CuratorFrameworkFactory.newClient(connect, new ExponentialBackoffRetry(1000, 3));
                client.start();
                two.add(client);
                if (!client.blockUntilConnected(60, TimeUnit.SECONDS)) {
                    fail(two, 1, "could not connect to " + connect);
                }
            }
            List<String> lines;
            try {
                lines = workload.equals("queue-throughput")
                        ? RecipeBench.queue(two.get(0), two.get(1), path, cycles, warmup, warmSolo + warmContended,
                                srvr, label)
                        : workload.equals("queue-sharded")
                        ? RecipeBench.sharded(two.get(0), two.get(1), path, queueShards, cycles, warmup,
                                warmSolo + warmContended, srvr, label)
                        : RecipeBench.query(two.get(0), two.get(1), path, instances, cycles, warmup, cacheQueries,
                                warmSolo + warmContended, srvr, label);
            } catch (Violation e) {
                fail(two, 3, "OPS LOST OR APPLIED TWICE: " + e.getMessage());
                return;
            } catch (Throwable e) {
                fail(two, 1, describe(e));
                return;
            }
            closeAll(two);
            for (String line : lines) {
                System.out.println(line);
            }
            System.out.flush();
            System.exit(0);
        }

        int sessions;
        int threadsPerSession = 1;
        // Counters and discovery: no critical section, and the counters' final values checked.
        boolean noSection = false;
        String valueRecipe = null;
        int maxHolders = 1;
        boolean semaphore = false;
        boolean readWrite = false;
        boolean latch = false;
        boolean cycleLatency = false;
        switch (workload) {
            case "mutex-uncontended":
                sessions = 1;
                cycleLatency = true;
                // One session, uncontended anyway: the measured lock's own cycles warm it.
                warmContended += warmSolo;
                warmSolo = 0;
                break;
            case "mutex-contended":
                sessions = clients;
                break;
            case "semaphore":
                sessions = clients;
                maxHolders = maxLeases;
                semaphore = true;
                break;
            case "rwlock":
                sessions = clients;
                readWrite = true;
                break;
            case "leader-handoff":
                sessions = clients;
                latch = true;
                break;
            case "counter-increment":
            case "shared-count-cas":
                sessions = clients;
                noSection = true;
                maxHolders = Integer.MAX_VALUE;
                valueRecipe = workload;
                break;
            case "cached-counter":
                sessions = clients;
                noSection = true;
                maxHolders = Integer.MAX_VALUE;
                valueRecipe = workload;
                warmSolo *= RecipeBench.cacheFactor;
                warmContended *= RecipeBench.cacheFactor;
                break;
            case "discovery-register":
                sessions = 1;
                cycleLatency = true;
                noSection = true;
                maxHolders = Integer.MAX_VALUE;
                valueRecipe = workload;
                // One session, as mutex-uncontended: the measured registration's own cycles warm it.
                warmContended += warmSolo;
                warmSolo = 0;
                break;
            case "typed-cas":
                sessions = 1;
                cycleLatency = true;
                noSection = true;
                maxHolders = Integer.MAX_VALUE;
                valueRecipe = workload;
                // One session, as mutex-uncontended: the measured record's own cycles warm it.
                warmContended += warmSolo;
                warmSolo = 0;
                break;
            case "many-locks":
                // Each cycle a new mutex on the next of many paths, taken once; the sessions
                // share the numbering.
                sessions = clients;
                cycleLatency = true;
                maxHolders = Integer.MAX_VALUE;
                break;
            case "many-waiters":
                sessions = clients;
                threadsPerSession = WAITERS_PER_SESSION;
                // The session's budget of cycles is shared by its threads (rounded up).
                cycles = ceilDiv(cycles, WAITERS_PER_SESSION);
                warmup = ceilDiv(warmup, WAITERS_PER_SESSION);
                warmSolo = ceilDiv(warmSolo, WAITERS_PER_SESSION);
                warmContended = ceilDiv(warmContended, WAITERS_PER_SESSION);
                break;
            default:
                usage("unknown workload " + workload);
                return;
        }

        List<CuratorFramework> frameworks = new ArrayList<>();
        for (int i = 0; i < sessions; i++) {
            CuratorFramework client =
                    CuratorFrameworkFactory.newClient(connect, new ExponentialBackoffRetry(1000, 3));
            client.start();
            frameworks.add(client);
        }
        for (CuratorFramework client : frameworks) {
            if (!client.blockUntilConnected(60, TimeUnit.SECONDS)) {
                fail(frameworks, 1, "could not connect to " + connect);
            }
        }

        Exclusion exclusion = new Exclusion(maxHolders, readWrite);
        int threads = sessions * threadsPerSession;
        String srvrAddress = srvr;
        long[][] countersBefore = {null};
        long[] startedAt = {0};
        // The last thread to arrive reads the server's counter and stamps the common start
        // before any thread is released.
        CyclicBarrier start = new CyclicBarrier(threads, () -> {
            countersBefore[0] = serverCounters(srvrAddress);
            startedAt[0] = System.nanoTime();
        });
        List<Contender> contenders = new ArrayList<>();
        long jitWarmupUntil = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(jitWarmupMs);
        int pct = readPct;
        long rwSeed = seed;
        Recipe recipe;
        // Counters: the increments applied per counter path, the tries and the policy's give-ups.
        java.util.concurrent.ConcurrentHashMap<String, AtomicLong> applied = new java.util.concurrent.ConcurrentHashMap<>();
        // Tries and give-ups of the measured counter (not of the solo ones of the JIT warm-up).
        AtomicLong tries = new AtomicLong();
        AtomicLong gaveUp = new AtomicLong();
        java.util.concurrent.ConcurrentHashMap<String, Long> baseline = new java.util.concurrent.ConcurrentHashMap<>();
        List<AutoCloseable> closeables = new ArrayList<>();
        if (valueRecipe != null) {
            recipe = RecipeBench.recipe(valueRecipe, path, retries, retrySleepMs, applied, baseline, tries, gaveUp,
                    closeables);
        } else if (readWrite) {
            recipe = (client, at, index) -> {
                InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, at);
                java.util.Random random = new java.util.Random(rwSeed * 1000003 + index);
                return () -> {
                    boolean writer = random.nextInt(100) >= pct;
                    InterProcessMutex half = writer ? rw.writeLock() : rw.readLock();
                    half.acquire();
                    return rwHeld(half, writer);
                };
            };
        } else if (latch) {
            recipe = (client, at, index) -> () -> {
                LeaderLatch candidate = new LeaderLatch(client, at, "c" + index);
                candidate.start();
                candidate.await();
                return candidate::close;
            };
        } else if (semaphore) {
            recipe = (client, at, index) -> {
                InterProcessSemaphoreV2 leases = new InterProcessSemaphoreV2(client, at, maxLeases);
                return () -> {
                    Lease lease = leases.acquire();
                    return lease::close;
                };
            };
        } else if (workload.equals("many-locks")) {
            java.util.concurrent.ConcurrentHashMap<String, AtomicLong> numbering = new java.util.concurrent.ConcurrentHashMap<>();
            recipe = (client, at, index) -> {
                AtomicLong next = numbering.computeIfAbsent(at, k -> new AtomicLong());
                return () -> {
                    InterProcessMutex mutex = new InterProcessMutex(client, at + "/" + next.getAndIncrement());
                    mutex.acquire();
                    return mutex::release;
                };
            };
        } else {
            recipe = (client, at, index) -> {
                InterProcessMutex mutex = new InterProcessMutex(client, at);
                return () -> {
                    mutex.acquire();
                    return mutex::release;
                };
            };
        }
        for (int session = 0; session < frameworks.size(); session++) {
            CuratorFramework client = frameworks.get(session);
            // Per session one recipe object, shared by the session's threads (rwlock: one thread
            // per session, so one read/write generator per session).
            Lock lock = recipe.make(client, path, session);
            for (int t = 0; t < threadsPerSession; t++) {
                int n = contenders.size();
                // The uncontended warm-up: a lock of the contender's own, beside the measured one.
                Lock solo = warmSolo > 0 ? recipe.make(client, path + "-solo-" + n, 1_000_000 + n) : null;
                contenders.add(new Contender(lock, solo, noSection ? null : exclusion,
                        noSection ? null : new Exclusion(maxHolders, readWrite), start,
                        warmSolo, warmContended, jitWarmupUntil, warmup, cycles, cycleLatency, holdMs));
            }
        }

        List<Thread> running = new ArrayList<>();
        for (int i = 0; i < contenders.size(); i++) {
            Thread thread = new Thread(contenders.get(i), "contender-" + i);
            thread.start();
            running.add(thread);
        }
        Thread watchdog = new Thread(() -> watch(contenders, frameworks), "stall-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        for (Thread thread : running) {
            thread.join();
        }
        long[] countersAfter = serverCounters(srvr);

        Throwable failure = null;
        long endedAt = startedAt[0];
        int ops = 0;
        for (Contender c : contenders) {
            endedAt = Math.max(endedAt, c.endedAt);
            ops += c.done;
            if (c.failure != null && (failure == null || c.failure instanceof Violation)) {
                failure = c.failure;
            }
        }
        if (exclusion.violated.get()) {
            fail(frameworks, 3, "EXCLUSION VIOLATED: "
                    + (failure instanceof Violation ? failure.getMessage() : "exclusion counter"));
        }
        if (failure != null) {
            fail(frameworks, 1, describe(failure));
        }
        long[] all = new long[ops];
        int at = 0;
        for (Contender c : contenders) {
            System.arraycopy(c.samples, 0, all, at, c.done);
            at += c.done;
        }
        Arrays.sort(all);
        double secs = (endedAt - startedAt[0]) / 1e9;
        long[] before = countersBefore[0];
        if (before != null && countersAfter != null && before[2] == countersAfter[2] && ops > 0) {
            double fsyncs = (double) (countersAfter[1] - before[1]) / (countersAfter[2] * ops);
            System.err.printf(Locale.ROOT, "[locks]   %-20s server requests/op %.2f (all sessions, pings included)%s%n",
                    "curator", (double) (countersAfter[0] - before[0]) / ops,
                    fsyncs > 0 ? String.format(Locale.ROOT, "; log fsyncs/op %.2f per server", fsyncs) : "");
        }
        String extra = "";
        if (workload.equals("cached-counter")) {
            long blocks = 0;
            try {
                if (RecipeBench.duplicate.get() != null) {
                    fail(frameworks, 3, "OPS LOST OR APPLIED TWICE: " + RecipeBench.duplicate.get());
                }
                for (java.util.Map.Entry<String, AtomicLong> e : applied.entrySet()) {
                    long value = RecipeBench.readCounter(frameworks.get(0), e.getKey(), true) - baseline.get(e.getKey());
                    if (value % RecipeBench.cacheFactor != 0 || value < e.getValue().get()) {
                        fail(frameworks, 3, "OPS LOST OR APPLIED TWICE: " + e.getKey() + " holds " + value + " after "
                                + e.getValue().get() + " values handed out in blocks of " + RecipeBench.cacheFactor);
                    }
                    if (e.getKey().equals(path)) {
                        blocks = value / RecipeBench.cacheFactor;
                    }
                }
            } catch (Exception e) {
                fail(frameworks, 1, describe(e));
            }
            double perOp = (double) tries.get() / Math.max(1, applied.get(path).get());
            System.err.printf(Locale.ROOT, "[locks]   %-20s tries per value %.3f (measured counter, warmup included),"
                    + " retry policy gave up %d times; %d distinct values handed out, %d blocks reserved%n",
                    "curator", perOp, gaveUp.get(), applied.get(path).get(), blocks);
            extra = String.format(Locale.ROOT, ",\"cache_factor\":%d,\"blocks\":%d", RecipeBench.cacheFactor, blocks);
        }
        if (workload.equals("counter-increment") || workload.equals("shared-count-cas")
                || workload.equals("typed-cas")) {
            long total = 0;
            try {
                for (java.util.Map.Entry<String, AtomicLong> e : applied.entrySet()) {
                    // Counted from the value found when the counter object was made (a JIT
                    // warm-up counter is beside the measured directory and outlives a round).
                    long value = (workload.equals("typed-cas")
                            ? RecipeBench.readRevision(frameworks.get(0), e.getKey())
                            : RecipeBench.readCounter(frameworks.get(0), e.getKey(), workload.equals("counter-increment")))
                            - baseline.get(e.getKey());
                    if (value != e.getValue().get()) {
                        fail(frameworks, 3, "OPS LOST OR APPLIED TWICE: " + e.getKey() + " holds " + value + " after "
                                + e.getValue().get() + " increments reported applied");
                    }
                    total += value;
                }
            } catch (Exception e) {
                fail(frameworks, 1, describe(e));
            }
            double perOp = (double) tries.get() / Math.max(1, applied.get(path).get());
            System.err.printf(Locale.ROOT, "[locks]   %-20s tries per applied op %.2f (measured counter, warmup included),"
                    + " retry policy gave up %d times; %d counters (JIT warm-up's included) hold the %d increments"
                    + " applied%n", "curator", perOp, gaveUp.get(), applied.size(), total);
            extra = String.format(Locale.ROOT, ",\"tries_per_op\":%.3f,\"gave_up\":%d", perOp, gaveUp.get());
        }
        for (AutoCloseable closeable : closeables) {
            try {
                closeable.close();
            } catch (Exception ignored) {
                // closing anyway
            }
        }
        closeAll(frameworks);
        String line = String.format(Locale.ROOT,
                "{\"impl\":\"curator\",\"workload\":%s,\"ops\":%d,\"secs\":%.3f,\"ops_per_sec\":%.1f,"
                        + "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"clients\":%d%s,\"label\":%s}",
                jsonString(workload), ops, secs, secs > 0 ? ops / secs : 0.0,
                nearestRank(all, 50.0) / 1e6, nearestRank(all, 99.0) / 1e6, sessions, extra, jsonString(label));
        System.out.println(line);
        System.out.flush();
        System.exit(0);
    }

    /** Fails the run if an acquire has been waiting for more than STALL_NANOS. */
    private static void watch(List<Contender> contenders, List<CuratorFramework> frameworks) {
        while (true) {
            try {
                Thread.sleep(1000);
            } catch (InterruptedException e) {
                return;
            }
            long now = System.nanoTime();
            for (Contender c : contenders) {
                long since = c.acquiringSince.get();
                if (since != 0 && now - since > STALL_NANOS) {
                    fail(frameworks, 1, "an acquire stalled for more than 60 s");
                }
            }
        }
    }

    /** The smallest sample with at least p percent of the sorted samples at or below it. */
    private static long nearestRank(long[] sorted, double p) {
        if (sorted.length == 0) {
            return 0;
        }
        int rank = (int) Math.ceil(p / 100.0 * sorted.length);
        return sorted[Math.min(Math.max(rank, 1), sorted.length) - 1];
    }

    /**
     * What the servers have done so far, summed over every host of a connect string (chroot
     * ignored): {packets received from clients (`Received:` of `srvr`), transaction-log fsyncs
     * (`zk_cnt_fsynctime` of `mntr`), servers}; null when a server does not answer.
     */
    private static long[] serverCounters(String connect) {
        if (connect == null) {
            return null;
        }
        long[] counters = new long[3];
        for (String host : connect.split("/", -1)[0].split(",", -1)) {
            String received = fourLetterField(host, "srvr", "Received:");
            if (received == null) {
                return null;
            }
            String fsyncs = fourLetterField(host, "mntr", "zk_cnt_fsynctime\t");
            counters[0] += Long.parseLong(received);
            counters[1] += fsyncs == null ? 0 : Long.parseLong(fsyncs);
            counters[2] += 1;
        }
        return counters;
    }

    /** The value after `prefix` on a line of the answer to a four-letter word, or null. */
    private static String fourLetterField(String host, String word, String prefix) {
        int colon = host.lastIndexOf(':');
        if (colon < 0) {
            return null;
        }
        try (Socket socket = new Socket()) {
            socket.connect(new InetSocketAddress(host.substring(0, colon),
                    Integer.parseInt(host.substring(colon + 1))), 2000);
            socket.setSoTimeout(2000);
            OutputStream out = socket.getOutputStream();
            out.write(word.getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = socket.getInputStream();
            ByteArrayOutputStream text = new ByteArrayOutputStream();
            byte[] buffer = new byte[4096];
            int n;
            while ((n = in.read(buffer)) >= 0) {
                text.write(buffer, 0, n);
            }
            for (String line : text.toString(StandardCharsets.UTF_8).split("\n")) {
                if (line.startsWith(prefix)) {
                    return line.substring(prefix.length()).trim();
                }
            }
        } catch (Exception e) {
            // no count, as in the Rust bench
        }
        return null;
    }

    private static String jsonString(String s) {
        StringBuilder out = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    out.append("\\\"");
                    break;
                case '\\':
                    out.append("\\\\");
                    break;
                case '\n':
                    out.append("\\n");
                    break;
                case '\r':
                    out.append("\\r");
                    break;
                case '\t':
                    out.append("\\t");
                    break;
                default:
                    if (c < 0x20) {
                        out.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        return out.append('"').toString();
    }

    private static int ceilDiv(int n, int d) {
        return (n + d - 1) / d;
    }

    private static int number(String text, String what, int min) {
        int n;
        try {
            n = Integer.parseInt(text);
        } catch (NumberFormatException e) {
            usage(what + ": not a valid number: " + text);
            return 0;
        }
        if (n < min) {
            usage(what + " must be at least " + min);
        }
        return n;
    }

    private static String describe(Throwable e) {
        return (e.getClass().getSimpleName() + ": " + e.getMessage()).replace('\n', ' ');
    }

    private static void usage(String problem) {
        System.err.println("CuratorBench: " + problem);
        System.err.println("usage: CuratorBench CONNECT"
                + " mutex-uncontended|mutex-contended|semaphore|many-waiters|rwlock|leader-handoff|cache-load|cache-events"
                + "|counter-increment|shared-count-cas|queue-throughput|discovery-register|discovery-query"
                + "|cached-counter|many-locks|queue-sharded"
                + " CYCLES WARMUP CLIENTS MAX_LEASES BASE_PATH [hold-ms=N] [warm-solo=N] [warm-contended=N]"
                + " [jit-warmup-ms=N] [label=TEXT]"
                + " [srvr=HOST:PORT] [read-pct=P] [seed=N] [queue-shards=N]");
        System.exit(2);
    }

    private static void closeAll(List<CuratorFramework> frameworks) {
        for (CuratorFramework client : frameworks) {
            try {
                client.close();
            } catch (Throwable ignored) {
                // exiting anyway
            }
        }
    }

    /** Prints the reason, closes the sessions (bounded) and exits with `status`. */
    private static void fail(List<CuratorFramework> frameworks, int status, String message) {
        System.err.println("CuratorBench: " + message);
        System.err.flush();
        Thread closer = new Thread(() -> closeAll(frameworks));
        closer.setDaemon(true);
        closer.start();
        try {
            closer.join(3_000);
        } catch (InterruptedException ignored) {
            // exiting anyway
        }
        Runtime.getRuntime().halt(status);
    }

    /** The cache workloads. */
    private static final class CacheBench {
        private CacheBench() {}

        /** A fresh CuratorCache of `path`, started; returns once initialized() was called. */
        static CuratorCache loadOnce(CuratorFramework client, String path, CuratorCacheListener extra)
                throws Exception {
            java.util.concurrent.CountDownLatch initialized = new java.util.concurrent.CountDownLatch(1);
            CuratorCache cache = CuratorCache.build(client, path);
            if (extra != null) {
                cache.listenable().addListener(extra);
            }
            cache.listenable().addListener(CuratorCacheListener.builder().forInitialized(initialized::countDown).build());
            cache.start();
            if (!initialized.await(60, TimeUnit.SECONDS)) {
                cache.close();
                throw new Exception("no initialized() within 60 s");
            }
            return cache;
        }

        static long usedHeapAfterGc() throws InterruptedException {
            Runtime runtime = Runtime.getRuntime();
            for (int i = 0; i < 3; i++) {
                System.gc();
                Thread.sleep(50);
            }
            return runtime.totalMemory() - runtime.freeMemory();
        }

        /** Everything at and below `path`: path -> {version, data}. */
        static java.util.Map<String, Object[]> readTree(CuratorFramework client, String path) throws Exception {
            java.util.Map<String, Object[]> nodes = new java.util.TreeMap<>();
            java.util.ArrayDeque<String> todo = new java.util.ArrayDeque<>(List.of(path));
            while (!todo.isEmpty()) {
                String node = todo.pop();
                org.apache.zookeeper.data.Stat stat = new org.apache.zookeeper.data.Stat();
                byte[] data = client.getData().storingStatIn(stat).forPath(node);
                nodes.put(node, new Object[] {stat.getVersion(), data == null ? new byte[0] : data});
                for (String child : client.getChildren().forPath(node)) {
                    todo.push(node.equals("/") ? "/" + child : node + "/" + child);
                }
            }
            return nodes;
        }

        static void compare(String what, CuratorCache cache, java.util.Map<String, Object[]> server) throws Violation {
            if (cache.size() != server.size()) {
                throw new Violation(what + ": the cache holds " + cache.size() + " nodes, the server " + server.size());
            }
            for (java.util.Map.Entry<String, Object[]> e : server.entrySet()) {
                java.util.Optional<ChildData> cached = cache.get(e.getKey());
                if (cached.isEmpty()) {
                    throw new Violation(what + ": " + e.getKey() + " missing from the cache");
                }
                byte[] data = cached.get().getData() == null ? new byte[0] : cached.get().getData();
                if (cached.get().getStat().getVersion() != (int) e.getValue()[0]
                        || !Arrays.equals(data, (byte[]) e.getValue()[1])) {
                    throw new Violation(what + ": " + e.getKey() + " differs (cache version "
                            + cached.get().getStat().getVersion() + ", server " + e.getValue()[0] + ")");
                }
            }
        }

        static String load(CuratorFramework client, String path, long jitWarmupMs, String label) throws Exception {
            long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(jitWarmupMs);
            int warmups = 0;
            while (warmups < 3 || System.nanoTime() - until < 0) {
                loadOnce(client, path, null).close();
                warmups++;
            }
            java.util.Map<String, Object[]> server = readTree(client, path);
            long heapBefore = usedHeapAfterGc();
            long[] samples = new long[server.size() + 1];
            AtomicInteger created = new AtomicInteger();
            long started = System.nanoTime();
            CuratorCache cache = loadOnce(client, path, CuratorCacheListener.builder().forCreates(node -> {
                int i = created.getAndIncrement();
                if (i < samples.length) {
                    samples[i] = System.nanoTime() - started;
                }
            }).build());
            double secs = (System.nanoTime() - started) / 1e9;
            int ops = Math.min(created.get(), samples.length);
            long heapAfter = usedHeapAfterGc();
            double perNode = (double) (heapAfter - heapBefore) / Math.max(1, cache.size());
            compare("cache-load", cache, server);
            cache.close();
            System.err.printf(Locale.ROOT, "[locks]   %-20s %d warm-up loads; heap after GC %.0f bytes per cached node%n",
                    "curator", warmups, perNode);
            long[] sorted = Arrays.copyOf(samples, ops);
            Arrays.sort(sorted);
            return String.format(Locale.ROOT,
                    "{\"impl\":\"curator\",\"workload\":\"cache-load\",\"ops\":%d,\"secs\":%.3f,\"ops_per_sec\":%.1f,"
                            + "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"clients\":1,\"heap_bytes_per_node\":%.0f,\"label\":%s}",
                    ops, secs, secs > 0 ? ops / secs : 0.0, nearestRank(sorted, 50.0) / 1e6,
                    nearestRank(sorted, 99.0) / 1e6, perNode, jsonString(label));
        }

        /** One cache-events round's measurements. */
        static final class Round {
            long[][] replied;
            List<List<long[]>> seen;
            int delivered;
            long started;
            long written;
            long ended;
            /** External writer: the wall clock (µs since the epoch) at `nanoAnchor`. */
            long wallAnchorMicros;
            long nanoAnchor;
        }

        /** Writes every pass over `paths` (versions base+1 .. base+passes) under a fresh cache. */
        static Round round(CuratorFramework client, CuratorFramework writer, String path, List<String> paths, int base,
                int passes, int batch, int inFlight, boolean check, boolean external) throws Exception {
            java.util.Map<String, Integer> index = new java.util.HashMap<>();
            for (int i = 0; i < paths.size(); i++) {
                index.put(paths.get(i), i);
            }
            Round r = new Round();
            r.replied = new long[paths.size()][passes];
            r.seen = new ArrayList<>();
            for (int i = 0; i < paths.size(); i++) {
                r.seen.add(new ArrayList<>());
            }
            Object lock = new Object();
            int last = base + passes;
            AtomicInteger remaining = new AtomicInteger(paths.size());
            AtomicInteger delivered = new AtomicInteger();
            java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
            AtomicBoolean backwards = new AtomicBoolean();
            CuratorCacheListener listener = CuratorCacheListener.builder().forChanges((old, node) -> {
                Integer i = index.get(node.getPath());
                if (i == null) {
                    return;
                }
                long now = System.nanoTime();
                int version = node.getStat().getVersion();
                synchronized (lock) {
                    List<long[]> list = r.seen.get(i);
                    if (!list.isEmpty() && list.get(list.size() - 1)[0] >= version) {
                        backwards.set(true);
                    }
                    list.add(new long[] {version, now});
                }
                delivered.incrementAndGet();
                if (version == last && remaining.decrementAndGet() == 0) {
                    r.ended = System.nanoTime();
                    done.countDown();
                }
            }).build();
            CuratorCache cache = loadOnce(client, path, listener);
            if (external) {
                // The bench's own writer writes this round (the same writer as the zk-recipes
                // line's): say where the versions start, and when each event came in wall-clock
                // microseconds (the writer's process has another monotonic clock).
                r.wallAnchorMicros = java.time.temporal.ChronoUnit.MICROS.between(java.time.Instant.EPOCH,
                        java.time.Instant.now());
                r.nanoAnchor = System.nanoTime();
                r.started = r.nanoAnchor;
                System.out.println("READY " + base);
                System.out.flush();
            } else {
                org.apache.zookeeper.ZooKeeper zk = writer.getZookeeperClient().getZooKeeper();
                java.util.concurrent.Semaphore slots = new java.util.concurrent.Semaphore(inFlight);
                AtomicInteger wrongVersions = new AtomicInteger();
                AtomicInteger errors = new AtomicInteger();
                java.util.concurrent.CountDownLatch allWritten = new java.util.concurrent.CountDownLatch(paths.size() * passes);
                r.started = System.nanoTime();
                for (int pass = 1; pass <= passes; pass++) {
                    byte[] data = Integer.toString(base + pass).getBytes(StandardCharsets.UTF_8);
                    for (int i = 0; batch > 1 && i < paths.size(); i += batch) {
                        // A multi of `batch` set-data of consecutive nodes, as the bench's writer.
                        slots.acquire();
                        int first = i;
                        int end = Math.min(i + batch, paths.size());
                        int p = pass;
                        List<org.apache.zookeeper.Op> ops = new ArrayList<>();
                        for (int node = first; node < end; node++) {
                            ops.add(org.apache.zookeeper.Op.setData(paths.get(node), data, -1));
                        }
                        zk.multi(ops, (rc, at, ctx, results) -> {
                            long now = System.nanoTime();
                            for (int node = first; node < end; node++) {
                                r.replied[node][p - 1] = now;
                                org.apache.zookeeper.OpResult result = results == null ? null : results.get(node - first);
                                if (rc != 0 || !(result instanceof org.apache.zookeeper.OpResult.SetDataResult)) {
                                    errors.incrementAndGet();
                                } else if (((org.apache.zookeeper.OpResult.SetDataResult) result).getStat().getVersion() != base + p) {
                                    wrongVersions.incrementAndGet();
                                }
                                allWritten.countDown();
                            }
                            slots.release();
                        }, null);
                    }
                    for (int i = 0; batch == 1 && i < paths.size(); i++) {
                        slots.acquire();
                        int node = i;
                        int p = pass;
                        zk.setData(paths.get(i), data, -1, (rc, at, ctx, stat) -> {
                            r.replied[node][p - 1] = System.nanoTime();
                            if (rc != 0) {
                                errors.incrementAndGet();
                            } else if (stat.getVersion() != base + p) {
                                wrongVersions.incrementAndGet();
                            }
                            slots.release();
                            allWritten.countDown();
                        }, null);
                    }
                }
                allWritten.await();
                r.written = System.nanoTime();
                if (errors.get() > 0 || wrongVersions.get() > 0) {
                    cache.close();
                    throw new Exception(errors.get() + " writes failed, " + wrongVersions.get()
                            + " found an unexpected version: is the path in use?");
                }
            }
            if (!done.await(60, TimeUnit.SECONDS)) {
                cache.close();
                throw new Exception(remaining.get() + " nodes short of their last version after 60 s");
            }
            r.delivered = delivered.get();
            if (backwards.get()) {
                cache.close();
                throw new Violation("a node's version went backwards in the events");
            }
            if (check) {
                compare("cache-events", cache, readTree(client, path));
            }
            cache.close();
            return r;
        }

        static String events(CuratorFramework client, CuratorFramework writer, String path, int nodes, int passes, int batch, int inFlight,
                long jitWarmupMs, boolean external, String label) throws Exception {
            client.create().creatingParentsIfNeeded().forPath(path);
            List<String> paths = new ArrayList<>();
            for (int i = 0; i < nodes; i++) {
                String node = String.format(Locale.ROOT, "%s/n%05d", path, i);
                client.create().forPath(node, "0".getBytes(StandardCharsets.UTF_8));
                paths.add(node);
            }
            long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(jitWarmupMs);
            int base = 0;
            int warmups = 0;
            while (warmups < 3 || System.nanoTime() - until < 0) {
                round(client, writer, path, paths, base, passes, batch, inFlight, false, false);
                base += passes;
                warmups++;
            }
            Round r = round(client, writer, path, paths, base, passes, batch, inFlight, true, external);
            if (external) {
                // Every event as "E <node> <version> <wall µs>"; the bench times the line.
                StringBuilder out = new StringBuilder();
                for (int i = 0; i < nodes; i++) {
                    for (long[] event : r.seen.get(i)) {
                        long micros = r.wallAnchorMicros + (event[1] - r.nanoAnchor) / 1000;
                        out.append("E ").append(i).append(' ').append(event[0] - base).append(' ').append(micros)
                                .append('\n');
                    }
                }
                System.err.printf(Locale.ROOT, "[locks]   %-20s %d warm-up rounds%n", "curator", warmups);
                for (String node : paths) {
                    client.delete().forPath(node);
                }
                client.delete().forPath(path);
                return out.append(String.format(Locale.ROOT,
                        "{\"impl\":\"curator\",\"workload\":\"cache-events\",\"ops\":%d,\"label\":%s}",
                        r.delivered, jsonString(label))).toString();
            }
            long[] samples = new long[nodes * passes];
            int n = 0;
            for (int i = 0; i < nodes; i++) {
                List<long[]> seen = r.seen.get(i);
                for (int p = 1; p <= passes; p++) {
                    long at = r.ended;
                    for (long[] event : seen) {
                        if (event[0] >= base + p) {
                            at = event[1];
                            break;
                        }
                    }
                    samples[n++] = Math.max(0, at - r.replied[i][p - 1]);
                }
            }
            Arrays.sort(samples);
            double secs = (r.ended - r.started) / 1e9;
            double writeSecs = (r.written - r.started) / 1e9;
            System.err.printf(Locale.ROOT, "[locks]   %-20s %d warm-up rounds%n", "curator", warmups);
            for (String node : paths) {
                client.delete().forPath(node);
            }
            client.delete().forPath(path);
            return String.format(Locale.ROOT,
                    "{\"impl\":\"curator\",\"workload\":\"cache-events\",\"ops\":%d,\"secs\":%.3f,\"ops_per_sec\":%.1f,"
                            + "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"clients\":1,\"writes\":%d,\"writes_per_sec\":%.1f,"
                            + "\"label\":%s}",
                    r.delivered, secs, secs > 0 ? r.delivered / secs : 0.0, nearestRank(samples, 50.0) / 1e6,
                    nearestRank(samples, 99.0) / 1e6, samples.length, writeSecs > 0 ? samples.length / writeSecs : 0.0,
                    jsonString(label));
        }
    }

    /** The recipes that are not locks: counters, the queue, service discovery. */
    private static final class RecipeBench {
        private RecipeBench() {}

        /** What a counter or registration "acquire" returns: nothing to release. */
        private static final Held NOTHING = () -> {};

        /** The service every discovery line registers or queries. */
        static final String SERVICE = "bench";

        /** cached-counter: the CachedAtomicLong's cacheFactor. */
        static int cacheFactor = 100;

        /** cached-counter: the values handed out, per counter path. */
        static final java.util.concurrent.ConcurrentHashMap<String, java.util.Set<Long>> HANDED = new java.util.concurrent.ConcurrentHashMap<>();

        /** cached-counter: the first value handed out twice, if any. */
        static final java.util.concurrent.atomic.AtomicReference<String> duplicate =
                new java.util.concurrent.atomic.AtomicReference<>();

        /** counter-increment, shared-count-cas, discovery-register as the Lock of a Contender. */
        static Recipe recipe(String workload, String measured, int retries, int retrySleepMs,
                java.util.concurrent.ConcurrentHashMap<String, AtomicLong> applied,
                java.util.concurrent.ConcurrentHashMap<String, Long> baseline, AtomicLong tries,
                AtomicLong gaveUp, List<AutoCloseable> closeables) {
            switch (workload) {
                case "counter-increment":
                    return (client, at, index) -> {
                        org.apache.curator.framework.recipes.atomic.DistributedAtomicLong counter =
                                new org.apache.curator.framework.recipes.atomic.DistributedAtomicLong(
                                        client, at, new RetryNTimes(retries, retrySleepMs));
                        if (!baseline.containsKey(at)) {
                            baseline.putIfAbsent(at, client.checkExists().forPath(at) == null ? 0 : readCounter(client, at, true));
                        }
                        AtomicLong count = applied.computeIfAbsent(at, k -> new AtomicLong());
                        AtomicLong myTries = at.equals(measured) ? tries : new AtomicLong();
                        AtomicLong myGaveUp = at.equals(measured) ? gaveUp : new AtomicLong();
                        return () -> {
                            while (true) {
                                org.apache.curator.framework.recipes.atomic.AtomicValue<Long> result = counter.increment();
                                myTries.addAndGet(result.getStats().getOptimisticTries());
                                if (result.succeeded()) {
                                    count.incrementAndGet();
                                    return NOTHING;
                                }
                                myGaveUp.incrementAndGet();
                            }
                        };
                    };
                case "cached-counter":
                    return (client, at, index) -> {
                        org.apache.curator.framework.recipes.atomic.CachedAtomicLong cached =
                                new org.apache.curator.framework.recipes.atomic.CachedAtomicLong(
                                        new org.apache.curator.framework.recipes.atomic.DistributedAtomicLong(
                                                client, at, new RetryNTimes(retries, retrySleepMs)),
                                        cacheFactor);
                        synchronized (baseline) {
                            if (!baseline.containsKey(at)) {
                                baseline.put(at, client.checkExists().forPath(at) == null ? 0 : readCounter(client, at, true));
                            }
                        }
                        AtomicLong count = applied.computeIfAbsent(at, k -> new AtomicLong());
                        java.util.Set<Long> handed = HANDED.computeIfAbsent(at, k -> java.util.concurrent.ConcurrentHashMap.newKeySet());
                        AtomicLong myTries = at.equals(measured) ? tries : new AtomicLong();
                        AtomicLong myGaveUp = at.equals(measured) ? gaveUp : new AtomicLong();
                        return () -> {
                            while (true) {
                                org.apache.curator.framework.recipes.atomic.AtomicValue<Long> result = cached.next();
                                myTries.addAndGet(result.getStats().getOptimisticTries());
                                if (result.succeeded()) {
                                    if (!handed.add(result.preValue())) {
                                        duplicate.compareAndSet(null, at + ": value " + result.preValue() + " handed out twice");
                                    }
                                    count.incrementAndGet();
                                    return NOTHING;
                                }
                                myGaveUp.incrementAndGet();
                            }
                        };
                    };
                case "typed-cas":
                    return (client, at, index) -> {
                        try {
                            client.create().creatingParentsIfNeeded().forPath(at, CONFIG_WRITER.writeValueAsBytes(Config.seed()));
                        } catch (org.apache.zookeeper.KeeperException.NodeExistsException ignored) {
                            // made by an earlier round
                        }
                        baseline.putIfAbsent(at, readRevision(client, at));
                        AtomicLong count = applied.computeIfAbsent(at, k -> new AtomicLong());
                        AtomicLong myTries = at.equals(measured) ? tries : new AtomicLong();
                        return () -> {
                            while (true) {
                                org.apache.zookeeper.data.Stat stat = new org.apache.zookeeper.data.Stat();
                                Config config = CONFIG_READER.readValue(client.getData().storingStatIn(stat).forPath(at));
                                config.revision += 1;
                                myTries.incrementAndGet();
                                try {
                                    client.setData().withVersion(stat.getVersion())
                                            .forPath(at, CONFIG_WRITER.writeValueAsBytes(config));
                                    count.incrementAndGet();
                                    return NOTHING;
                                } catch (org.apache.zookeeper.KeeperException.BadVersionException e) {
                                    // another writer came first: read again
                                }
                            }
                        };
                    };
                case "shared-count-cas":
                    return (client, at, index) -> {
                        org.apache.curator.framework.recipes.shared.SharedCount shared =
                                new org.apache.curator.framework.recipes.shared.SharedCount(client, at, 0);
                        shared.start();
                        closeables.add(shared);
                        baseline.putIfAbsent(at, (long) shared.getCount());
                        AtomicLong count = applied.computeIfAbsent(at, k -> new AtomicLong());
                        AtomicLong myTries = at.equals(measured) ? tries : new AtomicLong();
                        return () -> {
                            while (true) {
                                org.apache.curator.framework.recipes.shared.VersionedValue<Integer> seen =
                                        shared.getVersionedValue();
                                myTries.incrementAndGet();
                                if (shared.trySetCount(seen, seen.getValue() + 1)) {
                                    count.incrementAndGet();
                                    return NOTHING;
                                }
                            }
                        };
                    };
                default:
                    return (client, at, index) -> {
                        // The service's node persistent, as in the Rust lines: the TestingServer reaps
                        // an empty container within 100 ms, and a registerService whose parent went
                        // between its mkdirs and its create fails with NoNode.
                        try {
                            client.create().creatingParentsIfNeeded().forPath(at + "/" + SERVICE);
                        } catch (org.apache.zookeeper.KeeperException.NodeExistsException ignored) {
                            // made by an earlier round
                        }
                        org.apache.curator.x.discovery.ServiceDiscovery<Void> discovery = discovery(client, at);
                        closeables.add(discovery);
                        org.apache.curator.x.discovery.ServiceInstance<Void> instance = instance(0);
                        return () -> {
                            discovery.registerService(instance);
                            return () -> discovery.unregisterService(instance);
                        };
                    };
            }
        }

        /** A started ServiceDiscovery under `base` (no payload; Curator's default serializer). */
        static org.apache.curator.x.discovery.ServiceDiscovery<Void> discovery(CuratorFramework client, String base)
                throws Exception {
            org.apache.curator.x.discovery.ServiceDiscovery<Void> discovery =
                    org.apache.curator.x.discovery.ServiceDiscoveryBuilder.builder(Void.class).client(client)
                            .basePath(base).build();
            discovery.start();
            return discovery;
        }

        /** Instance `i`, as the Rust lines register it. */
        static org.apache.curator.x.discovery.ServiceInstance<Void> instance(int i) throws Exception {
            return org.apache.curator.x.discovery.ServiceInstance.<Void>builder().name(SERVICE)
                    .id(String.format(Locale.ROOT, "instance-%05d", i)).address("127.0.0.1").port(8080).build();
        }

        /** typed-cas's record: the fields of the Rust bench's `Config`, in the same order. */
        public static final class Config {
            public String name;
            public long revision;
            public int replicas;
            public double ratio;
            public boolean enabled;
            public List<String> regions;
            public String owner;

            /** The record every typed-cas line starts from (revision 0). */
            static Config seed() {
                Config config = new Config();
                config.name = "checkout";
                config.replicas = 3;
                config.ratio = 0.75;
                config.enabled = true;
                config.regions = Arrays.asList("eu-west", "us-east");
                return config;
            }
        }

        /** JacksonModelSerializer's mapper: a default ObjectMapper, unknown properties ignored. */
        static final com.fasterxml.jackson.databind.ObjectMapper MAPPER = new com.fasterxml.jackson.databind.ObjectMapper()
                .configure(com.fasterxml.jackson.databind.DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);
        static final com.fasterxml.jackson.databind.ObjectReader CONFIG_READER = MAPPER.readerFor(Config.class);
        static final com.fasterxml.jackson.databind.ObjectWriter CONFIG_WRITER = MAPPER.writerFor(Config.class);

        /** typed-cas: the record's revision. */
        static long readRevision(CuratorFramework client, String path) throws Exception {
            Config config = CONFIG_READER.readValue(client.getData().forPath(path));
            return config.revision;
        }

        /** A counter's value: 8 big-endian bytes (atomic long) or 4 (shared count). */
        static long readCounter(CuratorFramework client, String path, boolean atomicLong) throws Exception {
            java.nio.ByteBuffer bytes = java.nio.ByteBuffer.wrap(client.getData().forPath(path));
            return atomicLong ? bytes.getLong() : bytes.getInt();
        }

        static String line(String impl, String workload, int ops, double secs, long[] samples, int clients,
                String extra, String label) {
            long[] sorted = Arrays.copyOf(samples, samples.length);
            Arrays.sort(sorted);
            return String.format(Locale.ROOT,
                    "{\"impl\":%s,\"workload\":%s,\"ops\":%d,\"secs\":%.3f,\"ops_per_sec\":%.1f,"
                            + "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"clients\":%d%s,\"label\":%s}",
                    jsonString(impl), jsonString(workload), ops, secs, secs > 0 ? ops / secs : 0.0,
                    nearestRank(sorted, 50.0) / 1e6, nearestRank(sorted, 99.0) / 1e6, clients, extra,
                    jsonString(label));
        }

        static void requests(String impl, String srvr, long[] before, int ops) {
            long[] after = serverCounters(srvr);
            if (before != null && after != null && ops > 0) {
                System.err.printf(Locale.ROOT, "[locks]   %-20s server requests/op %.2f (all sessions, pings included)%n",
                        impl, (double) (after[0] - before[0]) / ops);
            }
        }

        /** One queue pass: items base .. base+n, when each was put and taken. */
        static final class Pass {
            final int base;
            final long[] put;
            final long[] taken;
            final java.util.concurrent.CountDownLatch done;
            final AtomicBoolean wrong = new AtomicBoolean();

            Pass(int base, int n) {
                this.base = base;
                this.put = new long[n];
                this.taken = new long[n];
                this.done = new java.util.concurrent.CountDownLatch(n);
            }

            void taken(String item) {
                long now = System.nanoTime();
                int i;
                try {
                    i = Integer.parseInt(item) - base;
                } catch (NumberFormatException e) {
                    i = -1;
                }
                synchronized (this) {
                    if (i < 0 || i >= taken.length || taken[i] != 0) {
                        wrong.set(true);
                        return;
                    }
                    taken[i] = now;
                }
                done.countDown();
            }
        }

        /** Where a pass's puts go: one queue, or the queue a QueueSharder picks for each put. */
        interface Producer {
            org.apache.curator.framework.recipes.queue.DistributedQueue<String> queue();
        }

        static Pass pass(Producer producer, java.util.concurrent.atomic.AtomicReference<Pass> current, int base, int n)
                throws Exception {
            Pass pass = new Pass(base, n);
            current.set(pass);
            for (int i = 0; i < n; i++) {
                pass.put[i] = System.nanoTime();
                producer.queue().put(Integer.toString(base + i));
            }
            if (!pass.done.await(60, TimeUnit.SECONDS)) {
                throw new Exception(pass.done.getCount() + " items not delivered after 60 s");
            }
            if (pass.wrong.get()) {
                throw new Violation("an item delivered twice or not put in this pass");
            }
            return pass;
        }

        static String measuredPass(String impl, String workload, String extra, Producer producer,
                java.util.concurrent.atomic.AtomicReference<Pass> current, int base, int n, String srvr, String label)
                throws Exception {
            long[] before = serverCounters(srvr);
            Pass pass = pass(producer, current, base, n);
            requests(impl, srvr, before, n);
            long[] samples = new long[n];
            long last = pass.put[0];
            for (int i = 0; i < n; i++) {
                samples[i] = Math.max(0, pass.taken[i] - pass.put[i]);
                last = Math.max(last, pass.taken[i]);
            }
            return line(impl, workload, n, (last - pass.put[0]) / 1e9, samples, 2, extra, label);
        }

        /** The items as UTF-8 text. */
        static org.apache.curator.framework.recipes.queue.QueueSerializer<String> strings() {
            return new org.apache.curator.framework.recipes.queue.QueueSerializer<String>() {
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

        /** A consumer that marks each item taken in the `current` pass. */
        static org.apache.curator.framework.recipes.queue.QueueConsumer<String> consumer(
                java.util.concurrent.atomic.AtomicReference<Pass> current) {
            return new org.apache.curator.framework.recipes.queue.QueueConsumer<String>() {
                @Override
                public void consumeMessage(String item) {
                    current.get().taken(item);
                }

                @Override
                public void stateChanged(CuratorFramework client,
                        org.apache.curator.framework.state.ConnectionState state) {}
            };
        }

        /**
         * queue-sharded: `shards` shards made under `path`, then a consumer's QueueSharder on
         * `consuming` (each shard's queue with the consumer) and a producer's on `producing`
         * (producer-only queues, puts awaited), both at most `shards` shards so that none is
         * added; `jitItems` items through first in passes of `items`, then `warmup` items, then
         * the measured `items`, each put into `getQueue()` of the producer's sharder.
         */
        static List<String> sharded(CuratorFramework producing, CuratorFramework consuming, String path, int shards,
                int items, int warmup, int jitItems, String srvr, String label) throws Exception {
            for (int i = 0; i < shards; i++) {
                producing.create().creatingParentsIfNeeded().forPath(path + "/queue-" + java.util.UUID.randomUUID());
            }
            org.apache.curator.framework.recipes.queue.QueueSerializer<String> serializer = strings();
            java.util.concurrent.atomic.AtomicReference<Pass> current = new java.util.concurrent.atomic.AtomicReference<>();
            org.apache.curator.framework.recipes.queue.QueueConsumer<String> consumer = consumer(current);
            org.apache.curator.framework.recipes.queue.QueueSharderPolicies policies =
                    org.apache.curator.framework.recipes.queue.QueueSharderPolicies.builder().maxQueues(shards).build();
            String leader = path + "-leader";
            org.apache.curator.framework.recipes.queue.QueueSharder<String,
                    org.apache.curator.framework.recipes.queue.DistributedQueue<String>> taker =
                    new org.apache.curator.framework.recipes.queue.QueueSharder<>(consuming,
                            (client, shard) -> org.apache.curator.framework.recipes.queue.QueueBuilder
                                    .builder(client, consumer, serializer, shard).buildQueue(),
                            path, leader, policies);
            org.apache.curator.framework.recipes.queue.QueueSharder<String,
                    org.apache.curator.framework.recipes.queue.DistributedQueue<String>> putter =
                    new org.apache.curator.framework.recipes.queue.QueueSharder<>(producing,
                            (client, shard) -> org.apache.curator.framework.recipes.queue.QueueBuilder
                                    .builder(client, null, serializer, shard).putInBackground(false).buildQueue(),
                            path, leader, policies);
            taker.start();
            putter.start();
            try {
                if (taker.getShardQty() != shards || putter.getShardQty() != shards) {
                    throw new Exception("the sharders took up " + taker.getShardQty() + " and " + putter.getShardQty()
                            + " shards, not " + shards);
                }
                int base = 0;
                for (int done = 0; done < jitItems; done += items) {
                    pass(putter::getQueue, current, base, items);
                    base += items;
                }
                if (warmup > 0) {
                    pass(putter::getQueue, current, base, warmup);
                    base += warmup;
                }
                List<String> lines = new ArrayList<>();
                lines.add(measuredPass("curator", "queue-sharded", ",\"shards\":" + shards, putter::getQueue, current,
                        base, items, srvr, label));
                System.err.printf(Locale.ROOT, "[locks]   %-20s %d JIT warm-up items, then %d warmup items, over %d shards%n",
                        "curator", jitItems, warmup, shards);
                return lines;
            } finally {
                putter.close();
                taker.close();
            }
        }

        /**
         * queue-throughput: a consumer's DistributedQueue on `consuming`, a producer-only one on
         * `producing` (puts awaited, putInBackground(false), as the Rust put is); `jitItems`
         * items through first in passes of `items`, then `warmup` items, then the measured
         * `items`; then the same measured pass through a producer with Curator's default
         * background puts (`curator-background`).
         */
        static List<String> queue(CuratorFramework producing, CuratorFramework consuming, String path, int items,
                int warmup, int jitItems, String srvr, String label) throws Exception {
            org.apache.curator.framework.recipes.queue.QueueSerializer<String> serializer = strings();
            java.util.concurrent.atomic.AtomicReference<Pass> current = new java.util.concurrent.atomic.AtomicReference<>();
            org.apache.curator.framework.recipes.queue.QueueConsumer<String> consumer = consumer(current);
            org.apache.curator.framework.recipes.queue.DistributedQueue<String> taker =
                    org.apache.curator.framework.recipes.queue.QueueBuilder.builder(consuming, consumer, serializer, path)
                            .buildQueue();
            taker.start();
            org.apache.curator.framework.recipes.queue.DistributedQueue<String> putter =
                    org.apache.curator.framework.recipes.queue.QueueBuilder.builder(producing, null, serializer, path)
                            .putInBackground(false).buildQueue();
            putter.start();
            org.apache.curator.framework.recipes.queue.DistributedQueue<String> background =
                    org.apache.curator.framework.recipes.queue.QueueBuilder.builder(producing, null, serializer, path)
                            .buildQueue();
            background.start();
            int base = 0;
            for (int done = 0; done < jitItems; done += items) {
                pass(() -> putter, current, base, items);
                base += items;
            }
            if (warmup > 0) {
                pass(() -> putter, current, base, warmup);
                base += warmup;
                pass(() -> background, current, base, warmup);
                base += warmup;
            }
            List<String> lines = new ArrayList<>();
            lines.add(measuredPass("curator", "queue-throughput", "", () -> putter, current, base, items, srvr, label));
            base += items;
            lines.add(measuredPass("curator-background", "queue-throughput", "", () -> background, current, base, items,
                    srvr, label));
            System.err.printf(Locale.ROOT, "[locks]   %-20s %d JIT warm-up items, then %d warmup items%n", "curator",
                    jitItems, warmup);
            background.close();
            putter.close();
            taker.close();
            return lines;
        }

        /**
         * discovery-query: `instances` registered through a ServiceDiscovery on `registering`;
         * on `querying`, queryForInstances (`curator`) and a ServiceCache's getInstances
         * (`curator-cache`), each after a JIT warm-up (at least `jitReads` instances read,
         * then `warmup` queries; the cache: `jitReads` + `warmup` calls).
         */
        static List<String> query(CuratorFramework registering, CuratorFramework querying, String path, int instances,
                int queries, int warmup, int cacheQueries, int jitReads, String srvr, String label) throws Exception {
            org.apache.curator.x.discovery.ServiceDiscovery<Void> registry = discovery(registering, path);
            for (int i = 0; i < instances; i++) {
                registry.registerService(instance(i));
            }
            org.apache.curator.x.discovery.ServiceDiscovery<Void> discovery = discovery(querying, path);
            int jitQueries = (jitReads + instances - 1) / instances;
            for (int i = 0; i < jitQueries + warmup; i++) {
                check(discovery.queryForInstances(SERVICE).size(), instances);
            }
            List<String> lines = new ArrayList<>();
            long[] before = serverCounters(srvr);
            long[] samples = new long[queries];
            long started = System.nanoTime();
            for (int i = 0; i < queries; i++) {
                long at = System.nanoTime();
                check(discovery.queryForInstances(SERVICE).size(), instances);
                samples[i] = System.nanoTime() - at;
            }
            double secs = (System.nanoTime() - started) / 1e9;
            requests("curator", srvr, before, queries);
            lines.add(line("curator", "discovery-query", queries, secs, samples, 1, "", label));

            org.apache.curator.x.discovery.ServiceCache<Void> cache =
                    discovery.serviceCacheBuilder().name(SERVICE).build();
            cache.start();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (cache.getInstances().size() != instances) {
                if (System.nanoTime() - deadline > 0) {
                    throw new Exception("the ServiceCache holds " + cache.getInstances().size() + " instances of "
                            + instances + " after 60 s");
                }
                Thread.sleep(10);
            }
            for (int i = 0; i < jitReads + warmup; i++) {
                check(cache.getInstances().size(), instances);
            }
            before = serverCounters(srvr);
            samples = new long[cacheQueries];
            started = System.nanoTime();
            for (int i = 0; i < cacheQueries; i++) {
                long at = System.nanoTime();
                check(cache.getInstances().size(), instances);
                samples[i] = System.nanoTime() - at;
            }
            secs = (System.nanoTime() - started) / 1e9;
            requests("curator-cache", srvr, before, cacheQueries);
            lines.add(line("curator-cache", "discovery-query", cacheQueries, secs, samples, 1, "", label));
            System.err.printf(Locale.ROOT, "[locks]   %-20s %d JIT warm-up queries (%d instances each), then %d warmup"
                    + " queries; the cache: %d calls first%n", "curator", jitQueries, instances, warmup, jitReads + warmup);
            cache.close();
            discovery.close();
            registry.close();
            return lines;
        }

        static void check(int found, int expected) throws Exception {
            if (found != expected) {
                throw new Exception("found " + found + " instances, expected " + expected);
            }
        }
    }
}
