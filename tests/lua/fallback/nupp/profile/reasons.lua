-- TEST FALLBACK ONLY: a minimal stand-in for the generated reason catalog
-- (scripts/gen-reasons.py: catalog/trace-reasons.tsv -> nupp.profile.reasons),
-- in its shape. It is on the tests' LUA_PATH after the build tree, so the
-- generated module wins whenever it has been built. Never installed.
local list = {
  { name = "RECERR", vmText = "error thrown or hook called during recording",
    id = "trace.recorder-error", class = "risk", severity = "warn" },
  { name = "NYIBC", vmText = "NYI: bytecode %d",
    id = "trace.nyi-bytecode", class = "blocker", severity = "warn" },
  { name = "NYIFFU", vmText = "NYI: unsupported variant of FastFunc %s",
    id = "trace.nyi-fastfunc", class = "blocker", severity = "warn" },
  { name = "LLEAVE", vmText = "leaving loop in root trace",
    id = "trace.leaving-loop", class = "stop", severity = "info" },
  { name = "LINNER", vmText = "inner loop in root trace",
    id = "trace.inner-loop", class = "stop", severity = "info" },
  { name = "LUNROLL", vmText = "loop unroll limit reached",
    id = "trace.loop-unroll", class = "stop", severity = "info" },
  { name = "CUNROLL", vmText = "call unroll limit reached",
    id = "trace.call-unroll", class = "stop", severity = "info" },
  { name = "DOWNREC", vmText = "down-recursion, restarting",
    id = "trace.down-recursion", class = "stop", severity = "info" },
}
local M = { catalogId = "nupp.trace-reasons", catalogVersion = 1,
	    byText = {}, byName = {}, list = list }
for _, r in ipairs(list) do
  r.explanation, r.action = "", ""
  M.byText[r.vmText], M.byName[r.name] = r, r
end
return M
