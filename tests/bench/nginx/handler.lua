-- handler.lua - the Lua of the production-impact benchmark's server
-- (scripts/bench-nginx.py): one CPU-bound handler and one light one.
local M = {}

-- /cpu: ~0.3 ms of compiled Lua per request.
local function checksum(n)
  local s = 0
  for i = 1, n do s = (s * 31 + i) % 1000003 end
  return s
end

function M.cpu()
  ngx.say(checksum(20000))
end

-- /light: what a proxy's Lua does per request: read a header and an
-- argument, build a short answer.
function M.light()
  local ua = ngx.var.http_user_agent or "-"
  local id = tonumber(ngx.var.arg_id) or 0
  ngx.say("{\"id\":", id, ",\"ua\":\"", #ua, "\"}")
end

-- /alloc: what an API handler's Lua allocates per request: a table of
-- fields and strings of its own (a request number makes each new: LuaJIT
-- interns strings, and /light's are the same at every request), joined
-- into the answer: about 18 blocks, 1.2 KB (record --alloc counts them).
local served = 0

function M.alloc()
  served = served + 1
  local item = { id = served, tags = {} }
  for i = 1, 8 do item.tags[i] = "tag-" .. served .. "-" .. i end
  item.name = "item " .. served
  ngx.say(item.name, ": ", table.concat(item.tags, ","))
end

return M
