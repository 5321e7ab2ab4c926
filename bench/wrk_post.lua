-- wrk script of the unary benchmark (bench/wrk.py): POST the body in the file named by
-- BENCH_WRK_BODY with the headers in BENCH_WRK_HEADERS ("Name: value" lines), or, when
-- BENCH_WRK_BODIES names a file, each of its lines in turn, one per request, from the line
-- after BENCH_WRK_OFFSET (lines sent by earlier runs); at the end
-- print one line "BENCH {json}" with requests, errors, duration and latency percentiles.

local function read(path)
  local file = assert(io.open(path, "rb"))
  local text = file:read("*a")
  file:close()
  return text
end

wrk.method = "POST"
wrk.body = read(os.getenv("BENCH_WRK_BODY"))
wrk.headers["Content-Type"] = "application/json"
for line in (os.getenv("BENCH_WRK_HEADERS") or ""):gmatch("[^\n]+") do
  local name, value = line:match("^([^:]+):%s*(.*)$")
  if name then
    wrk.headers[name] = value
  end
end

local bodies_file = os.getenv("BENCH_WRK_BODIES") or ""
if bodies_file ~= "" then
  local bodies = {}
  for line in io.lines(bodies_file) do
    if line ~= "" then
      bodies[#bodies + 1] = line
    end
  end
  local next_body = tonumber(os.getenv("BENCH_WRK_OFFSET") or "0") % #bodies
  function request()
    next_body = next_body % #bodies + 1
    return wrk.format(nil, nil, nil, bodies[next_body])
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests":%d,"duration_us":%d,"socket_errors":%d,"status_errors":%d,' ..
    '"p50_us":%d,"p99_us":%d}\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99)))
end
