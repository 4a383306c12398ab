// A mostly idle service: THREADS threads that each wake every PAUSE_MS for a few tens of µs of
// arithmetic, for MILLIS ms. What a profiler costs where there is almost nothing to profile.
// Usage: java QuietService MILLIS [THREADS [PAUSE_MS]]
public class QuietService {
    public static void main(String[] args) throws Exception {
        final long millis = Long.parseLong(args[0]);
        final int threads = args.length > 1 ? Integer.parseInt(args[1]) : 8;
        final long pauseMs = args.length > 2 ? Long.parseLong(args[2]) : 100;
        Thread[] workers = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            workers[i] = new Thread(() -> {
                final long end = System.currentTimeMillis() + millis;
                long x = 0;
                while (System.currentTimeMillis() < end) {
                    for (int k = 0; k < 20000; k++) x += k * 31 ^ (x >>> 3);
                    try {
                        Thread.sleep(pauseMs);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
                if (x == 42) System.out.println(x);
            }, "worker-" + i);
            workers[i].start();
        }
        for (Thread t : workers) t.join();
    }
}
