-- FFI: arithmetic on a struct is a bad argument type for the recorder, and
-- the error it raises is caught; ffi.new with a broken declaration errors
-- during recording.
local ffi = require("ffi")
local p = ffi.new("struct { int a; }")
local function add() return p + 1 end
for i = 1, 300000 do pcall(add) end
for i = 1, 2000 do pcall(ffi.new, "struct { int") end
print("done")
