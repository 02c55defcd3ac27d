package redisstore

// The scripts of ownership: claims, releases, checkpoints and restores (the prelude and the logging they share are in scripts.go).

// claimFn claims partition p for the live session s of member m: it
// answers {'ok', epoch, checkpoint, mark}, {'claimed', owner} or {'corrupt',
// key, field}, logs a claim and notes its time in epochat (at). The
// record's GivenBack mark (in gb) is kept, unless it names s: the giver's
// claim clears it.
const claimFn = `
local function claim_one(sess, owners, ckpt, at, gb, p, s, m)
  local prev = '0'
  local cur = redis.call('HGET', owners, p)
  if cur then
    local e, owner = parse(cur)
    if not e then return {'corrupt', owners, p} end
    -- A record naming s itself gets a new epoch too (see store.Store.ClaimBatch).
    if owner ~= '' and owner ~= s and alive(sess, owner) then return {'claimed', owner} end
    prev = e
  end
  local e = dec_inc(prev)
  if dec_gt(now_s, e) then e = now_s end
  if #e > 20 or (#e == 20 and e > MAXE) then return {'corrupt', owners, p} end
  redis.call('HSET', owners, p, e .. ':' .. s .. ':' .. m)
  redis.call('HSET', at, p, e .. ':' .. now_s)
  local mark = redis.call('HGET', gb, p)
  if mark == s then
    redis.call('HDEL', gb, p)
    mark = false
  end
  append('C\n' .. p .. '\n' .. s .. '\n' .. e .. '\n' .. m)
  return {'ok', e, redis.call('HGET', ckpt, p), mark or ''}
end

-- member_of returns the member of session s, or nil if its record is bad.
local function member_of(meta, s)
  local mv = redis.call('HGET', meta, s)
  return mv and string.match(mv, '^%d+:(.*)$')
end
`

// KEYS: sessions, members, owners, checkpoints, epochat, givenback. ARGV:
// session, then the partitions. Answers {'ok', member, {result}...}, one
// claim_one result per partition.
var claimBatchScript = logged(claimFn + `
local sess, meta, owners, ckpt, at, gb = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local s = ARGV[1]
prune(sess, meta)
if not alive(sess, s) then return {'expired'} end
local m = member_of(meta, s)
if not m then return {'corrupt', meta, s} end
local out = {'ok', m}
for i = 2, NARGV do
  out[#out + 1] = claim_one(sess, owners, ckpt, at, gb, ARGV[i], s, m)
end
return out
`)

// releaseFn releases partition p held by session s at epoch: it answers
// {'ok'}, {'notowner'} or {'corrupt', key, field}, and logs a release. With
// gb (the givenback key) it is a GiveBack: the record's mark becomes s and
// the entry carries s as a fifth field.
const releaseFn = `
local function release_one(sess, owners, p, s, epoch, gb)
  local cur = redis.call('HGET', owners, p)
  if not cur then return {'notowner'} end
  local e, owner = parse(cur)
  if not e then return {'corrupt', owners, p} end
  if e ~= epoch or owner ~= s or s == '' or not alive(sess, s) then return {'notowner'} end
  redis.call('HSET', owners, p, e .. '::')
  if gb then
    redis.call('HSET', gb, p, s)
    append('R\n' .. p .. '\n' .. s .. '\n' .. e .. '\n' .. s)
  else
    append('R\n' .. p .. '\n' .. s .. '\n' .. e)
  end
  return {'ok'}
end
`

// KEYS: sessions, members, owners, givenback. ARGV: partition, session,
// epoch.
var giveBackScript = logged(releaseFn + `
local sess, meta, owners, gb = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
prune(sess, meta)
return release_one(sess, owners, ARGV[1], ARGV[2], ARGV[3], gb)
`)

// KEYS: sessions, members, owners. ARGV: session, then partition, epoch
// pairs. Answers {'ok', {result}...}, one per pair.
var releaseBatchScript = logged(releaseFn + `
local sess, meta, owners = KEYS[1], KEYS[2], KEYS[3]
prune(sess, meta)
local out = {'ok'}
for i = 2, NARGV, 2 do
  out[#out + 1] = release_one(sess, owners, ARGV[i], ARGV[1], ARGV[i + 1])
end
return out
`)

// KEYS: sessions, owners, checkpoints, ckptat. ARGV: partition, epoch, value.
// Checkpoint neither prunes nor logs: it is the hot path.
var checkpointScript = newScript(prelude + `
local sess, owners, ckpt = KEYS[1], KEYS[2], KEYS[3]
local p, epoch = ARGV[1], ARGV[2]
local cur = redis.call('HGET', owners, p)
if not cur then return {'notowner'} end
local e, owner = parse(cur)
if not e then return {'corrupt', owners, p} end
if e ~= epoch or owner == '' or not alive(sess, owner) then return {'notowner'} end
redis.call('HSET', ckpt, p, ARGV[3])
redis.call('HSET', KEYS[4], p, now_s)
return {'ok'}
`)

// KEYS: owners, checkpoints, epochat, ckptat, givenback. ARGV: partition,
// epoch, value.
// Restore writes where the partition has no record, or a released record
// with a lower epoch (itself restored after a data loss, by a member that
// lost the partition earlier), and leaves it without a GivenBack mark.
var restoreScript = logged(`
local owners, ckpt = KEYS[1], KEYS[2]
local p, epoch = ARGV[1], ARGV[2]
local cur = redis.call('HGET', owners, p)
if cur then
  local e, owner = parse(cur)
  if not e then return {'corrupt', owners, p} end
  if owner ~= '' or not dec_gt(epoch, e) then return {'notowner'} end
end
redis.call('HSET', owners, p, epoch .. '::')
redis.call('HSET', ckpt, p, ARGV[3])
redis.call('HSET', KEYS[3], p, epoch .. ':' .. now_s)
redis.call('HSET', KEYS[4], p, now_s)
redis.call('HDEL', KEYS[5], p)
append('T\n' .. p .. '\n' .. epoch)
return {'ok'}
`)

// KEYS: version. ARGV: tag, seq (the version to read after).
// Answers {'ok'} (the log can be continued: XREAD reads on), {'gone',
// reason} or {'nolog'}. It reads no entry: XREAD delivers them without a
// trip through Lua tables, several times cheaper per entry.
var changesScript = newScript(`
local v = redis.pcall('GET', KEYS[1])
local g, n
if type(v) == 'string' then g, n = string.match(v, '^([1-9]%d*):(%d+)$') end
if not g then return {'nolog'} end
local after, last = tonumber(ARGV[2]), tonumber(n)
if after > last then return {'gone', 'the log ends at ' .. n} end
if after == last and g ~= ARGV[1] then return {'gone', 'the log is another history (tag ' .. g .. ')'} end
return {'ok'}
`)

// KEYS: owners, checkpoints, epochat, ckptat, givenback. ARGV: the
// partitions. Answers {now, owners, checkpoints, epochat, ckptat,
// givenback}: the server time and one HMGET of each hash (false where a
// field is missing). It reads only: Records is a view, and never expires
// sessions.
var recordsScript = newScript(prelude + `
return {
  now_s,
  redis.call('HMGET', KEYS[1], unpack(ARGV)),
  redis.call('HMGET', KEYS[2], unpack(ARGV)),
  redis.call('HMGET', KEYS[3], unpack(ARGV)),
  redis.call('HMGET', KEYS[4], unpack(ARGV)),
  redis.call('HMGET', KEYS[5], unpack(ARGV)),
}
`)
