// Driver for agent_breadcrumbs_test: calls natives with many arguments (several passed on the
// stack) for a given time and checks every result against the same arithmetic in Java.
// Usage: java BcNatives LIBRARY SECONDS [WORK]; prints "calls N mismatches M", exit 1 on a mismatch.
public class BcNatives {
    static native double mix(int i0, double d0, int i1, double d1, int i2, double d2, int i3, double d3, int i4,
                             double d4, int i5, double d5, int i6, double d6, int i7, double d7, double d8, long l0,
                             double d9, long l1, long l2, long l3, int work);
    native long many(long a0, long a1, long a2, long a3, long a4, long a5, long a6, long a7, long a8, long a9,
                     long a10, long a11, float f0, float f1, float f2, float f3, float f4, float f5, float f6,
                     float f7, float f8, float f9, int work);
    static native float fsum(float f0, float f1, float f2, float f3, float f4, float f5, float f6, float f7, float f8,
                             float f9, float f10, int work);
    static native int registered(int a, int b, int c, int d, int e, int f, int g, int work);

    static long mismatches = 0;

    static void check(boolean ok, String what) {
        if (!ok) {
            if (mismatches < 10) System.out.println("mismatch: " + what);
            ++mismatches;
        }
    }

    public static void main(String[] args) {
        System.load(args[0]);
        final long seconds = Long.parseLong(args[1]);
        final int work = args.length > 2 ? Integer.parseInt(args[2]) : 20000;
        final BcNatives self = new BcNatives();
        final long end = System.nanoTime() + seconds * 1_000_000_000L;
        long calls = 0;
        int k = 0;
        while (System.nanoTime() < end) {
            ++k;
            int i = k % 1000;
            double d = i * 0.125;
            long l = (long) i << 33;
            {
                double expect = 0;
                double[] terms = {i, d + 1, i + 2, d + 3, i + 4, d + 5, i + 6, d + 7, i + 8, d + 9, i + 10, d + 11,
                                  i + 12, d + 13, i + 14, d + 15, d + 16, (double) (l + 17), d + 18,
                                  (double) (l - 19), (double) (l + 20), (double) (-l)};
                for (double t : terms) expect = expect * 3 + t;
                double got = mix(i, d + 1, i + 2, d + 3, i + 4, d + 5, i + 6, d + 7, i + 8, d + 9, i + 10, d + 11,
                                 i + 12, d + 13, i + 14, d + 15, d + 16, l + 17, d + 18, l - 19, l + 20, -l, work);
                check(got == expect, "mix " + got + " != " + expect);
            }
            {
                long[] a = {l, l + 1, -l, i, i * 7L, l >> 3, 42, -42, l * 3, i - 500, Long.MAX_VALUE / 3, l ^ 0x5555};
                float[] f = new float[10];
                for (int j = 0; j < 10; ++j) f[j] = (i % 17) * 0.25f + j;
                long expect = 0;
                for (long v : a) expect = expect * 31 + v;
                for (float v : f) expect = expect * 31 + (long) (v * 4.0f);
                long got = self.many(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], f[0],
                                     f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], work);
                check(got == expect, "many " + got + " != " + expect);
            }
            {
                float[] f = new float[11];
                for (int j = 0; j < 11; ++j) f[j] = (i % 13) * 0.5f - j;
                float expect = 0;
                for (float v : f) expect = expect * 2 + v;
                float got = fsum(f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], work);
                check(Float.floatToIntBits(got) == Float.floatToIntBits(expect), "fsum " + got + " != " + expect);
            }
            {
                int expect = i - 2 * (i + 1) + 3 * (i + 2) - 4 * (i + 3) + 5 * (i + 4) - 6 * (i + 5) + 7 * (i + 6);
                int got = registered(i, i + 1, i + 2, i + 3, i + 4, i + 5, i + 6, work);
                check(got == expect, "registered " + got + " != " + expect);
            }
            calls += 4;
        }
        System.out.println("calls " + calls + " mismatches " + mismatches);
        System.exit(mismatches == 0 ? 0 : 1);
    }
}
