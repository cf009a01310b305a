//! [`WriteOp`]: one state change, as it is logged and replicated.
//!
//! A write command is turned into a `WriteOp` once, where it arrives (the
//! leader), with every time-dependent value made absolute: the op carries
//! the leader's clock reading `ts_ms` and absolute expiry times. Applying
//! the same sequence of ops to an empty [`crate::store::Store`] gives the
//! same state and the same replies on every replica, whatever its clock.
//!
//! Encoding (version 1; the data-type, transaction, query, expiry,
//! answer, config, publish and ACL tags 9
//! to 16 were added without changing the encoding of the
//! others, so earlier logs still decode), all integers little-endian:
//! `version:u8 = 1 | tag:u8 | ts_ms:u64 | body`, where byte strings are
//! `len:u32 | bytes`, lists are `count:u32 | items`, options are
//! `0 | 1 value`. The encoding is canonical: decoding then encoding gives
//! the same bytes. Decoding checks the structure only; the words of a
//! command op are the command layer's to judge when it is applied (an op
//! whose words do not parse applies as that error, on every member alike).

/// The origin of an encoded op: a hash of its bytes, by which the member
/// that proposed it recognises its changes when they are applied
/// ([`crate::store::Store::take_changes`]; `CLIENT TRACKING ... NOLOOP`).
/// Two identical ops share it, a collision that can only hide an
/// invalidation of a change identical to one the connection made itself.
pub fn origin(encoded: &[u8]) -> u64 {
    fxhash::hash64(encoded)
}

/// Version byte of the encoding written by [`WriteOp::encode`].
pub const OP_VERSION: u8 = 1;

/// Largest key or value an op may carry (matches the default RESP bulk
/// limit).
pub const MAX_OP_BYTES: usize = 512 << 20;

/// The condition of a `SET`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetCond {
    /// Always set.
    Always,
    /// `NX`: only if the key does not exist.
    IfAbsent,
    /// `XX`: only if the key exists.
    IfPresent,
}

/// What happens to the key's time to live on `SET`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetTtl {
    /// No expiry (an existing one is cleared).
    Persist,
    /// `KEEPTTL`: keep the existing expiry.
    Keep,
    /// Expire at this absolute time (ms since the Unix epoch).
    At(u64),
}

