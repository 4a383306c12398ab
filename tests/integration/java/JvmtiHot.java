// A known CPU profile for the mode=jvmti test (agent_jvmti_test.cpp): THREADS workers spend SECONDS
// (wall time) in JvmtiHot.spin, the one hot method, while the main thread only waits for them (not
// runnable). Usage: java JvmtiHot SECONDS THREADS
public class JvmtiHot {
    static volatile long sink;

    static long spin(long seed) {
        long x = seed;
        for (int i = 0; i < 100_000; i++) x = x * 6364136223846793005L + 1442695040888963407L + (x >>> 29);
        return x;
    }

    public static void main(String[] args) throws Exception {
        final double seconds = Double.parseDouble(args[0]);
        final int threads = Integer.parseInt(args[1]);
        final long deadline = System.nanoTime() + (long) (seconds * 1e9);
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final long seed = t + 1;
            workers[t] = new Thread(() -> {
                long acc = seed;
                while (System.nanoTime() < deadline) acc = spin(acc);
                sink += acc;
            }, "hot-" + t);
            workers[t].start();
        }
        for (Thread w : workers) w.join();
        System.out.println("jvmti hot done: " + sink);
    }
}
