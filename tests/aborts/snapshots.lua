-- too many snapshots: many guarded branches with maxsnap lowered.
jit.opt.start("maxsnap=4")
local s = 0
for i = 1, 300000 do
  if i % 2 == 0 then s = s + 1 end
  if i % 3 == 0 then s = s + 2 end
  if i % 5 == 0 then s = s + 3 end
  if i % 7 == 0 then s = s + 4 end
end
print(s)
