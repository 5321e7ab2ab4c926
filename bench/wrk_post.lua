-- wrk script of the unary benchmark (bench/wrk.py): POST the body in the file named by
-- BENCH_WRK_BODY with the headers in BENCH_WRK_HEADERS ("Name: value" lines); at the end
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

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests":%d,"duration_us":%d,"socket_errors":%d,"status_errors":%d,' ..
    '"p50_us":%d,"p99_us":%d}\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99)))
end
