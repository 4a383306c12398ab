// A workload whose sampling needs change halfway: phase 1 spins in one method (every sample has the
// same top frame), phase 2 spreads its time over 32 methods picked at random (hardly two samples in
// a row agree). interval=auto should lengthen the period in phase 1 and shorten it in phase 2.
// Usage: java PhaseChange SECONDS_PER_PHASE
public class PhaseChange {
    static volatile long sink;

    static long tightLoop(long deadline) {
        long x = 1;
        while (System.nanoTime() < deadline) {
            for (int i = 0; i < 10_000; i++) x = x * 6364136223846793005L + 1442695040888963407L;
        }
        return x;
    }

    // 32 distinct methods, each with its own loop; the JIT may inline them into manyMethods, but an
    // inlined frame keeps its own method.
    static long m0(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 0; return x; }
    static long m1(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 1; return x; }
    static long m2(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 2; return x; }
    static long m3(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 3; return x; }
    static long m4(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 4; return x; }
    static long m5(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 5; return x; }
    static long m6(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 6; return x; }
    static long m7(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 7; return x; }
    static long m8(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 8; return x; }
    static long m9(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 9; return x; }
    static long m10(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 10; return x; }
    static long m11(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 11; return x; }
    static long m12(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 12; return x; }
    static long m13(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 13; return x; }
    static long m14(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 14; return x; }
    static long m15(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 15; return x; }
    static long m16(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 16; return x; }
    static long m17(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 17; return x; }
    static long m18(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 18; return x; }
    static long m19(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 19; return x; }
    static long m20(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 20; return x; }
    static long m21(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 21; return x; }
    static long m22(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 22; return x; }
    static long m23(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 23; return x; }
    static long m24(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 24; return x; }
    static long m25(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 25; return x; }
    static long m26(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 26; return x; }
    static long m27(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 27; return x; }
    static long m28(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 28; return x; }
    static long m29(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 29; return x; }
    static long m30(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 30; return x; }
    static long m31(long x) { for (int i = 0; i < 3000; i++) x = x * 2862933555777941757L + 31; return x; }

    static long manyMethods(long deadline) {
        long x = 1;
        int r = 12345;
        while (System.nanoTime() < deadline) {
            r = r * 1103515245 + 12345;
            switch ((r >>> 16) & 31) {
                case 0: x = m0(x); break;
                case 1: x = m1(x); break;
                case 2: x = m2(x); break;
                case 3: x = m3(x); break;
                case 4: x = m4(x); break;
                case 5: x = m5(x); break;
                case 6: x = m6(x); break;
                case 7: x = m7(x); break;
                case 8: x = m8(x); break;
                case 9: x = m9(x); break;
                case 10: x = m10(x); break;
                case 11: x = m11(x); break;
                case 12: x = m12(x); break;
                case 13: x = m13(x); break;
                case 14: x = m14(x); break;
                case 15: x = m15(x); break;
                case 16: x = m16(x); break;
                case 17: x = m17(x); break;
                case 18: x = m18(x); break;
                case 19: x = m19(x); break;
                case 20: x = m20(x); break;
                case 21: x = m21(x); break;
                case 22: x = m22(x); break;
                case 23: x = m23(x); break;
                case 24: x = m24(x); break;
                case 25: x = m25(x); break;
                case 26: x = m26(x); break;
                case 27: x = m27(x); break;
                case 28: x = m28(x); break;
                case 29: x = m29(x); break;
                case 30: x = m30(x); break;
                default: x = m31(x); break;
            }
        }
        return x;
    }

    public static void main(String[] args) {
        final double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 3;
        final long phase = (long) (seconds * 1e9);
        sink += tightLoop(System.nanoTime() + phase);
        System.out.println("phase 2");
        sink += manyMethods(System.nanoTime() + phase);
        System.out.println("done " + sink);
    }
}
