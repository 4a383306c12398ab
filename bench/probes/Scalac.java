// Scalac probe (bench/probes.sh): Scala 2.11's compiler (Debian's scala package) compiling a generated
// source (bench/probes/gen_scala.py: traits, case classes, pattern matching, implicits,
// for-comprehensions) again and again in one JVM for SECONDS: the typer's recursion makes stacks of
// 150-300 frames, and the compiler's code is megamorphic and JIT-compiled all along.
// Usage: Scalac SECONDS OUT_DIR SOURCE.scala
public class Scalac {
    public static void main(String[] args) throws Exception {
        double seconds = Double.parseDouble(args[0]);
        long end = System.nanoTime() + (long) (seconds * 1e9);
        int n = 0;
        do {
            scala.tools.nsc.Main.process(new String[] {"-usejavacp", "-d", args[1], args[2]});
            n++;
        } while (System.nanoTime() < end);
        System.out.println("compiled " + n + " times");
    }
}
