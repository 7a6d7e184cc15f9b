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
-- older script, or whose interval key expired) is read under the numbers
-- in force. Either way it is never more than one burst ahead of now (as
-- the arithmetic below keeps it under unchanged numbers).
--
-- KEYS[1..n]     the TAT key of each GCRA limit
-- KEYS[n+1..2n]  the emission interval each TAT was written under
-- KEYS[2n+1]     the policy the subject was last charged under
-- KEYS[2n+2]     the subject's counter for the day (edge's UTC date in the key)
-- KEYS[2n+3]     the subject's counter for the month
-- ARGV[1]     n, the number of GCRA limits
-- ARGV[2]     cost
-- ARGV[3]     daily cap, 0 for none
-- ARGV[4]     seconds the day counter lives (until a little after the day ends)
-- ARGV[5]     seconds the month counter lives
-- ARGV[6]     the policy this request is charged under ("" for none)
-- ARGV[4+3i], ARGV[5+3i], ARGV[6+3i]   burst, rate, period (seconds) of limit i
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
local day_key = KEYS[2 * n + 2]

-- Redis's clock, relative to 2017 as in redis_rate, so that every replica
-- uses one clock and the float keeps its microseconds.
local jan_1_2017 = 1483228800
local now = redis.call("TIME")
now = (now[1] - jan_1_2017) + (now[2] / 1000000)

-- One read for every limit's TAT and interval, the policy charged and the
-- day's count (the keys share a hash tag, so one slot).
local reads = redis.call("MGET", unpack(KEYS, 1, 2 * n + 2))

local allowed = true
-- Per limit i: tat, new_tat, diff, remaining, emission_interval, burst_offset
-- at 6i-5 .. 6i of one flat table.
local l = {}
-- Per limit i: its interval in force as it is stored (a string), and
-- whether the TAT read was converted to the numbers in force.
local interval, converted = {}, {}
for i = 1, n do
  local burst = ARGV[4 + 3 * i]
  local rate = ARGV[5 + 3 * i]
  local period = ARGV[6 + 3 * i]

  local emission_interval = period / rate
  local increment = emission_interval * cost
  local burst_offset = emission_interval * burst
  interval[i] = tostring(emission_interval)

  local tat = reads[i]
  if not tat then
    tat = now
  else
    tat = math.max(tonumber(tat), now)
    local was = reads[n + i]
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

local today = tonumber(reads[2 * n + 2] or "0")
local daily_refused = cap > 0 and today + cost > cap
if daily_refused then
  allowed = false
end

-- keep writes limit i's TAT and, if it differs from the one stored, its
-- interval. The interval lives as long as the day's counter (refreshed by
-- the day's first admitted request), at least as long as the TAT: so the
-- state of a subject active every day always keeps its interval.
local function keep(i, tat, day_started)
  local ttl = math.ceil(tat - now)
  if ttl > 0 then
    redis.call("SET", KEYS[i], tat, "EX", ttl)
  end
  if day_started or reads[n + i] ~= interval[i] then
    redis.call("SET", KEYS[n + i], interval[i], "EX", math.max(ttl, tonumber(ARGV[4])))
  end
end

local result = {0, 0, today, 0}
if not allowed or peek then
  -- Nothing is consumed. A refusing limit answers as redis_rate does; a
  -- limit that would have admitted reports what it still has. A state
  -- converted to new numbers is kept converted, so that it comes back at
  -- the new rate from now on.
  result[2] = daily_refused and 1 or 0
  result[4] = tonumber(redis.call("GET", KEYS[2 * n + 3]) or "0")
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
      keep(i, tat, false)
    end
  end
  if peek then
    result[4 * n + 5] = reads[2 * n + 1]
  end
  return result
end

-- The counters get their expiry when they are made (the call that finds
-- them at cost): one command each per call instead of two. The day's
-- first request also renews the intervals and the policy charged.
result[1] = 1
result[3] = redis.call("INCRBY", day_key, ARGV[2])
local day_started = result[3] == cost
if day_started then
  redis.call("EXPIRE", day_key, ARGV[4])
end
result[4] = redis.call("INCRBY", KEYS[2 * n + 3], ARGV[2])
if result[4] == cost then
  redis.call("EXPIRE", KEYS[2 * n + 3], ARGV[5])
end
for i = 1, n do
  local b = 6 * i - 6
  local new_tat = l[b + 2]
  keep(i, new_tat, day_started)
  local r = 4 * i
  result[r + 1], result[r + 2], result[r + 3], result[r + 4] =
    0, math.floor(l[b + 4]), "-1", tostring(new_tat - now)
end
local policy = ARGV[6]
if policy ~= "" and (day_started or reads[2 * n + 1] ~= policy) then
  redis.call("SET", KEYS[2 * n + 1], policy, "EX", ARGV[4])
end
return result
