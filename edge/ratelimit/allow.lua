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
-- no fresh burst when it falls. A TAT without its interval (written by an
-- older script, or whose subject hash expired) is read under the numbers
-- in force. Either way it is never more than one burst ahead of now (as
-- the arithmetic below keeps it under unchanged numbers).
--
-- Each TAT is a key of its own, which expires when the limit is full
-- again. Everything else of the subject is one hash (KEYS[n+3]), whose
-- fields are small enough for Redis's compact encoding:
--   d:YYYY-MM-DD   admitted cost that day (the edge's UTC date)
--   m:YYYY-MM      admitted cost that month
--   p              the policy the subject was last charged under
--   i:<name>       the emission interval limit <name>'s TAT was written under
-- The hash lives until a day after the month (renewed by each day's first
-- admitted request), and that request drops the day and month fields older
-- than yesterday and last month.
--
-- The day and month counters of the layout before the hash (a key each)
-- are read and added, never written: during a rolling upgrade, replicas
-- of both layouts count every request, and the older keys expire on their
-- own (the month's a day after the month).
--
-- KEYS[1..n]  the TAT key of each GCRA limit; KEYS[i] is the hash's name
--             without its last character, then the limit's name
-- KEYS[n+1]   the older layout's counter for the day
-- KEYS[n+2]   the older layout's counter for the month
-- KEYS[n+3]   the subject's hash
-- ARGV[1]     n, the number of GCRA limits
-- ARGV[2]     cost
-- ARGV[3]     daily cap, 0 for none
-- ARGV[4]     seconds the subject's hash lives (until a day after the month)
-- ARGV[5]     the policy this request is charged under ("" for none)
-- ARGV[6]     today's field, ARGV[7] this month's field
-- ARGV[8]     the oldest day field kept, ARGV[9] the oldest month field kept
-- ARGV[7+3i], ARGV[8+3i], ARGV[9+3i]   burst, rate, period (seconds) of limit i
--
-- Returns {allowed, daily_refused, today, month} followed, for each limit, by
-- {refused, remaining, tostring(retry_after), tostring(reset_after)}, and,
-- for cost 0 only, the policy last charged (false for none).
-- today and month include the cost when allowed.

-- this script has side-effects, so it requires replicate commands mode
redis.replicate_commands()

local n = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])
local peek = cost == 0
local hash = KEYS[n + 3]
local day_field, month_field = ARGV[6], ARGV[7]

-- Redis's clock, relative to 2017 as in redis_rate, so that every replica
-- uses one clock and the float keeps its microseconds.
local jan_1_2017 = 1483228800
local now = redis.call("TIME")
now = (now[1] - jan_1_2017) + (now[2] / 1000000)

-- Two reads: every TAT and the older layout's counters, then the hash's
-- fields (the keys share a hash tag, so one slot).
local reads = redis.call("MGET", unpack(KEYS, 1, n + 2))
local fields = {}
local name_at = #hash
for i = 1, n do
  fields[i] = "i:" .. string.sub(KEYS[i], name_at)
end
fields[n + 1], fields[n + 2], fields[n + 3] = "p", day_field, month_field
local state = redis.call("HMGET", hash, unpack(fields))

local allowed = true
-- Per limit i: tat, new_tat, diff, remaining, emission_interval, burst_offset
-- at 6i-5 .. 6i of one flat table.
local l = {}
-- Per limit i: its interval in force as it is stored (a string), and
-- whether the TAT read was converted to the numbers in force.
local interval, converted = {}, {}
for i = 1, n do
  local burst = ARGV[7 + 3 * i]
  local rate = ARGV[8 + 3 * i]
  local period = ARGV[9 + 3 * i]

  local emission_interval = period / rate
  local increment = emission_interval * cost
  local burst_offset = emission_interval * burst
  interval[i] = tostring(emission_interval)

  local tat = reads[i]
  if not tat then
    tat = now
  else
    tat = math.max(tonumber(tat), now)
    local was = state[i]
    if was and was ~= interval[i] then
      tat = now + (tat - now) / tonumber(was) * emission_interval
      converted[i] = true
    end
    -- Beyond the burst only under other numbers: unchanged ones keep the
    -- TAT within it, give or take the 14 digits a TAT is stored with.
    if tat - now > burst_offset + 0.001 then
      tat = now + burst_offset
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
  l[b + 1], l[b + 2], l[b + 3], l[b + 4], l[b + 5], l[b + 6] =
    tat, new_tat, diff, remaining, emission_interval, burst_offset
