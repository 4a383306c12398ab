// Worker threads that spend their time in the VM's intrinsic stubs and the runtime routines
// compiled code calls without a Java frame of their own: message digests (sha*/md5 compress stubs),
// AES, CRC32/CRC32C/Adler32, Math's sin/cos/pow/exp/log/tan (libm stubs), BigInteger's
// Montgomery multiply and multiplyToLen/mulAdd/squareToLen, Base64, string coding and hashing,
// sorting (AVX-512 partition routines on JDK 25 where the CPU has them), exceptions, and `%` on
// doubles and floats (SharedRuntime::drem/frem, which tail-call libm's fmod on JDK 17 and the VM's
// fmod stub on JDK 25).
// Usage: IntrinsicStubs THREADS MILLIS
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.zip.Adler32;
import java.util.zip.CRC32;
import java.util.zip.CRC32C;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

public class IntrinsicStubs {
    static volatile long sink;
    static final byte[] DATA = new byte[1 << 16];

    static void digests() throws Exception {
        for (String algorithm : new String[] {"SHA-256", "SHA-512", "MD5"}) {
            MessageDigest md = MessageDigest.getInstance(algorithm);
            for (int i = 0; i < 20; i++) md.update(DATA);
            sink += md.digest()[0];
        }
    }

    static void aes(Random r) throws Exception {
        byte[] iv = new byte[12];
        r.nextBytes(iv);
        Cipher gcm = Cipher.getInstance("AES/GCM/NoPadding");
        gcm.init(Cipher.ENCRYPT_MODE, new SecretKeySpec(new byte[16], "AES"), new GCMParameterSpec(128, iv));
        sink += gcm.doFinal(DATA).length;
    }

    static void checksums() {
        CRC32 a = new CRC32();
        CRC32C b = new CRC32C();
        Adler32 c = new Adler32();
        for (int i = 0; i < 30; i++) {
            a.update(DATA);
            b.update(DATA);
            c.update(DATA);
        }
        sink += a.getValue() + b.getValue() + c.getValue();
    }

    static double maths(int n) {
        double s = 0;
        for (int i = 1; i < n; i++) {
            s += Math.sin(i) * Math.cos(i) + Math.log(i) + Math.exp(-i * 1e-6) + Math.pow(i, 0.3) + Math.tan(i * 1e-3);
        }
        return s;
    }

    static double remainders(int n) {
        double s = 0;
        float f = 0;
        for (int i = 1; i < n; i++) {
            s += (i * 1.7) % (i * 0.37 + 1.1);
            f += (i * 1.3f) % (i * 0.37f + 1.1f);
        }
        return s + f;
    }

    static void bigIntegers(Random r) {
        BigInteger m = BigInteger.probablePrime(1024, r);
        BigInteger b = BigInteger.valueOf(sink | 3);
        for (int i = 0; i < 3; i++) b = b.modPow(m.subtract(BigInteger.TWO), m);
        sink += b.bitLength() + m.multiply(b).sqrt().bitLength();
    }

    static void strings(int n) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < n; i++) sb.append(Integer.toHexString(i * 31)).append('-').append(Integer.toString(i, 36)).append(';');
        String s = sb.toString();
        byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
        String back = new String(utf8, StandardCharsets.UTF_8);
        byte[] decoded = Base64.getDecoder().decode(Base64.getEncoder().encodeToString(utf8));
        String wide = new String(s.toCharArray()) + "\u20ac";
        sink += s.hashCode() + wide.hashCode() + wide.indexOf("ffff") + s.compareTo(back) + Arrays.mismatch(utf8, decoded)
                + wide.toUpperCase().length();
    }

    static void sorts(Random r) {
        int[] a = r.ints(100_000).toArray();
        Arrays.sort(a);
        double[] d = r.doubles(50_000).toArray();
        Arrays.sort(d);
        sink += a[7] + (long) d[3];
    }

    static void exceptions(int n) {
        for (int i = 0; i < n; i++) {
            try {
                Integer.parseInt("x" + i);
            } catch (NumberFormatException e) {
                sink += e.getStackTrace().length;
            }
        }
    }

    static void task(Random r) throws Exception {
        switch (r.nextInt(9)) {
            case 0: digests(); break;
            case 1: aes(r); break;
            case 2: checksums(); break;
            case 3: sink += (long) maths(50_000); break;
            case 4: bigIntegers(r); break;
            case 5: strings(10_000); break;
            case 6: sorts(r); break;
            case 7: sink += (long) remainders(1_000_000); break;
            default: exceptions(500); break;
        }
    }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        long millis = Long.parseLong(args[1]);
        for (int i = 0; i < DATA.length; i++) DATA[i] = (byte) (i * 131 + (i >> 7));
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        long end = System.nanoTime() + millis * 1_000_000L;
        List<Future<?>> done = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final Random r = new Random(t);
            done.add(pool.submit(() -> {
                while (System.nanoTime() < end) task(r);
                return null;
            }));
        }
        for (Future<?> f : done) f.get();
        pool.shutdown();
        System.out.println("sink " + sink);
    }
}
