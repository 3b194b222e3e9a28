-- Runs the script scan of job_submit.lua (the part between its ">>> script scan" and "<<< script
-- scan" lines, unchanged) on files: lua5.1 scan_script.lua job_submit.lua FILE...
-- One line per file: the candidates (or "-"), a tab, "cut" or "whole", a tab, the seconds it took.
local source = io.open(arg[1]):read("*a")
local first = string.find(source, "-- >>> script scan", 1, true)
local last = string.find(source, "-- <<< script scan", 1, true)
local chunk = assert(loadstring(string.sub(source, first, last - 1) .. "\nreturn deadline_from_script\n"))
local scan = chunk()
for i = 2, #arg do
  local f = io.open(arg[i], "rb")
  local script = f:read("*a")
  f:close()
  local started = os.clock()
  local found, cut = scan(script)
  local took = os.clock() - started
  io.write(found or "-", "\t", cut and "cut" or "whole", "\t", string.format("%.6f", took), "\n")
end
