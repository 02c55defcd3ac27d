package redisstore

// The scripts of ownership: claims, releases, checkpoints and restores (the prelude and the logging they share are in scripts.go).

// claimFn decides the claim of one partition p, whose owners value is cur
// (false: no record), for the live session s of member m: it answers the
// epoch p gets, or nil and the reply ({'claimed', owner} or {'corrupt',
// key, field}). live caches alive() per owner: sessions do not change
// after the script's prune.
const claimFn = `
local function claim_epoch(sess, owners, live, p, cur, s)
  local prev = '0'
  if cur then
    local e, owner = parse(cur)
    if not e then return nil, {'corrupt', owners, p} end
    -- A record naming s itself gets a new epoch too (see store.Store.ClaimBatch).
    if owner ~= '' and owner ~= s then
      local a = live[owner]
      if a == nil then
        a = alive(sess, owner)
        live[owner] = a
      end
      if a then return nil, {'claimed', owner} end
    end
    prev = e
  end
  local e = dec_inc(prev)
  if dec_gt(now_s, e) then e = now_s end
  if #e > 20 or (#e == 20 and e > MAXE) then return nil, {'corrupt', owners, p} end
  return e
end

-- member_of returns the member of session s, or nil if its record is bad.
local function member_of(meta, s)
  local mv = redis.call('HGET', meta, s)
  return mv and string.match(mv, '^%d+:(.*)$')
end
`

// KEYS: sessions, members, owners, checkpoints, epochat, givenback. ARGV:
// session, then the partitions (no partition twice: store.ValidateBatch).
// Answers {'ok', member, {result}...}, one per partition: {'ok', epoch,
// checkpoint, mark}, {'claimed', owner} or {'corrupt', key, field}. Each
// claim is logged and its time noted in epochat; the record's GivenBack
// mark (in givenback) is kept, unless it names s: the giver's claim clears
// it. The hashes are read and written with one command each for the whole
// batch, not per partition, and alive() once per owner: 1,000 claims cost
// the server 10.9 ms this way, 14.4 ms with five commands per partition
// (BenchmarkServerCost/ClaimBatch1000, median of 7 runs at load 17-19 on
// two cores).
var claimBatchScript = logged(claimFn + `
local sess, meta, owners, ckpt, at, gb = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local s = ARGV[1]
prune(sess, meta)
if not alive(sess, s) then return {'expired'} end
local m = member_of(meta, s)
if not m then return {'corrupt', meta, s} end
local out = {'ok', m}
if NARGV < 2 then return out end
local curs = redis.call('HMGET', owners, unpack(ARGV, 2, NARGV))
local live = {}
local ps, ow, atw = {}, {}, {}
local sm = ':' .. s .. ':' .. m
for i = 2, NARGV do
  local p = ARGV[i]
  local e, r = claim_epoch(sess, owners, live, p, curs[i - 1], s)
  if e then
    ps[#ps + 1] = p
    ow[#ow + 1] = p
    ow[#ow + 1] = e .. sm
    atw[#atw + 1] = p
    atw[#atw + 1] = e .. ':' .. now_s
    append('C\n' .. p .. '\n' .. s .. '\n' .. e .. '\n' .. m)
    r = {'ok', e}
  end
  out[i + 1] = r
end
if #ps == 0 then return out end
-- The reads come before the claims' writes: an owners, givenback or
-- checkpoints key of another type fails the script before any claim is
-- written.
local marks = redis.call('HMGET', gb, unpack(ps))
local cks = redis.call('HMGET', ckpt, unpack(ps))
local clear = {}
local j = 0
for i = 3, #out do
  local r = out[i]
  if r[1] == 'ok' then
    j = j + 1
    local mark = marks[j]
    if mark == s then
      clear[#clear + 1] = ps[j]
      mark = false
    end
    r[3] = cks[j]
    r[4] = mark or ''
  end
end
redis.call('HSET', owners, unpack(ow))
redis.call('HSET', at, unpack(atw))
if #clear > 0 then redis.call('HDEL', gb, unpack(clear)) end
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
// pairs (no partition twice: store.ValidateReleaseBatch). Answers {'ok',
// {result}...}, one per pair, as release_one's: the owners hash is read and
// written with one command each for the whole batch, and the session's
// liveness read once, not per pair: 1,000 releases cost the server 10.8 ms
// this way, 15.6 ms per pair (BenchmarkServerCost/ReleaseBatch1000, median
// of 7 runs at load 17-19 on two cores).
var releaseBatchScript = logged(`
local sess, meta, owners = KEYS[1], KEYS[2], KEYS[3]
prune(sess, meta)
local out = {'ok'}
if NARGV < 2 then return out end
local s = ARGV[1]
local live = s ~= '' and alive(sess, s)
local ps = {}
for i = 2, NARGV, 2 do ps[#ps + 1] = ARGV[i] end
local curs = redis.call('HMGET', owners, unpack(ps))
local OK, NOTOWNER = {'ok'}, {'notowner'}
local w = {}
for j = 1, #ps do
  local p, cur, r = ps[j], curs[j], NOTOWNER
  if cur then
    local e, owner = parse(cur)
    if not e then
      r = {'corrupt', owners, p}
    elseif live and e == ARGV[2 * j + 1] and owner == s then
      w[#w + 1] = p
      w[#w + 1] = e .. '::'
      append('R\n' .. p .. '\n' .. s .. '\n' .. e)
      r = OK
    end
  end
  out[j + 1] = r
end
if #w > 0 then redis.call('HSET', owners, unpack(w)) end
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
// Answers {'ok', last} (the log can be continued: XREAD reads on; last,
// its last sequence, tells Changes whether to wait), {'gone', reason} or
// {'nolog'}. It reads no entry: XREAD delivers them without a
// trip through Lua tables, several times cheaper per entry.
var changesScript = newScript(`
local v = redis.pcall('GET', KEYS[1])
local g, n
if type(v) == 'string' then g, n = string.match(v, '^([1-9]%d*):(%d+)$') end
if not g then return {'nolog'} end
local after, last = tonumber(ARGV[2]), tonumber(n)
if after > last then return {'gone', 'the log ends at ' .. n} end
if after == last and g ~= ARGV[1] then return {'gone', 'the log is another history (tag ' .. g .. ')'} end
return {'ok', n}
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
