// A probe for bench/probes.sh: a StackOverflowError thrown and caught over and over (stacks far
// deeper than the decoder's 2,048 frames, exceptions unwinding C1 and C2 frames). Argument: seconds.
public class SOE {
    static int depth;
    static int recurse(int n) { depth = n; return recurse(n + 1) + 1; }
    static long mix(long a, int n) { if (n == 0) return a; return mix(a * 31 + n, n - 1) ^ a; }
    public static void main(String[] args) {
        long end = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000_000L;
        long s = 0; int overflows = 0;
        while (System.nanoTime() < end) {
            try { recurse(0); } catch (StackOverflowError e) { overflows++; }
            s += mix(overflows, 5000);
        }
        System.out.println(overflows + " " + s);
    }
}
