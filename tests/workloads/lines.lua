-- lines.lua - one function whose hot line is known: work() spends about 92 %
-- of its time on the line marked HOT and the rest on the line marked COLD.
--   luajit lines.lua MODE [SECONDS]   (default 3)
-- MODE: interp (jit.off) or jit (work's loop compiled). One chain of
-- dependent arithmetic runs through both lines, so that neither line's work
-- overlaps the other's in the CPU. Each line starts with a comparison,
-- which the JIT guards with a snapshot on that line.
-- Prints `truth hot LINE`, `truth cold LINE`, `truth call LINE` (where the
-- main chunk calls work) and `truth cpu SECONDS`.
local clock = os.clock
local mode = arg and arg[1] or "jit"
local dur = tonumber(arg and arg[2]) or 3
if mode == "interp" then jit.off() end

local function work(n, x)
  for _ = 1, n do
    if x > 1e300 then x = 0 end x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5 -- HOT
    if x > 1e300 then x = 0 end x = x * 0.999 + 0.5; x = x * 0.999 + 0.5 -- COLD
  end
  return x
end

local function line_of(tag)
  local n = 0
  for l in io.lines(arg[0]) do
    n = n + 1
    if l:find("-- " .. tag .. "$") then return n end
  end
end

local start, sink = clock(), 0
while clock() - start < dur do
  sink = sink + work(20000, 1) -- CALL
end
print(("truth hot %d"):format(line_of("HOT")))
print(("truth cold %d"):format(line_of("COLD")))
print(("truth call %d"):format(line_of("CALL")))
print(("truth sink %d"):format(sink % 2))
print(("truth cpu %.3f"):format(clock()))
