-- FFI: C arrays and structs, casts, and calls into libc.
local ffi = require("ffi")
ffi.cdef[[
typedef struct { double x, y; int tag; } point_t;
size_t strlen(const char *s);
]]
local N = 200000
local pts = ffi.new("point_t[?]", N)
for i = 0, N - 1 do pts[i].x, pts[i].y, pts[i].tag = i * 0.5, -i * 0.25, i % 17 end
local s = 0
for round = 1, 1200 do
  for i = 0, N - 1 do local p = pts[i] s = s + p.x * p.tag - p.y end
end
local buf = ffi.new("uint8_t[?]", 4096)
for i = 0, 4095 do buf[i] = (i * 7) % 256 end
local h = 0
for i = 0, 4095 do h = (h * 31 + buf[i]) % 1000000007 end
local n = 0
for i = 1, 600000 do n = n + tonumber(ffi.C.strlen("corpus" .. i % 10)) end
print("ffi_arrays", ("%.1f"):format(s), h, n)
