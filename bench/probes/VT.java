// A probe for bench/probes.sh (JDK 21+): 200 virtual threads doing regex work through a recursion,
// sleeping 1 ms and taking a monitor. Argument: seconds.
import java.util.*;
import java.util.concurrent.*;
import java.util.regex.*;
public class VT {
    static volatile Object sink;
    static int work(int d, String s) {
        if (d == 0) { Matcher m = Pattern.compile("(a+)(b*)").matcher(s); int c = 0; while (m.find()) c += m.group(1).length(); return c; }
        return work(d - 1, s) + 1;
    }
    public static void main(String[] args) throws Exception {
        long end = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000_000L;
        String s = "aaab".repeat(2000);
        try (ExecutorService ex = Executors.newVirtualThreadPerTaskExecutor()) {
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < 200; t++) {
                final int id = t;
                fs.add(ex.submit(() -> {
                    int n = 0;
                    while (System.nanoTime() < end) {
                        sink = work(20 + (id + n++) % 40, s);
                        try { Thread.sleep(1); } catch (InterruptedException e) { return null; }
                        synchronized (VT.class) { sink = n; }   // pins or not depending on the JDK
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) f.get();
        }
        System.out.println("done");
    }
}