/// A write command, with absolute times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteCmd {
    /// `SET key value [NX|XX] [EX|PX|EXAT|PXAT|KEEPTTL] [GET]`.
    Set {
        /// The key.
        key: Vec<u8>,
        /// The new value.
        value: Vec<u8>,
        /// NX / XX.
        cond: SetCond,
        /// Expiry.
        ttl: SetTtl,
        /// `GET`: reply with the old value instead of OK.
        get: bool,
    },
    /// `MSET k v [k v ...]`.
    MSet {
        /// The pairs, in command order.
        pairs: Vec<(Vec<u8>, Vec<u8>)>,
    },
    /// `DEL key [key ...]`.
    Del {
        /// The keys.
        keys: Vec<Vec<u8>>,
    },
    /// `INCR`, `DECR`, `INCRBY`, `DECRBY`.
    IncrBy {
        /// The key.
        key: Vec<u8>,
        /// The signed increment.
        delta: i64,
    },
    /// `APPEND key value`.
    Append {
        /// The key.
        key: Vec<u8>,
        /// The bytes to append.
        value: Vec<u8>,
    },
    /// `EXPIRE`/`PEXPIRE`/`EXPIREAT`/`PEXPIREAT`, made absolute. A time not
    /// after `ts_ms` deletes the key.
    ExpireAt {
        /// The key.
        key: Vec<u8>,
        /// Absolute expiry time, ms since the epoch.
        at_ms: u64,
    },
    /// `PERSIST key`.
    Persist {
        /// The key.
        key: Vec<u8>,
    },
    /// `FLUSHDB` / `FLUSHALL`.
    FlushDb,
    /// A write of the command layer (hashes, lists, sets, sorted sets,
    /// `RENAME`, `COPY`, ...): its Redis command words, checked at the
    /// leader ([`crate::cmd::check`]) and applied by every member the same
    /// way ([`crate::cmd::apply`]) — as Redis' own replication stream
    /// carries commands. `seed` drives the random picks of `SPOP`, so every
    /// member picks the same.
    Data {
        /// The command words, name first.
        args: Vec<Vec<u8>>,
        /// Seed of the command's random choices (0 when it makes none).
        seed: u64,
    },
    /// A read queued in a transaction (or `TIME`): answered at its place
    /// inside [`WriteCmd::Exec`] ([`crate::cmd::query`]; only there, its
    /// own decode refuses it elsewhere).
    Query {
        /// The command words.
        args: Vec<Vec<u8>>,
        /// Seed of its random picks (`SRANDMEMBER`).
        seed: u64,
    },
    /// A command queued in a transaction whose reply depends neither on the
    /// store nor on the time (`PING`, `ECHO`, `SELECT 0`, `CONFIG GET`,
    /// a command's own syntax error, ...): its reply, computed when it was
    /// queued, as RESP2 bytes (only inside [`WriteCmd::Exec`]).
    Answer {
        /// The reply's RESP2 encoding.
        reply: Vec<u8>,
    },
    /// `CONFIG SET` of settings that shape replicated values
    /// ([`crate::store::DataConfig`]), decided at the leader: every member
    /// takes the same values at the same place in the log.
    SetConfig {
        /// (name, value), each a [`crate::store::DataConfig::NAMES`] entry
        /// with its value as decimal text.
        pairs: Vec<(Vec<u8>, Vec<u8>)>,
    },
    /// `PUBLISH channel message`: every member hands the message to its
    /// own subscribers as it applies the op, so a message published on any
    /// member reaches the subscribers of all, in one order (as in Redis
    /// Cluster). Changes no key.
    Publish {
        /// The channel.
        channel: Vec<u8>,
        /// The message.
        message: Vec<u8>,
    },
    /// `SPUBLISH shardchannel message`: as [`WriteCmd::Publish`], for the
    /// subscribers of the shard channel (`SSUBSCRIBE`); the members of
    /// one xlane kv cluster are one shard that owns every slot.
    SPublish {
        /// The shard channel.
        channel: Vec<u8>,
        /// The message.
        message: Vec<u8>,
    },
    /// Expiry decided by the leader ([`crate::expiry`]): removes each of
    /// `keys` whose expiry is not after the op's `ts_ms` (a key given a
    /// later expiry or none since is kept). Bounded work: unlike every
    /// other op it neither advances the logical clock nor removes any key
    /// it does not name. Never inside an `Exec`.
    DelExpired {
        /// The keys the leader found expired, at most
        /// [`crate::expiry::BATCH_KEYS`].
        keys: Vec<Vec<u8>>,
    },
    /// A change of the users ([`crate::acl::UserTable`], part of the
    /// replicated state): `SETUSER name rules...`, `DELUSER names...`,
    /// `LOAD filename text` (the ACL file's text as the leader read it) or
    /// `REQUIREPASS password` (`CONFIG SET requirepass`). Every member
    /// applies it with the table's pure functions
    /// ([`crate::acl::UserTable::apply_setuser`], ...), so users and rules
    /// are identical everywhere.
    Acl {
        /// The change's words, its kind first.
        args: Vec<Vec<u8>>,
    },
    /// `EVAL`, `EVALSHA`, `FCALL` and their `_RO` forms: a script that
    /// every member runs as it applies the op ([`crate::script`]), with
    /// the op's time and `seed` for `math.random`, so all end identical.
    Eval {
        /// What runs.
        code: ScriptCode,
        /// Its keys, arguments and caller.
        call: ScriptCall,
    },
    /// `SCRIPT LOAD|FLUSH`, `FUNCTION LOAD|DELETE|FLUSH|RESTORE`: their
    /// words, checked at the leader, applied to the replicated scripts
    /// ([`crate::script::admin`]).
    ScriptAdmin {
        /// The command's words, name first.
        args: Vec<Vec<u8>>,
    },
    /// `EXEC`: a transaction's commands, applied as one entry. When any
    /// watched key's version ([`crate::store::Store::version`]) is not the
    /// one recorded at `WATCH`, nothing runs and the reply is a nil array.
    Exec {
        /// (key, version at WATCH time; see [`crate::store::Store::version`]).
        watched: Vec<(Vec<u8>, u64)>,
        /// The queued commands, in order (no `Exec` inside).
        cmds: Vec<WriteCmd>,
    },
}

