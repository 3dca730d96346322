-- Remove named turns from a session buffer and keep the token total in step.
--
-- KEYS[1] turn list (JSON strings, oldest first)
-- KEYS[2] token total of the list
-- ARGV[1..] turn ids to remove
--
-- Returns how many turns were removed. Atomic with append.lua: an append cannot land
-- between the recount and the write of the total. `tokens_of` comes from tokens_of.lua.

local doomed = {}
for i = 1, #ARGV do
  doomed[ARGV[i]] = true
end

local function turn_id(turn)
  local ok, decoded = pcall(cjson.decode, turn)
  if ok and type(decoded) == 'table' and type(decoded.turn_id) == 'string' then
    return decoded.turn_id
  end
  return nil
end

local removed = 0
local total = 0
local left = 0
for _, turn in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  local id = turn_id(turn)
  if id ~= nil and doomed[id] then
    removed = removed + redis.call('LREM', KEYS[1], 1, turn)
  else
    total = total + tokens_of(turn)
    left = left + 1
  end
end

if removed > 0 then
  if left == 0 then
    redis.call('DEL', KEYS[1], KEYS[2])
  else
    -- The total lives as long as the list (append.lua gives both one TTL).
    local ttl = redis.call('PTTL', KEYS[1])
    if ttl > 0 then
      redis.call('SET', KEYS[2], total, 'PX', ttl)
    else
      redis.call('SET', KEYS[2], total)
    end
  end
end
return removed
