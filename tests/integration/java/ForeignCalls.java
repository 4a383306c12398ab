// The foreign function API (JDK 22+) both ways: glibc's qsort sorts native ints with a Java
// comparator it calls through an upcall stub (native frames between two runs of Java frames), and a
// second thread calls strlen and getpid through downcall stubs in a loop.
// Usage: java --enable-native-access=ALL-UNNAMED ForeignCalls SECONDS
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.Random;

public class ForeignCalls {
    static final Linker LINKER = Linker.nativeLinker();
    static final ValueLayout INT_POINTER = ValueLayout.ADDRESS.withTargetLayout(ValueLayout.JAVA_INT);
    static final MethodHandle STRLEN = downcall("strlen", FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.ADDRESS));
    static final MethodHandle GETPID = downcall("getpid", FunctionDescriptor.of(ValueLayout.JAVA_INT));
    static final MethodHandle QSORT = downcall("qsort",
        FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS));

    static MethodHandle downcall(String name, FunctionDescriptor descriptor) {
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(), descriptor);
    }

    static int compare(MemorySegment a, MemorySegment b) {
        int x = a.get(ValueLayout.JAVA_INT, 0), y = b.get(ValueLayout.JAVA_INT, 0);
        int mixed = 0;
        for (int i = 0; i < 20; i++) mixed += (x ^ i) * 31;   // some work of the comparator's own
        return Integer.compare(x, y) + (mixed == 42 ? 1 : 0);
    }

    static long sorts(Arena arena, MemorySegment comparator, Random random, int n) throws Throwable {
        MemorySegment values = arena.allocate(ValueLayout.JAVA_INT, n);
        for (int i = 0; i < n; i++) values.setAtIndex(ValueLayout.JAVA_INT, i, random.nextInt());
        QSORT.invokeExact(values, (long) n, 4L, comparator);
        return values.getAtIndex(ValueLayout.JAVA_INT, 0);
    }

    static long lengths(MemorySegment text, int n) throws Throwable {
        long total = 0;
        for (int i = 0; i < n; i++) total += (long) STRLEN.invokeExact(text);
        for (int i = 0; i < n; i++) total += (int) GETPID.invokeExact();
        return total;
    }

    public static void main(String[] args) throws Throwable {
        final long end = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000_000L;
        Thread downcalls = new Thread(() -> {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment text = arena.allocateFrom("x".repeat(4000));
                long total = 0;
                while (System.nanoTime() < end) total += lengths(text, 2000);
                System.out.println("lengths " + total);
            } catch (Throwable e) {
                throw new RuntimeException(e);
            }
        }, "downcalls");
        downcalls.start();
        MethodHandle compare = MethodHandles.lookup().findStatic(ForeignCalls.class, "compare",
            MethodType.methodType(int.class, MemorySegment.class, MemorySegment.class));
        long total = 0;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment comparator = LINKER.upcallStub(compare,
                FunctionDescriptor.of(ValueLayout.JAVA_INT, INT_POINTER, INT_POINTER), arena);
            Random random = new Random(1);
            while (System.nanoTime() < end) total += sorts(arena, comparator, random, 20000);
        }
        downcalls.join();
        System.out.println("sorted " + total);
    }
}
