"""The job records' Redis scripts (``app.core.records.JobRecords`` runs them): each transition, wait and admission
is one script, so it is atomic against every other client of the same keys."""

# The jobs a waiting job still waits for: the sum of its count's left:{kind} fields (KEYS[key]).
LEFT = """
local function left(key)
  local fields = redis.call('HGETALL', key)
  local sum = 0
  for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, 5) == 'left:' then sum = sum + tonumber(fields[i + 1]) end
  end
  return sum
end
"""

# A transition: one guarded write and, where it ends the job, its countdown in every job that waits for it.
# KEYS[1] the job; for a write of a final status, then the record and the count of each job that waits for it.
# ARGV[1] the counts' time to live (s); ARGV[2] the status queued and ARGV[3] the time, JSON; ARGV[4] how many
# statuses the job may be in, those statuses, the attempt it must be on ('' for any), then field, value, ...
# Returns {0} where it did not apply; else {1, k...}, each k the index in KEYS of a waiting job's record whose count
# reached 0 here while it is queued (its queued_at set: it is to be queued now).
TRANSITION = (
    LEFT
    + """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {0} end
local n_allowed = tonumber(ARGV[4])
local allowed = false
for i = 5, n_allowed + 4 do
  if ARGV[i] == status then allowed = true end
end
if not allowed then return {0} end
local attempt = ARGV[n_allowed + 5]
if attempt ~= '' and redis.call('HGET', KEYS[1], 'attempt') ~= attempt then return {0} end
local fields = {}
for i = n_allowed + 6, #ARGV do fields[#fields + 1] = ARGV[i] end
if #fields > 0 then redis.call('HSET', KEYS[1], unpack(fields)) end
local applied = {1}
if #KEYS > 1 then
  local kind = 'left:' .. cjson.decode(redis.call('HGET', KEYS[1], 'kind'))
  for k = 2, #KEYS, 2 do
    redis.call('HINCRBY', KEYS[k + 1], kind, -1)
    redis.call('EXPIRE', KEYS[k + 1], ARGV[1])
    if left(KEYS[k + 1]) == 0 and redis.call('HGET', KEYS[k], 'status') == ARGV[2] then
      redis.call('HSET', KEYS[k], 'queued_at', ARGV[3])
      applied[#applied + 1] = k
    end
  end
end
return applied
"""
)

# What a job just recorded waits for: KEYS[1] its record, KEYS[2] its count; ARGV[1] the count's time to live (s),
# ARGV[2] the time (JSON), then kind, how many, kind, how many, ... Adds them to what ended before (below 0), and
# returns 1 where nothing is left (its queued_at set: it is to be queued now), else 0.
WAIT_FOR = (
    LEFT
    + """
for i = 3, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[2], 'left:' .. ARGV[i], ARGV[i + 1])
  redis.call('HSET', KEYS[2], 'total:' .. ARGV[i], ARGV[i + 1])
end
redis.call('EXPIRE', KEYS[2], ARGV[1])
if left(KEYS[2]) == 0 then
  redis.call('HSET', KEYS[1], 'queued_at', ARGV[2])
  return 1
end
return 0
"""
)


# The tenant's active work units (KEYS[1] its admitted submissions, sorted set by admission time; KEYS[2] their units,
# hash): units of submissions no longer admitted are dropped, and a submission admitted before units were counted
# counts one.
HELD = """
local function held()
  local units = 0
  for _, job in ipairs(redis.call('HKEYS', KEYS[2])) do
    if redis.call('ZSCORE', KEYS[1], job) then
      units = units + tonumber(redis.call('HGET', KEYS[2], job))
    else
      redis.call('HDEL', KEYS[2], job)
    end
  end
  return units + redis.call('ZCARD', KEYS[1]) - redis.call('HLEN', KEYS[2])
end
"""

# admit: ARGV the job, its units, now, the limits of submissions and of units, then admitted submissions that
# finished. Prunes those, then admits the job unless a limit would be passed. Returns {admitted 0/1, submissions,
# units} as they were before the job.
ADMIT = (
    HELD
    + """
for i = 6, #ARGV do
  redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('HDEL', KEYS[2], ARGV[i])
end
local jobs = redis.call('ZCARD', KEYS[1])
local units = held()
if jobs + 1 > tonumber(ARGV[4]) or units + tonumber(ARGV[2]) > tonumber(ARGV[5]) then
  return {0, jobs, units}
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return {1, jobs, units}
"""
)

# admit_more: ARGV the job, more units, now, the limit of units. Adds them to the job's (and makes now its admission
# time: a submission still adding is not pruned) unless the tenant's units would pass the limit. Returns {added 0/1,
# the tenant's units, the job's} as they were.
ADMIT_MORE = (
    HELD
    + """
local own = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
local units = held()
if units + tonumber(ARGV[2]) > tonumber(ARGV[4]) then return {0, units, own} end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], own + tonumber(ARGV[2]))
return {1, units, own}
"""
)
