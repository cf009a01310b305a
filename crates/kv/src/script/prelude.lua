-- xlane kv's scripting prelude (runs once per Lua state, before any
-- script). It builds what scripts see: a read-only global environment
-- with Redis's API, the error handler that gives errors Redis's shape,
-- and the entry points the engine calls. The Rust side passes its helpers
-- in `R`; `run.call` is set only while a script runs.
local R = ...
local dbg = debug
local error, type, tostring, tonumber, setmetatable, rawget, rawset, select =
      error, type, tostring, tonumber, setmetatable, rawget, rawset, select
local loadstring, setfenv, xpcall, pairs = loadstring, setfenv, xpcall, pairs
local HERE = '=xlane'

-- Tables scripts may read but not change (and cannot unprotect: the
-- metatable is hidden, rawset refuses them).
local readonly = setmetatable({}, {__mode = 'k'})
local function frozen(t)
  local view = {}
  readonly[view] = true
  return setmetatable(view, {
    __index = t,
    __newindex = function() error('Attempt to modify a readonly table', 2) end,
    __metatable = false,
  })
end

local function guarded_rawset(t, k, v)
  if readonly[t] then error('Attempt to modify a readonly table', 2) end
  return rawset(t, k, v)
end

-- Per run: `call` (the Rust function that runs a command), `resp`.
local run = {resp = 2}
local loading = false
local registered = nil

-- The words go to Rust in a table: a call may have thousands.
local function call_checked(...)
  local c = run.call
  if not c then
    error({err = 'ERR redis.call is not available while a library loads'}, 0)
  end
  return c(select('#', ...), {...})
end

local api = {}
function api.call(...)
  local r, failed = call_checked(...)
  if failed then error(r, 0) end
  return r
end
function api.pcall(...)
  local r = call_checked(...)
  return r
end
function api.error_reply(msg)
  if type(msg) ~= 'string' then error('wrong number or type of arguments', 2) end
  if msg:sub(1, 1) == '-' then msg = msg:sub(2) end
  if msg == '' then msg = 'ERR' end
  return {err = msg}
end
function api.status_reply(msg)
  if type(msg) ~= 'string' then error('wrong number or type of arguments', 2) end
  return {ok = msg}
end
function api.sha1hex(s)
  if type(s) ~= 'string' and type(s) ~= 'number' then
    error('wrong number of arguments', 2)
  end
  return R.sha1hex(tostring(s))
end
function api.log(level, ...)
  if select('#', ...) == 0 then error('redis.log() requires two arguments or more.', 2) end
  if type(level) ~= 'number' then error('First argument must be a number (log level).', 2) end
  if level < 0 or level > 3 then error('Invalid debug level.', 2) end
end
function api.setresp(v)
  if v ~= 2 and v ~= 3 then error('RESP version must be 2 or 3.', 2) end
  run.resp = v
  R.setresp(v)
end
function api.set_repl(v)
  if type(v) ~= 'number' then error('wrong number or type of arguments', 2) end
  if v < 0 or v > 3 then error('Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.', 2) end
end
function api.acl_check_cmd(...)
  local c = run.call
  if not c then error({err = 'ERR redis.acl_check_cmd is not available while a library loads'}, 0) end
  local r, failed = c(select('#', ...), {...}, true)
  if failed then error(r, 0) end
  return r
end
function api.replicate_commands() return true end
function api.breakpoint() return false end
function api.debug() end
api.LOG_DEBUG, api.LOG_VERBOSE, api.LOG_NOTICE, api.LOG_WARNING = 0, 1, 2, 3
api.REPL_NONE, api.REPL_AOF, api.REPL_SLAVE, api.REPL_REPLICA, api.REPL_ALL = 0, 1, 2, 2, 3
api.REDIS_VERSION = R.version
api.REDIS_VERSION_NUM = R.version_num

