-- Real-client test: make LuaJIT compile lots of traces.
-- Many distinct hot loops (generated with loadstring so each one is a new
-- prototype and needs its own root trace plus side traces), string ops and
-- table churn.  LuaJIT writes machine code into mcode areas and toggles them
-- between RW and RX with mprotect around every trace it links, so this is a
-- heavy mprotect client.  Output is deterministic.
local bit = require("bit")
local band, bxor, tobit = bit.band, bit.bxor, bit.tobit

local NFUNCS = tonumber(arg and arg[1]) or 12000
local N = tonumber(arg and arg[2]) or 3000

local function mix(h, x)
  return tobit(bxor(h, tobit(x)) * 16777619 % 4294967296)
end

local ops = { "+", "-", "*" }
local gen = {}
for i = 1, NFUNCS do
  local a = ops[i % 3 + 1]
  local b = ops[math.floor(i / 3) % 3 + 1]
  local c = (i * 7919) % 97 + 1
  local d = (i * 104729) % 31 + 1
  local src = {
    "local bit, t, s, n = ...",
    "local acc = " .. i,
    "for k = 1, n do",
    "  local v = (k " .. a .. " " .. c .. ") % 65536",
  }
  if i % 2 == 0 then src[#src + 1] = "  if k % " .. d .. " == 0 then acc = acc + t[k % 64 + 1] else acc = acc " .. b .. " 3 end" end
  if i % 3 == 0 then src[#src + 1] = "  v = bit.bxor(v, k * " .. d .. ")" end
  if i % 5 == 1 then src[#src + 1] = "  acc = acc + s:byte(k % #s + 1)" end
  if i % 7 == 2 then src[#src + 1] = "  if v % 3 == 0 then acc = acc + 1 elseif v % 3 == 1 then acc = acc + 2 else acc = acc - 1 end" end
  src[#src + 1] = "  acc = (acc + v) % 1000000007"
  src[#src + 1] = "end"
  src[#src + 1] = "return acc"
  local f = assert(loadstring(table.concat(src, "\n"), "gen" .. i))
  gen[i] = f
end

local t = {}
for i = 1, 64 do t[i] = (i * 2654435761) % 1000 end
local strs = { "alpha", "bravo-charlie", "delta", "echo-foxtrot-golf" }

local h = 2166136261
for round = 1, 2 do
  for i = 1, NFUNCS do
    local r = gen[i](bit, t, strs[(i + round) % 4 + 1], N)
    h = mix(h, r)
  end
end

-- String operations in hot loops.
local parts = {}
for i = 1, 20000 do
  parts[#parts + 1] = string.format("%s%d", strs[i % 4 + 1], i % 97)
end
local text = table.concat(parts, ",")
local count = 0
for w in text:gmatch("[a-z]+%d+") do count = count + #w end
h = mix(h, count)
local up = text:sub(1, 5000):upper():gsub("A", "4"):rep(3)
h = mix(h, #up)
for i = 1, 200 do
  local s = tostring(i * 31):rep(i % 13 + 1)
  h = mix(h, #s + s:byte(1))
end

-- Table churn with polymorphic values.
local acc = 0
for round = 1, 60 do
  local tt = {}
  for i = 1, 20000 do
    if i % 3 == 0 then tt[i] = { x = i, y = round }
    elseif i % 3 == 1 then tt[i] = "s" .. (i % 100)
    else tt[i] = i * 0.5 end
  end
  for i = 1, #tt do
    local v = tt[i]
    local ty = type(v)
    if ty == "table" then acc = acc + v.x + v.y
    elseif ty == "string" then acc = acc + #v
    else acc = acc + math.floor(v) end
  end
  acc = acc % 1000000007
end
h = mix(h, acc)

local jit_on = jit and jit.status and jit.status() or false
print("functions: " .. NFUNCS)
print("matched chars: " .. count)
print("table acc: " .. acc)
print("jit: " .. tostring(jit_on))
print(string.format("checksum: %08x", h % 4294967296))
