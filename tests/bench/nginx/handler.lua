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

return M
