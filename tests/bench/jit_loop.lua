-- jit_loop.lua: JIT-heavy: a Mandelbrot set in compiled numeric loops.
return function(scale)
  local size = math.floor(3400 * math.sqrt(scale))
  local inside = 0
  for y = 0, size - 1 do
    local ci = 2 * y / size - 1
    for x = 0, size - 1 do
      local cr = 2 * x / size - 1.5
      local zr, zi, n = 0, 0, 0
      while n < 100 and zr * zr + zi * zi < 4 do
        zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        n = n + 1
      end
      if n == 100 then inside = inside + 1 end
    end
  end
  return inside
end
