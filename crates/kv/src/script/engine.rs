//! The Lua engine: one Lua 5.1 state per thread, with the prelude's
//! sandbox (`prelude.lua`), the libraries Redis ships (`bit`, `cjson`,
//! `cmsgpack`, `struct`) and a cache of compiled scripts and loaded
//! libraries keyed by their bytes.
//!
//! The state holds nothing a script's result depends on: globals are
//! read-only, `math.random` restarts from the run's seed, the clock is the
//! op's, and the compiled code is the same for the same bytes. So a member
//! whose state was built later (after a restart, on another thread) runs a
//! script exactly as one that ran every earlier script.
//!
//! A run is bounded by a count of Lua VM instructions, not by time: the
//! count hook fires every [`HOOK_STEP`] instructions and raises once the
//! run has used its budget. Every member counts the same instructions, so
//! every member stops the same script at the same place.

use super::convert::{from_lua, to_lua};
use super::state::{sha1_hex, Flags, FunctionMeta, Library, Sha};
use crate::resp::Reply;
use crate::value::SplitMix;
use mlua::{Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Value, VmState};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

/// Instructions between two checks of the budget.
pub const HOOK_STEP: u32 = 1000;

/// Compiled scripts kept per thread before the cache starts over.
const MAX_COMPILED: usize = 4096;

/// The longest string a script may build with `string.rep`.
const MAX_STRING: f64 = (512u64 << 20) as f64;

/// What a script's commands run against: the member's store at the op's
/// place in the log.
pub trait Host {
    /// Runs command `args` from the script; its reply (an error reply when
    /// the command is refused or fails).
    fn call(&mut self, args: &[Vec<u8>]) -> Reply;

    /// `redis.acl_check_cmd`: whether the script's user may run `args`;
    /// the error reply for a command that does not exist.
    fn acl_check(&mut self, args: &[Vec<u8>]) -> Result<bool, Reply>;
}

/// The end of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The script returned (its reply) or raised (an error reply).
    Done(Reply),
    /// It ran past its instruction budget: the caller undoes its writes
    /// and answers this error.
    OverBudget(Reply),
}

/// One run's inputs.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// `KEYS`.
    pub keys: &'a [Vec<u8>],
    /// `ARGV`.
    pub args: &'a [Vec<u8>],
    /// Seed of `math.random`.
    pub seed: u64,
    /// Lua VM instructions the run may use.
    pub budget: u64,
}

struct Engine {
    lua: Lua,
    entry: Table,
    compiled: HashMap<Sha, Function>,
    /// (library name, SHA1 of its code) to its functions by name.
    libs: HashMap<(Vec<u8>, Sha), HashMap<Vec<u8>, Function>>,
    /// Instructions left in the current run (signed: the hook may overrun
    /// by less than a step).
    left: Rc<Cell<i64>>,
    over: Rc<Cell<bool>>,
    rng: Rc<Cell<u64>>,
    resp3: Rc<Cell<bool>>,
}

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

fn with_engine<R>(f: impl FnOnce(&mut Engine) -> R) -> Result<R, Reply> {
    ENGINE.with(|cell| {
        let mut slot = cell.try_borrow_mut().map_err(|_| {
            Reply::err("ERR a script cannot run a script (the engine is busy on this thread)")
        })?;
        if slot.is_none() {
            *slot = Some(
                Engine::new()
                    .map_err(|e| Reply::err(format!("ERR the Lua engine did not start: {e}")))?,
            );
        }
        Ok(f(slot.as_mut().expect("engine just made")))
    })
}

