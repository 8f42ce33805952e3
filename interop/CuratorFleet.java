// Benchmark peer: the fleet of benches/fleet/ through Apache Curator 5.x, in one JVM, so that the
// bench measures Curator's fleet in the same run, on the same ensemble (see benches/README.md,
// "A fleet in one box").
//
// Usage (benches/fleet/ compiles this file with javac and drives it through stdin):
//
//   java -cp <classes>:<curator classpath> CuratorFleet CONNECT ROOT INSTANCES ENTITIES
//       SESSION_TIMEOUT_MS LOCK_EVERY_MS HOLD_MS CONCURRENCY SEED LABEL
//
// Each instance is one CuratorFramework (its own session) with a ServiceDiscovery registration
// (ROOT/services/fleet/instance-NNNNN), a CuratorCache (SINGLE_NODE_CACHE) on ROOT/config, whose
// data is the configuration's generation in decimal, and, every LOCK_EVERY_MS on average (at
// random, uniform in 0..2*LOCK_EVERY_MS), an InterProcessMutex on ROOT/entities/<k> held HOLD_MS.
// Commands, one per line on stdin; each prints JSON lines and then OK, or FAIL <what>:
//
//   up                 open the sessions, register, start the caches; the memory and
//                      registration lines; then the background locks start
//   changes W K        W unmeasured configuration changes, then K measured ones (a line each
//                      and one with the medians)
//   recover MICROS M   the leader, member M, was killed at MICROS (microseconds since the epoch): write the
//                      configuration once more (retried by Curator until the new leader takes
//                      it), and wait until every instance is back: its cache shows that
//                      configuration and it took and gave back one entity lock; then the
//                      registrations; the leader-kill line
//   end                the registrations and the locks lines, close everything, exit
//
// A line VIOLATION <what> before OK or FAIL reports something lost or doubled (two holders of an
// entity lock at once, a registration missing or twice).

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;

public final class CuratorFleet {
    static final String SERVICE = "fleet";

    final String connect;
    final String services;
    final String config;
    final String entities;
    final int n;
    final int sessionTimeoutMs;
    final long lockEveryMs;
    final long holdMs;
    final int concurrency;
    final long seed;
    final String label;

    /** Per entity: the instance holding its lock now (null: none), and its sessions lost then. */
    final java.util.concurrent.atomic.AtomicReferenceArray<Holder> held;
    /** Acquires that found the entity held by another instance: that holder. */
    final List<Holder> overlapped = java.util.Collections.synchronizedList(new ArrayList<>());
    final AtomicLong acquired = new AtomicLong();
    final AtomicLong timedOut = new AtomicLong();
    final AtomicLong failed = new AtomicLong();

    final List<Instance> instances = new ArrayList<>();
    CuratorFramework admin;
    ServiceDiscovery<Void> adminDiscovery;
    long generation;
    final ScheduledExecutorService timer = Executors.newScheduledThreadPool(2);
    final ExecutorService lockers = Executors.newFixedThreadPool(64);
    volatile boolean stopping;

    /** The generation every instance is waited for, and the latch its first showing counts down. */
    volatile long target = Long.MAX_VALUE;
    volatile CountDownLatch reached = new CountDownLatch(0);

    /** A hold: its instance, and how many sessions that instance had lost when it acquired. */
    record Holder(Instance instance, int lostBefore) {
        /** Whether the holder's session ended after it acquired (its lock node went with it). */
        boolean sessionEnded() {
            return instance.sessionsLost.get() > lostBefore;
        }
    }

    final class Instance {
        final int index;
        final String id;
        final CuratorFramework client;
        ServiceDiscovery<Void> discovery;
        CuratorCache cache;
        final Random random;
        /** Written by the client's event thread only (one per client). */
        volatile long seenGeneration = -1;
        volatile long seenAt;
        final AtomicInteger sessionsLost = new AtomicInteger();