/// The call of a [`WriteCmd::Eval`]: what the script is given and what
/// was true of its caller where it arrived (stamped there, so every member
/// runs it alike).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScriptCall {
    /// `KEYS`.
    pub keys: Vec<Vec<u8>>,
    /// `ARGV`.
    pub args: Vec<Vec<u8>>,
    /// Seed of the script's random draws and of its commands' picks.
    pub seed: u64,
    /// The `_RO` form: the script may not write.
    pub read_only: bool,
    /// The user the script's commands are checked against (empty:
    /// `default`).
    pub user: Vec<u8>,
    /// The client speaks RESP3: the reply keeps RESP3's types (a map, a
    /// double, a big number a script returns).
    pub resp3: bool,
    /// The member that took the command was over `maxmemory`: a script
    /// that may write is refused, as Redis refuses it (a script without
    /// flags: each command that may grow memory).
    pub oom: bool,
}

/// What an [`WriteCmd::Eval`] runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptCode {
    /// `EVAL`: the script's body (cached by every member as it applies).
    Body(Vec<u8>),
    /// `EVALSHA`: the SHA1 (40 lower-case hex digits) of a cached body,
    /// looked up by every member at the op's place in the log.
    Sha(Vec<u8>),
    /// `FCALL`: a function's name.
    Function(Vec<u8>),
}

/// A write as replicated: the command and the leader's clock when it
/// arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOp {
    /// Leader's wall clock, ms since the Unix epoch, when the command
    /// arrived. The store's logical clock is the maximum of these.
    pub ts_ms: u64,
    /// The command.
    pub cmd: WriteCmd,
}

/// Why bytes are not a valid [`WriteOp`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpDecodeError {
    /// No bytes at all.
    #[error("empty op")]
    Empty,
    /// A version this build does not know.
    #[error("unknown op version {0}")]
    UnknownVersion(u8),
    /// An unknown command tag.
    #[error("unknown op tag {0}")]
    UnknownTag(u8),
    /// The bytes end inside a field.
    #[error("op truncated")]
    Truncated,
    /// Bytes left after a complete op.
    #[error("{0} trailing bytes after op")]
    Trailing(usize),
    /// A field value outside its domain (flag byte, length above
    /// [`MAX_OP_BYTES`], empty list).
    #[error("invalid op field: {0}")]
    Invalid(&'static str),
}

const T_SET: u8 = 1;
const T_MSET: u8 = 2;
const T_DEL: u8 = 3;
const T_INCRBY: u8 = 4;
const T_APPEND: u8 = 5;
const T_EXPIREAT: u8 = 6;
const T_PERSIST: u8 = 7;
const T_FLUSHDB: u8 = 8;
const T_DATA: u8 = 9;
const T_EXEC: u8 = 10;
const T_QUERY: u8 = 11;
const T_DELEXPIRED: u8 = 12;
const T_ANSWER: u8 = 13;
const T_SETCONFIG: u8 = 14;
const T_PUBLISH: u8 = 15;
const T_ACL: u8 = 16;
const T_SPUBLISH: u8 = 17;
const T_EVAL: u8 = 18;
const T_SCRIPTADMIN: u8 = 19;

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    // Keys and values are bounded by the RESP limits (< 4 GiB).
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// A list of byte strings: its count, then each ([`Reader::words`] reads it).
fn put_words(out: &mut Vec<u8>, words: &[Vec<u8>]) {
    out.extend_from_slice(&(words.len() as u32).to_le_bytes());
    for w in words {
        put_bytes(out, w);
    }
}

