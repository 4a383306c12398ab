// A probe for bench/probes.sh: 4 pool threads over a class hierarchy that turns megamorphic and
// throws (its callers deoptimize), recursion through a MethodHandle, streams of string
// concatenation, regexes compiled each round and lambdas spun now and then. Argument: seconds.
import java.lang.invoke.*;
import java.util.*;
import java.util.regex.*;
import java.util.stream.*;
import java.util.concurrent.*;

public class Unseen {
    interface Shape { double area(); }
    record Circle(double r) implements Shape { public double area() { return Math.PI * r * r; } }
    record Square(double s) implements Shape { public double area() { return s * s; } }
    record Tri(double b, double h) implements Shape { public double area() { return 0.5 * b * h; } }
    static final class Weird implements Shape { public double area() { throw new IllegalStateException("weird"); } }

    static volatile Object sink;
    static final Object lock = new Object();
    static long counter;

    static double sumAreas(Shape[] shapes) {
        double s = 0;
        for (Shape sh : shapes) {
            try { s += sh.area(); } catch (IllegalStateException e) { s -= 1; }
        }
        return s;
    }

    static String concat(int i, String a, double d) { return a + ":" + i + "/" + d + "[" + (i % 7) + "]"; }

    static int recurseMH(MethodHandle mh, int depth) throws Throwable {
        if (depth == 0) return (int) mh.invokeExact(7, 5);
        return recurseMH(mh, depth - 1) + 1;
    }
    static int add(int a, int b) { return a + b; }

    static long streams(int n) {
        return IntStream.range(0, n).boxed()
            .map(i -> concat(i, "k", i * 0.5))
            .filter(s -> s.hashCode() % 3 != 0)
            .collect(Collectors.groupingBy(s -> s.length(), Collectors.counting()))
            .values().stream().mapToLong(Long::longValue).sum();
    }

    static int regex(String text) {
        Matcher m = Pattern.compile("(\\w+)@(\\w+)\\.com").matcher(text);
        int c = 0; while (m.find()) c += m.group(2).length();
        return c;
    }

    static int deep(int d, Shape[] shapes) {
        if (d == 0) { sink = sumAreas(shapes); return 1; }
        return deep(d - 1, shapes) + (d & 1);
    }

    public static void main(String[] args) throws Throwable {
        long seconds = Long.parseLong(args.length > 0 ? args[0] : "8");
        int threads = 4;
        MethodHandle mh = MethodHandles.lookup().findStatic(Unseen.class, "add", MethodType.methodType(int.class, int.class, int.class));
        StringBuilder tb = new StringBuilder();
        for (int i = 0; i < 2000; i++) tb.append("user").append(i).append("@host").append(i % 13).append(".com ");
        String text = tb.toString();
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        ExecutorService ex = Executors.newFixedThreadPool(threads);
        List<Future<?>> fs = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int id = t;
            fs.add(ex.submit(() -> {
                Random rnd = new Random(id);
                long phase = 0;
                try {
                    while (System.nanoTime() < end) {
                        phase++;
                        // monomorphic first, then megamorphic plus throwing: forces deoptimization
                        int kinds = phase < 200 ? 1 : (phase < 400 ? 2 : 4);
                        Shape[] shapes = new Shape[256];
                        for (int i = 0; i < shapes.length; i++) {
                            int k = rnd.nextInt(kinds);
                            shapes[i] = k == 0 ? new Circle(i) : k == 1 ? new Square(i) : k == 2 ? new Tri(i, 2) : (rnd.nextInt(50) == 0 ? new Weird() : new Circle(1));
                        }
                        sink = deep(50 + rnd.nextInt(200), shapes);
                        sink = recurseMH(mh, 20 + rnd.nextInt(40));
                        sink = streams(2000);
                        sink = regex(text);
                        synchronized (lock) { counter++; }
                        if (phase % 50 == 0) {
                            // new hidden classes now and then: lambdas spun at run time
                            Runnable r = (Runnable) () -> { sink = concat(1, "x", 2.0); };
                            r.run();
                        }
                    }
                } catch (Throwable e) { throw new RuntimeException(e); }
                return null;
            }));
        }
        for (Future<?> f : fs) f.get();
        ex.shutdown();
        System.out.println("done " + counter);
    }
}