        Instance(int index) {
            this.index = index;
            this.id = String.format(Locale.ROOT, "instance-%05d", index);
            // Mixed: java.util.Random's first values for neighbouring seeds are nearly equal,
            // which would start every instance's locks at the same moment.
            this.random = new Random(splitMix(seed ^ (index * 0x9E3779B97F4A7C15L)));
            this.client = CuratorFrameworkFactory.builder().connectString(connect)
                    .sessionTimeoutMs(sessionTimeoutMs).connectionTimeoutMs(15000)
                    .retryPolicy(new ExponentialBackoffRetry(100, 10)).build();
            client.getConnectionStateListenable().addListener((c, state) -> {
                if (state == ConnectionState.LOST) {
                    sessionsLost.incrementAndGet();
                }
            });
        }

        void open() throws Exception {
            client.start();
            if (!client.blockUntilConnected(sessionTimeoutMs * 2, TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException(id + ": not connected");
            }
        }

        void attach() throws Exception {
            discovery = ServiceDiscoveryBuilder.builder(Void.class).client(client).basePath(services).build();
            discovery.start();
            discovery.registerService(ServiceInstance.<Void>builder().name(SERVICE).id(id).address("127.0.0.1")
                    .port(8080).build());
            CountDownLatch initialized = new CountDownLatch(1);
            cache = CuratorCache.build(client, config, CuratorCache.Options.SINGLE_NODE_CACHE);
            cache.listenable().addListener(CuratorCacheListener.builder()
                    .forCreatesAndChanges((before, node) -> shown(node))
                    .forInitialized(initialized::countDown).build());
            cache.start();
            if (!initialized.await(sessionTimeoutMs * 2, TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException(id + ": cache not initialized");
            }
        }

        void shown(ChildData node) {
            long at = System.nanoTime();
            long g;
            try {
                g = Long.parseLong(new String(node.getData(), StandardCharsets.UTF_8));
            } catch (RuntimeException e) {
                return;
            }
            long previous = seenGeneration;
            if (g <= previous) {
                return;
            }
            seenAt = at;
            seenGeneration = g;
            long t = target;
            CountDownLatch latch = reached;
            if (previous < t && g >= t) {
                latch.countDown();
            }
        }

        /** The generation its cache holds now. */
        long cached() {
            return cache.get(config).map(d -> Long.parseLong(new String(d.getData(), StandardCharsets.UTF_8)))
                    .orElse(-1L);
        }

        void scheduleLock() {
            if (lockEveryMs == 0 || stopping) {
                return;
            }
            long pause = (long) (random.nextDouble() * 2 * lockEveryMs);
            int k = random.nextInt(held.length());
            timer.schedule(() -> lockers.execute(() -> {
                if (stopping) {
                    return;
                }
                try {
                    takeEntity(this, k, sessionTimeoutMs * 2L);
                } catch (Exception e) {
                    // counted
                }
                scheduleLock();
            }), pause, TimeUnit.MILLISECONDS);
        }

        void close() {
            try {
                cache.close();
            } catch (RuntimeException ignored) {
            }
            try {
                discovery.close();
            } catch (Exception ignored) {
            }
            client.close();
        }
    }

    CuratorFleet(String[] a) {
        connect = a[0];
        services = a[1] + "/services";
        config = a[1] + "/config";
        entities = a[1] + "/entities";
        n = Integer.parseInt(a[2]);
        held = new java.util.concurrent.atomic.AtomicReferenceArray<>(Integer.parseInt(a[3]));
        sessionTimeoutMs = Integer.parseInt(a[4]);
        lockEveryMs = Long.parseLong(a[5]);
        holdMs = Long.parseLong(a[6]);
        concurrency = Integer.parseInt(a[7]);
        seed = Long.parseLong(a[8]);
        label = a.length > 9 ? a[9] : "";
    }

    /** Takes entity k's lock (waiting at most boundMs), holds it, releases it; false on timeout. */
    boolean takeEntity(Instance in, int k, long boundMs) throws Exception {
        InterProcessMutex mutex = new InterProcessMutex(in.client, entities + "/" + k);
        boolean got;
        try {
            got = mutex.acquire(boundMs, TimeUnit.MILLISECONDS);
        } catch (Exception e) {
            failed.incrementAndGet();
            throw e;
        }
        if (!got) {
            timedOut.incrementAndGet();
            return false;
        }
        Holder me = new Holder(in, in.sessionsLost.get());
        Holder other = held.getAndSet(k, me);
        if (other != null) {
            overlapped.add(other);
            System.err.println("[fleet] curator: entity " + k + ": acquired while another instance held it");
        }
        Thread.sleep(holdMs);
        held.compareAndSet(k, me, null);
        acquired.incrementAndGet();
        try {
            mutex.release();
        } catch (Exception e) {
            failed.incrementAndGet();
            throw e;
        }
        return true;
    }

    // ------------------------------------------------------------------------------------------
    // Commands

    void up() throws Exception {
        admin = CuratorFrameworkFactory.builder().connectString(connect).sessionTimeoutMs(sessionTimeoutMs)
                .retryPolicy(new ExponentialBackoffRetry(100, 10)).build();
        admin.start();
        if (!admin.blockUntilConnected(sessionTimeoutMs * 2, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("admin: not connected");
        }
        admin.create().orSetData().creatingParentsIfNeeded().forPath(config, bytes(0));
        // The service's node persistent: a container's reaping between a registration's mkdirs
        // and its create would fail that registration with NoNode.
        admin.create().orSetData().creatingParentsIfNeeded().forPath(services + "/" + SERVICE);
        adminDiscovery = ServiceDiscoveryBuilder.builder(Void.class).client(admin).basePath(services).build();
        adminDiscovery.start();
        long boundMs = sessionTimeoutMs * 4L + 50L * n;

        long heapBefore = heapKib();
        long rssBefore = rssKib();
        long started = System.nanoTime();
        ExecutorService pool = Executors.newFixedThreadPool(concurrency);
        try {
            for (int i = 0; i < n; i++) {
                instances.add(new Instance(i));
            }
            runAll(pool, instances.stream().map(in -> (Task) in::open).toList(), boundMs, "sessions open");
            double connectSecs = (System.nanoTime() - started) / 1e9;
            long heapSessions = heapKib();
            long rssSessions = rssKib();
            System.err.printf(Locale.ROOT, "[fleet] curator: %d sessions open in %.1f s; registering and starting caches ...%n",
                    n, connectSecs);
            long attachStarted = System.nanoTime();
            runAll(pool, instances.stream().map(in -> (Task) in::attach).toList(), boundMs,
                    "instances registered with their caches loaded");
            double attachSecs = (System.nanoTime() - attachStarted) / 1e9;
            long heapFleet = heapKib();
            long rssFleet = rssKib();
            int threads = ManagementFactory.getThreadMXBean().getThreadCount();
            print(String.format(Locale.ROOT,
                    "\"measure\":\"memory\",\"instances\":%d,\"connect_secs\":%.3f,\"attach_secs\":%.3f,"
                            + "\"rss_before_kib\":%d,\"rss_sessions_kib\":%d,\"rss_fleet_kib\":%d,"
                            + "\"kib_per_idle_framework\":%.3f,\"kib_per_instance\":%.3f,"
                            + "\"heap_kib_per_idle_framework\":%.3f,\"heap_kib_per_instance\":%.3f,\"threads\":%d",
                    n, connectSecs, attachSecs, rssBefore, rssSessions, rssFleet,
                    (rssSessions - rssBefore) / (double) n, (rssFleet - rssBefore) / (double) n,
                    (heapSessions - heapBefore) / (double) n, (heapFleet - heapBefore) / (double) n, threads));
        } finally {
            pool.shutdown();
        }
        checkRegistrations("setup", System.nanoTime() + sessionTimeoutMs * 2_000_000L);
        for (Instance in : instances) {
            in.scheduleLock();
        }
    }

    void changes(int warmup, int measured) throws Exception {
        List<long[]> medians = new ArrayList<>();
        for (int change = 1 - warmup; change <= measured; change++) {
            generation++;
            long g = generation;
            reached = new CountDownLatch(n);
            target = g;
            long written = System.nanoTime();
            admin.setData().forPath(config, bytes(g));
            if (!reached.await(sessionTimeoutMs * 2L, TimeUnit.MILLISECONDS)) {
                long missing = instances.stream().filter(in -> in.seenGeneration < g).count();
                throw new IllegalStateException("configuration " + g + ": " + missing + " of " + n
                        + " caches did not show it within " + sessionTimeoutMs * 2 + " ms");
            }
            if (change < 1) {
                continue;
            }
            long[] latencies = instances.stream().mapToLong(in -> Math.max(0, in.seenAt - written)).sorted().toArray();
            long[] line = {rank(latencies, 50), rank(latencies, 99), rank(latencies, 100)};
            medians.add(line);
            print(String.format(Locale.ROOT,
                    "\"measure\":\"config-propagation\",\"change\":%d,\"instances\":%d,\"p50_ms\":%.3f,"
                            + "\"p99_ms\":%.3f,\"max_ms\":%.3f",
                    change, n, line[0] / 1e6, line[1] / 1e6, line[2] / 1e6));
        }
        if (!medians.isEmpty()) {
            long[] p50 = medians.stream().mapToLong(l -> l[0]).sorted().toArray();
            long[] p99 = medians.stream().mapToLong(l -> l[1]).sorted().toArray();
            long[] max = medians.stream().mapToLong(l -> l[2]).sorted().toArray();
            print(String.format(Locale.ROOT,
                    "\"measure\":\"config-propagation-median\",\"changes\":%d,\"instances\":%d,\"p50_ms\":%.3f,"
                            + "\"p99_ms\":%.3f,\"max_ms\":%.3f",
                    medians.size(), n, rank(p50, 50) / 1e6, rank(p99, 50) / 1e6, rank(max, 50) / 1e6));
        }
    }

    void recover(long killedMicros, int member) throws Exception {
        // The kill's instant on this JVM's nanoTime clock.
        java.time.Instant now = java.time.Instant.now();
        long nowMicros = now.getEpochSecond() * 1_000_000L + now.getNano() / 1000;
        long killed = System.nanoTime() - (nowMicros - killedMicros) * 1000L;
        long deadline = killed + sessionTimeoutMs * 4_000_000L;
        generation++;
        long g = generation;
        reached = new CountDownLatch(n);
        target = g;
        admin.setData().forPath(config, bytes(g)); // Curator retries until the new leader takes it
        long written = System.nanoTime();
        System.err.printf(Locale.ROOT, "[fleet] curator: configuration %d written %.1f s after the kill%n", g,
                (written - killed) / 1e9);
        ExecutorService pool = Executors.newFixedThreadPool(n);
        long[] back = new long[n];
        List<String> missing = new ArrayList<>();
        try {
            List<Future<String>> futures = new ArrayList<>();
            for (Instance in : instances) {
                int k = in.random.nextInt(held.length());
                futures.add(pool.submit(() -> {
                    while (in.seenGeneration < g || in.cached() < g) {
                        if (System.nanoTime() >= deadline) {
                            return "its cache never showed the new configuration";
                        }
                        Thread.sleep(10);
                    }
                    while (true) {
                        long remainingMs = (deadline - System.nanoTime()) / 1_000_000L;
                        if (remainingMs <= 0) {
                            return "it could not take an entity lock";
                        }
                        try {
                            if (takeEntity(in, k, remainingMs)) {
                                back[in.index] = System.nanoTime() - killed;
                                return null;
                            }
                            return "it could not take an entity lock";
                        } catch (Exception e) {
                            Thread.sleep(20);
                        }
                    }
                }));
            }
            for (int i = 0; i < n; i++) {
                String why = futures.get(i).get();
                if (why != null) {
                    missing.add(instances.get(i).id + ": " + why);
                }
            }
        } finally {
            pool.shutdownNow();
        }
        // When the read that found them exact began (or now, when none did).
        long began = checkRegistrations("after-leader-kill", deadline);
        boolean registered = began != 0;
        long registrationsAt = (registered ? began : System.nanoTime()) - killed;
        long[] sorted = Arrays.stream(back).filter(b -> b > 0).sorted().toArray();
        long lost = instances.stream().filter(in -> in.sessionsLost.get() > 0).count();
        print(String.format(Locale.ROOT,
                "\"measure\":\"leader-kill\",\"instances\":%d,\"member\":%d,\"write_ms\":%.3f,\"instances_back\":%d,"
                        + "\"back_p50_ms\":%.3f,\"back_p99_ms\":%.3f,\"back_max_ms\":%.3f,\"registrations_ms\":%.3f,"
                        + "\"all_back_ms\":%.3f,\"sessions_lost\":%d",
                n, member, (written - killed) / 1e6, sorted.length, rank(sorted, 50) / 1e6, rank(sorted, 99) / 1e6,
                rank(sorted, 100) / 1e6, registrationsAt / 1e6, Math.max(rank(sorted, 100), registrationsAt) / 1e6,
                lost));
        if (!missing.isEmpty()) {
            throw new IllegalStateException(missing.size() + " of " + n
                    + " instances not back within 4 session timeouts of the leader's kill (first: " + missing.get(0) + ")");
        }
        if (!registered) {
            throw new IllegalStateException("registrations not exact after the leader's kill");
        }
    }

    void end() throws Exception {
        checkRegistrations("end", System.nanoTime() + sessionTimeoutMs * 2_000_000L);
        stopping = true;
        timer.shutdownNow();
        lockers.shutdown();
        lockers.awaitTermination(sessionTimeoutMs * 2L, TimeUnit.MILLISECONDS);
        long ended;
        synchronized (overlapped) {
            ended = overlapped.stream().filter(Holder::sessionEnded).count();
        }
        long overlaps = overlapped.size() - ended;
        print(String.format(Locale.ROOT,
                "\"measure\":\"locks\",\"entities\":%d,\"acquired\":%d,\"timed_out\":%d,\"failed\":%d,\"overlaps\":%d,"
                        + "\"overlaps_after_session_end\":%d",
                held.length(), acquired.get(), timedOut.get(), failed.get(), overlaps, ended));
        if (overlaps > 0) {
            System.out.println("VIOLATION curator: " + overlaps
                    + " entity lock acquisitions overlapped another holder whose session went on");
        }
        ExecutorService pool = Executors.newFixedThreadPool(concurrency);
        for (Instance in : instances) {
            pool.execute(in::close);
        }
        pool.shutdown();
        pool.awaitTermination(sessionTimeoutMs * 4L + 50L * n, TimeUnit.MILLISECONDS);
        adminDiscovery.close();
        admin.close();
    }

    /**
     * Reads the registrations until they are exactly the fleet's ids, or deadline; prints the line.
     * Returns when (System.nanoTime()) the read that found them exact began, 0 when none did.
     */
    long checkRegistrations(String phase, long deadline) throws Exception {
        Set<String> expected = new HashSet<>();
        for (Instance in : instances) {
            expected.add(in.id);
        }
        while (true) {
            long began = System.nanoTime();
            List<ServiceInstance<Void>> found = new ArrayList<>(adminDiscovery.queryForInstances(SERVICE));
            Set<String> ids = new HashSet<>();
            for (ServiceInstance<Void> i : found) {
                ids.add(i.getId());
            }
            int duplicates = found.size() - ids.size();
            long missing = expected.stream().filter(id -> !ids.contains(id)).count();
            long unexpected = ids.stream().filter(id -> !expected.contains(id)).count();
            boolean exact = duplicates == 0 && missing == 0 && unexpected == 0;
            boolean last = System.nanoTime() >= deadline;
            if (exact || last) {
                print(String.format(Locale.ROOT,
                        "\"measure\":\"registrations\",\"phase\":\"%s\",\"expected\":%d,\"found\":%d,\"distinct\":%d,"
                                + "\"missing\":%d,\"duplicates\":%d,\"unexpected\":%d",
                        phase, expected.size(), found.size(), ids.size(), missing, duplicates, unexpected));
            }
            if (exact) {
                return began;
            }
            if (!last) {
                System.err.println("[fleet] curator: registrations " + phase + ": " + found.size() + " found, " + missing
                        + " missing, " + duplicates + " doubled, " + unexpected + " unexpected; reading again");
            }
            if (last) {
                System.out.println("VIOLATION curator " + phase + ": " + found.size() + " registrations, " + missing
                        + " missing, " + duplicates + " doubled, " + unexpected + " unexpected");
                return 0;
            }
            Thread.sleep(100);
        }
    }

    // ------------------------------------------------------------------------------------------
    // Helpers

    interface Task {
        void run() throws Exception;
    }

    /** Runs every task on pool; fails naming how many finished when one fails or time runs out. */
    static void runAll(ExecutorService pool, List<Task> tasks, long boundMs, String what) throws Exception {
        List<Future<?>> futures = new ArrayList<>();
        for (Task task : tasks) {
            futures.add(pool.submit(() -> {
                task.run();
                return null;
            }));
        }
        long deadline = System.nanoTime() + boundMs * 1_000_000L;
        int done = 0;
        for (Future<?> future : futures) {
            long remaining = deadline - System.nanoTime();
            try {
                future.get(Math.max(1, remaining), TimeUnit.NANOSECONDS);
            } catch (java.util.concurrent.TimeoutException e) {
                throw new IllegalStateException(done + " of " + tasks.size() + " " + what + " after " + boundMs + " ms");
            }
            done++;
        }
    }

    void print(String fields) {
        System.out.println("{\"bench\":\"fleet\",\"impl\":\"curator\"," + fields + ",\"label\":" + json(label) + "}");
    }

    static String json(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static byte[] bytes(long generation) {
        return Long.toString(generation).getBytes(StandardCharsets.UTF_8);
    }

    /** SplitMix64's step and output function (each Rust instance draws from SplitMix64 itself). */
    static long splitMix(long z) {
        z += 0x9E3779B97F4A7C15L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /** Nearest-rank percentile p of sorted; 0 when empty. */
    static long rank(long[] sorted, double p) {
        if (sorted.length == 0) {
            return 0;
        }
        int r = (int) Math.ceil(p / 100.0 * sorted.length);
        return sorted[Math.min(Math.max(r, 1), sorted.length) - 1];
    }

    /** Heap in use after a full collection, KiB. */
    static long heapKib() {
        Runtime runtime = Runtime.getRuntime();
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        return (runtime.totalMemory() - runtime.freeMemory()) / 1024;
    }

    /** VmRSS of /proc/self/status, KiB (0 off Linux). */
    static long rssKib() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("VmRSS:")) {
                    return Long.parseLong(line.substring(6).replace("kB", "").trim());
                }
            }
        } catch (Exception ignored) {
        }
        return 0;
    }

    public static void main(String[] args) throws Exception {
        // Quiet clients: a thousand of them each log their connection losses at a leader's kill.
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        if (System.getProperty("org.slf4j.simpleLogger.log.org.apache.zookeeper") == null) {
            System.setProperty("org.slf4j.simpleLogger.log.org.apache.zookeeper", "error");
        }
        CuratorFleet fleet = new CuratorFleet(args);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String command;
        while ((command = in.readLine()) != null) {
            String[] words = command.trim().split("\\s+");
            try {
                switch (words[0]) {
                    case "up" -> fleet.up();
                    case "changes" -> fleet.changes(Integer.parseInt(words[1]), Integer.parseInt(words[2]));
                    case "recover" -> fleet.recover(Long.parseLong(words[1]), Integer.parseInt(words[2]));
                    case "end" -> fleet.end();
                    default -> throw new IllegalArgumentException("unknown command " + command);
                }
                System.out.println("OK");
            } catch (Throwable e) {
                System.out.println("FAIL " + String.valueOf(e).replace('\n', ' '));
            }
            System.out.flush();
            if (words[0].equals("end")) {
                break;
            }
        }
        System.exit(0);
    }
}
