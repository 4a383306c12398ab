// Churns compiled code and classes for the unloading test (agent_live_unload_test.cpp): every round
// defines Churn$Payload anew in its own class loader (the same bytes, a new class each time), runs
// it until the JIT has compiled it, drops the loader and now and then forces a GC, so classes,
// their methods and their compiled code are unloaded while samples are being taken; addresses in
// the (small) code cache are then reused by the next round's code.
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.util.function.LongSupplier;

public class Churn {
    public static class Payload implements LongSupplier {
        private long state = 17;

        public long getAsLong() {
            long acc = 0;
            for (int i = 0; i < 2000; i++) acc += step(i);
            return acc;
        }

        private long step(int i) {
            state = state * 6364136223846793005L + 1442695040888963407L;
            return (state >>> 33) ^ i;
        }
    }

    static final class OneClassLoader extends ClassLoader {
        private final byte[] bytes;

        OneClassLoader(byte[] bytes) {
            super(Churn.class.getClassLoader());
            this.bytes = bytes;
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            // Payload comes from this loader (a new class every time); everything else from the parent.
            if (name.equals("Churn$Payload")) {
                synchronized (getClassLoadingLock(name)) {
                    Class<?> c = findLoadedClass(name);
                    if (c == null) c = defineClass(name, bytes, 0, bytes.length);
                    return c;
                }
            }
            return super.loadClass(name, resolve);
        }
    }

    static byte[] payloadBytes() throws Exception {
        try (InputStream in = Churn.class.getResourceAsStream("Churn$Payload.class")) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            in.transferTo(out);
            return out.toByteArray();
        }
    }

    public static void main(String[] args) throws Exception {
        final long millis = args.length > 0 ? Long.parseLong(args[0]) : 3000;
        final byte[] bytes = payloadBytes();
        final long end = System.currentTimeMillis() + millis;
        long sink = 0;
        int rounds = 0;
        while (System.currentTimeMillis() < end) {
            OneClassLoader loader = new OneClassLoader(bytes);
            LongSupplier payload = (LongSupplier) loader.loadClass("Churn$Payload").getDeclaredConstructor().newInstance();
            for (int i = 0; i < 600; i++) sink += payload.getAsLong();
            payload = null;
            loader = null;
            if (++rounds % 4 == 0) System.gc();
        }
        System.out.println("rounds " + rounds + " sink " + sink);
    }
}
