--[[
greenslurm job_submit.lua: ask the greenslurm decision service about every submission.

Installed as Slurm's job_submit.lua (slurm.conf: JobSubmitPlugins=lua; the file sits beside
slurm.conf).  For each submission it sends the job description as one JSON line over a UNIX
socket (lua-socket's socket.unix) and applies the answer: accept; reject with a message the user
sees (slurm.log_user) and an error code; or modify (append to the comment, required nodes, begin
time).

The job's comment, name, script body and environment are NOT sent (the service never needs them);
the strings that are sent are cut to MAX_FIELD bytes, and the cut is said, so nothing a user writes
can make a request the service cannot read.

When the service is down, slow (more than TIMEOUT_MS for the whole exchange) or answers
something unusable, the hook FAILS OPEN (accepts) or FAILS CLOSED (rejects): FAIL_OPEN for jobs
without a deadline, FAIL_DEADLINE_OPEN for jobs that carry one.  Every failure is one line in
slurmctld's log with a running count, and the count (with the request numbers) is reported to the
service with the next request it answers.  After 3 failures in a row of one user's submissions
the hook stops asking for that user for RETRY_AFTER_S seconds (each of their submissions then fails
at once); after failures in a row of 3 different users (the service is down, not one user's
submissions slow) it stops asking for everybody.  So one user's crafted submissions can only pause
that user's checks, and a stopped service stalls slurmctld for at most TIMEOUT_MS per submission
and 7 submissions in a row (3 of one user, 3 of a second, 1 of a third) before the pause.

The deadline: job_desc.deadline is not visible to Lua.  The hook sends GREENSLURM_DEADLINE from the
job's environment (set by the shipped cli_filter.lua from --deadline) and the last "#SBATCH
--deadline" of the batch script; the service checks the earlier one, and later compares what it
checked with the deadline Slurm really holds (reconciliation from squeue --json).

Rendered by `greenslurm hook install`; the settings below come from hook.toml, but FAILURES_DIR:
the folder install made beside this script for slurmctld's user.
--]]

local SOCKET_PATH = "@SOCKET@"
local FAILURES_DIR = "@FAILURES_DIR@"
local TIMEOUT_MS = @TIMEOUT_MS@
local FAIL_OPEN = @FAIL_OPEN@
local FAIL_DEADLINE_OPEN = @FAIL_DEADLINE_OPEN@
local RETRY_AFTER_S = @RETRY_AFTER_S@
local MAX_FIELD = 4096
local MAX_ANSWER_BYTES = 1048576     -- the service's answers are a few hundred bytes; a plan's node list more
local ANSWER_CHUNK_BYTES = 8192
local FAILURES_BEFORE_PAUSE = 3

local have_socket, socket = pcall(require, "socket")
local have_unix, unix = pcall(require, "socket.unix")
local sequence = 0
local failed_open, failed_ids = 0, {}      -- not yet reported to the service
local total_failures = 0
math.randomseed(os.time() + math.floor((os.clock() * 1e6) % 1e6))
local function clock()
    if have_socket then return socket.gettime() end
    return os.time()
end

-- >>> back-off (tests/test_hook_lua.py runs this part on its own)
-- Failures in a row are counted per user (uid), in a table of at most MAX_USERS_TRACKED users: when
-- it is full, users with no pause under way are forgotten, then (all paused) the one whose pause ends
-- first; a stream of submissions from many uids never grows it.  Failures in a row of the service as
-- a whole are counted with the users they came from: DISTINCT_USERS_BEFORE_PAUSE users means the
-- service itself fails, and every user pauses.
local MAX_USERS_TRACKED = 256
local DISTINCT_USERS_BEFORE_PAUSE = 3
local users = {}                            -- uid -> { failures in a row, paused until }
local users_tracked = 0
local global_paused_until = 0
local streak_users, streak_distinct = {}, 0 -- users with a failure since the service last answered

local function user_state(uid)
    uid = uid or -1
    local state = users[uid]
    if state ~= nil then return state end
    if users_tracked >= MAX_USERS_TRACKED then
        local now, first, first_end = clock(), nil, math.huge
        for key, other in pairs(users) do
            if other[2] <= now then
                users[key] = nil
                users_tracked = users_tracked - 1
            elseif other[2] < first_end then
                first, first_end = key, other[2]
            end
        end
        if users_tracked >= MAX_USERS_TRACKED and first ~= nil then
            users[first] = nil
            users_tracked = users_tracked - 1
        end
    end
    state = { 0, 0 }
    users[uid] = state
    users_tracked = users_tracked + 1
    return state
end

-- whether this user's submissions fail at once (a pause under way for them, or for everybody)
local function paused(uid)
    local now = clock()
    if global_paused_until > now then return true end
    local state = users[uid or -1]
    return state ~= nil and state[2] > now
