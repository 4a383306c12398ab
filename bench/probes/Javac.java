import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import javax.tools.DiagnosticCollector;
import javax.tools.FileObject;
import javax.tools.ForwardingJavaFileManager;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileManager;
import javax.tools.JavaFileObject;
import javax.tools.SimpleJavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;
import java.io.ByteArrayOutputStream;
import java.io.OutputStream;

// javac compiling generated sources in memory, over and over, on two threads: a compiler is code
// no shared workload has (visitors recursing over trees, symbol tables, a great many small
// classes, string building everywhere), and a long chained expression makes its parser, attribution
// and code generation recurse deeper than the stack fragment.
// Usage: java Javac [SECONDS]
public class Javac {
    static final class Source extends SimpleJavaFileObject {
        final String text;
        Source(String name, String text) {
            super(URI.create("string:///" + name + ".java"), Kind.SOURCE);
            this.text = text;
        }
        @Override public CharSequence getCharContent(boolean ignore) { return text; }
    }

    static final class Output extends SimpleJavaFileObject {
        final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        Output(String name) { super(URI.create("bytes:///" + name + ".class"), Kind.CLASS); }
        @Override public OutputStream openOutputStream() { return bytes; }
    }

    static String unit(int n, int variant, int chain) {
        StringBuilder s = new StringBuilder();
        s.append("import java.util.*; import java.util.function.*; import java.util.stream.*;\n");
        s.append("public class Gen").append(n).append(" {\n");
        s.append("  interface Shape { double area(); }\n");
        s.append("  record Box<T extends Comparable<T>>(T lo, T hi) { boolean has(T t) { return lo.compareTo(t) <= 0 && t.compareTo(hi) <= 0; } }\n");
        for (int m = 0; m < 12; m++) {
            s.append("  static <K, V extends Comparable<V>> Map<K, List<V>> group").append(m)
             .append("(List<V> in, Function<V, K> key) {\n")
             .append("    int round = ").append(variant).append(";\n")
             .append("    return in.stream().filter(v -> v != null).sorted(Comparator.naturalOrder())")
             .append(".collect(Collectors.groupingBy(key, TreeMap::new, Collectors.toList()));\n  }\n");
            s.append("  static String text").append(m).append("(int x) {\n    switch (x % 4) {\n")
             .append("      case 0: return \"a\" + x + String.format(\"%05d\", x);\n")
             .append("      case 1: { StringBuilder b = new StringBuilder(); for (int i = 0; i < x; i++) b.append(i).append(','); return b.toString(); }\n")
             .append("      default: return Integer.toHexString(x).repeat(2);\n    }\n  }\n");
        }
        // One long chain of additions: a tree as deep as the chain is long.
        s.append("  static long chain(long a) { return a");
        for (int i = 0; i < chain; i++) s.append(i % 3 == 0 ? " + a * " : " - ").append(i);
        s.append("; }\n");
        s.append("  static Shape shape(double r) { return () -> Math.PI * r * r; }\n");
        s.append("}\n");
        return s.toString();
    }

    static long compileAll(JavaCompiler compiler, StandardJavaFileManager standard, int round, int units, int chain) {
        List<JavaFileObject> sources = new ArrayList<>();
        for (int i = 0; i < units; i++) sources.add(new Source("Gen" + i, unit(i, round, chain)));
        List<Output> outputs = new ArrayList<>();
        JavaFileManager memory = new ForwardingJavaFileManager<>(standard) {
            @Override public JavaFileObject getJavaFileForOutput(Location l, String name, JavaFileObject.Kind k, FileObject sibling) {
                Output o = new Output(name);
                synchronized (outputs) { outputs.add(o); }
                return o;
            }
        };
        DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
        boolean ok = compiler.getTask(null, memory, diagnostics, List.of("-proc:none", "-g"), null, sources).call();
        if (!ok) throw new IllegalStateException(diagnostics.getDiagnostics().get(0).getMessage(Locale.ROOT));
        long bytes = 0;
        for (Output o : outputs) bytes += o.bytes.size();
        return bytes;
    }

    public static void main(String[] args) throws Exception {
        final long seconds = args.length > 0 ? Long.parseLong(args[0]) : 8;
        final long end = System.nanoTime() + seconds * 1_000_000_000L;
        final JavaCompiler compiler = ToolProvider.getSystemJavaCompiler();
        Thread[] threads = new Thread[2];
        final long[] bytes = new long[threads.length];
        final int[] rounds = new int[threads.length];
        for (int t = 0; t < threads.length; t++) {
            final int id = t;
            threads[t] = new Thread(() -> {
                StandardJavaFileManager standard = compiler.getStandardFileManager(null, Locale.ROOT, null);
                while (System.nanoTime() < end) {
                    // Every fourth round a chain long enough for stacks past 64 KB.
                    bytes[id] += compileAll(compiler, standard, rounds[id], 6, rounds[id] % 4 == 3 ? 1500 : 40);
                    rounds[id]++;
                }
            }, "javac-" + t);
            threads[t].start();
        }
        for (Thread t : threads) t.join();
        System.out.println("rounds " + (rounds[0] + rounds[1]) + ", class bytes " + (bytes[0] + bytes[1]));
    }
}
