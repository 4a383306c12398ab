// Classes replaced while their methods run, as JFR and Java agents (APM tools) do: two threads spin
// in Hot's methods, which the launcher agent (Launcher-Agent-Class: this class) redefines with
// RedefineClasses and then retransforms with RetransformClasses. Hot is kept out of the JIT
// (-XX:CompileCommand=exclude,Redefinitions$Hot::*), so every sample in it is an interpreted frame
// naming the Method* of the version that runs.
// Usage: java -XX:CompileCommand=exclude,Redefinitions$Hot::* -jar redefinitions.jar SECONDS
import java.io.InputStream;
import java.lang.instrument.ClassDefinition;
import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.security.ProtectionDomain;

public class Redefinitions {
    private static volatile Instrumentation instrumentation;
    private static volatile boolean stop;
    static volatile long sink;

    public static void agentmain(String args, Instrumentation inst) { instrumentation = inst; }

    static class Hot {
        static long step(long x) {
            for (int i = 0; i < 64; i++) x = x * 6364136223846793005L + 1442695040888963407L;
            return x;
        }

        static long spin(long seed) {
            long x = seed;
            for (int i = 0; i < 1000; i++) x = step(x);
            return x;
        }
    }

    static byte[] classBytes(Class<?> c) throws Exception {
        try (InputStream in = Redefinitions.class.getResourceAsStream("/" + c.getName().replace('.', '/') + ".class")) {
            return in.readAllBytes();
        }
    }

    public static void main(String[] args) throws Exception {
        final long millis = (long) (Double.parseDouble(args[0]) * 1000);
        if (instrumentation == null) throw new IllegalStateException("run with -jar: no launcher agent");
        Thread[] workers = new Thread[2];
        for (int t = 0; t < workers.length; t++) {
            final long seed = t + 1;
            workers[t] = new Thread(() -> {
                long x = seed;
                while (!stop) x = Hot.spin(x);
                sink += x;
            }, "spinner-" + t);
            workers[t].start();
        }
        final long start = System.nanoTime();
        Thread.sleep(millis / 4);
        instrumentation.redefineClasses(new ClassDefinition(Hot.class, classBytes(Hot.class)));
        System.out.println("redefined at " + (System.nanoTime() - start) / 1_000_000 + " ms");
        Thread.sleep(millis / 4);
        ClassFileTransformer same = new ClassFileTransformer() {
            @Override
            public byte[] transform(ClassLoader loader, String name, Class<?> redefined, ProtectionDomain domain, byte[] bytes) {
                return redefined == Hot.class ? bytes.clone() : null;
            }
        };
        instrumentation.addTransformer(same, true);
        instrumentation.retransformClasses(Hot.class);
        instrumentation.removeTransformer(same);
        System.out.println("retransformed at " + (System.nanoTime() - start) / 1_000_000 + " ms");
        Thread.sleep(Math.max(0, millis - (System.nanoTime() - start) / 1_000_000));
        stop = true;
        for (Thread w : workers) w.join();
        System.out.println("done " + sink);
    }
}
