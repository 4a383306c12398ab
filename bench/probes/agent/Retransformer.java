// For bench/probes.sh -a: a Java agent shaped like an APM tool's, which retransforms the loaded
// classes it traces while the program runs. Once a second, three times, it retransforms every
// modifiable java.util.*, java.lang.String* class and every class of the probe program (~300
// classes) with a transformer that returns their bytes unchanged: each of their methods gets a new
// Method*, which interpreted frames name from their next call on.
import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.security.ProtectionDomain;
import java.util.ArrayList;
import java.util.List;

public class Retransformer {
    public static void premain(String args, Instrumentation inst) {
        final String program = args == null ? "" : args;
        Thread thread = new Thread(() -> {
            try {
                for (int round = 0; round < 3; round++) {
                    Thread.sleep(1000);
                    List<Class<?>> targets = new ArrayList<>();
                    for (Class<?> c : inst.getAllLoadedClasses()) {
                        String name = c.getName();
                        boolean traced = name.startsWith("java.util.") || name.startsWith("java.lang.String")
                                || (!program.isEmpty() && name.startsWith(program));
                        if (traced && !c.isArray() && inst.isModifiableClass(c)) targets.add(c);
                    }
                    ClassFileTransformer same = new ClassFileTransformer() {
                        @Override
                        public byte[] transform(Module module, ClassLoader loader, String name, Class<?> redefined,
                                                ProtectionDomain domain, byte[] bytes) {
                            return redefined != null ? bytes.clone() : null;
                        }
                    };
                    inst.addTransformer(same, true);
                    long start = System.nanoTime();
                    try {
                        inst.retransformClasses(targets.toArray(new Class<?>[0]));
                    } catch (Throwable e) {
                        System.err.println("retransformer: " + e);
                    }
                    inst.removeTransformer(same);
                    System.err.println("retransformer: " + targets.size() + " classes in " + (System.nanoTime() - start) / 1_000_000 + " ms");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "retransformer");
        thread.setDaemon(true);
        thread.start();
    }
}
