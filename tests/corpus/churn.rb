# Corpus workload (Ruby, with and without YJIT): binary trees, hash and
# string churn, explicit GC.  Output is deterministic.
def tree(d) = d.zero? ? [nil, nil] : [tree(d - 1), tree(d - 1)]
def check(t) = t[0].nil? ? 1 : 1 + check(t[0]) + check(t[1])

puts "yjit: #{defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? "on" : "off"}"
h = 0
long_lived = tree(14)
4.step(14, 2) do |d|
  total = 0
  (1 << (14 - d + 2)).times { total += check(tree(d)) }
  puts "trees of depth #{d} check #{total}"
  h = (h * 31 + total) % 1_000_000_007
end
maps = []
60.times do |i|
  m = {}
  3000.times { |k| m[(k * i).to_s] = [k] * (k % 7) }
  maps << m
  maps.shift if maps.size > 8
  h = (h * 31 + m.size + m.values.sum(&:size)) % 1_000_000_007
end
s = (0...200_000).map { |i| (i % 97).to_s }.join
h = (h * 31 + s.size) % 1_000_000_007
GC.start
puts "long lived #{check(long_lived)}"
puts "hash #{h}"
