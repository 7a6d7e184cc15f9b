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

local allowed = true
local limits = {}
for i = 1, n do
  local burst = ARGV[3 + 3 * i]
  local rate = ARGV[4 + 3 * i]
  local period = ARGV[5 + 3 * i]

  local emission_interval = period / rate
  local increment = emission_interval * cost
  local burst_offset = emission_interval * burst

  local tat = redis.call("GET", KEYS[i])
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
  limits[i] = {
    tat = tat, new_tat = new_tat, diff = diff, remaining = remaining,
    emission_interval = emission_interval, burst_offset = burst_offset,
  }
end

local today = tonumber(redis.call("GET", KEYS[n + 1]) or "0")
local daily_refused = cap > 0 and today + cost > cap
if daily_refused then
  allowed = false
end

if not allowed then
  -- Nothing is consumed. A refusing limit answers as redis_rate does; a
  -- limit that would have admitted reports what it still has.
  local month = tonumber(redis.call("GET", KEYS[n + 2]) or "0")
  local result = {0, daily_refused and 1 or 0, today, month}
  for i = 1, n do
    local l = limits[i]
    local reset_after = l.tat - now
    if l.remaining < 0 then
      local retry_after = l.diff * -1
      table.insert(result, 1)
      table.insert(result, 0)
      table.insert(result, tostring(retry_after))
    else
      table.insert(result, 0)
      table.insert(result, math.floor((now - (l.tat - l.burst_offset)) / l.emission_interval))
      table.insert(result, tostring(-1))
    end
    table.insert(result, tostring(reset_after))
  end
  return result
end

local result = {1, 0, 0, 0}
for i = 1, n do
  local l = limits[i]
  local reset_after = l.new_tat - now
  if reset_after > 0 then
    redis.call("SET", KEYS[i], l.new_tat, "EX", math.ceil(reset_after))
  end
  table.insert(result, 0)
  table.insert(result, math.floor(l.remaining))
  table.insert(result, tostring(-1))
  table.insert(result, tostring(reset_after))
end

result[3] = redis.call("INCRBY", KEYS[n + 1], cost)
redis.call("EXPIRE", KEYS[n + 1], ARGV[4])
result[4] = redis.call("INCRBY", KEYS[n + 2], cost)
redis.call("EXPIRE", KEYS[n + 2], ARGV[5])
return result
