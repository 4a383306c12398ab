// JNI both ways: a native method sorts with glibc's qsort_r, whose comparator calls back into Java
// (CallIntMethod: an entry frame, with the JNI function's and qsort's native frames below it); and
// a native thread the library attached to the VM calls tick() in a loop.
// Usage: java JniCallbacks LIBRARY SECONDS   (LIBRARY: tests/integration/native/jni_callbacks.c built)
import java.util.Random;

public class JniCallbacks {
    static native long sortWith(int[] values, JniCallbacks comparator);
    static native void startCallbackThread(int seconds);
    static volatile long ticks;

    static void tick(int round) {
        long x = round;
        for (int i = 0; i < 100000; i++) x = x * 6364136223846793005L + 1442695040888963407L;
        ticks += x;
    }

    int compare(int x, int y) {
        int mixed = 0;
        for (int i = 0; i < 20; i++) mixed += (x ^ i) * 31;   // some work of the comparator's own
        return Integer.compare(x, y) + (mixed == 42 ? 1 : 0);
    }

    public static void main(String[] args) {
        System.load(args[0]);
        final long end = System.nanoTime() + Long.parseLong(args[1]) * 1_000_000_000L;
        startCallbackThread(Integer.parseInt(args[1]));
        JniCallbacks comparator = new JniCallbacks();
        Random random = new Random(1);
        int[] values = new int[20000];
        long total = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < values.length; i++) values[i] = random.nextInt();
            total += sortWith(values, comparator);
            for (int i = 1; i < values.length; i++) {
                if (values[i - 1] > values[i]) throw new AssertionError("not sorted at " + i);
            }
        }
        System.out.println("sorted " + total);
    }
}