impl Engine {
    fn new() -> mlua::Result<Engine> {
        // SAFETY of the unsafe constructor: the `debug` library is loaded
        // only for the prelude's error handler, which keeps it in a local;
        // scripts never see it (their globals are the prelude's table).
        let lua = unsafe {
            Lua::unsafe_new_with(
                StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG,
                LuaOptions::default(),
            )
        };
        let left = Rc::new(Cell::new(0i64));
        let over = Rc::new(Cell::new(false));
        let rng = Rc::new(Cell::new(0u64));
        let resp3 = Rc::new(Cell::new(false));
        let helpers = lua.create_table()?;
        helpers.set(
            "sha1hex",
            lua.create_function(|lua, s: mlua::String| lua.create_string(sha1_hex(&s.as_bytes())))?,
        )?;
        let r = rng.clone();
        helpers.set(
            "random",
            lua.create_function(move |_, (m, n): (Option<f64>, Option<f64>)| {
                let mut g = SplitMix::new(r.get());
                let x = g.next_u64();
                r.set(r.get().wrapping_add(0x9e37_79b9_7f4a_7c15));
                let unit = (x >> 11) as f64 / (1u64 << 53) as f64;
                match (m, n) {
                    (None, _) => Ok(unit),
                    (Some(m), None) if m >= 1.0 => Ok((unit * m).floor() + 1.0),
                    (Some(m), Some(n)) if m <= n => Ok((unit * (n - m + 1.0)).floor() + m),
                    _ => Err(mlua::Error::runtime("interval is empty")),
                }
            })?,
        )?;
        let r = rng.clone();
        helpers.set(
            "randomseed",
            lua.create_function(move |_, seed: f64| {
                r.set(SplitMix::new(seed.to_bits()).next_u64());
                Ok(())
            })?,
        )?;
        let o = over.clone();
        helpers.set("over", lua.create_function(move |_, ()| Ok(o.get()))?)?;
        let r3 = resp3.clone();
        helpers.set(
            "setresp",
            lua.create_function(move |_, v: i64| {
                r3.set(v == 3);
                Ok(())
            })?,
        )?;
        helpers.set("max_string", MAX_STRING)?;
        helpers.set("version", crate::info::REDIS_VERSION)?;
        helpers.set("version_num", version_num(crate::info::REDIS_VERSION))?;
        helpers.set("bit", super::libs::bit(&lua)?)?;
        helpers.set("cjson", super::libs::cjson(&lua)?)?;
        helpers.set("cmsgpack", super::libs::cmsgpack(&lua)?)?;
        helpers.set("struct", super::libs::structlib(&lua)?)?;
        let entry: Table = lua
            .load(include_str!("prelude.lua"))
            .set_name("=xlane")
            .call(helpers)?;
        budget_hook(&lua, &left, &over)?;
        Ok(Engine {
            lua,
            entry,
            compiled: HashMap::new(),
            libs: HashMap::new(),
            left,
            over,
            rng,
            resp3,
        })
    }

    /// Readies a run: its budget, its seed, and the hook re-armed, so its
    /// instructions count from the first (Lua keeps the count between two
    /// firings of the hook, and a member's earlier runs must not move where
    /// this one stops).
    fn start(&mut self, run: &Run<'_>) -> mlua::Result<()> {
        self.left.set(i64::try_from(run.budget).unwrap_or(i64::MAX));
        self.over.set(false);
        self.rng.set(run.seed);
        self.resp3.set(false);
        super::libs::reset();
        budget_hook(&self.lua, &self.left, &self.over)
    }

    /// Compiles `body`. Compiling is not metered: whether a member has the
    /// code compiled already differs from member to member, so it must not
    /// change any run's outcome.
    fn compile(&mut self, body: &[u8], name: &str) -> Result<Function, String> {
        self.left.set(i64::MAX);
        self.over.set(false);
        let src = self
            .lua
            .create_string(uncomment_shebang(body))
            .map_err(|e| e.to_string())?;
        let (f, err): (Option<Function>, Option<String>) = self
            .entry
            .get::<Function>("compile")
            .and_then(|c| c.call((src, name)))
            .map_err(|e| e.to_string())?;
        f.ok_or_else(|| err.unwrap_or_default())
    }

