// Workloads for the fault tests (agent_faults_test.cpp), one per first argument:
//   busy THREADS MS         THREADS threads spin for MS milliseconds, then main returns
//   exit THREADS MS         as busy, but after MS a worker calls System.exit(0) while all spin
//   halt THREADS MS         as exit, with Runtime.halt(0) (no shutdown hooks)
//   churn TOTAL BATCH       TOTAL short-lived threads, BATCH started and joined at a time; prints
//                           the process's open descriptors and RSS before and after (from /proc/self)
//   sleep MS                only sleeps (a JVM that is there, for the socket check)
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

public class Faults {
    static volatile boolean stop;
    static volatile long sink;

    static long spin(long seed) {
        long acc = seed;
        for (int i = 0; i < 100_000; i++) acc = acc * 6364136223846793005L + (acc >>> 7) + i;
        return acc;
    }

    static List<Thread> spinners(int count) {
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            final long seed = i;
            Thread t = new Thread(() -> {
                long acc = seed;
                while (!stop) acc = spin(acc);
                sink = acc;
            }, "fault-busy-" + i);
            t.setDaemon(true);
            t.start();
            threads.add(t);
        }
        return threads;
    }

    static long openDescriptors() throws IOException {
        try (var entries = Files.list(Path.of("/proc/self/fd"))) {
            return entries.count();
        }
    }

    // Threads of the process (Java and VM threads alike): each live sampled thread owns a perf event.
    static long liveThreads() throws IOException {
        try (var entries = Files.list(Path.of("/proc/self/task"))) {
            return entries.count();
        }
    }

    static long rssKb() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
        }
        return -1;
    }

    // A settled picture: garbage collected, finished threads' native memory released.
    static void settle() throws InterruptedException {
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(100);
        }
    }

    static void churn(int total, int batch) throws Exception {
        // Warm-up: the same churn once at a smaller scale, so the JIT, the agent's tables and the
        // heap reach their working size before the baseline is taken.
        runBatches(Math.min(total / 10, 1000), batch);
        settle();
        long fdsBefore = openDescriptors(), rssBefore = rssKb(), threadsBefore = liveThreads();
        runBatches(total, batch);
        settle();
        // The least count over a second: a descriptor held for a moment (the agent's periodic read of
        // /proc/self/maps, a ring the reader is closing) is not a leak; one per thread would stay.
        long fdsAfter = openDescriptors(), rssAfter = rssKb();
        for (int i = 0; i < 10 && fdsAfter > fdsBefore; i++) {
            Thread.sleep(100);
            fdsAfter = Math.min(fdsAfter, openDescriptors());
        }
        System.out.println("churn threads=" + total + " fds_before=" + fdsBefore + " fds_after=" + fdsAfter +
                           " rss_kb_before=" + rssBefore + " rss_kb_after=" + rssAfter +
                           " threads_before=" + threadsBefore + " threads_after=" + liveThreads());
    }

    static void runBatches(int total, int batch) throws InterruptedException {
        Thread[] threads = new Thread[batch];
        for (int done = 0; done < total; done += batch) {
            int n = Math.min(batch, total - done);
            for (int i = 0; i < n; i++) {
                final long seed = done + i;
                threads[i] = new Thread(() -> sink = spin(seed), "fault-churn");
                threads[i].start();
            }
            for (int i = 0; i < n; i++) threads[i].join();
        }
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "busy" -> {
                spinners(Integer.parseInt(args[1]));
                Thread.sleep(Long.parseLong(args[2]));
                stop = true;
            }
            case "exit", "halt" -> {
                final boolean halt = args[0].equals("halt");
                final long ms = Long.parseLong(args[2]);
                spinners(Integer.parseInt(args[1]));
                Thread exiter = new Thread(() -> {
                    try {
                        Thread.sleep(ms);
                    } catch (InterruptedException e) {
                        return;
                    }
                    System.out.println("exiting with " + (halt ? "halt" : "exit"));
                    System.out.flush();
                    if (halt) Runtime.getRuntime().halt(0);
                    else System.exit(0);
                }, "fault-exiter");
                exiter.start();
                Thread.sleep(Long.MAX_VALUE);
            }
            case "churn" -> churn(Integer.parseInt(args[1]), Integer.parseInt(args[2]));
            case "sleep" -> Thread.sleep(Long.parseLong(args[1]));
            default -> throw new IllegalArgumentException(args[0]);
        }
    }
}
