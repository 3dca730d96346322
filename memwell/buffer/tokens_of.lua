-- The token count of one buffered turn (JSON); shared by append.lua and remove.lua,
-- in front of which session_buffer.py puts it.
local function tokens_of(turn)
  -- memwell.buffer serialises "tokens" first, so a prefix match avoids decoding the
  -- whole (possibly long) content. cjson is the fallback for JSON written by hand;
  -- pcall so an undecodable element cannot wedge the session forever.
  local n = string.match(turn, '^{"tokens":(%d+)[,}]')
  if n then
    return tonumber(n)
  end
  local ok, decoded = pcall(cjson.decode, turn)
  if ok and type(decoded) == 'table' and tonumber(decoded.tokens) then
    return tonumber(decoded.tokens)
  end
  return 0
end