/// The encoded length of [`put_words`]'s list.
fn words_len(words: &[Vec<u8>]) -> usize {
    4 + words.iter().map(|w| 4 + w.len()).sum::<usize>()
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], OpDecodeError> {
        if self.b.len() < n {
            return Err(OpDecodeError::Truncated);
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8, OpDecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, OpDecodeError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    fn u64(&mut self) -> Result<u64, OpDecodeError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn bytes(&mut self) -> Result<Vec<u8>, OpDecodeError> {
        let n = self.u32()? as usize;
        if n > MAX_OP_BYTES {
            return Err(OpDecodeError::Invalid("byte string too long"));
        }
        Ok(self.take(n)?.to_vec())
    }
    /// A list count: each item takes at least `min_item` bytes, so a count
    /// the remaining input cannot hold is rejected before allocating.
    fn count(&mut self, min_item: usize) -> Result<usize, OpDecodeError> {
        let n = self.u32()? as usize;
        if n == 0 {
            return Err(OpDecodeError::Invalid("empty list"));
        }
        if n.saturating_mul(min_item) > self.b.len() {
            return Err(OpDecodeError::Truncated);
        }
        Ok(n)
    }
    /// A list count that may be 0.
    fn count_or_zero(&mut self, min_item: usize) -> Result<usize, OpDecodeError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_item) > self.b.len() {
            return Err(OpDecodeError::Truncated);
        }
        Ok(n)
    }
    /// A non-empty list of byte strings.
    fn words(&mut self) -> Result<Vec<Vec<u8>>, OpDecodeError> {
        let n = self.count(4)?;
        (0..n).map(|_| self.bytes()).collect()
    }
    /// A list of byte strings that may be empty.
    fn words_or_none(&mut self) -> Result<Vec<Vec<u8>>, OpDecodeError> {
        let n = self.count_or_zero(4)?;
        (0..n).map(|_| self.bytes()).collect()
    }
    fn flag(&mut self) -> Result<bool, OpDecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(OpDecodeError::Invalid("flag byte")),
        }
    }
}

impl WriteOp {
    /// A new op.
    pub fn new(ts_ms: u64, cmd: WriteCmd) -> Self {
        WriteOp { ts_ms, cmd }
    }

    /// Appends the binary encoding.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(OP_VERSION);
        let tag = self.cmd.tag();
        out.push(tag);
        out.extend_from_slice(&self.ts_ms.to_le_bytes());
        self.cmd.encode_body(out);
    }

    /// The binary encoding.
    pub fn encode(&self) -> Vec<u8> {
        // version, tag, time, body: one allocation.
        let mut v = Vec::with_capacity(2 + 8 + self.cmd.body_len());
        self.encode_into(&mut v);
        v
    }

    /// Decodes exactly one op (no trailing bytes).
    pub fn decode(b: &[u8]) -> Result<WriteOp, OpDecodeError> {
        if b.is_empty() {
            return Err(OpDecodeError::Empty);
        }
        let mut r = Reader { b };
        let v = r.u8()?;
        if v != OP_VERSION {
            return Err(OpDecodeError::UnknownVersion(v));
        }
        let tag = r.u8()?;
        let ts_ms = r.u64()?;
        let cmd = WriteCmd::decode_body(tag, &mut r, true)?;
        if !r.b.is_empty() {
            return Err(OpDecodeError::Trailing(r.b.len()));
        }
        Ok(WriteOp { ts_ms, cmd })
    }
}

impl WriteCmd {
    /// Stamps the caller on the scripts of this command (an `EVAL`, or
    /// the `EVAL`s queued in an `EXEC`): their commands are checked
    /// against user `name`, and a top-level script answers in RESP3 when
    /// the caller speaks it.
    pub fn stamp_script_caller(&mut self, name: &[u8], speaks_resp3: bool, over_memory: bool) {
        match self {
            WriteCmd::Eval { call, .. } => {
                call.user = name.to_vec();
                call.resp3 = speaks_resp3;
                call.oom = over_memory;
            }
            WriteCmd::Exec { cmds, .. } => {
                for c in cmds {
                    c.stamp_script_caller(name, false, over_memory);
                }
            }
            _ => {}
        }
    }

    fn tag(&self) -> u8 {
        match self {
            WriteCmd::Set { .. } => T_SET,
            WriteCmd::MSet { .. } => T_MSET,
            WriteCmd::Del { .. } => T_DEL,
            WriteCmd::IncrBy { .. } => T_INCRBY,
            WriteCmd::Append { .. } => T_APPEND,
            WriteCmd::ExpireAt { .. } => T_EXPIREAT,
            WriteCmd::Persist { .. } => T_PERSIST,
            WriteCmd::FlushDb => T_FLUSHDB,
            WriteCmd::Data { .. } => T_DATA,
            WriteCmd::Exec { .. } => T_EXEC,
            WriteCmd::Query { .. } => T_QUERY,
            WriteCmd::DelExpired { .. } => T_DELEXPIRED,
            WriteCmd::Answer { .. } => T_ANSWER,
            WriteCmd::SetConfig { .. } => T_SETCONFIG,
            WriteCmd::Publish { .. } => T_PUBLISH,
            WriteCmd::SPublish { .. } => T_SPUBLISH,
            WriteCmd::Acl { .. } => T_ACL,
            WriteCmd::Eval { .. } => T_EVAL,
            WriteCmd::ScriptAdmin { .. } => T_SCRIPTADMIN,
        }
    }