    fn script(&mut self, sha: &Sha, body: &[u8]) -> Result<Function, Reply> {
        if let Some(f) = self.compiled.get(sha) {
            return Ok(f.clone());
        }
        let f = self
            .compile(body, "@user_script")
            .map_err(|e| Reply::err(format!("ERR Error compiling script (new function): {e}")))?;
        if self.compiled.len() >= MAX_COMPILED {
            self.compiled.clear();
        }
        self.compiled.insert(*sha, f.clone());
        Ok(f)
    }

    /// Runs `f` through the prelude's entry `how` (`eval` or `fcall`).
    fn invoke(
        &mut self,
        how: &str,
        f: Function,
        funcname: &str,
        run: Run<'_>,
        host: &mut dyn Host,
    ) -> Outcome {
        if let Err(e) = self.start(&run) {
            return Outcome::Done(Reply::err(format!("ERR the Lua engine did not start: {e}")));
        }
        let resp3 = self.resp3.clone();
        let over = self.over.clone();
        let left = self.left.clone();
        let result = self.lua.scope(|scope| {
            let lua = &self.lua;
            let keys = words_table(lua, run.keys)?;
            let argv = words_table(lua, run.args)?;
            let call = scope.create_function_mut(
                |lua, (n, args, acl): (usize, Table, Option<bool>)| {
                    if over.get() {
                        return Err(mlua::Error::runtime(
                            "Script ran past its instruction budget",
                        ));
                    }
                    let words = command_words(n, &args);
                    if acl == Some(true) {
                        return match words.and_then(|w| host.acl_check(&w)) {
                            Ok(b) => Ok((Value::Boolean(b), false)),
                            Err(r) => Ok((to_lua(lua, &r, false)?, true)),
                        };
                    }
                    let (reply, failed) = match words {
                        Ok(words) => {
                            // A command costs what a few hundred Lua
                            // instructions do, more with a long reply.
                            let r = host.call(&words);
                            left.set(left.get() - call_cost(&r));
                            let failed = r.is_error();
                            (r, failed)
                        }
                        Err(r) => (r, true),
                    };
                    Ok((to_lua(lua, &reply, resp3.get())?, failed))
                },
            )?;
            let entry: Function = self.entry.get(how)?;
            let (ok, v): (bool, Value) = entry.call((f, keys, argv, call))?;
            Ok((ok, v))
        });
        if self.over.get() {
            return Outcome::OverBudget(Reply::err(format!(
                "ERR Script killed: it ran past its budget of {} Lua instructions \
                 (lua-instruction-limit); its writes were undone on every member",
                run.budget
            )));
        }
        let reply = match result {
            Ok((true, v)) => from_lua(&v, self.resp3.get()),
            // An error names the script by its SHA (`f_` is the name of the
            // Lua function that holds an EVAL script's body), a function by
            // its name.
            Ok((false, Value::Table(t))) => match how {
                "eval" => error_reply(&t, funcname.strip_prefix("f_").unwrap_or(funcname)),
                _ => error_reply(&t, funcname),
            },
            Ok((false, v)) => Reply::err(format!(
                "ERR Error running script {funcname}, {}",
                lua_text(&v)
            )),
            Err(e) => Reply::err(format!("ERR Error running script {funcname}, {e}")),
        };
        Outcome::Done(reply)
    }
}

/// The budget's hook: every [`HOOK_STEP`] instructions it takes them from
/// `left`; past the budget it raises, at every later step too. A script
/// cannot catch that error for good: the sandbox's `pcall`, `xpcall` and
/// `coroutine.resume` raise it again once the budget is spent
/// (`prelude.lua`).
fn budget_hook(lua: &Lua, left: &Rc<Cell<i64>>, over: &Rc<Cell<bool>>) -> mlua::Result<()> {
    let (l, o) = (left.clone(), over.clone());
    // Global: coroutines a script creates count against the same budget.
    lua.set_global_hook(
        HookTriggers::new().every_nth_instruction(HOOK_STEP),
        move |_, _| {
            l.set(l.get() - i64::from(HOOK_STEP));
            if l.get() < 0 {
                o.set(true);
                return Err(mlua::Error::runtime(
                    "Script ran past its instruction budget",
                ));
            }
            Ok(VmState::Continue)
        },
    )
}

