-- oddnames.lua - for `luajit oddnames.lua [SECONDS]`: hot functions in
-- chunks whose names every output format must carry without breaking: a
-- ';' (collapsed stacks' separator), XML's and JSON's special characters,
-- a byte that is not UTF-8, control characters, and UTF-8 proper. Each
-- chunk's spin runs in turn for about SECONDS (default 1) in all.
local seconds = tonumber(arg and arg[1]) or 1
local chunks = {
  "=semi;colon", "=<tag> & \"quote\" 'single'", "=bad\255byte", "=tab\tand\nnewline",
  "=\195\188n\195\175c\195\184d\195\169",
}
local src = "local clock = os.clock\n" ..
  "local function spin(t) local x, t0 = 0, clock() while clock() - t0 < t do x = x + 1 end return x end\n" ..
  "return spin"
local spins = {}
for i, name in ipairs(chunks) do spins[i] = assert(loadstring(src, name))() end
local t0 = os.clock()
while os.clock() - t0 < seconds do
  for i = 1, #spins do spins[i](0.01) end
end
print("done")