    /// The length of [`WriteCmd::encode_body`]'s output.
    fn body_len(&self) -> usize {
        let bytes = |b: &[u8]| 4 + b.len();
        match self {
            WriteCmd::Set {
                key, value, ttl, ..
            } => {
                let ttl = match ttl {
                    SetTtl::At(_) => 9,
                    SetTtl::Persist | SetTtl::Keep => 1,
                };
                bytes(key) + bytes(value) + 1 + ttl + 1
            }
            WriteCmd::MSet { pairs } | WriteCmd::SetConfig { pairs } => {
                4 + pairs
                    .iter()
                    .map(|(k, v)| bytes(k) + bytes(v))
                    .sum::<usize>()
            }
            WriteCmd::Del { keys }
            | WriteCmd::DelExpired { keys }
            | WriteCmd::Acl { args: keys }
            | WriteCmd::ScriptAdmin { args: keys } => words_len(keys),
            WriteCmd::Eval { code, call } => {
                let code = match code {
                    ScriptCode::Body(b) | ScriptCode::Sha(b) | ScriptCode::Function(b) => b,
                };
                let ScriptCall {
                    keys, args, user, ..
                } = call;
                1 + bytes(code) + words_len(keys) + words_len(args) + 8 + 1 + bytes(user) + 2
            }
            WriteCmd::IncrBy { key, .. } | WriteCmd::ExpireAt { key, .. } => bytes(key) + 8,
            WriteCmd::Append { key, value }
            | WriteCmd::Publish {
                channel: key,
                message: value,
            }
            | WriteCmd::SPublish {
                channel: key,
                message: value,
            } => bytes(key) + bytes(value),
            WriteCmd::Persist { key } | WriteCmd::Answer { reply: key } => bytes(key),
            WriteCmd::FlushDb => 0,
            WriteCmd::Data { args, .. } | WriteCmd::Query { args, .. } => 8 + words_len(args),
            WriteCmd::Exec { watched, cmds } => {
                4 + watched.iter().map(|(k, _)| bytes(k) + 8).sum::<usize>()
                    + 4
                    + cmds.iter().map(|c| 1 + c.body_len()).sum::<usize>()
            }
        }
    }

    /// The body of the encoding (after version, tag and time); an `Exec`'s
    /// commands are each `tag | body`.
    fn encode_body(&self, out: &mut Vec<u8>) {
        match self {
            WriteCmd::Set {
                key,
                value,
                cond,
                ttl,
                get,
            } => {
                put_bytes(out, key);
                put_bytes(out, value);
                out.push(match cond {
                    SetCond::Always => 0,
                    SetCond::IfAbsent => 1,
                    SetCond::IfPresent => 2,
                });
                match ttl {
                    SetTtl::Persist => out.push(0),
                    SetTtl::Keep => out.push(1),
                    SetTtl::At(t) => {
                        out.push(2);
                        out.extend_from_slice(&t.to_le_bytes());
                    }
                }
                out.push(u8::from(*get));
            }
            WriteCmd::MSet { pairs } | WriteCmd::SetConfig { pairs } => {
                out.extend_from_slice(&(pairs.len() as u32).to_le_bytes());
                for (k, v) in pairs {
                    put_bytes(out, k);
                    put_bytes(out, v);
                }
            }
            WriteCmd::Del { keys }
            | WriteCmd::DelExpired { keys }
            | WriteCmd::Acl { args: keys }
            | WriteCmd::ScriptAdmin { args: keys } => put_words(out, keys),
            WriteCmd::Eval { code, call } => {
                let (kind, code) = match code {
                    ScriptCode::Body(b) => (0, b),
                    ScriptCode::Sha(b) => (1, b),
                    ScriptCode::Function(b) => (2, b),
                };
                out.push(kind);
                put_bytes(out, code);
                put_words(out, &call.keys);
                put_words(out, &call.args);
                out.extend_from_slice(&call.seed.to_le_bytes());
                out.push(u8::from(call.read_only));
                put_bytes(out, &call.user);
                out.push(u8::from(call.resp3));
                out.push(u8::from(call.oom));
            }
            WriteCmd::IncrBy { key, delta } => {
                put_bytes(out, key);
                out.extend_from_slice(&delta.to_le_bytes());
            }
            WriteCmd::Append { key, value }
            | WriteCmd::Publish {
                channel: key,
                message: value,
            }
            | WriteCmd::SPublish {
                channel: key,
                message: value,
            } => {
                put_bytes(out, key);
                put_bytes(out, value);
            }
            WriteCmd::ExpireAt { key, at_ms } => {
                put_bytes(out, key);
                out.extend_from_slice(&at_ms.to_le_bytes());
            }
            WriteCmd::Persist { key } | WriteCmd::Answer { reply: key } => put_bytes(out, key),
            WriteCmd::FlushDb => {}
            WriteCmd::Data { args, seed } | WriteCmd::Query { args, seed } => {
                out.extend_from_slice(&seed.to_le_bytes());
                put_words(out, args);
            }
            WriteCmd::Exec { watched, cmds } => {
                out.extend_from_slice(&(watched.len() as u32).to_le_bytes());
                for (k, v) in watched {
                    put_bytes(out, k);
                    out.extend_from_slice(&v.to_le_bytes());
                }
                out.extend_from_slice(&(cmds.len() as u32).to_le_bytes());
                for c in cmds {
                    out.push(c.tag());
                    c.encode_body(out);
                }
            }
        }
    }

