-- wrk script for docs/benchmarks.md: ListOrganizations as plain HTTP/JSON
-- (what curl sends), one bearer token per request taken round-robin from
-- the file named by the TOKENS environment variable (one token a line), so
-- that no subject exceeds its plan and the edge refuses nothing.
--   TOKENS=/tmp/bench/tokens.txt wrk -t2 -c32 -d20s -s bench/list.lua http://127.0.0.1:18080
local tokens = {}
for line in io.lines(os.getenv("TOKENS")) do
  if #line > 0 then tokens[#tokens + 1] = line end
end
local i = math.random(#tokens)
local path = "/svc.v1.OrganizationService/ListOrganizations"
non200 = 0 -- global: done() reads it through thread:get

function request()
  i = i % #tokens + 1
  return wrk.format("POST", path, {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. tokens[i],
  }, "{}")
end

local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
end

function response(status, headers, body)
  if status ~= 200 then non200 = non200 + 1 end
end

function done(summary, latency, requests)
  local n = 0
  for _, t in ipairs(threads) do n = n + (t:get("non200") or 0) end
  io.write(string.format("non-200 answers: %d\n", n))
end
