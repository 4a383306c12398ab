import java.math.BigDecimal;
import java.math.MathContext;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.LongAdder;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

// A probe for bench/probes.sh: 8 threads over log parsing with a regex and String.format, streams
// with grouping and sorting, BigDecimal arithmetic, megamorphic interface calls, a MethodHandle,
// Method.invoke, a recursion of random depth (50-200 frames, an exception thrown at a quarter of
// its bottoms: stitching cannot complete a stack whose depth changes from call to call), and a
// contended monitor beside a ConcurrentHashMap. Argument: seconds.
public class Mixed {
    static final LongAdder sink = new LongAdder();
    static final Pattern LOG = Pattern.compile("(\\d{4})-(\\d{2})-(\\d{2}) (\\w+) \\[(.*?)\\] (.*)");
    static final ConcurrentHashMap<String, Integer> shared = new ConcurrentHashMap<>();
    static final Object lock = new Object();
    static int counter;

    interface Shape { double area(); }
    static final class Circle implements Shape { final double r; Circle(double r) { this.r = r; } public double area() { return Math.PI * r * r; } }
    static final class Rect implements Shape { final double w, h; Rect(double w, double h) { this.w = w; this.h = h; } public double area() { return w * h; } }
    static final class Tri implements Shape { final double b, h; Tri(double b, double h) { this.b = b; this.h = h; } public double area() { return b * h / 2; } }

    static String logLine(Random r) {
        return String.format("%04d-%02d-%02d %s [%s] user=%d action=%s took=%dms", 2020 + r.nextInt(6), 1 + r.nextInt(12),
                1 + r.nextInt(28), r.nextBoolean() ? "INFO" : "WARN", "worker-" + r.nextInt(64), r.nextInt(100000),
                List.of("login", "logout", "buy", "sell", "view").get(r.nextInt(5)), r.nextInt(2000));
    }

    static void parseLogs(Random r) {
        Map<String, Long> byLevel = new TreeMap<>();
        for (int i = 0; i < 400; i++) {
            Matcher m = LOG.matcher(logLine(r));
            if (m.matches()) byLevel.merge(m.group(4) + ":" + m.group(5), 1L, Long::sum);
        }
        sink.add(byLevel.size());
    }

    static void streams(Random r) {
        List<String> words = IntStream.range(0, 3000).mapToObj(i -> Integer.toString(r.nextInt(50000), 36)).collect(Collectors.toList());
        Map<Character, List<String>> groups = words.stream().filter(w -> w.length() > 2)
                .collect(Collectors.groupingBy(w -> w.charAt(0), TreeMap::new, Collectors.toList()));
        String joined = groups.values().stream().flatMap(List::stream).sorted(Comparator.reverseOrder()).limit(500)
                .map(String::toUpperCase).collect(Collectors.joining(","));
        sink.add(joined.hashCode());
    }

    static void decimals(Random r) {
        BigDecimal acc = BigDecimal.ONE;
        MathContext mc = new MathContext(60);
        for (int i = 1; i < 300; i++) acc = acc.multiply(BigDecimal.valueOf(r.nextDouble() + 0.5), mc).add(BigDecimal.valueOf(i), mc);
        sink.add(acc.toPlainString().length());
    }

    static double shapes(Random r) {
        Shape[] s = new Shape[2000];
        for (int i = 0; i < s.length; i++) {
            switch (r.nextInt(3)) {
                case 0: s[i] = new Circle(r.nextDouble()); break;
                case 1: s[i] = new Rect(r.nextDouble(), r.nextDouble()); break;
                default: s[i] = new Tri(r.nextDouble(), r.nextDouble());
            }
        }
        double total = 0;
        for (int k = 0; k < 20; k++) for (Shape x : s) total += x.area();
        return total;
    }

    static final MethodHandle CONCAT;
    static {
        try {
            CONCAT = MethodHandles.lookup().findVirtual(String.class, "concat", MethodType.methodType(String.class, String.class));
        } catch (ReflectiveOperationException e) { throw new AssertionError(e); }
    }

    static void handles(Random r) throws Throwable {
        String s = "";
        for (int i = 0; i < 300; i++) { String base = s.length() > 200 ? "" : s; s = (String) CONCAT.invokeExact(base, Integer.toHexString(r.nextInt())); }
        sink.add(s.length());
    }

    static void reflection(Random r) throws Exception {
        var m = Mixed.class.getDeclaredMethod("shapes", Random.class);
        for (int i = 0; i < 5; i++) sink.add((long) (double) (Double) m.invoke(null, r));
    }

    static int recurse(int depth, Random r) {
        if (depth == 0) {
            try {
                if (r.nextInt(4) == 0) throw new IllegalStateException("deep " + r.nextInt());
                return r.nextInt();
            } catch (IllegalStateException e) {
                return e.getMessage().length();
            }
        }
        return recurse(depth - 1, r) + (depth & 1);
    }

    static void contended(Random r) {
        for (int i = 0; i < 2000; i++) {
            synchronized (lock) { counter += r.nextInt(3); }
            shared.merge("k" + r.nextInt(256), 1, Integer::sum);
        }
    }

    static void task(Random r) throws Throwable {
        switch (r.nextInt(8)) {
            case 0: parseLogs(r); break;
            case 1: streams(r); break;
            case 2: decimals(r); break;
            case 3: sink.add((long) shapes(r)); break;
            case 4: handles(r); break;
            case 5: reflection(r); break;
            case 6: for (int i = 0; i < 200; i++) sink.add(recurse(50 + r.nextInt(150), r)); break;
            default: contended(r);
        }
    }

    public static void main(String[] args) throws Exception {
        int threads = 8;
        long end = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 1e9);
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        List<Future<?>> fs = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final Random r = new Random(t * 7919L);
            fs.add(pool.submit(() -> { while (System.nanoTime() < end) { try { task(r); } catch (Throwable e) { throw new RuntimeException(e); } } return null; }));
        }
        for (Future<?> f : fs) f.get();
        pool.shutdown();
        System.out.println("sink " + sink.sum() + " " + counter);
    }
}
