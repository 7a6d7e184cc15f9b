-- Checks every limit of one request and, only if all of them admit it,
-- consumes them: GCRA rates exactly as go-redis/redis_rate v10's allowN
-- (same arithmetic, same order, same clock), then a fixed-window daily cap.
--
-- KEYS[1..n]  the TAT key of each GCRA limit
-- KEYS[n+1]   the subject's counter for the day (edge's UTC date in the key)
-- KEYS[n+2]   the subject's counter for the month
-- ARGV[1]     n, the number of GCRA limits
-- ARGV[2]     cost
-- ARGV[3]     daily cap, 0 for none
-- ARGV[4]     seconds the day counter lives (until a little after the day ends)
-- ARGV[5]     seconds the month counter lives
-- ARGV[3+3i], ARGV[4+3i], ARGV[5+3i]   burst, rate, period (seconds) of limit i
--
-- Returns {allowed, daily_refused, today, month} followed, for each limit, by
-- {refused, remaining, tostring(retry_after), tostring(reset_after)}.
-- today and month include the cost when allowed.

-- this script has side-effects, so it requires replicate commands mode
redis.replicate_commands()

local n = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])

-- Redis's clock, relative to 2017 as in redis_rate, so that every replica
-- uses one clock and the float keeps its microseconds.
local jan_1_2017 = 1483228800
local now = redis.call("TIME")
now = (now[1] - jan_1_2017) + (now[2] / 1000000)

-- One read for every limit's TAT and the day's count (the keys share a
-- hash tag, so one slot).
local reads = redis.call("MGET", unpack(KEYS, 1, n + 1))

local allowed = true
-- Per limit i: tat, new_tat, diff, remaining, emission_interval, burst_offset
-- at 6i-5 .. 6i of one flat table.
local l = {}
for i = 1, n do
  local burst = ARGV[3 + 3 * i]
  local rate = ARGV[4 + 3 * i]
  local period = ARGV[5 + 3 * i]

  local emission_interval = period / rate
  local increment = emission_interval * cost
  local burst_offset = emission_interval * burst

  local tat = reads[i]
  if not tat then
    tat = now
  else
    tat = tonumber(tat)
  end
  tat = math.max(tat, now)

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

local today = tonumber(reads[n + 1] or "0")
local daily_refused = cap > 0 and today + cost > cap
if daily_refused then
  allowed = false
end

local result = {0, 0, today, 0}
if not allowed then
  -- Nothing is consumed. A refusing limit answers as redis_rate does; a
  -- limit that would have admitted reports what it still has.
  result[2] = daily_refused and 1 or 0
  result[4] = tonumber(redis.call("GET", KEYS[n + 2]) or "0")
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
  end
  return result
end

result[1] = 1
for i = 1, n do
  local b = 6 * i - 6
  local new_tat = l[b + 2]
  local reset_after = new_tat - now
  if reset_after > 0 then
    redis.call("SET", KEYS[i], new_tat, "EX", math.ceil(reset_after))
  end
  local r = 4 * i
  result[r + 1], result[r + 2], result[r + 3], result[r + 4] =
    0, math.floor(l[b + 4]), "-1", tostring(reset_after)
end

-- The counters get their expiry when they are made (the call that finds
-- them at cost): one command each per call instead of two.
result[3] = redis.call("INCRBY", KEYS[n + 1], ARGV[2])
if result[3] == cost then
  redis.call("EXPIRE", KEYS[n + 1], ARGV[4])
end
result[4] = redis.call("INCRBY", KEYS[n + 2], ARGV[2])
if result[4] == cost then
  redis.call("EXPIRE", KEYS[n + 2], ARGV[5])
end
return result
