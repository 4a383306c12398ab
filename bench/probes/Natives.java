import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.io.OutputStream;
import java.io.Serializable;
import java.lang.reflect.Array;
import java.lang.reflect.Field;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

// Java code that lives in the VM's natives and the kernel: String.intern (the VM's string table),
// Class.forName, clone of arrays, identity hashes, stack traces filled in and walked (StackWalker),
// reflective field access, Array.newInstance, serialisation of an object graph (reflection and
// recursion), and a loopback TCP echo (blocking socket reads and writes: time in syscalls), on four
// threads. Code no shared workload has this much of.
// Usage: java Natives [SECONDS]
public class Natives {
    static final class Node implements Serializable {
        private static final long serialVersionUID = 1L;
        int value;
        String name;
        List<Node> children = new ArrayList<>();
        Map<String, Integer> tags = new HashMap<>();
    }

    static Node tree(int depth, int width, int seed) {
        Node n = new Node();
        n.value = seed;
        n.name = "n" + seed;
        n.tags.put("d" + depth, seed);
        if (depth > 0) for (int i = 0; i < width; i++) n.children.add(tree(depth - 1, width, seed * 31 + i));
        return n;
    }

    static int recurse(int depth) {
        if (depth == 0) {
            long frames = StackWalker.getInstance().walk(s -> s.count());
            return (int) frames + new Throwable().getStackTrace().length;
        }
        return recurse(depth - 1) + 1;
    }

    static long vmNatives(int round) throws Exception {
        long sum = 0;
        for (int i = 0; i < 200; i++) sum += ("k" + (round * 200 + i) % 5000).intern().length();
        sum += Class.forName(round % 2 == 0 ? "java.util.ArrayList" : "java.util.HashMap").getName().length();
        int[] a = new int[4096];
        for (int i = 0; i < 50; i++) sum += a.clone().length;
        Object o = new Object();
        sum += System.identityHashCode(o) & 1;
        sum += recurse(40 + round % 20);
        Field f = Node.class.getDeclaredField("value");
        Node n = new Node();
        for (int i = 0; i < 1000; i++) { f.setInt(n, i); sum += f.getInt(n); }
        Object arr = Array.newInstance(String.class, 64);
        sum += Array.getLength(arr);
        return sum;
    }

    static long serialise(Node root) throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (ObjectOutputStream out = new ObjectOutputStream(bytes)) { out.writeObject(root); }
        try (ObjectInputStream in = new ObjectInputStream(new ByteArrayInputStream(bytes.toByteArray()))) {
            return ((Node) in.readObject()).children.size() + bytes.size();
        }
    }

    public static void main(String[] args) throws Exception {
        final long seconds = args.length > 0 ? Long.parseLong(args[0]) : 8;
        final long end = System.nanoTime() + seconds * 1_000_000_000L;
        ServerSocket server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread echo = new Thread(() -> {
            try (Socket s = server.accept(); InputStream in = s.getInputStream(); OutputStream out = s.getOutputStream()) {
                byte[] buf = new byte[512];
                for (int r; (r = in.read(buf)) > 0;) out.write(buf, 0, r);
            } catch (Exception e) {
                // the client closed
            }
        }, "echo-server");
        echo.start();
        Thread[] threads = new Thread[4];
        final long[] sums = new long[threads.length];
        for (int t = 0; t < threads.length; t++) {
            final int id = t;
            threads[t] = new Thread(() -> {
                try {
                    Node root = tree(4, 4, id);
                    if (id == 0) {
                        // The echo client: small writes and blocking reads.
                        try (Socket s = new Socket(server.getInetAddress(), server.getLocalPort())) {
                            OutputStream out = s.getOutputStream();
                            InputStream in = s.getInputStream();
                            byte[] msg = new byte[256];
                            while (System.nanoTime() < end) {
                                out.write(msg);
                                for (int got = 0; got < msg.length;) got += in.read(msg, got, msg.length - got);
                                sums[id]++;
                            }
                        }
                    } else {
                        for (int round = 0; System.nanoTime() < end; round++) {
                            sums[id] += id % 2 == 0 ? vmNatives(round) : serialise(root);
                        }
                    }
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }, "natives-" + t);
            threads[t].start();
        }
        for (Thread t : threads) t.join();
        server.close();
        echo.join();
        long total = 0;
        for (long s : sums) total += s;
        System.out.println("sum " + total);
    }
}
