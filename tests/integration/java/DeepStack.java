// A program for stack=auto (agent_deep_stack_test.cpp): "deep-worker" descends DEPTH interpreted
// frames (once, before the JIT compiles the recursion, so their size is stable: about 40 KB for the
// default depth) and spins at the bottom; "shallow-worker" spins near its stack's top. Each uses the
// CPU milliseconds given as the first argument (CPU time: a loaded machine changes the duration, not
// the sample count).
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

public class DeepStack {
    static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    static long spin(long rounds, long seed) {
        long x = seed;
        for (long i = 0; i < rounds; i++) x = x * 6364136223846793005L + 1442695040888963407L + i;
        return x;
    }

    static long spinFor(long cpuMillis) {
        long begin = THREADS.getCurrentThreadCpuTime();
        long acc = 0;
        while (THREADS.getCurrentThreadCpuTime() - begin < cpuMillis * 1_000_000L) acc += spin(200_000, acc);
        return acc;
    }

    static long descend(int depth, long cpuMillis, long a, long b) {
        if (depth == 0) return spinFor(cpuMillis);
        long r = descend(depth - 1, cpuMillis, a + 1, b ^ a);
        return r + a - b;
    }

    public static void main(String[] args) throws Exception {
        final long cpuMillis = Long.parseLong(args[0]);
        final int depth = args.length > 1 ? Integer.parseInt(args[1]) : 300;
        final long[] sink = new long[2];
        Thread deep = new Thread(() -> sink[0] = descend(depth, cpuMillis, 1, 2), "deep-worker");
        Thread shallow = new Thread(() -> sink[1] = spinFor(cpuMillis), "shallow-worker");
        deep.start();
        shallow.start();
        deep.join();
        shallow.join();
        if (sink[0] == 42 && sink[1] == 42) System.out.println("unlikely");
        System.out.println("done");
    }
}
