# Corpus workload (CPython, PyPy): binary trees, dict and string churn,
# explicit collections.  Output is deterministic.
import gc


def tree(d):
    return (tree(d - 1), tree(d - 1)) if d else (None, None)


def check(t):
    return 1 if t[0] is None else 1 + check(t[0]) + check(t[1])


def main():
    h = 0
    long_lived = tree(14)
    for d in range(4, 15, 2):
        total = sum(check(tree(d)) for _ in range(1 << (14 - d + 2)))
        print("trees of depth", d, "check", total)
        h = (h * 31 + total) % 1000000007
    maps = []
    for i in range(60):
        m = {str(k * i): [k] * (k % 7) for k in range(3000)}
        maps.append(m)
        if len(maps) > 8:
            maps.pop(0)
        h = (h * 31 + len(m) + sum(len(v) for v in m.values())) % 1000000007
    s = "".join(str(i % 97) for i in range(200000))
    h = (h * 31 + len(s)) % 1000000007
    gc.collect()
    print("long lived", check(long_lived))
    print("hash", h)


main()
