import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

// Virtual threads (JDK 21+): each task sleeps (unmounts, its frames frozen in the heap), then runs
// a recursion when mounted again, so most samples are taken in frames thawed above the
// continuation return barrier. args: tasks.
public class VirtualThreads {
    static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
    static long deep(int depth, int n) { return depth == 0 ? fib(n) : deep(depth - 1, n) + 1; }

    public static void main(String[] args) throws Exception {
        final int tasks = args.length > 0 ? Integer.parseInt(args[0]) : 20000;
        long sum = 0;
        try (ExecutorService executor = Executors.newVirtualThreadPerTaskExecutor()) {
            List<Future<Long>> results = new ArrayList<>();
            for (int i = 0; i < tasks; i++) {
                final int k = i;
                results.add(executor.submit(() -> {
                    Thread.sleep(1 + k % 3);
                    long s = deep(50 + k % 100, 22);
                    Thread.sleep(1);
                    return s + deep(10, 20);
                }));
            }
            for (Future<Long> f : results) sum += f.get();
        }
        System.out.println(sum);
    }
}
