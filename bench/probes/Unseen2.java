// A probe for bench/probes.sh: 4 threads over Arrays.sort, SHA-256, AES-GCM, CRC32C,
// BigInteger.modPow, Math intrinsics, exceptions with their stack traces, Method.invoke,
// String.hashCode and a contended monitor. Argument: seconds.
import java.lang.reflect.Method;
import java.math.BigInteger;
import java.security.MessageDigest;
import java.util.*;
import java.util.zip.CRC32C;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

public class Unseen2 {
    static volatile Object sink;
    static final Object lock = new Object();
    static long shared;

    static int sorts(Random r) {
        int[] a = new int[20000]; for (int i = 0; i < a.length; i++) a[i] = r.nextInt();
        Arrays.sort(a);
        long[] b = new long[20000]; for (int i = 0; i < b.length; i++) b[i] = r.nextLong();
        Arrays.sort(b);
        double[] c = new double[20000]; for (int i = 0; i < c.length; i++) c[i] = r.nextDouble();
        Arrays.sort(c);
        return a[7] + (int) b[9] + (int) c[3];
    }
    static byte[] crypto(byte[] data, Cipher gcm, SecretKeySpec key, int n) throws Exception {
        MessageDigest md = MessageDigest.getInstance("SHA-256");
        byte[] h = md.digest(data);
        byte[] iv = new byte[12]; iv[0] = (byte) n; iv[1] = (byte) (n >> 8); iv[2] = (byte) (n >> 16);
        gcm.init(Cipher.ENCRYPT_MODE, key, new GCMParameterSpec(128, iv));
        byte[] out = gcm.doFinal(data);
        CRC32C crc = new CRC32C(); crc.update(out);
        h[0] ^= (byte) crc.getValue();
        return h;
    }
    static BigInteger bigs(Random r) {
        BigInteger m = new BigInteger(1024, r).setBit(1023).setBit(0);
        return new BigInteger(1000, r).modPow(new BigInteger(256, r), m).multiply(new BigInteger(2048, r));
    }
    static double maths(double x) {
        double s = 0;
        for (int i = 0; i < 20000; i++) { s += Math.sin(x + i) * Math.log(1 + i) + Math.pow(1.0001, i) + Math.exp(-i * 1e-4); }
        return s;
    }
    static int thrower(int d) {
        if (d == 0) throw new IllegalArgumentException("bottom");
        return thrower(d - 1) + 1;
    }
    static int exceptions(int n) {
        int c = 0;
        for (int i = 0; i < n; i++) { try { c += thrower(30 + (i % 20)); } catch (IllegalArgumentException e) { c += e.getStackTrace().length; } }
        return c;
    }
    public int target(int x, String s) { return x + s.length(); }
    static int reflect(Method m, Unseen2 o, int n) throws Exception {
        int c = 0; for (int i = 0; i < n; i++) c += (Integer) m.invoke(o, i, "abc"); return c;
    }
    static int hashes(String[] strs) { int h = 0; for (String s : strs) h += s.hashCode() + new String(s.toCharArray()).hashCode(); return h; }

    public static void main(String[] args) throws Throwable {
        long seconds = Long.parseLong(args.length > 0 ? args[0] : "8");
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        Method m = Unseen2.class.getMethod("target", int.class, String.class);
        Thread[] ts = new Thread[4];
        for (int t = 0; t < ts.length; t++) {
            final int id = t;
            ts[t] = new Thread(() -> {
                try {
                    Random r = new Random(id);
                    byte[] data = new byte[64 * 1024]; r.nextBytes(data);
                    Cipher gcm = Cipher.getInstance("AES/GCM/NoPadding");
                    SecretKeySpec key = new SecretKeySpec(Arrays.copyOf(data, 16), "AES");
                    String[] strs = new String[500]; for (int i = 0; i < strs.length; i++) strs[i] = "k" + r.nextLong() + "/" + i;
                    Unseen2 o = new Unseen2();
                    int n = 0;
                    while (System.nanoTime() < end) {
                        n++;
                        switch ((n + id) % 7) {
                            case 0: sink = sorts(r); break;
                            case 1: sink = crypto(data, gcm, key, n); break;
                            case 2: sink = bigs(r); break;
                            case 3: sink = maths(n); break;
                            case 4: sink = exceptions(200); break;
                            case 5: sink = reflect(m, o, 20000); break;
                            default: sink = hashes(strs); for (int i = 0; i < 2000; i++) synchronized (lock) { shared++; }
                        }
                    }
                } catch (Exception e) { throw new RuntimeException(e); }
            }, "worker-" + t);
            ts[t].start();
        }
        for (Thread t : ts) t.join();
        System.out.println("done " + shared);
    }
}