/// Instructions a command called from a script takes from the budget:
/// 200, and 4 per element of its reply (a loop of `redis.call` ends in
/// about the time a loop of plain Lua does).
fn call_cost(r: &Reply) -> i64 {
    let n = match r {
        Reply::Array(Some(v)) | Reply::Set(v) | Reply::Push(v) => v.len(),
        Reply::Map(v) => 2 * v.len(),
        _ => 1,
    };
    200 + 4 * n as i64
}

/// The error reply for an error table `{err=..., source=..., line=...}`.
fn error_reply(t: &Table, funcname: &str) -> Reply {
    let msg = match t.raw_get::<Value>("err") {
        Ok(Value::String(s)) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
        _ => "ERR unknown error".into(),
    };
    let msg = if msg.is_empty() { "ERR".into() } else { msg };
    let source = t.raw_get::<Option<mlua::String>>("source").ok().flatten();
    let line = t.raw_get::<Option<i64>>("line").ok().flatten();
    let text = match (source, line) {
        (Some(s), Some(l)) => format!(
            "{msg} script: {funcname}, on {}:{l}.",
            String::from_utf8_lossy(&s.as_bytes())
        ),
        _ => msg,
    };
    Reply::err(one_line(text))
}

/// Error replies are one line.
fn one_line(s: String) -> String {
    if s.contains(['\r', '\n']) {
        s.replace(['\r', '\n'], " ")
    } else {
        s
    }
}

fn lua_text(v: &Value) -> String {
    match v {
        Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
        Value::Error(e) => e.to_string(),
        _ => "execution failure".into(),
    }
}

fn words_table(lua: &Lua, words: &[Vec<u8>]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(words.len(), 0)?;
    for (i, w) in words.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(w)?)?;
    }
    Ok(t)
}

/// The words of `redis.call(...)`: strings and numbers (as Lua prints
/// them), anything else an error.
fn command_words(n: usize, args: &Table) -> Result<Vec<Vec<u8>>, Reply> {
    if n == 0 {
        return Err(Reply::err(
            "ERR Please specify at least one argument for this redis lib call",
        ));
    }
    (1..=n)
        .map(|i| match &args.raw_get::<Value>(i).unwrap_or(Value::Nil) {
            Value::String(s) => Ok(s.as_bytes().to_vec()),
            Value::Integer(i) => Ok(i.to_string().into_bytes()),
            Value::Number(n) => Ok(super::convert::lua_number_text(*n).into_bytes()),
            _ => Err(Reply::err(
                "ERR Lua redis lib command arguments must be strings or integers",
            )),
        })
        .collect()
}

/// A script's shebang line (`#!lua ...`) turned into a comment, so line
/// numbers stay.
fn uncomment_shebang(body: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    match body.strip_prefix(b"#!") {
        Some(rest) => {
            let mut v = b"--".to_vec();
            v.extend_from_slice(rest);
            std::borrow::Cow::Owned(v)
        }
        None => std::borrow::Cow::Borrowed(body),
    }
}

fn version_num(v: &str) -> i64 {
    v.split('.')
        .map(|p| p.parse::<i64>().unwrap_or(0))
        .chain(std::iter::repeat(0))
        .take(3)
        .fold(0, |acc, p| acc * 256 + p)
}

/// Compiles `body` (for `SCRIPT LOAD` and `EVAL`): Redis's error when it
/// does not compile.
pub fn check_script(sha: &Sha, body: &[u8]) -> Result<(), Reply> {
    with_engine(|e| e.script(sha, body).map(|_| ()))?
}

