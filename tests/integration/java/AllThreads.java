import java.io.FileOutputStream;
import java.io.IOException;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

// Keeps the JVM's own threads busy beside the application: an allocation-heavy thread that retains
// part of what it allocates (GC workers copy survivors), a thread that runs much varied library code
// for the JIT to compile, and a thread that makes one small write(2) after another (kernel time
// under AllThreads.syscalls). Argument: seconds to run.
public class AllThreads {
    static volatile long sink;

    static void allocate(long until) {
        Object[] kept = new Object[200_000];
        int i = 0;
        while (System.nanoTime() < until) {
            List<Integer> list = new ArrayList<>(16);
            for (int j = 0; j < 16; ++j) list.add(j * i);
            kept[i++ % kept.length] = list;
            sink += list.size();
        }
    }

    static void varied(long until) {
        int round = 0;
        while (System.nanoTime() < until) {
            String text = IntStream.range(0, 50 + round % 7).mapToObj(Integer::toString).collect(Collectors.joining(","));
            sink += Pattern.compile("[0-9]+" + (round % 5)).matcher(text).results().count();
            sink += new BigDecimal(round).pow(3).toString().length();
            sink += String.format("%d-%s-%x", round, text.length(), round * 31L).hashCode();
            ++round;
        }
    }

    static void syscalls(long until) throws IOException {
        try (FileOutputStream out = new FileOutputStream("/dev/null")) {
            while (System.nanoTime() < until) {
                for (int j = 0; j < 100; ++j) out.write(j);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        final long until = System.nanoTime() + (long) (Double.parseDouble(args.length > 0 ? args[0] : "3") * 1e9);
        Thread allocator = new Thread(() -> allocate(until), "allocator");
        Thread compiler = new Thread(() -> varied(until), "varied");
        Thread writer = new Thread(() -> {
            try {
                syscalls(until);
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
        }, "writer");
        allocator.start();
        compiler.start();
        writer.start();
        allocator.join();
        compiler.join();
        writer.join();
        System.out.println("done " + sink);
    }
}
