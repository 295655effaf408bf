-- JIT-heavy numeric loops: spectral norm and a mandelbrot sum.
local function A(i, j) local ij = i + j - 1 return 1.0 / (ij * (ij - 1) * 0.5 + i) end
local function Av(x, y, N) for i = 1, N do local a = 0 for j = 1, N do a = a + x[j] * A(i, j) end y[i] = a end end
local function Atv(x, y, N) for i = 1, N do local a = 0 for j = 1, N do a = a + x[j] * A(j, i) end y[i] = a end end
local function AtAv(x, y, t, N) Av(x, t, N) Atv(t, y, N) end
local N = 1800
local u, v, t = {}, {}, {}
for i = 1, N do u[i] = 1 end
for _ = 1, 10 do AtAv(u, v, t, N) AtAv(v, u, t, N) end
local vBv, vv = 0, 0
for i = 1, N do local ui, vi = u[i], v[i] vBv = vBv + ui * vi vv = vv + vi * vi end
local inside = 0
for py = 0, 1199 do
  for px = 0, 1199 do
    local cr, ci, zr, zi, k = px / 600 - 1.5, py / 600 - 1.0, 0, 0, 0
    while k < 50 and zr * zr + zi * zi < 4 do zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci k = k + 1 end
    if k == 50 then inside = inside + 1 end
  end
end
print("numeric_jit", ("%.9f"):format(math.sqrt(vBv / vv)), inside)
