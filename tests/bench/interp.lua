-- interp.lua: interpreter only (jit.off): calls, arithmetic, table reads and writes.
return function(scale)
  jit.off()
  local function step(t, i)
    local a = t[i % 64 + 1]
    t[(i * 7) % 64 + 1] = a + i
    return a % 1000
  end
  local t, sum = {}, 0
  for i = 1, 64 do t[i] = i end
  for i = 1, math.floor(3.4e7 * scale) do
    sum = (sum + step(t, i)) % 1000003
  end
  return sum
end
