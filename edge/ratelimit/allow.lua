-- Checks every limit of one request and, only if all of them admit it,
-- consumes them: GCRA rates exactly as go-redis/redis_rate v10's allowN
-- (same arithmetic, same order, same clock), then a fixed-window daily cap.
-- Cost 0 only reads: the standing of every limit, nothing written.
--
-- A limit's state (its TAT) is kept with the emission interval it was
-- written under. Read under other numbers, it is first converted: the
-- requests the subject spent stay spent (the TAT's distance from now, in
-- intervals), at most the new burst. So a changed rate, burst or period
-- takes effect at once for every subject, with no lockout when it rises and
-- no fresh burst when it falls. A TAT without its interval is read under
-- the numbers in force. Either way it is never more than one burst ahead
-- of now (as the arithmetic below keeps it under unchanged numbers).
--
-- Everything of one subject is one hash (KEYS[1]), whose fields are small
-- enough for Redis's compact encoding:
--   t:<name>       limit <name>'s TAT (a TAT in the past is a full limit)
--   i:<name>       the emission interval that TAT was written under
--   d:YYYY-MM-DD   admitted cost that day (the edge's UTC date)
--   m:YYYY-MM      admitted cost that month
--   p              the policy the subject was last charged under
-- One read (HMGET) and one write (HSET) per call: the script is atomic, so
-- the counts are written as read plus the cost. The hash lives until a day
-- after the month (longer if a TAT is further ahead), renewed by each day's
-- first admitted request, which also drops the TATs in the past and the
-- day and month counts older than yesterday and last month.
--
-- The layout before the hash kept the day's and month's counts and each
-- TAT in keys of their own (KEYS[2..]): a request of a day the hash has not
-- counted yet reads them where the hash has nothing, and an admitted one
-- writes what it read into the hash, so a rolling upgrade loses no count
-- or spent rate made before it; nothing writes those keys any more, and
-- they expire.
--
-- KEYS[1]     the subject's hash
-- KEYS[2]     the older layout's counter for the day
-- KEYS[3]     the older layout's counter for the month
-- KEYS[3+i]   the older layout's TAT of limit i
-- ARGV[1]     the numbers and fields below (args), as one JSON array that
--             cjson decodes: one argument, not one each, because the edge
--             writes an argument at about 300 instructions and a value of
--             the array at a tenth of that; the numbers arrive as numbers,
--             the same doubles as redis_rate's arguments give
--   args[1]   n, the number of GCRA limits
--   args[2]   cost
--   args[3]   daily cap, 0 for none
--   args[4]   seconds the subject's hash lives (until a day after the month)
--   args[5]   today's field, args[6] this month's field
--   args[7]   the oldest day field kept, args[8] the oldest month field kept
--   args[5+4i .. 7+4i]   burst, rate, period (seconds) of limit i
--   args[8+4i]           limit i's emission interval (period / rate) as
--             tostring writes it (%.14g): the edge formats it (Go's
--             strconv gives the same string), since Lua's tostring costs
--             Redis a sprintf of its own, 3,000 instructions a limit
-- ARGV[2]     the policy this request is charged under ("" for none)
-- ARGV[2+i]   the name of limit i
--
-- Returns {allowed, daily_refused, today, month} followed, for each limit, by
-- {refused, remaining, retry_after, reset_after}, and, for cost 0 only, the
-- policy last charged (false for none). today and month include the cost
-- when allowed. retry_after (-1 s when the limit did not refuse) and
-- reset_after are whole nanoseconds (how, where the answer is made): every
-- value but the policy is an integer, which the edge reads without boxing
-- or parsing.

-- this script has side-effects, so it requires replicate commands mode
redis.replicate_commands()

local args = cjson.decode(ARGV[1])
local n, cost, cap = args[1], args[2], args[3]
local peek = cost == 0
local hash = KEYS[1]

-- Redis's clock, relative to 2017 as in redis_rate, so that every replica
-- uses one clock and the float keeps its microseconds.
local jan_1_2017 = 1483228800
local now = redis.call("TIME")
now = (now[1] - jan_1_2017) + (now[2] / 1000000)

-- Tables here are filled in index order, and those that grow on every
-- call are made at their size for two limits (a plan's and an
-- operation's) by their constructor: Lua 5.1 assigns a list of targets
-- right to left, which puts the higher indexes in a table's hash part,
-- and a table grown index by index is rehashed each time its array part
-- doubles. Either costs Redis thousands of instructions a call.

-- One read: per limit its TAT and interval, then the policy, the day's
-- and the month's counts (the slots of two limits, made at once; the read
-- takes the first 2n + 3).
local fields = {"", "", "", "", "", "", ""}
for i = 1, n do
  local name = ARGV[2 + i]
  fields[2 * i - 1] = "t:" .. name
  fields[2 * i] = "i:" .. name
end
local at = 2 * n
fields[at + 1] = "p"
fields[at + 2] = args[5]
fields[at + 3] = args[6]
local state = redis.call("HMGET", hash, unpack(fields, 1, at + 3))

-- The day's first request on this layout: the older one's counts and TATs
-- join (and, admitted, are written into the hash).
local fresh_day = not state[at + 2]
local older = fresh_day and not peek
local before = fresh_day and redis.call("MGET", unpack(KEYS, 2, n + 3))

local allowed = true
-- Per limit i: tat, new_tat, diff, remaining, emission_interval, burst_offset
-- at 6i-5 .. 6i of one flat table (made with the slots of two limits).
local l = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
-- Per limit i, whether the TAT read was converted to the numbers in force
-- (made only then: no table a call that needs none).
local converted
for i = 1, n do
  local burst = args[5 + 4 * i]
  local rate = args[6 + 4 * i]
  local period = args[7 + 4 * i]

  local emission_interval = period / rate
  local increment = emission_interval * cost
  local burst_offset = emission_interval * burst

  -- A string's "+ 0" is tonumber's conversion once: tonumber converts it
  -- twice (it tests, then converts), a strtod of 17 digits each time.
  local stored = state[2 * i - 1] or before and before[2 + i]
  local tat = stored and stored + 0 -- false or nil when none
  if not tat or tat <= now then
    tat = now
  else
    local was = state[2 * i]
    if was and was ~= args[8 + 4 * i] then
      tat = now + (tat - now) / tonumber(was) * emission_interval
      converted = converted or {}
      converted[i] = true
    end
    -- Beyond the burst only under other numbers: unchanged ones keep the
    -- TAT within it, give or take the 14 digits a TAT is stored with.
    if tat - now > burst_offset + 0.001 then
      tat = now + burst_offset
      converted = converted or {}
      converted[i] = true
    end
  end

  local new_tat = tat + increment
  local allow_at = new_tat - burst_offset
  local diff = now - allow_at
  local remaining = diff / emission_interval
  if remaining < 0 then
    allowed = false
  end
  local b = 6 * i - 6
  l[b + 1] = tat
  l[b + 2] = new_tat
  l[b + 3] = diff
  l[b + 4] = remaining
  l[b + 5] = emission_interval
  l[b + 6] = burst_offset
end

local today = (state[at + 2] or before and before[1] or 0) + 0
local month = (state[at + 3] or before and before[2] or 0) + 0
local daily_refused = cap > 0 and today + cost > cap
if daily_refused then
  allowed = false
end

-- The answer, and the field-value pairs of one HSET. An admitted request
-- consumes: the day's and the month's counts, each limit's TAT, the
-- policy charged. Otherwise nothing is consumed: a refusing limit answers
-- as redis_rate does, a limit that would have admitted reports what it
-- still has, and a state converted to new numbers is kept converted, so
-- that it comes back at the new rate from now on (a peek writes nothing).
-- No helper is a closure: each would be made anew on every call, with the
-- locals it reads.
local consume = allowed and not peek
local result = {0, daily_refused and 1 or 0, today, month}
local hset
if consume then
  result[1], result[3], result[4] = 1, today + cost, month + cost
  hset = {args[5], result[3], args[6], result[4]}
else
  hset = {}
end
-- The furthest TAT written, ahead of now: the hash lives at least as long
-- (its lifetime is math.max(args[4], math.ceil(furthest))).
local furthest = 0
for i = 1, n do
  local b = 6 * i - 6
  local tat, diff, remaining = l[b + 1], l[b + 3], l[b + 4]
  local r = 4 * i
  local keep -- the TAT limit i writes, if it writes one
  -- Durations are whole nanoseconds, exactly the time.Duration that
  -- parsing redis_rate's answer, tostring(seconds), gives
  -- (strconv.ParseFloat, times 1e9, truncated): Redis turns a number into
  -- an integer reply by truncating it, as Go turns a float into an
  -- integer.
  local refused, left, retry = 0, 0, -1e9
  if consume then
    tat = l[b + 2] -- the new TAT
    keep = tat
    left = math.floor(remaining)
  else
    if remaining < 0 then
      refused, retry = 1, (tostring(diff * -1) + 0) * 1e9
    else
      left = math.floor((now - (tat - l[b + 6])) / l[b + 5])
    end
    if converted and converted[i] and not peek then
      keep = tat
    end
  end
  result[r + 1] = refused
  result[r + 2] = left
  result[r + 3] = retry
  result[r + 4] = (tostring(tat - now) + 0) * 1e9
  if keep then
    hset[#hset + 1] = fields[2 * i - 1]
    hset[#hset + 1] = keep
    furthest = math.max(furthest, keep - now)
    if state[2 * i] ~= args[8 + 4 * i] then
      hset[#hset + 1] = fields[2 * i]
      hset[#hset + 1] = args[8 + 4 * i]
    end
  end
end

if not consume then
  if #hset > 0 then
    -- The hash may be made here: it gets its expiry at once.
    redis.call("HSET", hash, unpack(hset))
    redis.call("EXPIRE", hash, math.max(args[4], math.ceil(furthest)))
  end
  if peek then
    result[4 * n + 5] = state[at + 1]
  end
  return result
end

local policy = ARGV[2]
if policy ~= "" and state[at + 1] ~= policy then
  hset[#hset + 1] = "p"
  hset[#hset + 1] = policy
end
redis.call("HSET", hash, unpack(hset))
-- The day's first admitted request (the one that made the hash, among
-- them) renews its expiry and drops what is past: full limits' TATs, days
-- before yesterday, months before the last. A TAT further ahead than the
-- hash lives (a limit whose burst spans days) stretches it.
if older then
  redis.call("EXPIRE", hash, math.max(args[4], math.ceil(furthest)))
  local all = redis.call("HGETALL", hash)
  local past = {}
  for j = 1, #all, 2 do
    local f = all[j]
    local kind = string.sub(f, 1, 2)
    if (kind == "d:" and f < args[7]) or (kind == "m:" and f < args[8]) or
        (kind == "t:" and tonumber(all[j + 1]) <= now) then
      past[#past + 1] = f
    end
  end
  if #past > 0 then
    redis.call("HDEL", hash, unpack(past))
  end
elseif furthest > 86400 then
  if redis.call("TTL", hash) < furthest then
    redis.call("EXPIRE", hash, math.max(args[4], math.ceil(furthest)))
  end
end
return result
