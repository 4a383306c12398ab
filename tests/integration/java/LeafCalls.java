import java.math.BigInteger;
import java.util.Random;

// Modular exponentiation on a few threads: C2 compiles BigInteger.oddModPow with the Montgomery
// intrinsics, which call SharedRuntime::montgomery_square / montgomery_multiply in libjvm directly
// (a leaf call: no stub, no frame anchor). A sample taken there has native frames on top of a
// compiled Java frame that only unwinding the native code reaches.
public class LeafCalls {
    static volatile long sink;

    static long work(int seed, long millis) {
        Random random = new Random(seed);
        BigInteger modulus = BigInteger.probablePrime(512, random);
        long end = System.nanoTime() + millis * 1_000_000L;
        long sum = 0;
        while (System.nanoTime() < end) {
            BigInteger base = new BigInteger(500, random);
            BigInteger exponent = new BigInteger(510, random);
            sum += base.modPow(exponent, modulus).bitLength();
        }
        return sum;
    }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        long millis = Long.parseLong(args[1]);
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final int seed = t;
            workers[t] = new Thread(() -> sink += work(seed, millis), "leaf-worker-" + t);
            workers[t].start();
        }
        for (Thread w : workers) w.join();
        System.out.println("done " + sink);
    }
}
