-- Token bucket, one round trip. KEYS[1]: the bucket hash.
-- ARGV: refill rate (tokens per second), burst (capacity), cost of this request,
-- extra tokens wanted beyond the cost (a lease, taken only as far as the bucket holds
-- them), tokens handed back (a lease's unspent rest).
-- Returns {allowed (0/1), milliseconds until it would be allowed, tokens left,
-- extra tokens granted}.
-- Time comes from the server, so API processes with skewed clocks share one bucket.
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local want = tonumber(ARGV[4] or '0')
local refund = tonumber(ARGV[5] or '0')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or burst
local ts = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / 1000 + refund)
local allowed = 0
local wait_ms = 0
local granted = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
  granted = math.max(0, math.min(want, math.floor(tokens)))
  tokens = tokens - granted
else
  wait_ms = math.ceil((cost - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
-- A full bucket carries no information: let it expire once it would be full again.
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return {allowed, wait_ms, math.floor(tokens), granted}
