-- A scheduler of tasks as coroutines: timers in a binary heap, tasks that
-- sleep, spawn others and finish, as an event loop runs them.
local heap, now, seq = {}, 0, 0
local function push(t, co)
  seq = seq + 1
  heap[#heap+1] = {t = t, s = seq, co = co}
  local i = #heap
  while i > 1 do
    local p = math.floor(i / 2)
    local a, b = heap[p], heap[i]
    if a.t < b.t or (a.t == b.t and a.s < b.s) then break end
    heap[p], heap[i] = b, a i = p
  end
end
local function pop()
  local top, last = heap[1], table.remove(heap)
  if #heap > 0 then
    heap[1] = last
    local i = 1
    while true do
      local l, r, m = 2 * i, 2 * i + 1, i
      local function less(x, y) return heap[x].t < heap[y].t or (heap[x].t == heap[y].t and heap[x].s < heap[y].s) end
      if l <= #heap and less(l, m) then m = l end
      if r <= #heap and less(r, m) then m = r end
      if m == i then break end
      heap[m], heap[i] = heap[i], heap[m] i = m
    end
  end
  return top
end
local done, h = 0, 0
local function task(id, n)
  return coroutine.create(function()
    for k = 1, n do
      coroutine.yield((id * 7 + k) % 13 + 1)
      h = (h + id * k) % 1000000007
    end
    done = done + 1
  end)
end
for id = 1, 2000 do push(id % 50, task(id, 20 + id % 30)) end
while #heap > 0 do
  local e = pop()
  now = e.t
  local ok, delay = coroutine.resume(e.co)
  assert(ok, delay)
  if delay then push(now + delay, e.co) end
end
print("event_loop", done, now, h)
