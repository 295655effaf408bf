-- A ring of coroutines passing a token: each takes it, adds to it, and
-- hands it to the next, many times around.
local N, ROUNDS = 503, 16000
local ring = {}
for i = 1, N do
  ring[i] = coroutine.create(function(token)
    while true do
      token = coroutine.yield((token * 31 + i) % 1000003)
    end
  end)
end
local token, sum = 1, 0
for r = 1, ROUNDS do
  for i = 1, N do
    local ok, t = coroutine.resume(ring[i], token)
    assert(ok, t)
    token = t
  end
  sum = (sum + token) % 1000000007
end
print("coro_ring", token, sum)
