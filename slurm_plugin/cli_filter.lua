--[[
greenslurm cli_filter.lua (optional): pass the job's --deadline to the job_submit hook.

Slurm does not show job_desc.deadline to job_submit.lua.  This filter runs inside sbatch, salloc
and srun (slurm.conf: CliFilterPlugins=lua; the file sits beside slurm.conf), where --deadline is
visible from the command line and from #SBATCH lines, and puts it in the job's environment as
GREENSLURM_DEADLINE (through --export), where job_submit.lua reads it: as epoch seconds, read in
the user's own time zone as sbatch read it.  A GREENSLURM_DEADLINE the
user wrote into --export is replaced by the real one.  This filter runs on the user's side and can be
bypassed (another slurm.conf, the REST API): the service also checks the earliest deadline the
script carries and, after submission, the deadline Slurm really holds.
--]]

function slurm_cli_setup_defaults(options, early_pass)
    return slurm.SUCCESS
end

function slurm_cli_pre_submit(options, pack_offset)
    local deadline = options["deadline"]
    -- unset, sbatch shows "Unknown" (or "0"/"N/A" in some versions)
    if deadline == nil or deadline == "" or deadline == "Unknown" or deadline == "0" or deadline == "N/A" then
        return slurm.SUCCESS
    end
    -- sbatch shows the deadline in the user's local time (slurm_make_time_str); this filter runs in
    -- the user's own process, so its local time is the user's TZ: send epoch seconds, which mean the
    -- same to the service whatever its own time zone
    local y, mo, d, h, mi, s = string.match(deadline, "^(%d%d%d%d)%-(%d%d)%-(%d%d)T(%d%d):(%d%d):(%d%d)$")
    if y then
        deadline = tostring(os.time({ year = tonumber(y), month = tonumber(mo), day = tonumber(d),
                                      hour = tonumber(h), min = tonumber(mi), sec = tonumber(s) }))
    end
    local export = options["export"]
    local entry = "GREENSLURM_DEADLINE=" .. deadline
    if export == nil or export == "" then
        options["export"] = "ALL," .. entry
    elseif string.upper(export) == "NONE" then
        options["export"] = "NONE," .. entry
    else
        -- the job's real --deadline replaces any GREENSLURM_DEADLINE the user put in --export
        local kept = {}
        for item in string.gmatch(export, "[^,]+") do
            if not string.find(item, "^%s*GREENSLURM_DEADLINE=") then kept[#kept + 1] = item end
        end
        kept[#kept + 1] = entry
        options["export"] = table.concat(kept, ",")
    end
    return slurm.SUCCESS
end

function slurm_cli_post_submit(offset, jobid, stepid)
    return slurm.SUCCESS
end
