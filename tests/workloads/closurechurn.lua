-- closurechurn.lua - closures that die and are born again at the same
-- address running other code. Two prototypes live for the whole run, the
-- function made by closA and the one made by closB; a closure of each is made,
-- run as the leaf for a while (by phaseA or phaseB), dropped and collected in
-- turn, so that a new closure of one takes the memory of the last closure of
-- the other. A sampler that trusted what it learnt of a closure's address
-- after a GC cycle freed it would put closB's function under phaseA.
--   luajit closurechurn.lua [SECONDS [PHASE [jit|nojit]]]   (2 s, 0.2 s, jit)
-- Prints "phases N, reused R": R of N closures took an address that a closure
-- of the other prototype had held.
local secs = tonumber(arg and arg[1]) or 2
local phase = tonumber(arg and arg[2]) or 0.2
if arg and arg[3] == "nojit" then jit.off() end
local clock = os.clock

local src = [[
return function() return function(n) local x = 0 for i = 1, n do x = x + i % 7 end return x end end
]]
local make = {
  A = assert(loadstring(src, "=closA"))(),
  B = assert(loadstring(src, "=closB"))(),
}

local function phaseA(f, until_)
  local t = 0
  repeat t = t + f(20000) until clock() > until_
  return t
end

local function phaseB(f, until_)
  local t = 0
  repeat t = t + f(20000) until clock() > until_
  return t
end

local held, phases, reused, sink = {}, 0, 0, 0
local deadline = clock() + secs
while clock() < deadline do
  local name = phases % 2 == 0 and "A" or "B"
  local f = make[name]()
  local where = tostring(f):match("0x%x+")
  if held[where] and held[where] ~= name then reused = reused + 1 end
  held[where] = name
  if name == "A" then sink = sink + phaseA(f, clock() + phase)
  else sink = sink + phaseB(f, clock() + phase) end
  f = nil
  collectgarbage("collect")	-- frees the closure
  phases = phases + 1
end
print(("phases %d, reused %d"):format(phases, reused))
