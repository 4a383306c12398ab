import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.math.BigDecimal;
import java.math.MathContext;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.zip.CRC32;
import java.util.zip.Deflater;

// Code shaped like a web framework's, which no shared workload has: each request goes down a chain
// of 24 interceptors (Interceptor.handle, each calling the next) to End.handle, which does one of:
// regex matching, a stream pipeline, BigDecimal arithmetic, an exception thrown and caught, zip
// (Deflater and CRC32, JNI), a call through a MethodHandle, reflection and a dynamic proxy, a
// recursive-descent parse, deep recursion through a lambda with String.format, or a
// ConcurrentHashMap update. THREADS workers (args[0]) run for args[1] milliseconds.
public class FrameworkStacks {
    interface Handler {
        Object handle(Map<String, Object> request) throws Exception;
    }

    interface Service {
        String call(String in);
    }

    static final int kChainLength = 24;
    static final Pattern kWord = Pattern.compile("([a-z]+)(\\d*)");
    static final Pattern kEmail = Pattern.compile("[\\w.+-]+@[\\w-]+\\.[a-z]{2,}");
    static final AtomicLong sink = new AtomicLong();
    static final ConcurrentHashMap<String, LongAdder> counts = new ConcurrentHashMap<>();
    static MethodHandle upper;
    static Method reflectedUpper;
    static Service proxied;

    static final class Interceptor implements Handler {
        final int index;
        final Handler next;

        Interceptor(int index, Handler next) {
            this.index = index;
            this.next = next;
        }

        @Override
        public Object handle(Map<String, Object> request) throws Exception {
            request.put("i" + index, index);
            try {
                return next.handle(request);
            } finally {
                if ((index & 7) == 0) request.remove("i" + index);
            }
        }
    }

    static final class End implements Handler {
        @Override
        public Object handle(Map<String, Object> request) throws Exception {
            final Random r = (Random) request.get("random");
            final String text = (String) request.get("text");
            switch (r.nextInt(10)) {
                case 0: {
                    Matcher m = kWord.matcher(text);
                    int c = 0;
                    while (m.find()) c += m.group(1).length();
                    return c;
                }
                case 1:
                    return Arrays.stream(text.split(" ")).filter(w -> w.length() > 3).map(String::toUpperCase)
                            .sorted(Comparator.reverseOrder()).collect(Collectors.joining(",")).length();
                case 2: {
                    BigDecimal x = BigDecimal.ONE;
                    for (int i = 1; i < 60; i++) {
                        x = x.multiply(BigDecimal.valueOf(i)).divide(BigDecimal.valueOf(i + 1), MathContext.DECIMAL128);
                    }
                    return x.toString().length();
                }
                case 3:
                    try {
                        if (r.nextBoolean()) throw new IllegalStateException("bad " + text.length());
                        return Integer.parseInt("12x" + r.nextInt());
                    } catch (RuntimeException e) {
                        return e.getMessage().length() + e.getStackTrace().length;
                    }
                case 4: {
                    Deflater d = new Deflater();
                    d.setInput(text.getBytes());
                    d.finish();
                    byte[] out = new byte[text.length() * 2 + 64];
                    int n = d.deflate(out);
                    d.end();
                    CRC32 crc = new CRC32();
                    crc.update(out, 0, n);
                    return (int) crc.getValue();
                }
                case 5:
                    try {
                        return ((String) upper.invokeExact(text)).length()
                                + ((String) reflectedUpper.invoke(null, text)).length() + proxied.call(text).length();
                    } catch (Throwable e) {
                        throw new RuntimeException(e);
                    }
                case 6:
                    return parse(nested(6, r), new int[] {0}).toString().length();
                case 7:
                    return recurse(200 + r.nextInt(400),
                            () -> String.format("%08x-%s", r.nextInt(), text.substring(0, 5)).hashCode());
                case 8: {
                    Matcher m = kEmail.matcher(text);
                    while (m.find()) counts.computeIfAbsent(m.group(), k -> new LongAdder()).increment();
                    return counts.size();
                }
                default: {
                    StringBuilder sb = new StringBuilder();
                    for (String w : text.split(" ")) sb.append(w.indexOf('a')).append(w.compareTo("kappa"));
                    return sb.length();
                }
            }
        }
    }

    static Object parse(String s, int[] pos) {
        if (s.charAt(pos[0]) == '[') {
            pos[0]++;
            List<Object> list = new ArrayList<>();
            while (s.charAt(pos[0]) != ']') {
                list.add(parse(s, pos));
                if (s.charAt(pos[0]) == ',') pos[0]++;
            }
            pos[0]++;
            return list;
        }
        int start = pos[0];
        while (pos[0] < s.length() && Character.isLetterOrDigit(s.charAt(pos[0]))) pos[0]++;
        return s.substring(start, pos[0]);
    }

    static String nested(int depth, Random r) {
        if (depth == 0) return "x" + r.nextInt(1000);
        StringBuilder sb = new StringBuilder("[");
        int n = 1 + r.nextInt(3);
        for (int i = 0; i < n; i++) {
            if (i > 0) sb.append(',');
            sb.append(nested(depth - 1, r));
        }
        return sb.append(']').toString();
    }

    static int recurse(int n, Supplier<Integer> leaf) {
        if (n == 0) return leaf.get();
        return recurse(n - 1, leaf) + (n & 1);
    }

    public static String upper(String s) {
        return s.toUpperCase(Locale.ROOT);
    }

    public static void main(String[] args) throws Exception {
        final int threads = args.length > 0 ? Integer.parseInt(args[0]) : 4;
        final long millis = args.length > 1 ? Long.parseLong(args[1]) : 5000;
        upper = MethodHandles.lookup().findStatic(FrameworkStacks.class, "upper",
                MethodType.methodType(String.class, String.class));
        reflectedUpper = FrameworkStacks.class.getMethod("upper", String.class);
        proxied = (Service) Proxy.newProxyInstance(FrameworkStacks.class.getClassLoader(), new Class<?>[] {Service.class},
                (p, m, a) -> ((String) a[0]).trim() + m.getName());
        Handler chain = new End();
        for (int i = kChainLength - 1; i >= 0; i--) chain = new Interceptor(i, chain);
        final Handler handler = chain;
        final String[] words = {"alpha", "beta12", "gamma", "delta7", "user@example.com", "epsilon", "zeta99", "eta",
                                "theta", "iota@mail.org", "kappa", "lambda3"};
        final long deadline = System.currentTimeMillis() + millis;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        List<Future<?>> futures = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            futures.add(pool.submit(() -> {
                Random r = new Random();
                while (System.currentTimeMillis() < deadline) {
                    StringBuilder sb = new StringBuilder();
                    for (int i = 0; i < 40; i++) sb.append(words[r.nextInt(words.length)]).append(' ');
                    Map<String, Object> request = new HashMap<>();
                    request.put("text", sb.toString());
                    request.put("random", r);
                    sink.addAndGet(handler.handle(request).hashCode());
                }
                return null;
            }));
        }
        for (Future<?> f : futures) f.get();
        pool.shutdown();
        System.out.println("done " + sink.get() + " " + counts.size());
    }
}
