<?php
// Corpus workload (PHP with opcache's tracing JIT): binary trees, array
// and string churn, explicit cycle collection.  Output is deterministic.
function tree($d) { return $d ? [tree($d - 1), tree($d - 1)] : [null, null]; }
function check($t) { return $t[0] === null ? 1 : 1 + check($t[0]) + check($t[1]); }
$st = function_exists('opcache_get_status') ? opcache_get_status(false) : false;
echo "jit: " . ($st && !empty($st['jit']['on']) ? "on" : "off") . "\n";
$m = 1000000007;
$h = 0;
$long = tree(16);
for ($d = 4; $d <= 16; $d += 2) {
    $total = 0;
    for ($i = 0; $i < 1 << (16 - $d + 2); $i++) $total += check(tree($d));
    echo "trees of depth $d check $total\n";
    $h = ($h * 31 + $total) % $m;
}
$keep = [];
for ($i = 0; $i < 60; $i++) {
    $a = [];
    $n = 0;
    for ($k = 0; $k < 20000; $k++) { $a[(string)($k * $i)] = array_fill(0, $k % 7, $k); $n += $k % 7; }
    $keep[] = $a;
    if (count($keep) > 8) array_shift($keep);
    $h = ($h * 31 + count($a) + $n) % $m;
}
$s = '';
for ($i = 0; $i < 300000; $i++) $s .= $i % 97;
$h = ($h * 31 + strlen($s)) % $m;
gc_collect_cycles();
echo "long lived " . check($long) . "\n";
echo "hash $h\n";
