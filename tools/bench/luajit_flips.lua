-- W^X flip benchmark for LuaJIT (tools/bench_wx.sh): compiles many small
-- traces, each of which LuaJIT writes into its machine-code area between
-- an mprotect to RW and one back to RX, so most of the run is trace
-- compilation and flips (like the issue's 140,000-flip workload).
--   luajit luajit_flips.lua [NFUNCS] [ROUNDS]
-- NFUNCS distinct hot loops are compiled, the traces flushed, ROUNDS times.
-- Output is deterministic.
local NFUNCS = tonumber(arg and arg[1]) or 400
local ROUNDS = tonumber(arg and arg[2]) or 120

local ops = { "+", "-", "*" }
local gen = {}
for i = 1, NFUNCS do
  local src = string.format([[
local n = ...
local acc = %d
for k = 1, n do
  local v = (k %s %d) %% 65536
  if k %% %d == 0 then acc = acc + 1 else acc = acc %s v end
  acc = acc %% 1000000007
end
return acc]], i, ops[i % 3 + 1], (i * 7919) % 97 + 1, (i * 104729) % 7 + 2, ops[math.floor(i / 3) % 3 + 1])
  gen[i] = assert(loadstring(src, "f" .. i))
end

local h = 0
for r = 1, ROUNDS do
  for i = 1, NFUNCS do
    h = (h * 31 + gen[i](70)) % 4294967296
  end
  jit.flush()
end
print(string.format("functions %d rounds %d checksum %08x", NFUNCS, ROUNDS, h))