/// Runs script `body` (whose SHA1 is `sha`).
pub fn run_script(sha: &Sha, body: &[u8], run: Run<'_>, host: &mut dyn Host) -> Outcome {
    let funcname = format!("f_{}", String::from_utf8_lossy(sha));
    match with_engine(|e| match e.script(sha, body) {
        Ok(f) => e.invoke("eval", f, &funcname, run, host),
        Err(r) => Outcome::Done(r),
    }) {
        Ok(o) => o,
        Err(r) => Outcome::Done(r),
    }
}

/// Runs function `name` of `lib`.
pub fn run_function(lib: &Library, name: &[u8], run: Run<'_>, host: &mut dyn Host) -> Outcome {
    let funcname = String::from_utf8_lossy(name).into_owned();
    let done = with_engine(|e| {
        let key = (lib.name.clone(), sha1_hex(&lib.code));
        if !e.libs.contains_key(&key) {
            match e.load(&lib.code, run.budget) {
                Ok((_, fns)) => {
                    e.libs.insert(key.clone(), fns);
                }
                Err(r) => return Outcome::Done(r),
            }
        }
        match e.libs.get(&key).and_then(|fs| fs.get(name)).cloned() {
            Some(f) => e.invoke("fcall", f, &funcname, run, host),
            None => Outcome::Done(Reply::err("ERR Function not found")),
        }
    });
    done.unwrap_or_else(Outcome::Done)
}

/// What `#!lua name=... ` says of a library.
struct Shebang {
    name: Vec<u8>,
}

/// Reads a library's first line: `#!<engine> name=<name>`.
fn library_shebang(code: &[u8]) -> Result<Shebang, Reply> {
    let line_end = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
    let line = code[..line_end]
        .strip_prefix(b"#!")
        .ok_or_else(|| Reply::err("ERR Missing library metadata"))?;
    // The engine is what precedes the first space (possibly nothing); the
    // rest are words, quoted or not, as Redis splits them.
    let (engine, rest) = match line.iter().position(|&b| b == b' ') {
        Some(i) => (&line[..i], &line[i..]),
        None => (line, &line[line.len()..]),
    };
    if !engine.eq_ignore_ascii_case(b"lua") {
        return Err(Reply::err(format!(
            "ERR Engine '{}' not found",
            String::from_utf8_lossy(engine)
        )));
    }
    let words =
        crate::acl::split_args(rest).ok_or_else(|| Reply::err("ERR Invalid library metadata"))?;
    let mut name = None;
    for p in &words {
        match p.strip_prefix(b"name=") {
            Some(_) if name.is_some() => {
                return Err(Reply::err(
                    "ERR Invalid metadata value, name argument was given multiple times",
                ))
            }
            Some(n) => name = Some(n.to_vec()),
            None => {
                return Err(Reply::err(format!(
                    "ERR Invalid metadata value given: {}",
                    String::from_utf8_lossy(p)
                )))
            }
        }
    }
    let name = name.ok_or_else(|| Reply::err("ERR Library name was not given"))?;
    if name.is_empty() || !name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_') {
        return Err(Reply::err(
            "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long",
        ));
    }
    Ok(Shebang { name })
}

