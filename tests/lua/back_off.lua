-- Runs the back-off of job_submit.lua (the part between its ">>> back-off" and "<<< back-off" lines,
-- unchanged) on a list of events read from a file, one a line:
--   fail UID | answer UID | paused UID | clock SECONDS
-- printing for each "paused" line "paused" or "asked", and at the end the number of users tracked
-- (counted by walking the table, and as the part counts them).
local source = io.open(arg[1]):read("*a")
local first = string.find(source, "-- >>> back-off", 1, true)
local last = string.find(source, "-- <<< back-off", 1, true)
local now = 0
local chunk = assert(loadstring("local FAILURES_BEFORE_PAUSE, RETRY_AFTER_S = 3, 5\n"
  .. "local clock = ...\n" .. string.sub(source, first, last - 1)
  .. "\nreturn note_failure, note_answer, paused, function() local n = 0 for _ in pairs(users) do n = n + 1 end"
  .. " return n, users_tracked end\n"))
local note_failure, note_answer, paused, size = chunk(function() return now end)
for line in io.lines(arg[2]) do
  local what, value = string.match(line, "^(%a+) (%S+)$")
  if what == "fail" then note_failure(tonumber(value))
  elseif what == "answer" then note_answer(tonumber(value))
  elseif what == "clock" then now = tonumber(value)
  elseif what == "paused" then io.write(paused(tonumber(value)) and "paused" or "asked", "\n") end
end
local walked, counted = size()
io.write(walked, " ", counted, "\n")