-- What a library's code sees while it loads: `redis` with
-- register_function, log and the version, nothing else (any other name is
-- an error, as a missing global is).
local function missing(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end
local load_api = {}
for _, k in ipairs({'log', 'LOG_DEBUG', 'LOG_VERBOSE', 'LOG_NOTICE', 'LOG_WARNING',
                    'REDIS_VERSION', 'REDIS_VERSION_NUM'}) do
  load_api[k] = api[k]
end

local known_flags = {['no-writes'] = true, ['allow-oom'] = true, ['allow-stale'] = true,
                     ['no-cluster'] = true, ['allow-cross-slot-keys'] = true}

local function valid_name(n)
  return type(n) == 'string' and n ~= '' and not n:find('[^%w_]')
end

function load_api.register_function(...)
  if not loading then
    error('redis.register_function can only be called on FUNCTION LOAD command', 2)
  end
  local argc = select('#', ...)
  if argc < 1 or argc > 2 then
    error('wrong number of arguments to redis.register_function', 2)
  end
  local a, b = ...
  local name, callback, flags, description
  if argc == 1 then
    if type(a) ~= 'table' then
      error('calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).', 2)
    end
    for k, v in pairs(a) do
      if type(k) ~= 'string' then
        error('named argument key given to redis.register_function is not a string', 2)
      elseif k == 'function_name' then
        if type(v) ~= 'string' then error('function_name argument given to redis.register_function must be a string', 2) end
        name = v
      elseif k == 'description' then
        if type(v) ~= 'string' then error('description argument given to redis.register_function must be a string', 2) end
        description = v
      elseif k == 'callback' then
        if type(v) ~= 'function' then error('callback argument given to redis.register_function must be a function', 2) end
        callback = v
      elseif k == 'flags' then
        if type(v) ~= 'table' then error('flags argument to redis.register_function must be a table representing function flags', 2) end
        flags = v
      else
        error('unknown argument given to redis.register_function', 2)
      end
    end
    if name == nil then error('redis.register_function must get a function name argument', 2) end
    if callback == nil then error('redis.register_function must get a callback argument', 2) end
  else
    if type(a) ~= 'string' then error('first argument to redis.register_function must be a string', 2) end
    if type(b) ~= 'function' then error('second argument to redis.register_function must be a function', 2) end
    name, callback = a, b
  end
  local fl = {}
  for _, f in ipairs(flags or {}) do
    if type(f) ~= 'string' or not known_flags[f] then error('unknown flag given', 2) end
    fl[#fl + 1] = f
  end
  if not valid_name(name) then
    error('Library names can only contain letters, numbers, or underscores(_) and must be at least one character long', 2)
  end
  for _, r in ipairs(registered) do
    if r.name == name then error('Function already exists in the library', 2) end
  end
  registered[#registered + 1] = {name = name, callback = callback, flags = fl, description = description}
end

local load_redis = setmetatable({}, {
  __index = function(_, k)
    local v = load_api[k]
    if v == nil then missing(_, k) end
    return v
  end,
  __newindex = function() error('Attempt to modify a readonly table', 2) end,
  __metatable = false,
})
readonly[load_redis] = true
local load_env = {redis = load_redis}
local redis = frozen(api)

-- math.random and math.randomseed draw from the run's generator (seeded
-- by the op), so every member draws the same.
local math_lib = {}
for k, v in pairs(math) do math_lib[k] = v end
math_lib.random = R.random
math_lib.randomseed = R.randomseed

local string_lib = {}
for k, v in pairs(string) do string_lib[k] = v end
local rep = string.rep
function string_lib.rep(s, n, ...)
  if type(n) == 'number' and type(s) == 'string' and #s * n > R.max_string then
    error('resulting string too large', 2)
  end
  return rep(s, n, ...)
end

local env = {}
local G = setmetatable({}, {
  __index = function(_, k)
    local v = (loading and load_env or env)[k]
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = function() error('Attempt to modify a readonly table', 2) end,
  __metatable = false,
})
readonly[G] = true

for _, k in ipairs({'assert', 'error', 'ipairs', 'next', 'pairs', 'rawequal',
                    'rawget', 'select', 'setmetatable', 'getmetatable', 'tonumber',
                    'tostring', 'type', 'unpack', '_VERSION'}) do
  env[k] = _G[k]
end
env.rawset = guarded_rawset
-- A read-only table's metatable can be neither replaced nor reached:
-- getmetatable gives a read-only stand-in.
local raw_setmetatable, raw_getmetatable = setmetatable, getmetatable
local sealed = frozen({})
env.setmetatable = function(t, m)
  if readonly[t] then error('Attempt to modify a readonly table', 2) end
  return raw_setmetatable(t, m)
end
env.getmetatable = function(t)
  if readonly[t] then return sealed end
  return raw_getmetatable(t)
end

-- Once the budget is spent, what catches errors raises it again: the
-- script ends whatever it wraps in pcall.
local over = R.over
local function rethrow(ok, ...)
  if not ok and over() then error('Script ran past its instruction budget', 0) end
  return ok, ...
end
local raw_pcall, raw_xpcall, raw_resume = pcall, xpcall, coroutine.resume
env.pcall = function(f, ...) return rethrow(raw_pcall(f, ...)) end
env.xpcall = function(f, h)
  local function handler(e)
    if over() then return e end
    return h(e)
  end
  return rethrow(raw_xpcall(f, handler))
end
local coroutine_lib = {}
for k, v in pairs(coroutine) do coroutine_lib[k] = v end
coroutine_lib.resume = function(co, ...) return rethrow(raw_resume(co, ...)) end
-- Lua bytecode is refused (it can break the VM's invariants): only source
-- loads.
local function is_binary(s)
  return type(s) == 'string' and s:byte(1) == 27
end
env.loadstring = function(s, name)
  if is_binary(s) then return nil, 'binary code loading is disabled' end
  local f, e = loadstring(s, name)
  if f then setfenv(f, G) end
  return f, e
end
env.coroutine = frozen(coroutine_lib)
env.string = frozen(string_lib)
env.table = frozen(table)
env.math = frozen(math_lib)
env.bit = frozen(R.bit)
env.cjson = frozen(R.cjson)
env.cmsgpack = frozen(R.cmsgpack)
env.struct = frozen(R.struct)
env.redis = redis
env._G = G

-- The frame an error happened in: the first one of the script's own code.
local function where(level)
  while true do
    local i = dbg.getinfo(level, 'Sl')
    if not i then return nil end
    if i.what ~= 'C' and i.what ~= 'tail' and i.source ~= HERE then return i end
    level = level + 1
  end
end

local function on_error(e)
  if type(e) ~= 'table' or readonly[e] then
    e = {err = 'ERR ' .. tostring(e)}
  end
  local i = where(2)
  if i then
    rawset(e, 'source', i.source)
    rawset(e, 'line', i.currentline)
  end
  return e
end

local entry = {}

-- Compiles a script body (`name` is its chunk name): the function, or
-- nil and the message.
function entry.compile(body, name)
  if is_binary(body) then return nil, 'binary code loading is disabled' end
  local f, e = loadstring(body, name)
  if not f then return nil, e end
  setfenv(f, G)
  return f
end

-- Runs an EVAL script: ok, value (or false, error table).
function entry.eval(f, keys, argv, call)
  env.KEYS, env.ARGV = keys, argv
  run.call, run.resp = call, 2
  local ok, v = xpcall(f, on_error)
  env.KEYS, env.ARGV, run.call = nil, nil, nil
  return ok, v
end

-- Runs a function of a library: ok, value (or false, error table).
function entry.fcall(f, keys, argv, call)
  run.call, run.resp = call, 2
  local ok, v = xpcall(function() return f(keys, argv) end, on_error)
  run.call = nil
  return ok, v
end

-- Runs a library's code (compiled with entry.compile): true and the list
-- of {name, callback, flags, description}, or false and the error table.
function entry.load(f)
  loading, registered = true, {}
  local ok, e = xpcall(f, on_error)
  local got = registered
  loading, registered = false, nil
  if not ok then return false, e end
  return true, got
end

return entry
