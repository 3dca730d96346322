-- Append turns to a session buffer and evict the oldest past the token budget.
--
-- KEYS[1] turn list (JSON strings, oldest first)
-- KEYS[2] token total of the list
-- KEYS[3] running summary (only its TTL is touched)
-- ARGV[1] token budget, ARGV[2] TTL in seconds, ARGV[3..] turn JSON, oldest first
--
-- Returns the evicted turns' JSON, oldest first.
--
-- Atomic, so concurrent appends to one session can never leave the total out of step
-- with the list or evict the same turn twice. `tokens_of` comes from tokens_of.lua,
-- which session_buffer.py puts in front of this script.

local budget = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])

local len = redis.call('LLEN', KEYS[1])
local total = tonumber(redis.call('GET', KEYS[2]))
if total == nil or len == 0 then
  -- One of the two keys was lost on its own (maxmemory eviction, a manual DEL):
  -- recount from the list instead of carrying a wrong total forever.
  total = 0
  for _, turn in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
    total = total + tokens_of(turn)
  end
end

for i = 3, #ARGV do
  redis.call('RPUSH', KEYS[1], ARGV[i])
  total = total + tokens_of(ARGV[i])
  len = len + 1
end

-- The newest turn always stays, even when it alone is over the budget.
local evicted = {}
while total > budget and len > 1 do
  local turn = redis.call('LPOP', KEYS[1])
  total = total - tokens_of(turn)
  len = len - 1
  evicted[#evicted + 1] = turn
end

redis.call('SET', KEYS[2], total, 'EX', ttl)
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[3], ttl)
return evicted
