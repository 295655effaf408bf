-- deep.lua: a Lua stack 60 frames deep, spinning at the bottom in a compiled
-- loop, until `scale` seconds of CPU time have passed.
return function(scale)
  local clock = os.clock
  local function spin()
    local deadline, acc = clock() + 2.5 * scale, 0
    repeat
      for i = 1, 1e6 do acc = (acc + i) % 1000003 end
    until clock() >= deadline
    return acc
  end
  local function down(n)
    if n == 0 then return spin() end
    return down(n - 1) + 1		-- not a tail call: the frame stays
  end
  return down(60)
end
