package demo;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CountDownLatch;

/**
 * The bundled demo profiled by scripts/demo.sh: a few threads with distinct, recognisable hot paths
 * (numeric kernels, string and map work, sorting, deep recursion), run for a fixed number of seconds.
 * Usage: java demo.Demo [seconds]
 */
public final class Demo {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 5.0;
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        List<Thread> threads = new ArrayList<>();
        CountDownLatch done = new CountDownLatch(3);
        threads.add(worker("demo-matrix", done, () -> Matrix.run(deadline)));
        threads.add(worker("demo-words", done, () -> Words.run(deadline)));
        threads.add(worker("demo-sort", done, () -> Sorting.run(deadline)));
        for (Thread t : threads) t.start();
        // The main thread recurses, so the profile also shows a deep interpreted/compiled mix.
        while (System.nanoTime() < deadline) sink += Recursion.fib(22);
        done.await();
        System.out.println("demo done: " + sink);
    }

    private static Thread worker(String name, CountDownLatch done, Runnable body) {
        return new Thread(() -> {
            try {
                body.run();
            } finally {
                done.countDown();
            }
        }, name);
    }

    static final class Matrix {
        static void run(long deadline) {
            int n = 96;
            double[][] a = random(n, 1), b = random(n, 2);
            while (System.nanoTime() < deadline) sink += (long) multiply(a, b)[n / 2][n / 2];
        }

        static double[][] random(int n, long seed) {
            Random r = new Random(seed);
            double[][] m = new double[n][n];
            for (double[] row : m) for (int j = 0; j < n; j++) row[j] = r.nextDouble();
            return m;
        }

        static double[][] multiply(double[][] a, double[][] b) {
            int n = a.length;
            double[][] c = new double[n][n];
            for (int i = 0; i < n; i++)
                for (int k = 0; k < n; k++) {
                    double aik = a[i][k];
                    for (int j = 0; j < n; j++) c[i][j] += aik * b[k][j];
                }
            return c;
        }
    }

    static final class Words {
        static void run(long deadline) {
            Random r = new Random(3);
            while (System.nanoTime() < deadline) sink += countWords(sentence(r, 400)).size();
        }

        static String sentence(Random r, int words) {
            StringBuilder sb = new StringBuilder();
            for (int i = 0; i < words; i++) {
                int len = 2 + r.nextInt(6);
                for (int j = 0; j < len; j++) sb.append((char) ('a' + r.nextInt(8)));
                sb.append(' ');
            }
            return sb.toString();
        }

        static Map<String, Integer> countWords(String text) {
            Map<String, Integer> counts = new HashMap<>();
            for (String w : text.split(" ")) counts.merge(w, 1, Integer::sum);
            return counts;
        }
    }

    static final class Sorting {
        static void run(long deadline) {
            Random r = new Random(4);
            int[] data = new int[20000];
            while (System.nanoTime() < deadline) {
                for (int i = 0; i < data.length; i++) data[i] = r.nextInt();
                Arrays.sort(data);
                sink += data[data.length / 2] + insertionSortPrefix(data, 300);
            }
        }

        // Deliberately quadratic on a reversed prefix so it shows up next to Arrays.sort.
        static int insertionSortPrefix(int[] data, int n) {
            int[] a = new int[n];
            for (int i = 0; i < n; i++) a[i] = data[n - 1 - i];
            for (int i = 1; i < n; i++) {
                int v = a[i], j = i - 1;
                while (j >= 0 && a[j] < v) { a[j + 1] = a[j]; j--; }
                a[j + 1] = v;
            }
            return a[0];
        }
    }

    static final class Recursion {
        static int fib(int n) {
            return n < 2 ? n : fib(n - 1) + fib(n - 2);
        }
    }
}
