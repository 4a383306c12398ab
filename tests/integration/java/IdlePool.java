import java.util.*;
import java.util.concurrent.*;

// A server's shape that costs a profiler per thread: many threads parked almost all the time (a
// large pool waiting for work, each waking once a second), a few busy. A fixed amount of work for
// the busy threads: args idle threads, busy threads, rounds.
public class IdlePool {
    static volatile long sink;

    static long work(int round) {
        StringBuilder sb = new StringBuilder();
        long x = round;
        for (int k = 0; k < 200; k++) sb.append(k * x).append(',');
        String s = sb.toString();
        for (int k = 0; k < 20; k++) x += s.indexOf(Integer.toString(k * 7)) + s.hashCode();
        return x;
    }

    public static void main(String[] args) throws Exception {
        final int idle = Integer.parseInt(args[0]), busy = Integer.parseInt(args[1]), rounds = Integer.parseInt(args[2]);
        final CountDownLatch stop = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < idle; i++) {
            Thread t = new Thread(() -> {
                try {
                    while (!stop.await(1, TimeUnit.SECONDS)) sink++;
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }, "idle-" + i);
            t.start();
            threads.add(t);
        }
        List<Thread> workers = new ArrayList<>();
        for (int i = 0; i < busy; i++) {
            Thread t = new Thread(() -> {
                long acc = 0;
                for (int r = 0; r < rounds; r++) acc += work(r);
                sink += acc;
            }, "busy-" + i);
            t.start();
            workers.add(t);
        }
        for (Thread t : workers) t.join();
        stop.countDown();
        for (Thread t : threads) t.join();
        System.out.println("done");
    }
}
