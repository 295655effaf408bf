-- wide.lua: many distinct stacks, as a large program shows a profiler: 16
-- functions, each calling one of them picked at random, three deep, spinning
-- at the leaf (16^3 = 4096 stacks).
return function(scale)
  local fns, seed = {}, 1
  local function pick()
    seed = (seed * 1103515245 + 12345) % 2147483648
    return fns[math.floor(seed / 65536) % 16 + 1]	-- high bits: the low ones cycle
  end
  for i = 1, 16 do
    -- A chunk of its own: a prototype, and a frame name, per function.
    fns[i] = assert(loadstring([[
      local pick = ...
      return function(depth)
        if depth == 0 then
          local x = 0
          for k = 1, 20000 do x = (x + k) % 65521 end
          return x
        end
        local v = pick()(depth - 1)	-- not a tail call: the frame stays
        return v
      end]], "=wide" .. i))(pick)
  end
  local sum = 0
  for _ = 1, math.floor(10000 * scale) do sum = (sum + pick()(2)) % 65521 end
  return sum
end