end

local older_today = tonumber(reads[n + 1] or "0")
local older_month = tonumber(reads[n + 2] or "0")
local today = tonumber(state[n + 2] or "0") + older_today
local daily_refused = cap > 0 and today + cost > cap
if daily_refused then
  allowed = false
end

-- Field-value pairs for one HSET at the end.
local hset = {}

-- keep writes limit i's TAT and, if it differs from the one stored, its
-- interval.
local function keep(i, tat)
  local ttl = math.ceil(tat - now)
  if ttl > 0 then
    redis.call("SET", KEYS[i], tat, "EX", ttl)
  end
  if state[i] ~= interval[i] then
    hset[#hset + 1] = fields[i]
    hset[#hset + 1] = interval[i]
  end
end

local result = {0, 0, today, 0}
if not allowed or peek then
  -- Nothing is consumed. A refusing limit answers as redis_rate does; a
  -- limit that would have admitted reports what it still has. A state
  -- converted to new numbers is kept converted, so that it comes back at
  -- the new rate from now on.
  result[2] = daily_refused and 1 or 0
  result[4] = tonumber(state[n + 3] or "0") + older_month
  for i = 1, n do
    local b = 6 * i - 6
    local tat, diff, remaining = l[b + 1], l[b + 3], l[b + 4]
    local r = 4 * i
    if remaining < 0 then
      result[r + 1], result[r + 2], result[r + 3] = 1, 0, tostring(diff * -1)
    else
      result[r + 1], result[r + 2], result[r + 3] =
        0, math.floor((now - (tat - l[b + 6])) / l[b + 5]), "-1"
    end
    result[r + 4] = tostring(tat - now)
    if converted[i] and not peek then
      keep(i, tat)
    end
  end
  if #hset > 0 then
    -- The hash may be made here: it gets its expiry at once.
    redis.call("HSET", hash, unpack(hset))
    redis.call("EXPIRE", hash, ARGV[4])
  end
  if peek then
    result[4 * n + 5] = state[n + 1]
  end
  return result
end

result[1] = 1
local counted = redis.call("HINCRBY", hash, day_field, cost)
local day_started = counted == cost
result[3] = counted + older_today
result[4] = redis.call("HINCRBY", hash, month_field, cost) + older_month
for i = 1, n do
  local b = 6 * i - 6
  local new_tat = l[b + 2]
  keep(i, new_tat)
  local r = 4 * i
  result[r + 1], result[r + 2], result[r + 3], result[r + 4] =
    0, math.floor(l[b + 4]), "-1", tostring(new_tat - now)
end
local policy = ARGV[5]
if policy ~= "" and state[n + 1] ~= policy then
  hset[#hset + 1] = "p"
  hset[#hset + 1] = policy
end
if #hset > 0 then
  redis.call("HSET", hash, unpack(hset))
end
-- The day's first admitted request (the one that made the hash, among
-- them) renews its expiry and drops the days and months past.
if day_started then
  redis.call("EXPIRE", hash, ARGV[4])
  local past = {}
  for _, f in ipairs(redis.call("HKEYS", hash)) do
    local kind = string.sub(f, 1, 2)
    if (kind == "d:" and f < ARGV[8]) or (kind == "m:" and f < ARGV[9]) then
      past[#past + 1] = f
    end
  end
  if #past > 0 then
    redis.call("HDEL", hash, unpack(past))
  end
end
return result
