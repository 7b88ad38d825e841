# W^X flip benchmark for Ruby's YJIT (tools/bench_wx.sh): defines many
# small methods, each with a block, and calls each often enough to be
# compiled.  Ruby 3.1's YJIT makes the 4 KiB page it writes to RW, then its
# whole 128 MiB inline (and outlined) code block RX again, at every
# compilation, so most of the run's mprotect calls are such flips.
#   ruby --yjit yjit_flips.rb [NMETHODS] [ROUNDS]
# Output is deterministic.
n = (ARGV[0] || 4000).to_i
rounds = (ARGV[1] || 30).to_i
src = +""
n.times do |i|
  src << "def m#{i}(x); a = x * #{i % 97 + 1}; b = a ^ #{i}; " \
         "(0..(x % 3)).each { |k| b += k * #{i % 13} }; b % 1000003; end\n"
end
eval(src)
h = 0
rounds.times do |r|
  n.times { |i| h = (h * 31 + send(:"m#{i}", r + i)) % 4294967296 }
end
puts h