impl Engine {
    /// Runs a library's code: its description and its functions.
    fn load(
        &mut self,
        code: &[u8],
        budget: u64,
    ) -> Result<(Library, HashMap<Vec<u8>, Function>), Reply> {
        let shebang = library_shebang(code)?;
        let f = self
            .compile(code, "@user_function")
            .map_err(|e| Reply::err(format!("ERR Error compiling function: {e}")))?;
        self.start(&Run {
            keys: &[],
            args: &[],
            seed: 0,
            budget,
        })
        .map_err(lua_err)?;
        let load: Function = self.entry.get("load").map_err(lua_err)?;
        let (ok, v): (bool, Value) = load.call(f).map_err(lua_err)?;
        if self.over.get() {
            return Err(Reply::err("ERR FUNCTION LOAD timeout"));
        }
        let list = match (ok, v) {
            (true, Value::Table(t)) => t,
            (false, Value::Table(t)) => {
                let msg = match t.raw_get::<Value>("err") {
                    Ok(Value::String(s)) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                    _ => "unknown error".into(),
                };
                let msg = msg.strip_prefix("ERR ").unwrap_or(&msg).to_owned();
                return Err(Reply::err(one_line(format!(
                    "ERR Error registering functions: {msg}"
                ))));
            }
            _ => return Err(Reply::err("ERR Error registering functions")),
        };
        let mut functions = Vec::new();
        let mut compiled = HashMap::new();
        for item in list.sequence_values::<Table>() {
            let item = item.map_err(lua_err)?;
            let name: mlua::String = item.get("name").map_err(lua_err)?;
            let callback: Function = item.get("callback").map_err(lua_err)?;
            let description: Option<mlua::String> = item.get("description").map_err(lua_err)?;
            let mut flags = Flags::default();
            let names: Table = item.get("flags").map_err(lua_err)?;
            for n in names.sequence_values::<mlua::String>() {
                let n = n.map_err(lua_err)?;
                flags = flags.with(Flags::named(&n.as_bytes()).ok_or_else(|| {
                    Reply::err("ERR Error registering functions: unknown flag given")
                })?);
            }
            let name = name.as_bytes().to_vec();
            compiled.insert(name.clone(), callback);
            functions.push(FunctionMeta {
                name,
                description: description.map(|d| d.as_bytes().to_vec()),
                flags,
            });
        }
        if functions.is_empty() {
            return Err(Reply::err("ERR No functions registered"));
        }
        Ok((
            Library {
                name: shebang.name,
                code: code.to_vec(),
                functions,
            },
            compiled,
        ))
    }
}

fn lua_err(e: mlua::Error) -> Reply {
    Reply::err(one_line(format!("ERR {e}")))
}

/// Loads library `code` (`FUNCTION LOAD`): the library, or Redis's error.
/// Its code runs under `budget` like a script, with `redis.call` absent.
pub fn load_library(code: &[u8], budget: u64) -> Result<Library, Reply> {
    with_engine(|e| {
        let (lib, fns) = e.load(code, budget)?;
        e.libs.insert((lib.name.clone(), sha1_hex(code)), fns);
        Ok(lib)
    })?
}

/// The flags of an `EVAL` script's shebang line (`#!lua flags=a,b`), or
/// none declared; Redis's error for a malformed line.
pub fn script_flags(body: &[u8]) -> Result<Flags, Reply> {
    let Some(rest) = body.strip_prefix(b"#!") else {
        return Ok(Flags::default());
    };
    let line_end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
    let mut parts = rest[..line_end]
        .split(|&b| b == b' ')
        .filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or_default();
    if engine != b"lua" {
        return Err(Reply::err(format!(
            "ERR Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(engine)
        )));
    }
    let mut flags = Flags::DECLARED;
    for p in parts {
        let Some(list) = p.strip_prefix(b"flags=") else {
            return Err(Reply::err(format!(
                "ERR Unknown lua shebang option: {}",
                String::from_utf8_lossy(p)
            )));
        };
        for f in list.split(|&b| b == b',').filter(|f| !f.is_empty()) {
            flags = flags.with(Flags::named(f).ok_or_else(|| {
                Reply::err(format!(
                    "ERR Unexpected flag in script shebang: {}",
                    String::from_utf8_lossy(f)
                ))
            })?);
        }
    }
    Ok(flags)
}

