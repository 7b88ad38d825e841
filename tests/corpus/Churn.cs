// Corpus workload (Mono): binary trees, Dictionary and string churn,
// explicit collections.  Output is deterministic.
using System;
using System.Collections.Generic;
using System.Text;

public static class Churn {
    sealed class Node { public Node L, R; public Node(Node l, Node r) { L = l; R = r; } }
    static Node Tree(int d) => d > 0 ? new Node(Tree(d - 1), Tree(d - 1)) : new Node(null, null);
    static int Check(Node n) => n.L == null ? 1 : 1 + Check(n.L) + Check(n.R);

    public static int Main() {
        long h = 0;
        Node longLived = Tree(18);
        for (int d = 4; d <= 18; d += 2) {
            long total = 0;
            for (int i = 0; i < 1 << (18 - d + 2); i++) total += Check(Tree(d));
            Console.WriteLine("trees of depth " + d + " check " + total);
            h = (h * 31 + total) % 1000000007;
        }
        var maps = new List<Dictionary<string, int[]>>();
        for (int i = 0; i < 60; i++) {
            var m = new Dictionary<string, int[]>();
            long n = 0;
            for (int k = 0; k < 20000; k++) { var v = new int[k % 7]; m[(k * i).ToString()] = v; n += v.Length; }
            maps.Add(m);
            if (maps.Count > 8) maps.RemoveAt(0);
            h = (h * 31 + m.Count + n) % 1000000007;
        }
        var sb = new StringBuilder();
        for (int i = 0; i < 500000; i++) sb.Append(i % 97);
        h = (h * 31 + sb.Length) % 1000000007;
        GC.Collect();
        Console.WriteLine("long lived " + Check(longLived));
        Console.WriteLine("hash " + h);
        return 0;
    }
}
