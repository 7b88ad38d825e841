// Real-client test: an allocation-heavy Java program.
// Binary-trees style allocation (many short-lived trees plus one long-lived
// tree), collections churn (HashMap, ArrayList, ArrayDeque, TreeMap, String
// building) and a few large arrays, so both young and old collections run.
// Run with -XX:+UseG1GC and with -XX:+UseParallelGC; output is deterministic.
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

public final class AllocChurn {
    static final class Node {
        Node left, right;
        Node(Node l, Node r) { left = l; right = r; }
        int check() { return 1 + (left == null ? 0 : left.check() + right.check()); }
    }

    static Node bottomUp(int depth) {
        return depth > 0 ? new Node(bottomUp(depth - 1), bottomUp(depth - 1)) : new Node(null, null);
    }

    static long seed = 42;
    static int rnd() {
        seed = (seed * 6364136223846793005L + 1442695040888963407L);
        return (int) (seed >>> 33);
    }

    static long mix(long h, long x) {
        h ^= x;
        h *= 0x100000001b3L;
        return h;
    }

    public static void main(String[] args) {
        int maxDepth = args.length > 0 ? Integer.parseInt(args[0]) : 18;
        long h = 0xcbf29ce484222325L;

        // Binary trees.
        Node longLived = bottomUp(maxDepth);
        for (int d = 4; d <= maxDepth; d += 2) {
            int iters = 1 << (maxDepth - d + 4);
            long check = 0;
            for (int i = 0; i < iters; i++) check += bottomUp(d).check();
            h = mix(h, check);
            System.out.println("trees of depth " + d + ": " + iters + " check " + check);
        }
        System.out.println("long lived tree check " + longLived.check());

        // Collections churn with a rotating set of retained maps.
        ArrayList<Map<String, int[]>> retained = new ArrayList<>();
        for (int round = 0; round < 60; round++) {
            HashMap<String, int[]> m = new HashMap<>();
            for (int i = 0; i < 20000; i++) {
                String k = "key-" + round + "-" + (rnd() % 7000);
                m.put(k, new int[] { i, k.length(), round });
            }
            TreeMap<Integer, String> tm = new TreeMap<>();
            for (int i = 0; i < 5000; i++) tm.put(rnd() % 100000, Integer.toHexString(i));
            ArrayDeque<long[]> dq = new ArrayDeque<>();
            for (int i = 0; i < 10000; i++) {
                dq.addLast(new long[(i & 15) + 1]);
                if (dq.size() > 100) dq.pollFirst();
            }
            StringBuilder sb = new StringBuilder();
            for (Map.Entry<Integer, String> e : tm.entrySet()) {
                if ((e.getKey() & 63) == 0) sb.append(e.getValue()).append(',');
            }
            long s = 0;
            for (Map.Entry<String, int[]> e : m.entrySet()) s += e.getValue()[0] + e.getKey().hashCode();
            h = mix(h, s);
            h = mix(h, m.size());
            h = mix(h, tm.firstKey() + tm.lastKey());
            h = mix(h, sb.toString().hashCode());
            h = mix(h, dq.size());
            // A few large arrays (humongous objects for G1).
            double[] big = new double[(1 << 19) + round];
            for (int i = 0; i < big.length; i += 1024) big[i] = i * 0.25;
            h = mix(h, (long) big[big.length - (big.length % 1024) - 1024]);
            retained.add(m);
            if (retained.size() > 6) retained.remove(0);
        }
        long alive = 0;
        for (Map<String, int[]> m : retained) alive += m.size();
        System.out.println("retained entries " + alive);
        System.out.println("checksum " + Long.toHexString(h));
    }
}
