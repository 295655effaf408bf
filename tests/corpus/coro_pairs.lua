-- Many coroutines meeting in pairs: producers and consumers, each pair
-- handing values through a resume/yield rendezvous.
local PAIRS, ITEMS = 300, 9000
local function producer(seed)
  return coroutine.create(function()
    local x = seed
    for _ = 1, ITEMS do
      x = (x * 1103515245 + 12345) % 2147483648
      coroutine.yield(x % 1000)
    end
    return nil
  end)
end
local function consumer(p)
  return coroutine.create(function()
    local acc = 0
    while true do
      local ok, v = coroutine.resume(p)
      assert(ok, v)
      if v == nil then return acc end
      acc = acc + v
      coroutine.yield(acc)
    end
  end)
end
local cons = {}
for i = 1, PAIRS do cons[i] = consumer(producer(i)) end
local live, total = PAIRS, 0
while live > 0 do
  for i = 1, PAIRS do
    local c = cons[i]
    if c and coroutine.status(c) ~= "dead" then
      local ok, v = coroutine.resume(c)
      assert(ok, v)
      if coroutine.status(c) == "dead" then
        total = (total + v) % 1000000007
        live = live - 1
      end
    end
  end
end
print("coro_pairs", total)
