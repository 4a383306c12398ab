// A program with one known hot method, for the signal backend test (agent_signal_backend_test.cpp):
// a worker thread spends its CPU time in HotSpin.spin until it has used the milliseconds given as
// the argument (CPU time, not wall time, so a loaded machine changes the duration, not the
// sample count), then prints how much CPU it used.
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

public class HotSpin {
    static long spin(long rounds, long seed) {
        long x = seed;
        for (long i = 0; i < rounds; i++) x = x * 6364136223846793005L + 1442695040888963407L + i;
        return x;
    }

    public static void main(String[] args) throws Exception {
        final long cpuMillis = Long.parseLong(args[0]);
        final ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        final long[] used = new long[1];
        Thread worker = new Thread(() -> {
            long begin = threads.getCurrentThreadCpuTime();
            long acc = 0;
            while (threads.getCurrentThreadCpuTime() - begin < cpuMillis * 1_000_000L) acc += spin(200_000, acc);
            used[0] = (threads.getCurrentThreadCpuTime() - begin) / 1_000_000L;
            if (acc == 42) System.out.println("unlikely");
        }, "hot-worker");
        worker.start();
        worker.join();
        System.out.println("worker cpu_ms=" + used[0]);
    }
}
