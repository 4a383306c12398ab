import java.util.concurrent.Semaphore;

// A thread per request: each request a new thread doing ~0.2 ms of string work and ending, a few at
// a time. The creating thread spends much of its time in the VM's thread start (clone3, its locks).
// args: requests, concurrency.
public class ThreadChurn {
    static volatile long sink;

    static long work(int n) {
        StringBuilder sb = new StringBuilder();
        long x = n;
        for (int k = 0; k < 300; k++) sb.append(k * x).append(',');
        String s = sb.toString();
        for (int k = 0; k < 30; k++) x += s.indexOf(Integer.toString(k * 7)) + s.hashCode();
        return x;
    }

    public static void main(String[] args) throws Exception {
        final int requests = Integer.parseInt(args[0]);
        final int concurrency = Integer.parseInt(args[1]);
        final Semaphore slots = new Semaphore(concurrency);
        for (int i = 0; i < requests; i++) {
            slots.acquire();
            final int n = i;
            new Thread(() -> {
                try {
                    long acc = 0;
                    for (int r = 0; r < 20; r++) acc += work(n + r);
                    sink += acc;
                } finally {
                    slots.release();
                }
            }, "request-" + i).start();
        }
        slots.acquire(concurrency);
        System.out.println("done");
    }
}
