-- waiting.lua - the waits of the test server (tests/integration/nginx/nginx.conf):
-- requests whose coroutines yield while they wait, for
-- tests/integration/test_nginx.py::test_coroutine_waits_of_a_worker. Apart
-- from handler.lua, whose trace aborts another test reads whole.
local M = {}

-- The time since t0 (FFI clock_gettime: ngx.now() counts milliseconds).
local ffi = require("ffi")
ffi.cdef[[
struct nupp_handler_ts { long tv_sec, tv_nsec; };
int clock_gettime(int clk, struct nupp_handler_ts *ts);
]]
local ts = ffi.new("struct nupp_handler_ts")
local function now()
  ffi.C.clock_gettime(1, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

-- /fetch?port=P: a cosocket request to a slow upstream on port P, which
-- answers a line 50 ms after it gets one. The request's coroutine yields
-- while it waits; the worker serves others meanwhile. Answers the time the
-- wait took, as the handler measured it around the call.
local function fetch_user(port)
  local sock = ngx.socket.tcp()
  assert(sock:connect("127.0.0.1", port))
  assert(sock:send("user\n"))
  local line = assert(sock:receive("*l"))
  sock:close()
  return line
end

function M.fetch()
  local t0 = now()
  fetch_user(tonumber(ngx.var.arg_port))
  ngx.say(string.format("waited %.6f", now() - t0))
end

-- /nap: ngx.sleep(0.02), a timer's wait, the coroutine yielded meanwhile.
local function nap()
  ngx.sleep(0.02)
end

function M.nap()
  local t0 = now()
  nap()
  ngx.say(string.format("waited %.6f", now() - t0))
end

return M
