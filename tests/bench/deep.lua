-- deep.lua: a Lua stack 60 frames deep, spinning at the bottom in a compiled
-- loop, until `scale` seconds of CPU time have passed. Every level is its own
-- function (its own prototype and call site), as in real code: a walk cannot
-- get cheaper by recognizing the frame below as the one above.
return function(scale)
  local clock = os.clock
  local function spin()
    local deadline, acc = clock() + 2.5 * scale, 0
    repeat
      for i = 1, 1e6 do acc = (acc + i) % 1000003 end
    until clock() >= deadline
    return acc
  end
  local below = spin
  for level = 1, 60 do
    -- A fresh chunk per level: distinct bytecode, not closures of one proto.
    below = assert(loadstring(("local below = ...\n" ..
      "return function() return below() + %d end -- level %d"):format(level, level),
      "=deep" .. level))(below)
  end
  return below()
end
