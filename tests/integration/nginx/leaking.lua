-- leaking.lua - a planted leak of the test server (tests/integration/nginx/nginx.conf),
-- for tests/integration/test_nginx.py::test_heap_diff_finds_a_workers_leak:
-- /remember?id=N keeps a session per request in a module-level table that
-- nothing ever empties, as a cache without eviction does. Apart from
-- handler.lua, whose trace aborts another test reads whole.
local M = { sessions = {} }

-- Answers the worker's pid: the test counts what each worker kept.
function M.remember()
  local id = ngx.var.arg_id or "0"
  M.sessions["session-" .. id] = { id = id, body = string.rep("x", 1000) .. id }
  ngx.say(ngx.worker.pid())
end

return M