    /// Decodes the body of a command of this tag (`top`: not inside an
    /// `Exec`, which may not nest).
    fn decode_body(tag: u8, r: &mut Reader<'_>, top: bool) -> Result<WriteCmd, OpDecodeError> {
        Ok(match tag {
            T_SET => {
                let key = r.bytes()?;
                let value = r.bytes()?;
                let cond = match r.u8()? {
                    0 => SetCond::Always,
                    1 => SetCond::IfAbsent,
                    2 => SetCond::IfPresent,
                    _ => return Err(OpDecodeError::Invalid("set condition")),
                };
                let ttl = match r.u8()? {
                    0 => SetTtl::Persist,
                    1 => SetTtl::Keep,
                    2 => SetTtl::At(r.u64()?),
                    _ => return Err(OpDecodeError::Invalid("set ttl kind")),
                };
                let get = r.flag()?;
                WriteCmd::Set {
                    key,
                    value,
                    cond,
                    ttl,
                    get,
                }
            }
            T_MSET => {
                let n = r.count(8)?;
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    pairs.push((r.bytes()?, r.bytes()?));
                }
                WriteCmd::MSet { pairs }
            }
            T_DEL => {
                let keys = r.words()?;
                WriteCmd::Del { keys }
            }
            T_INCRBY => {
                let key = r.bytes()?;
                let delta = r.u64()? as i64;
                WriteCmd::IncrBy { key, delta }
            }
            T_APPEND => WriteCmd::Append {
                key: r.bytes()?,
                value: r.bytes()?,
            },
            T_EXPIREAT => WriteCmd::ExpireAt {
                key: r.bytes()?,
                at_ms: r.u64()?,
            },
            T_PERSIST => WriteCmd::Persist { key: r.bytes()? },
            T_FLUSHDB => WriteCmd::FlushDb,
            T_DATA => {
                let seed = r.u64()?;
                let args = r.words()?;
                WriteCmd::Data { args, seed }
            }
            T_EXEC if top => {
                let n = r.count_or_zero(12)?;
                let mut watched = Vec::with_capacity(n);
                for _ in 0..n {
                    watched.push((r.bytes()?, r.u64()?));
                }
                let n = r.count_or_zero(1)?;
                let mut cmds = Vec::with_capacity(n);
                for _ in 0..n {
                    let tag = r.u8()?;
                    cmds.push(WriteCmd::decode_body(tag, r, false)?);
                }
                WriteCmd::Exec { watched, cmds }
            }
            T_EXEC => return Err(OpDecodeError::Invalid("nested exec")),
            T_QUERY if !top => {
                let seed = r.u64()?;
                let args = r.words()?;
                WriteCmd::Query { args, seed }
            }
            T_QUERY => return Err(OpDecodeError::Invalid("query outside exec")),
            T_DELEXPIRED if top => {
                let keys = r.words()?;
                WriteCmd::DelExpired { keys }
            }
            T_DELEXPIRED => return Err(OpDecodeError::Invalid("expiry inside exec")),
            T_ANSWER if !top => WriteCmd::Answer { reply: r.bytes()? },
            T_ANSWER => return Err(OpDecodeError::Invalid("answer outside exec")),
            T_SETCONFIG if top => {
                let n = r.count(8)?;
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    pairs.push((r.bytes()?, r.bytes()?));
                }
                WriteCmd::SetConfig { pairs }
            }
            T_SETCONFIG => return Err(OpDecodeError::Invalid("config inside exec")),
            T_PUBLISH => WriteCmd::Publish {
                channel: r.bytes()?,
                message: r.bytes()?,
            },
            T_SPUBLISH => WriteCmd::SPublish {
                channel: r.bytes()?,
                message: r.bytes()?,
            },
            T_ACL => {
                let args = r.words()?;
                WriteCmd::Acl { args }
            }
            T_EVAL => {
                let kind = r.u8()?;
                let code = r.bytes()?;
                let code = match kind {
                    0 => ScriptCode::Body(code),
                    1 => ScriptCode::Sha(code),
                    2 => ScriptCode::Function(code),
                    _ => return Err(OpDecodeError::Invalid("script kind")),
                };
                let keys = r.words_or_none()?;
                let args = r.words_or_none()?;
                let seed = r.u64()?;
                let read_only = r.flag()?;
                let user = r.bytes()?;
                let resp3 = r.flag()?;
                let oom = r.flag()?;
                WriteCmd::Eval {
                    code,
                    call: ScriptCall {
                        keys,
                        args,
                        seed,
                        read_only,
                        user,
                        resp3,
                        oom,
                    },
                }
            }
            T_SCRIPTADMIN => {
                let args = r.words()?;
                WriteCmd::ScriptAdmin { args }
            }
            t => return Err(OpDecodeError::UnknownTag(t)),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..12)
    }

    pub(crate) fn arb_op() -> impl Strategy<Value = WriteOp> {
        let cmd = prop_oneof![
            (
                bytes(),
                bytes(),
                0u8..3,
                prop_oneof![
                    Just(SetTtl::Persist),
                    Just(SetTtl::Keep),
                    any::<u64>().prop_map(SetTtl::At)
                ],
                any::<bool>()
            )
                .prop_map(|(key, value, c, ttl, get)| WriteCmd::Set {
                    key,
                    value,
                    cond: [SetCond::Always, SetCond::IfAbsent, SetCond::IfPresent][c as usize],
                    ttl,
                    get
                }),
            proptest::collection::vec((bytes(), bytes()), 1..4)
                .prop_map(|pairs| WriteCmd::MSet { pairs }),
            proptest::collection::vec(bytes(), 1..4).prop_map(|keys| WriteCmd::Del { keys }),
            (bytes(), any::<i64>()).prop_map(|(key, delta)| WriteCmd::IncrBy { key, delta }),
            (bytes(), bytes()).prop_map(|(key, value)| WriteCmd::Append { key, value }),
            (bytes(), any::<u64>()).prop_map(|(key, at_ms)| WriteCmd::ExpireAt { key, at_ms }),
            bytes().prop_map(|key| WriteCmd::Persist { key }),
            Just(WriteCmd::FlushDb),
            (bytes(), bytes())
                .prop_map(|(channel, message)| WriteCmd::Publish { channel, message }),
            (bytes(), bytes())
                .prop_map(|(channel, message)| WriteCmd::SPublish { channel, message }),
            (
                prop_oneof![
                    Just(vec!["HSET", "h", "f", "v"]),
                    Just(vec!["RPUSH", "l", "a", "b"]),
                    Just(vec!["SPOP", "s", "2"]),
                    Just(vec!["ZADD", "z", "NX", "1.5", "m"]),
                    Just(vec!["RENAME", "a", "b"]),
                ],
                any::<u64>()
            )
                .prop_map(|(words, seed)| WriteCmd::Data {
                    args: words.iter().map(|w| w.as_bytes().to_vec()).collect(),
                    seed
                }),
        ];
        let query = (
            prop_oneof![
                Just(vec!["GET", "k"]),
                Just(vec!["PING"]),
                Just(vec!["SRANDMEMBER", "s", "2"]),
            ],
            any::<u64>(),
        )
            .prop_map(|(words, seed)| WriteCmd::Query {
                args: words.iter().map(|w| w.as_bytes().to_vec()).collect(),
                seed,
            });
        let exec = (
            proptest::collection::vec((bytes(), any::<u64>()), 0..3),
            proptest::collection::vec(prop_oneof![cmd.clone(), query], 0..3),
        )
            .prop_map(|(watched, cmds)| WriteCmd::Exec { watched, cmds });
        let expired =
            proptest::collection::vec(bytes(), 1..4).prop_map(|keys| WriteCmd::DelExpired { keys });
        let acl = prop_oneof![
            Just(vec!["SETUSER", "u", "on", ">p", "~k*", "+get"]),
            Just(vec!["DELUSER", "u", "v"]),
            Just(vec!["LOAD", "users.acl", "user a on nopass +@all\n"]),
            Just(vec!["REQUIREPASS", "secret"]),
        ]
        .prop_map(|w| WriteCmd::Acl {
            args: w.iter().map(|a| a.as_bytes().to_vec()).collect(),
        });
        let eval = (
            0u8..3,
            bytes(),
            proptest::collection::vec(bytes(), 0..3),
            proptest::collection::vec(bytes(), 0..3),
            any::<u64>(),
            any::<bool>(),
            bytes(),
        )
            .prop_map(
                |(kind, code, keys, args, seed, read_only, user)| WriteCmd::Eval {
                    code: match kind {
                        0 => ScriptCode::Body(code),
                        1 => ScriptCode::Sha(code),
                        _ => ScriptCode::Function(code),
                    },
                    call: ScriptCall {
                        keys,
                        args,
                        seed,
                        read_only,
                        user,
                        resp3: seed % 2 == 0,
                        oom: seed % 3 == 0,
                    },
                },
            );
        let admin = prop_oneof![
            Just(vec!["SCRIPT", "LOAD", "return 1"]),
            Just(vec!["SCRIPT", "FLUSH"]),
            Just(vec!["FUNCTION", "DELETE", "lib"]),
        ]
        .prop_map(|w| WriteCmd::ScriptAdmin {
            args: w.iter().map(|a| a.as_bytes().to_vec()).collect(),
        });
        let cmd = prop_oneof![4 => cmd, 1 => exec, 1 => expired, 1 => acl, 1 => eval, 1 => admin];
        (any::<u64>(), cmd).prop_map(|(ts_ms, cmd)| WriteOp { ts_ms, cmd })
    }

    #[test]
    fn decode_errors() {
        let good = WriteOp::new(
            5,
            WriteCmd::Del {
                keys: vec![b"a".to_vec()],
            },
        )
        .encode();
        let mut bad_version = good.clone();
        bad_version[0] = 9;
        let mut bad_tag = good.clone();
        bad_tag[1] = 99;
        let mut trailing = good.clone();
        trailing.push(0);
        let mut empty_list = good[..10].to_vec();
        empty_list.extend_from_slice(&0u32.to_le_bytes());
        let mut huge_list = good[..10].to_vec();
        huge_list.extend_from_slice(&u32::MAX.to_le_bytes());
        let table: Vec<(Vec<u8>, OpDecodeError)> = vec![
            (vec![], OpDecodeError::Empty),
            (bad_version, OpDecodeError::UnknownVersion(9)),
            (bad_tag, OpDecodeError::UnknownTag(99)),
            (good[..good.len() - 1].to_vec(), OpDecodeError::Truncated),
            (trailing, OpDecodeError::Trailing(1)),
            (empty_list, OpDecodeError::Invalid("empty list")),
            (huge_list, OpDecodeError::Truncated),
        ];
        for (b, want) in table {
            assert_eq!(WriteOp::decode(&b), Err(want));
        }
    }

    proptest! {
        #[test]
        fn round_trip(op in arb_op()) {
            let b = op.encode();
            // The size computed up front is the size written.
            prop_assert_eq!(b.len(), 2 + 8 + op.cmd.body_len());
            prop_assert_eq!(WriteOp::decode(&b), Ok(op));
            for cut in 0..b.len() {
                prop_assert!(WriteOp::decode(&b[..cut]).is_err());
            }
        }

        #[test]
        fn arbitrary_bytes(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(op) = WriteOp::decode(&b) {
                prop_assert_eq!(op.encode(), b);
            }
        }
    }
}