/// Bytes of Lua memory this thread's engine holds (`INFO`'s
/// `used_memory_lua`; 0 before the first script).
pub fn memory() -> usize {
    ENGINE.with(|cell| {
        cell.try_borrow()
            .ok()
            .and_then(|e| e.as_ref().map(|e| e.lua.used_memory()))
            .unwrap_or(0)
    })
}

/// Drops the compiled scripts (`SCRIPT FLUSH`): the next run compiles
/// again.
pub fn forget_compiled() {
    ENGINE.with(|cell| {
        if let Ok(mut e) = cell.try_borrow_mut() {
            if let Some(e) = e.as_mut() {
                e.compiled.clear();
                e.libs.clear();
                let _ = e.lua.gc_collect();
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host whose every command answers `+PONG`.
    struct Pong;

    impl Host for Pong {
        fn call(&mut self, _: &[Vec<u8>]) -> Reply {
            Reply::Simple("PONG".into())
        }
        fn acl_check(&mut self, _: &[Vec<u8>]) -> Result<bool, Reply> {
            Ok(true)
        }
    }

    fn run(body: &str, budget: u64) -> Outcome {
        let sha = sha1_hex(body.as_bytes());
        let run = Run {
            keys: &[],
            args: &[],
            seed: 7,
            budget,
        };
        run_script(&sha, body.as_bytes(), run, &mut Pong)
    }

    #[test]
    fn runaway_scripts_end_at_their_budget_whatever_they_catch() {
        let runaways = [
            "while true do end",
            "while 1 do pcall(function() while true do end end) end",
            "local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end",
            "while 1 do xpcall(function() while true do end end, function() while true do end end) end",
            "local co = coroutine.wrap(function() while true do end end) while true do pcall(co) end",
            "local co = coroutine.create(function() while true do end end) while true do coroutine.resume(co) end",
        ];
        for body in runaways {
            assert!(
                matches!(run(body, 1_000_000), Outcome::OverBudget(_)),
                "{body}"
            );
        }
        // The next script runs with a fresh budget.
        assert_eq!(run("return 1", 1_000_000), Outcome::Done(Reply::Integer(1)));
    }

    /// Where a run stops depends on the run alone: not on what ran or
    /// compiled on the thread before it (a member that restarted, or ran
    /// other scripts, stops a script where every other member does).
    #[test]
    fn a_runs_budget_does_not_depend_on_the_threads_history() {
        let body = "local n = 0 for i = 1, 400 do n = n + i end return n";
        let budgets: Vec<u64> = (1..=40).map(|k| k * 100).collect();
        let fresh = |budget: u64| {
            std::thread::spawn(move || run(body, budget))
                .join()
                .unwrap()
        };
        let histories: [&[&str]; 3] = [
            &["local n = 0 for i = 1, 37 do n = n + i end return n"],
            &["return 1", "return 2", "return 3"],
            &["while true do end"],
        ];
        for history in histories {
            for &budget in &budgets {
                let after = std::thread::spawn(move || {
                    for h in history {
                        run(h, 1_000_000);
                    }
                    run(body, budget)
                })
                .join()
                .unwrap();
                assert_eq!(after, fresh(budget), "budget {budget} after {history:?}");
            }
        }
    }

    /// Compiling is not metered: after a run spent its budget, new scripts
    /// still compile, however many.
    #[test]
    fn scripts_compile_after_a_run_spent_its_budget() {
        std::thread::spawn(|| {
            assert!(matches!(
                run("while true do end", 10_000),
                Outcome::OverBudget(_)
            ));
            for i in 0..500 {
                let body = format!("return {i}");
                let sha = sha1_hex(body.as_bytes());
                assert_eq!(check_script(&sha, body.as_bytes()), Ok(()), "{body}");
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_same_script_and_seed_give_the_same_result() {
        let body = "local t = {} for i = 1, 5 do t[i] = math.random(1000) end return t";
        assert_eq!(run(body, 1_000_000), run(body, 1_000_000));
    }
}
