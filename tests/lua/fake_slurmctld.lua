-- FAKE slurmctld for tests/test_hook_lua.py: the `slurm` table job_submit.lua sees inside slurmctld
-- (log functions, return codes), so that job descriptions Slurm itself would never build (bytes,
-- sizes) can be fed to the real job_submit.lua and the real service.  Usage:
--   lua5.1 fake_slurmctld.lua job_submit.lua cases.lua
-- cases.lua returns a list of {job_desc = {...}, uid = N} (with job_rec = {...}: a change to that
-- pending job, slurm_job_modify); one line per case is printed:
--   rc<TAB>comment<TAB>req_nodes   (comment with bytes >= 0x80 as \xNN)
local logs = {}
slurm = { SUCCESS = 0, ERROR = -1, ESLURM_ACCESS_DENIED = 2002, ESLURM_INVALID_TIME_VALUE = 2051,
  log_info = function(f, ...) io.stderr:write("INFO " .. string.format(f, ...) .. "\n") end,
  log_error = function(f, ...) io.stderr:write("ERROR " .. string.format(f, ...) .. "\n") end,
  log_debug = function() end,
  log_user = function(f, ...) io.stderr:write("USER " .. string.format(f, ...) .. "\n") end }
dofile(arg[1])
local cases = dofile(arg[2])
local function show(s)
  if s == nil then return "" end
  return (string.gsub(s, "[%z\1-\31\127-\255]", function(c) return string.format("\\x%02x", string.byte(c)) end))
end
for _, case in ipairs(cases) do
  local rc
  if case.job_rec then                      -- a change to a pending job (scontrol update)
    rc = slurm_job_modify(case.job_desc, case.job_rec, {}, case.uid or 1000)
  else
    rc = slurm_job_submit(case.job_desc, {}, case.uid or 1000)
  end
  io.write(tostring(rc), "\t", show(case.job_desc.comment), "\t", show(case.job_desc.req_nodes), "\n")
  io.flush()
  if case.sleep then os.execute("sleep " .. case.sleep) end
end
