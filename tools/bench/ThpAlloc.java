// Large-folio benchmark (tools/bench_thp.sh): an allocation-heavy Java
// program with a large live set, so the heap grows to hundreds of MiB and
// every collection walks (and the mutator keeps touching) all of it.
//
//   java -Xms64m -Xmx1g -XX:+UseG1GC -cp DIR ThpAlloc [liveMiB] [rounds]
//
// Phase 1 builds a live set of about liveMiB (default 384) MiB: a table of
// slots, each holding a long[] of 1..32 KiB or a small linked structure.
// Phase 2 runs `rounds` (default 60) rounds of churn: short-lived garbage
// (trees, strings, boxed maps), replacement of 3% of the live slots (old
// garbage, so old/mixed collections have work), a humongous array now and
// then, and a read pass over a part of the live set.  The heap grows while
// the program runs (the JVM commits it with MAP_FIXED mmaps inside its
// reservation).  The output is a deterministic checksum per phase: it must
// be the same with and without mmfold, under any collector.
import java.util.ArrayList;
import java.util.HashMap;

public final class ThpAlloc {
    static final class Link {
        final long v;
        final Link next;
        final int[] pad;
        Link(long v, Link next) { this.v = v; this.next = next; this.pad = new int[(int) (v & 7) + 2]; }
    }

    static long seed = 0x5DEECE66DL;
    static int rnd() {
        seed = seed * 6364136223846793005L + 1442695040888963407L;
        return (int) (seed >>> 33);
    }
    static long mix(long h, long x) { return (h ^ x) * 0x100000001b3L; }

    static Object makeSlot(int i) {
        int r = rnd();
        if ((r & 3) != 0) {
            long[] a = new long[128 + (r >>> 4) % 4000]; // 1 .. 33 KiB
            for (int j = 0; j < a.length; j += 8) a[j] = (long) i * 31 + j;
            a[a.length - 1] = i;
            return a;
        }
        Link l = null;
        int n = 16 + (r >>> 8) % 64;
        for (int j = 0; j < n; j++) l = new Link((long) i * 131 + j, l);
        return l;
    }

    static long slotSum(Object o) {
        if (o instanceof long[]) {
            long[] a = (long[]) o;
            return a[0] + a[a.length >> 1] + a[a.length - 1] + a.length;
        }
        long s = 0;
        for (Link l = (Link) o; l != null; l = l.next) s += l.v + l.pad.length;
        return s;
    }

    static int treeCheck(int depth) {
        if (depth == 0) return 1;
        int[] node = new int[4];
        node[0] = treeCheck(depth - 1);
        node[1] = treeCheck(depth - 1);
        return 1 + node[0] + node[1];
    }

    public static void main(String[] args) {
        int liveMiB = args.length > 0 ? Integer.parseInt(args[0]) : 384;
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 60;
        long h = 0xcbf29ce484222325L;

        // Phase 1: the live set (average slot ~13 KiB).
        int nslots = (int) ((long) liveMiB * 1024 / 13);
        Object[] live = new Object[nslots];
        for (int i = 0; i < nslots; i++) live[i] = makeSlot(i);
        for (int i = 0; i < nslots; i += 97) h = mix(h, slotSum(live[i]));
        System.out.println("live slots " + nslots + " checksum " + Long.toHexString(h));

        // Phase 2: churn.
        for (int round = 0; round < rounds; round++) {
            // young garbage: trees, strings, boxed maps
            long t = 0;
            for (int k = 0; k < 40; k++) t += treeCheck(10);
            HashMap<Integer, String> m = new HashMap<>();
            for (int k = 0; k < 20000; k++) m.put(rnd() % 50000, "v" + k);
            StringBuilder sb = new StringBuilder();
            for (int k = 0; k < 2000; k++) sb.append(k % 10);
            ArrayList<long[]> tmp = new ArrayList<>();
            for (int k = 0; k < 500; k++) tmp.add(new long[64 + (k & 255)]);
            h = mix(h, t);
            h = mix(h, m.size());
            h = mix(h, sb.length());
            h = mix(h, tmp.size());
            // old garbage: replace 3% of the live slots
            int repl = nslots * 3 / 100;
            for (int k = 0; k < repl; k++) {
                int i = (rnd() & 0x7fffffff) % nslots;
                live[i] = makeSlot(i);
            }
            // a humongous array now and then
            if (round % 4 == 0) {
                long[] big = new long[(1 << 19) + round * 1000];
                for (int j = 0; j < big.length; j += 512) big[j] = j ^ round;
                h = mix(h, big[big.length - 1 - (big.length - 1) % 512]);
            }
            // read a slice of the live set
            int from = (int) ((long) nslots * (round % 8) / 8), to = from + nslots / 8;
            long s = 0;
            for (int i = from; i < to; i++) s += slotSum(live[i]);
            h = mix(h, s);
        }
        long all = 0;
        for (int i = 0; i < nslots; i++) all += slotSum(live[i]);
        System.out.println("rounds " + rounds + " live sum " + all);
        System.out.println("checksum " + Long.toHexString(h));
    }
}