end

-- a failure of a submission of this user that was sent to the service (or could not be); what it
-- paused, for the log: "user", "all" or nil
local function note_failure(uid)
    local now, what = clock(), nil
    uid = uid or -1                         -- (Slurm always gives one)
    local state = user_state(uid)
    state[1] = state[1] + 1
    if state[1] >= FAILURES_BEFORE_PAUSE and state[2] <= now then
        state[2] = now + RETRY_AFTER_S
        what = "user"
    end
    if streak_users[uid] == nil then
        streak_users[uid] = true
        streak_distinct = streak_distinct + 1
    end
    if streak_distinct >= DISTINCT_USERS_BEFORE_PAUSE then
        global_paused_until = now + RETRY_AFTER_S
        streak_users, streak_distinct = {}, 0
        what = "all"
    end
    return what
end

-- the service answered a submission of this user
local function note_answer(uid)
    uid = uid or -1
    if users[uid] ~= nil then
        users[uid] = nil
        users_tracked = users_tracked - 1
    end
    streak_users, streak_distinct = {}, 0
    global_paused_until = 0
end
-- <<< back-off
local INSTANCE = string.format("%x%06x", os.time(), math.random(0, 0xffffff))

-- Failures not yet reported are also kept in a small file, so that a slurmctld restart (or a reload
-- of this file) does not lose them: the next load reports them as its own, with the earlier load's
-- request numbers.  The file lives in FAILURES_DIR, a folder `greenslurm hook install` made beside
-- this script for slurmctld's user alone (mode 0755): the load below reads it with a plain io.open,
-- which waits for ever on a FIFO and follows a link, so nobody else may put anything there (it was
-- beside the socket, in the folder of the service's user).
local FAILURES_FILE = FAILURES_DIR .. "/unreported"
local failed_earlier = nil                  -- "INSTANCE:ranges" of an earlier load, not yet reported
-- the failed requests' numbers, as ranges, go to the service as failed_ids (then failed_earlier, after
-- INSTANCE:), whose strings hold 4096 bytes: a new range is kept only while they stay under this
-- (the last range may still grow by one number); a failure past it is still counted, not named
local MAX_RANGES_BYTES = 4000
local kept_on_disk = 0                      -- the count FAILURES_FILE holds, as far as this load knows
local kept_whose = false                    -- whether its line says whose failures it holds (TOTAL KEPT)
-- Whose failures this load's first running totals are, read back with the line: "INSTANCE:TOTAL:COUNT,..."
-- (the failures of load INSTANCE with running totals TOTAL-COUNT+1..TOTAL, oldest load first).  Reported
-- with the count and kept in the line after KEPT, so that the service counts only what it did not hold
-- already for those loads: a request whose report it recorded but whose answer came after TIMEOUT_MS is
-- a failure here, and the line keeps the failures that request reported (failures_file.Kept.inherited).
local inherited = ""
local MAX_SEGMENTS = 32
local LUA_EXACT = "9007199254740992"        -- 2^53: Lua 5.1's doubles hold every integer up to it

-- whether a run of digits is an integer this Lua holds exactly (failures_file.LUA_EXACT_MAX)
local function exact(digits)
    local first = string.find(digits, "[1-9]")          -- past the leading zeros
    digits = first and string.sub(digits, first) or ""
    return #digits < #LUA_EXACT or (#digits == #LUA_EXACT and digits <= LUA_EXACT)
end

