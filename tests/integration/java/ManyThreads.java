import java.lang.reflect.Method;
import java.math.BigDecimal;
import java.util.*;
import java.util.concurrent.*;
import java.util.regex.*;
import java.util.stream.*;

// A service-like load no shared workload has: a pool of many threads (most of them waking from a
// short sleep), each task running down a deep chain of lambdas into string, regex, stream,
// BigDecimal, reflection and exception work. A fixed amount of work: args threads, rounds.
public class ManyThreads {
    interface Handler { long handle(int depth); }
    static final List<Handler> chain = new ArrayList<>();
    static final Pattern PAIR = Pattern.compile("([a-z]+)=(\\d+)(;|$)");
    static final ConcurrentHashMap<String, Long> totals = new ConcurrentHashMap<>();
    static final Object lock = new Object();
    static long sink;

    static long work() throws Exception {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 50; i++) sb.append("key").append((char) ('a' + i % 26)).append('=').append(i * 7).append(';');
        String s = sb.toString();
        long total = 0;
        Matcher m = PAIR.matcher(s);
        while (m.find()) total += Long.parseLong(m.group(2)) + m.group(1).hashCode();
        total += Arrays.stream(s.split(";")).filter(w -> w.indexOf("=1") >= 0).map(String::toUpperCase)
                       .sorted(Comparator.reverseOrder()).collect(Collectors.joining(",")).length();
        BigDecimal bd = BigDecimal.ONE;
        for (int i = 1; i < 30; i++) bd = bd.multiply(BigDecimal.valueOf(i)).add(BigDecimal.valueOf(0.5));
        total += bd.toString().length();
        Method length = String.class.getMethod("length");
        total += (Integer) length.invoke(s);
        try {
            if (total % 3 == 0) throw new IllegalStateException("x" + total);
        } catch (IllegalStateException e) {
            total += e.getMessage().length();
        }
        totals.merge("k" + (total % 1000), total, Long::sum);
        synchronized (lock) { sink += total; }
        return total;
    }

    public static void main(String[] args) throws Exception {
        final int threads = args.length > 0 ? Integer.parseInt(args[0]) : 200;
        final int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 100;
        for (int i = 0; i < 200; i++) {
            final int next = (i + 1) % 200;
            chain.add(depth -> {
                if (depth > 0) return chain.get(next).handle(depth - 1);
                try {
                    return work();
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
        }
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        Random random = new Random(1);
        List<Future<Long>> pending = new ArrayList<>();
        for (int round = 0; round < rounds; round++) {
            pending.clear();
            for (int i = 0; i < threads; i++) {
                final int depth = 20 + random.nextInt(180);
                final boolean sleeps = i % 4 != 0;
                pending.add(pool.submit(() -> {
                    if (sleeps) Thread.sleep(1);
                    return chain.get(0).handle(depth);
                }));
            }
            for (Future<Long> f : pending) f.get();
        }
        pool.shutdown();
        System.out.println("sink " + sink);
    }
}
