import java.util.Random;
import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

// The incubating Vector API on two threads: C2 turns its calls into vector instructions, masked
// loops, and calls into libjsvml's vectorised exp/log/sin (a native library C2 code calls without
// a Java frame between), code no shared workload has. Needs --add-modules jdk.incubator.vector.
// Usage: java --add-modules jdk.incubator.vector Vec [SECONDS]
public class Vec {
    static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    static final VectorSpecies<Double> D = DoubleVector.SPECIES_PREFERRED;
    static final VectorSpecies<Integer> I = IntVector.SPECIES_PREFERRED;

    static float dot(float[] a, float[] b) {
        FloatVector sum = FloatVector.zero(F);
        int i = 0;
        for (; i < F.loopBound(a.length); i += F.length()) {
            sum = FloatVector.fromArray(F, a, i).fma(FloatVector.fromArray(F, b, i), sum);
        }
        float s = sum.reduceLanes(VectorOperators.ADD);
        for (; i < a.length; i++) s += a[i] * b[i];
        return s;
    }

    // Transcendentals: libjsvml where the CPU has it, Java fallbacks where not.
    static void softmax(float[] x, float[] out) {
        float max = Float.NEGATIVE_INFINITY;
        for (float v : x) max = Math.max(max, v);
        float total = 0;
        int i = 0;
        for (; i < F.loopBound(x.length); i += F.length()) {
            FloatVector e = FloatVector.fromArray(F, x, i).sub(max).lanewise(VectorOperators.EXP);
            e.intoArray(out, i);
            total += e.reduceLanes(VectorOperators.ADD);
        }
        for (; i < x.length; i++) total += out[i] = (float) Math.exp(x[i] - max);
        for (int j = 0; j < x.length; j++) out[j] /= total;
    }

    static double logSinSum(double[] x) {
        DoubleVector acc = DoubleVector.zero(D);
        for (int i = 0; i < D.loopBound(x.length); i += D.length()) {
            DoubleVector v = DoubleVector.fromArray(D, x, i);
            acc = acc.add(v.lanewise(VectorOperators.LOG).mul(v.lanewise(VectorOperators.SIN)));
        }
        return acc.reduceLanes(VectorOperators.ADD);
    }

    // Masked tail and compares: the loop's last lanes under a mask.
    static int countAbove(int[] a, int threshold) {
        int count = 0;
        for (int i = 0; i < a.length; i += I.length()) {
            VectorMask<Integer> in = I.indexInRange(i, a.length);
            IntVector v = IntVector.fromArray(I, a, i, in);
            count += v.compare(VectorOperators.GT, threshold, in).trueCount();
        }
        return count;
    }

    public static void main(String[] args) throws Exception {
        final long seconds = args.length > 0 ? Long.parseLong(args[0]) : 8;
        final long end = System.nanoTime() + seconds * 1_000_000_000L;
        Thread[] threads = new Thread[2];
        final double[] sink = new double[threads.length];
        for (int t = 0; t < threads.length; t++) {
            final int id = t;
            threads[t] = new Thread(() -> {
                Random r = new Random(id);
                float[] a = new float[1003], b = new float[1003], out = new float[1003];
                double[] d = new double[4096];
                int[] n = new int[10007];
                for (int i = 0; i < a.length; i++) { a[i] = r.nextFloat(); b[i] = r.nextFloat(); }
                for (int i = 0; i < d.length; i++) d[i] = 1 + r.nextDouble() * 100;
                for (int i = 0; i < n.length; i++) n[i] = r.nextInt(1000);
                double s = 0;
                while (System.nanoTime() < end) {
                    s += dot(a, b);
                    softmax(a, out);
                    s += out[7] + logSinSum(d) + countAbove(n, 500);
                }
                sink[id] = s;
            }, "vec-" + t);
            threads[t].start();
        }
        for (Thread t : threads) t.join();
        System.out.println("sum " + (sink[0] + sink[1]));
    }
}
