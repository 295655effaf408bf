-- selfkill.lua - spins for a while, then has a shell send signal SIG to this
-- process, and keeps spinning until it arrives.
--   luajit selfkill.lua SIG [SECONDS]   (default 0.5 s before the signal)
local clock = os.clock
local sig = assert(tonumber(arg and arg[1]), "usage: selfkill.lua SIG [SECONDS]")
local dur = tonumber(arg and arg[2]) or 0.5

local function spin(seconds)
  local deadline, s = clock() + seconds, 0
  repeat for i = 1, 20000 do s = s + i % 5 end until clock() > deadline
  return s
end

spin(dur)
os.execute("kill -" .. sig .. " $PPID")	-- $PPID of the shell is this process
spin(10)
os.exit(0)