-- the segments a load reading back the line (COUNT, INSTANCE, TOTAL, what follows KEPT) carries: the
-- line's own, then its load's COUNT minus those; the newest MAX_SEGMENTS; none when they do not add up
local function inherited_from(count, instance, total, rest)
    if total == nil or #instance > 32 then return "" end
    local found, sum, text = {}, 0, string.sub(rest, 2)
    local pos, named = 1, {[instance] = true}   -- a load named twice is no chain of loads: none
    while text ~= "" and pos <= #text + 1 do
        local comma = string.find(text, ",", pos, true) or (#text + 1)
        local item = string.sub(text, pos, comma - 1)
        pos = comma + 1
        do
            local x, t, c = string.match(item, "^(%x+):(%d+):(%d+)$")
            -- (count - sum: exact, where their sum in doubles rounds 2^53 + 1 down to 2^53)
            if #found >= MAX_SEGMENTS or x == nil or #x > 32 or named[x] or not exact(t) or not exact(c)
                    or tonumber(c) < 1 or tonumber(c) > tonumber(t) or tonumber(c) > count - sum then
                found, sum = {}, 0
                break
            end
            found[#found + 1] = string.format("%s:%d:%d", x, tonumber(t), tonumber(c))    -- (no leading zeros)
            sum, named[x] = sum + tonumber(c), true
        end
    end
    local own = count - sum
    if own > total then return "" end
    if own > 0 then found[#found + 1] = string.format("%s:%d:%d", instance, total, own) end
    while #found > MAX_SEGMENTS do table.remove(found, 1) end
    return table.concat(found, ",")
end

do
    local f = io.open(FAILURES_FILE, "r")
    if f then
        local text = f:read(65536) or ""     -- the whole line: up to 1,000 ranges (failures_file.MAX_BYTES)
        f:close()
        local count, earlier = string.match(text, "^(%d+) ([%x]+:[%d,-]*)")
        local _, last, total, kept = string.find(text, "^%d+ [%x]+:[%d,-]* (%d+) (%d+)")
        local newline = last and string.find(text, "\n", last + 1, true)
        local rest = newline and string.sub(text, last + 1, newline - 1)
        if newline == nil or (rest ~= "" and string.sub(rest, 1, 1) ~= " ") then
            total, kept = nil, nil          -- TOTAL and KEPT count only with a blank or the line's end after them
        end
        if count and not (exact(count) and (total == nil or (exact(total) and exact(kept)))) then
            count = nil                     -- a number job_submit.lua never writes (failures_file.parse)
        end
        if count then
            inherited = inherited_from(tonumber(count), string.match(earlier, "^%x+"), tonumber(total), rest)
        end
        if earlier and #earlier > MAX_FIELD then    -- an earlier script kept more ranges: whole ones that fit
            earlier = string.match(string.sub(earlier, 1, MAX_FIELD), "^(.*),") or string.match(earlier, "^[%x]+:")
        end
        if count then
            failed_open = tonumber(count)
            total_failures = failed_open
            kept_on_disk, kept_whose = failed_open, total ~= nil
            failed_earlier = earlier
        end
    end
end

local function log_info(fmt, ...) slurm.log_info("greenslurm: " .. fmt, ...) end
local function log_error(fmt, ...) slurm.log_error("greenslurm: " .. fmt, ...) end

-- JSON ---------------------------------------------------------------------------------------------
local escapes = { ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f', ['\n'] = '\\n',
                  ['\r'] = '\\r', ['\t'] = '\\t' }

local function json_string(s)
    return '"' .. string.gsub(s, '[%c"\\]', function(c)
        return escapes[c] or string.format("\\u%04x", string.byte(c))
    end) .. '"'
end

local function json_object(t)
    local parts = {}
    for k, v in pairs(t) do
        local tv = type(v)
        if tv == "string" then
            parts[#parts + 1] = json_string(k) .. ":" .. json_string(v)
        elseif tv == "number" and v == v and v ~= math.huge and v ~= -math.huge then
            parts[#parts + 1] = json_string(k) .. ":" .. string.format("%.17g", v)
        elseif tv == "boolean" then
            parts[#parts + 1] = json_string(k) .. ":" .. tostring(v)
        end
    end
    table.sort(parts)
    return "{" .. table.concat(parts, ",") .. "}"
end

-- A flat JSON object (string, number, true/false/null values): all the service ever answers.
local function json_decode_flat(s)
    local pos, out = 1, {}
    local function skip() pos = string.find(s, "[^%s]", pos) or (#s + 1) end
    local function str()
        local buf = {}
        pos = pos + 1
        while pos <= #s do
            local c = string.sub(s, pos, pos)
            if c == '"' then pos = pos + 1; return table.concat(buf) end
            if c == "\\" then
                local e = string.sub(s, pos + 1, pos + 1)
                if e == "u" then
                    local code = tonumber(string.sub(s, pos + 2, pos + 5), 16) or 63
                    buf[#buf + 1] = code < 128 and string.char(code) or "?"
                    pos = pos + 6
                else
                    buf[#buf + 1] = ({ n = "\n", t = "\t", r = "\r", b = "\b", f = "\f" })[e] or e
                    pos = pos + 2
                end
            else
                buf[#buf + 1] = c
                pos = pos + 1
            end
        end
        return nil
    end
    skip()
    if string.sub(s, pos, pos) ~= "{" then return nil end
    pos = pos + 1
    while true do
        skip()
        local c = string.sub(s, pos, pos)
        if c == "}" then return out end
        if c == "," then pos = pos + 1; skip(); c = string.sub(s, pos, pos) end
        if c ~= '"' then return nil end
        local key = str()
        if key == nil then return nil end
        skip()
        if string.sub(s, pos, pos) ~= ":" then return nil end
        pos = pos + 1
        skip()
        c = string.sub(s, pos, pos)
        if c == '"' then
            out[key] = str()
        elseif string.sub(s, pos, pos + 3) == "true" then
            out[key] = true; pos = pos + 4
        elseif string.sub(s, pos, pos + 4) == "false" then
            out[key] = false; pos = pos + 5
        elseif string.sub(s, pos, pos + 3) == "null" then
            pos = pos + 4
        else
            local num = string.match(s, "^-?[%d.eE+-]+", pos)
            if num == nil then return nil end
            out[key] = tonumber(num)
            pos = pos + #num
        end
    end
end

-- The deadline ------------------------------------------------------------------------------------
-- The batch script is read as sbatch reads it (Slurm 22.05, src/sbatch/opt.c _opt_batch_script): line
-- by line up to the first command (a line whose first non-blank byte is not "#"); a line starting
-- with "#SBATCH" (or "#SLURM") holds options, split as sbatch's get_argument splits them (quotes,
-- backslash escapes, an unquoted "#" ends the line), all such lines making one argument list.  Every
-- "--dea[dline]" option (getopt accepts unique prefixes; the value after "=" or the next argument)
-- is a candidate: all are sent, comma-separated, and the service checks the earliest.
-- Linear in the script's size: every search below is a plain find or a single character class (no
-- pattern that backtracks over user bytes); the first command is looked for in the first
-- MAX_HEADER_BYTES bytes, and at most MAX_DIRECTIVE_LINES option lines holding MAX_DIRECTIVE_BYTES
-- bytes are split.  A script with more before its first command (an option line further on) is
-- reported as cut: the service then treats its deadline as unreadable.
-- >>> script scan (tests/test_hook_lua.py runs this part on its own)
local MAX_DIRECTIVE_LINES = 1000
local MAX_DIRECTIVE_BYTES = 65536
local MAX_HEADER_BYTES = 262144

-- The arguments of one option line (the text after the magic word), appended to args.  As in
-- get_argument: an argument of no bytes ("", or an escaped blank) ends the line; so does an unquoted
-- "#"; a quote left open (sbatch refuses the script) keeps what it holds.
local function directive_arguments(text, args)
    local pos, n = 1, #text
    while true do
        pos = string.find(text, "[^%s]", pos)
        if pos == nil then return end
        local parts, quote, ended = {}, nil, false
        while pos <= n do
            local stop = string.find(text, quote and (quote == '"' and '[\\"]' or "[\\']") or "[%s\\\"'#]", pos)
            if stop == nil then
                parts[#parts + 1] = string.sub(text, pos)
                pos = n + 1
                break
            end
            parts[#parts + 1] = string.sub(text, pos, stop - 1)
            local c = string.sub(text, stop, stop)
            pos = stop + 1
            if c == "\\" then
                local e = string.sub(text, pos, pos)
                if e == "" or (not quote and string.find(e, "^%s")) then break end
                parts[#parts + 1] = e
                pos = pos + 1
            elseif quote then
                quote = nil                         -- the closing quote
            elseif c == '"' or c == "'" then
                quote = c
            elseif c == "#" then                    -- an unquoted "#": the rest of the line is a comment
                ended = true
                break
            else                                    -- a blank ends the argument
                break
            end
        end
        local arg = table.concat(parts)
        if arg == "" then return end
        args[#args + 1] = arg
        if ended or quote then return end
    end
end

-- (candidates, why it was cut or nil)
local function deadline_from_script(script)
    if type(script) ~= "string" then return nil end
    local n = #script
    -- the first command: line 1, or a newline then blanks then a byte that is neither blank nor "#";
    -- looked for in the first MAX_HEADER_BYTES only
    local window = (n > MAX_HEADER_BYTES) and string.sub(script, 1, MAX_HEADER_BYTES) or script
    local stop = string.find(window, "^[ \t\r\f\v]*[^%s#]")
    if stop == nil then stop = string.find(window, "\n[ \t\r\f\v]*[^%s#]") end
    if stop == nil and n > MAX_HEADER_BYTES and string.find(script, "\n#S", MAX_HEADER_BYTES - 2, true) then
        return nil, true           -- option lines may follow further on: not read
    end
    -- from here on every option line starts inside the window: the searches for the next stay in it
    local header_end = stop or (n + 1)
    local args, lines, bytes, cut = {}, 0, 0, nil
    local pos = 1
    while pos < header_end do
        local line_end = string.find(script, "\n", pos, true) or (n + 1)
        local body = nil
        if string.sub(script, pos, pos + 6) == "#SBATCH" then
            body = pos + 7
        elseif string.sub(script, pos, pos + 5) == "#SLURM" then
            body = pos + 6
        end
        if body ~= nil then
            lines = lines + 1
            bytes = bytes + (line_end - body)
            if lines > MAX_DIRECTIVE_LINES or bytes > MAX_DIRECTIVE_BYTES then cut = true; break end
            directive_arguments(string.sub(script, body, line_end - 1), args)
        end
        -- the next option line: a plain search, so comment lines cost nothing each
        local nxt = string.find(window, "\n#S", line_end, true)
        if nxt == nil or nxt >= header_end then break end
        pos = nxt + 1
    end
    local found = {}
    for i, a in ipairs(args) do
        if string.sub(a, 1, 5) == "--dea" then
            local eq = string.find(a, "=", 1, true)
            local name = string.sub(a, 3, (eq or (#a + 1)) - 1)
            if string.sub("deadline", 1, #name) == name then
                local value = eq and string.sub(a, eq + 1) or args[i + 1]
                if value ~= nil then found[#found + 1] = value end
            end
        end
    end
    if #found == 0 then return nil, cut end
    return table.concat(found, ","), cut
end
-- <<< script scan

local function environment_value(env, name)
    if type(env) ~= "table" then return nil end
    local v = env[name]
    if type(v) == "string" and v ~= "" then return v end
    for _, entry in pairs(env) do       -- some Slurm versions give a list of "NAME=value"
        if type(entry) == "string" then
            local k, val = string.match(entry, "^([^=]+)=(.*)$")
            if k == name and val ~= "" then return val end
        end
    end
    return nil
end

-- The exchange ------------------------------------------------------------------------------------
local function ask(request)
    if not have_socket or not have_unix then
        return nil, "lua-socket (socket.unix) is not installed"
    end
    local deadline = socket.gettime() + TIMEOUT_MS / 1000.0
    local client = (type(unix) == "table" and unix.stream) and unix.stream() or unix()
    if not client then return nil, "cannot create a UNIX socket" end
    local function remaining()
        local left = deadline - socket.gettime()
        if left <= 0 then return nil end
        client:settimeout(left)
        return left
    end
    remaining()
    local ok, err = client:connect(SOCKET_PATH)
    if not ok then client:close(); return nil, "connect " .. SOCKET_PATH .. ": " .. tostring(err) end
    if not remaining() then client:close(); return nil, "timeout" end
    ok, err = client:send(json_object(request) .. "\n")
    if not ok then client:close(); return nil, "send: " .. tostring(err) end
    -- the service answers the line, then closes when it reads the end of the requests; the answer is
    -- read in chunks up to MAX_ANSWER_BYTES (a longer one is refused, never held: receive("*l") would
    -- hold however many bytes arrive within the timeout inside slurmctld)
    client:shutdown("send")
    local parts, size, line = {}, 0, nil
    while line == nil do
        if not remaining() then client:close(); return nil, "timeout" end
        local chunk, rerr, partial = client:receive(ANSWER_CHUNK_BYTES)
        chunk = chunk or partial or ""
        local newline = string.find(chunk, "\n", 1, true)
        if newline then
            parts[#parts + 1] = string.sub(chunk, 1, newline - 1)
            line = table.concat(parts)
        else
            parts[#parts + 1] = chunk
            size = size + #chunk
            if size > MAX_ANSWER_BYTES then
                client:close()
                return nil, string.format("answer longer than %d bytes", MAX_ANSWER_BYTES)
            end
            if rerr then client:close(); return nil, "receive: " .. tostring(rerr) end
        end
    end
    client:close()
    local answer = json_decode_flat(line)
    if answer == nil then return nil, "unreadable answer" end
    return answer, nil
end

-- The Slurm error a refusal returns: the ESLURM_ code the answer names when this Slurm has it, else
-- slurm.ERROR.  Any other name must not pass: slurm.SUCCESS would turn the refusal into an
-- acceptance, and so would a function (slurm.log_info), Slurm reading a value that is not a number
-- as success (job_submit_lua.c, "non-numeric return code").
local function refusal_code(answer)
    local name = answer.error_code
    if type(name) == "string" and string.sub(name, 1, 7) == "ESLURM_" then
        local code = slurm[name]
        if type(code) == "number" and code ~= slurm.SUCCESS then return code end
    end
    return slurm.ERROR
end

local function failed_ranges()
    local parts = {}
    for i, r in ipairs(failed_ids) do
        parts[i] = (r[1] == r[2]) and tostring(r[1]) or (tostring(r[1]) .. "-" .. tostring(r[2]))
    end
    return table.concat(parts, ",")
end

-- The file is written under a name nobody can guess (16 bytes of /dev/urandom) and renamed over
-- FAILURES_FILE: a reader sees the old line or the new one, never half of one, and rename replaces
-- the name itself, so even a link left at FAILURES_FILE is replaced, never written through.
local function private_name()
    local random = io.open("/dev/urandom", "rb")
    if random == nil then return nil end
    local bytes = random:read(16)
    random:close()
    if bytes == nil or #bytes ~= 16 then return nil end
    return FAILURES_FILE .. "." .. (string.gsub(bytes, ".", function(c) return string.format("%02x", string.byte(c)) end))
end

-- nil when kept, else why not (the count stays in memory and is still reported; only a restart of
-- slurmctld before the service answers would lose it).  The line: COUNT INSTANCE:RANGES TOTAL KEPT
-- [SEGMENTS], TOTAL this load's running total, KEPT the count FAILURES_FILE holds now, SEGMENTS whose
-- failures its first totals are (inherited).  A line never renamed (a
-- slurmctld killed between the write and the rename) holds COUNT - KEPT failures no load reads back,
-- the running totals TOTAL-COUNT+KEPT+1 to TOTAL: the service counts them once from the name it left
-- (greenslurm hook check lists such names).
local function keep_failures()
    local name = private_name()
    if name == nil then return "no /dev/urandom" end
    local f, err = io.open(name, "w")
    if f == nil then return err end
    local written, write_err = f:write(string.format("%d %s:%s %d %d%s\n", failed_open, INSTANCE, failed_ranges(),
                                                     total_failures, kept_on_disk,
                                                     inherited ~= "" and (" " .. inherited) or ""))
    -- the write is buffered: a full disk or a read-only remount shows only in the flush at close,
    -- and renaming that empty file over FAILURES_FILE would lose the line kept there
    local closed, close_err = f:close()
    if written and closed then
        local renamed, rename_err = os.rename(name, FAILURES_FILE)
        if renamed then
            kept_on_disk, kept_whose = failed_open, true
            return nil
        end
        err = rename_err
    else
        err = write_err or close_err
    end
    os.remove(name)
    return err
end
local keeping_failed = false                -- said once until keeping works again

local function fail(reason, has_deadline, request_id, uid, asked)
    total_failures = total_failures + 1
    if asked then
        local what = note_failure(uid)
        if what == "user" then
            log_error("%d failures in a row of uid %s's submissions; not asking the service for them for %g s",
                      FAILURES_BEFORE_PAUSE, tostring(uid), RETRY_AFTER_S)
        elseif what == "all" then
            log_error("failures in a row of %d users' submissions; not asking the service for %g s",
                      DISTINCT_USERS_BEFORE_PAUSE, RETRY_AFTER_S)
        end
    end
    failed_open = failed_open + 1
    if request_id ~= nil then       -- kept as ranges: a long outage is a few of them
        local last = failed_ids[#failed_ids]
        if last ~= nil and last[2] == request_id - 1 then
            last[2] = request_id
        elseif #failed_ids < 1000 and #failed_ranges() + #tostring(request_id) + 1 <= MAX_RANGES_BYTES then
            failed_ids[#failed_ids + 1] = { request_id, request_id }
        end
    end
    local ran, problem = pcall(keep_failures)
    if ran and problem == nil then
        keeping_failed = false
    elseif not keeping_failed then
        keeping_failed = true
        log_error("cannot keep the unreported failures in %s (%s): a restart of slurmctld before the service "
                  .. "answers would lose their count (greenslurm hook check)", FAILURES_DIR, tostring(problem))
    end
    local open = FAIL_OPEN
    if has_deadline then open = FAIL_DEADLINE_OPEN end
    if open then
        log_error("decision service unavailable (%s); failing open: job accepted unchecked (failure %d)",
                  reason, total_failures)
        return slurm.SUCCESS
    end
    log_error("decision service unavailable (%s); failing closed: job rejected (failure %d)", reason, total_failures)
    slurm.log_user("%s", "greenslurm: the job admission service is unavailable; try again later")
    return slurm.ERROR
end

local function cut(request, key, value)
    if type(value) ~= "string" then return end
    if #value > MAX_FIELD then
        value = string.sub(value, 1, MAX_FIELD)
        request.truncated = (request.truncated and (request.truncated .. ",") or "") .. key
    end
    request[key] = value
end

-- _test_job_desc_fields of Slurm 22.05 (job_mgr.c): checked after job_submit.lua (MAXPATHLEN 4096)
local SLURM_STRING_LIMITS = { { "name", 1024 }, { "comment", 1024 }, { "account", 1024 }, { "qos", 1024 },
                        { "reservation", 1024 }, { "licenses", 1024 }, { "wckey", 1024 }, { "mail_user", 1024 },
                        { "features", 1024 }, { "partition", 1024 }, { "tres_per_node", 1024 },
                        { "tres_per_job", 1024 }, { "tres_per_task", 1024 }, { "tres_per_socket", 1024 },
                        { "array_inx", 4096 }, { "std_out", 4096 }, { "std_err", 4096 }, { "std_in", 4096 },
                        { "work_dir", 4096 } }

local function describe(job_desc, submit_uid)
    sequence = sequence + 1
    local request = {
        op = "submit", id = sequence, hook_instance = INSTANCE, uid = submit_uid,
        min_cpus = job_desc.min_cpus, num_tasks = job_desc.num_tasks, cpus_per_task = job_desc.cpus_per_task,
        min_nodes = job_desc.min_nodes, max_nodes = job_desc.max_nodes, pn_min_memory = job_desc.pn_min_memory,
        time_limit = job_desc.time_limit, begin_time = job_desc.begin_time, submit_time = os.time(),
    }
    cut(request, "user", job_desc.user_name)
    cut(request, "partition", job_desc.partition)
    cut(request, "tres_per_node", job_desc.tres_per_node)
    cut(request, "tres_per_job", job_desc.tres_per_job)
    cut(request, "tres_per_task", job_desc.tres_per_task)
    cut(request, "tres_per_socket", job_desc.tres_per_socket)
    request.sockets_per_node = job_desc.sockets_per_node
    request.ntasks_per_node = job_desc.ntasks_per_node
    cut(request, "req_nodes", job_desc.req_nodes)
    cut(request, "exc_nodes", job_desc.exc_nodes)
    cut(request, "features", job_desc.features)
    cut(request, "array_inx", job_desc.array_inx)
    cut(request, "deadline_env", environment_value(job_desc.environment, "GREENSLURM_DEADLINE"))
    local script_deadline, script_cut = deadline_from_script(job_desc.script)
    cut(request, "deadline_script", script_deadline)
    if script_cut then
        request.truncated = (request.truncated and (request.truncated .. ",") or "") .. "deadline_script"
    end
    if request.deadline_env ~= nil or request.deadline_script ~= nil then
        -- a local time is read in the user's own zone (sbatch read it so)
        cut(request, "tz", environment_value(job_desc.environment, "TZ"))
    end
    cut(request, "dependency", job_desc.dependency)
    if job_desc.priority == 0 then request.hold = 1 end
    -- Slurm refuses, right after this hook, a job with a string longer than its limits: such a job
    -- reserves nothing in the plan (the service records it as not applied)
    for _, limit in ipairs(SLURM_STRING_LIMITS) do
        local v = job_desc[limit[1]]
        if type(v) == "string" and #v > limit[2] then request.slurm_refuses = limit[1]; break end
    end
    if failed_open > 0 then
        -- the running total lets the service count each failure once, however many queued requests
        -- repeat it
        request.failed_open = failed_open
        request.failed_total = total_failures
        request.failed_ids = failed_ranges()
        request.failed_earlier = failed_earlier
        if inherited ~= "" then request.failed_segments = inherited end
    end
    return request
end

-- Slurm 22.05 refuses a comment longer than this (job_mgr.c _test_job_desc_fields), AFTER this hook
-- ran: the tag must never push a comment Slurm would have taken over it.
local MAX_COMMENT = 1024

-- The service's text after the user's comment; when it does not fit, only its tag
-- ("greenslurm#ID.TOKEN", what reconciliation reads); when not even that fits, nothing (the job is
-- then checked again by reconciliation, as any job without a tag).
local function append_comment(job_desc, text)
    local old = job_desc.comment
    if type(old) ~= "string" then old = "" end
    local sep = (old ~= "") and " | " or ""
    local room = MAX_COMMENT - #old - #sep
    if #text > room then
        text = string.match(text, "^greenslurm#%d+%.%x+") or ""
        if #text > room or text == "" then
            log_info("comment of %d bytes leaves no room for the tag; left as it is", #old)
            return
        end
    end
    job_desc.comment = old .. sep .. text
end

function slurm_job_submit(job_desc, part_list, submit_uid)
    local has_deadline = false
    local request_id = nil
    local ok, result = pcall(function()
        local request = describe(job_desc, submit_uid)
        request_id = request.id
        has_deadline = request.deadline_env ~= nil or request.deadline_script ~= nil
        if paused(submit_uid) then
            return fail("paused after repeated failures", has_deadline, request_id, submit_uid, false)
        end
        local answer, err = ask(request)
        if answer == nil then return fail(err, has_deadline, request_id, submit_uid, true) end
        local action = answer.action
        if action == "accept" or action == "modify" or action == "reject" then
            note_answer(submit_uid)
            if request.failed_open ~= nil then
                failed_open, failed_ids, failed_earlier, inherited = 0, {}, nil, ""
                local removed, remove_err = os.remove(FAILURES_FILE)
                -- a line left there that says whose failures it holds (all reported now) counts 0 when
                -- read back: none of them is kept then (an earlier script's line would count again)
                if removed or kept_whose or string.find(tostring(remove_err), "No such file", 1, true) then
                    kept_on_disk = 0
                end
            end
        end
        if action == "accept" then
            return slurm.SUCCESS
        elseif action == "modify" then
            if answer.comment_append ~= nil then append_comment(job_desc, answer.comment_append) end
            if answer.req_nodes ~= nil then job_desc.req_nodes = answer.req_nodes end
            if answer.min_nodes ~= nil then job_desc.min_nodes = answer.min_nodes end
            if answer.max_nodes ~= nil then job_desc.max_nodes = answer.max_nodes end
            if answer.begin_time ~= nil then job_desc.begin_time = answer.begin_time end
            return slurm.SUCCESS
        elseif action == "reject" then
            log_info("rejected a job of uid %s: %s", tostring(submit_uid), tostring(answer.message))
            slurm.log_user("%s", answer.message or "greenslurm: job rejected")
            return refusal_code(answer)
        end
        return fail("service error: " .. tostring(answer.message), has_deadline, request_id, submit_uid, true)
    end)
    if ok then return result end
    return fail("hook error: " .. tostring(result), has_deadline, request_id, submit_uid, true)
end

-- A change to a pending job that can move when it (or another job) starts or ends: these fields of
-- job_desc are set (not NO_VAL / nil) when the user's update names them.
local MODIFY_NUMBERS = { "time_limit", "pn_min_memory", "min_cpus", "min_nodes", "max_nodes", "num_tasks",
                         "cpus_per_task", "priority", "begin_time" }
local MODIFY_STRINGS = { "req_nodes", "exc_nodes", "tres_per_job", "tres_per_node", "tres_per_task",
                         "tres_per_socket", "partition", "dependency", "features" }
local NO_VAL = 4294967294

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
    local ok, result = pcall(function()
        if job_rec == nil or (job_rec.job_state % 256) ~= 0 then return slurm.SUCCESS end  -- pending jobs only
        local request = { op = "modify", id = nil, hook_instance = INSTANCE, uid = modify_uid,
                          job_id = job_rec.job_id, submit_time = job_rec.submit_time,
                          time_limit = job_rec.time_limit, min_cpus = job_rec.min_cpus,
                          min_nodes = job_rec.min_nodes, pn_min_memory = job_rec.pn_min_memory }
        local changed = false
        for _, key in ipairs(MODIFY_NUMBERS) do
            local v = job_desc[key]
            if type(v) == "number" and v ~= NO_VAL and not (key == "begin_time" and v == 0) then
                request["new_" .. key] = v; changed = true
            end
        end
        for _, key in ipairs(MODIFY_STRINGS) do
            local v = job_desc[key]
            if type(v) == "string" then
                cut(request, "new_" .. key, v); changed = true
            end
        end
        if not changed then return slurm.SUCCESS end
        cut(request, "user", job_rec.user_name)
        cut(request, "partition", job_rec.partition)
        cut(request, "tres_per_node", job_rec.tres_per_node)
        local comment = job_rec.comment
        if type(comment) == "string" then
            local tag = nil
            for t in string.gmatch(string.sub(comment, -1100), "greenslurm#%d+%.%x+") do tag = t end
            if tag then request.tag = tag end
        end
        sequence = sequence + 1
        request.id = sequence
        local answer, err = ask(request)
        if answer == nil then
            log_error("decision service unavailable (%s); change to job %s applied unchecked", err,
                      tostring(job_rec.job_id))
            return slurm.SUCCESS
        end
        if answer.action == "reject" then
            log_info("refused a change to job %s by uid %s: %s", tostring(job_rec.job_id), tostring(modify_uid),
                     tostring(answer.message))
            slurm.log_user("%s", answer.message or "greenslurm: change refused")
            return refusal_code(answer)
        end
        return slurm.SUCCESS
    end)
    if ok then return result end
    log_error("hook error on a job change: %s; change applied unchecked", tostring(result))
    return slurm.SUCCESS
end

local codes = {}
for k, _ in pairs(slurm) do
    if type(k) == "string" and string.sub(k, 1, 7) == "ESLURM_" then codes[#codes + 1] = k end
end
table.sort(codes)
slurm.log_debug("greenslurm: error codes known to this Slurm: %s", table.concat(codes, " "))
log_info("job_submit.lua %s loaded (socket %s, timeout %d ms, fail %s, deadline jobs fail %s)", INSTANCE,
         SOCKET_PATH, TIMEOUT_MS, FAIL_OPEN and "open" or "closed", FAIL_DEADLINE_OPEN and "open" or "closed")
return slurm.SUCCESS
