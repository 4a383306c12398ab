// Threads that wait in three known places, each from its own method, beside one busy thread:
// the off-CPU profile (events=switch) must show the three waits under their methods, the on-CPU
// profile the busy method. Usage: java OffCpu SECONDS
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;

public class OffCpu {
    static final Object LOCK = new Object();
    static volatile boolean stop;
    static volatile long sink;

    // Sleeps 2 ms at a time.
    static void sleepingWaiter() throws InterruptedException {
        while (!stop) Thread.sleep(2);
    }

    // The holder keeps LOCK 3 ms at a time and takes it straight back (monitors are not fair), so
    // the contender waits for it nearly all the time.
    static void lockHolder() throws InterruptedException {
        while (!stop) {
            synchronized (LOCK) {
                Thread.sleep(3);
            }
        }
    }

    static void lockContender() {
        while (!stop) {
            synchronized (LOCK) {
                sink++;
            }
        }
    }

    // Reads one byte at a time from a loopback socket whose writer sends one every 2 ms.
    static void socketReader(InputStream in) throws Exception {
        while (!stop && in.read() >= 0) {
        }
    }

    static void socketWriter(OutputStream out) throws Exception {
        while (!stop) {
            out.write(1);
            out.flush();
            Thread.sleep(2);
        }
    }

    // Pure computation, never blocks.
    static long busyComputation(long n) {
        long x = n;
        for (int i = 0; i < 10_000_000 && !stop; i++) x = x * 6364136223846793005L + 1442695040888963407L;
        return x;
    }

    static Thread start(String name, ThrowingRunnable body) {
        Thread t = new Thread(() -> {
            try {
                body.run();
            } catch (Exception e) {
                if (!stop) throw new RuntimeException(e);
            }
        }, name);
        t.start();
        return t;
    }

    interface ThrowingRunnable {
        void run() throws Exception;
    }

    public static void main(String[] args) throws Exception {
        final double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 3;
        ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
        Socket client = new Socket(InetAddress.getLoopbackAddress(), server.getLocalPort());
        Socket accepted = server.accept();
        Thread[] threads = {
            start("sleeper", OffCpu::sleepingWaiter),
            start("holder", OffCpu::lockHolder),
            start("contender", OffCpu::lockContender),
            start("reader", () -> socketReader(accepted.getInputStream())),
            start("writer", () -> socketWriter(client.getOutputStream())),
            start("busy", () -> {
                while (!stop) sink += busyComputation(sink);
            }),
        };
        Thread.sleep((long) (seconds * 1000));
        stop = true;
        client.close();
        accepted.close();
        server.close();
        for (Thread t : threads) t.join(2000);
        System.out.println("done " + sink);
    }
}
