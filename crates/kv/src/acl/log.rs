//! The ACL log (`ACL LOG`): a member's denied commands and failed
//! authentications.

use super::*;

/// Why an entry was logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogReason {
    /// A command denied.
    Command,
    /// A key denied.
    Key,
    /// A channel denied.
    Channel,
    /// A failed `AUTH` (or `HELLO ... AUTH`).
    Auth,
}

impl LogReason {
    /// Its name in `ACL LOG`.
    pub fn name(self) -> &'static str {
        match self {
            LogReason::Command => "command",
            LogReason::Key => "key",
            LogReason::Channel => "channel",
            LogReason::Auth => "auth",
        }
    }
}

impl From<DenyReason> for LogReason {
    fn from(r: DenyReason) -> Self {
        match r {
            DenyReason::Command => LogReason::Command,
            DenyReason::Key => LogReason::Key,
            DenyReason::Channel => LogReason::Channel,
        }
    }
}

/// Where the denied command ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogContext {
    /// Sent by the client.
    Toplevel,
    /// Inside `MULTI`.
    Multi,
    /// From a script.
    Lua,
    /// From a module.
    Module,
}

impl LogContext {
    /// Its name in `ACL LOG`.
    pub fn name(self) -> &'static str {
        match self {
            LogContext::Toplevel => "toplevel",
            LogContext::Multi => "multi",
            LogContext::Lua => "lua",
            LogContext::Module => "module",
        }
    }
}

/// One entry of the ACL log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// How many times it happened (repeats within 60 s are grouped).
    pub count: u64,
    /// Why.
    pub reason: LogReason,
    /// Where.
    pub context: LogContext,
    /// The command's full name, the key, the channel, or for `AUTH` the
    /// command word as sent (`AUTH`, `hello`...).
    pub object: Vec<u8>,
    /// The connection's user, or for `AUTH` the user tried.
    pub username: Vec<u8>,
    /// When it last happened, ms since the epoch.
    pub ctime_ms: u64,
    /// The client's `CLIENT INFO` line, last time.
    pub client_info: Vec<u8>,
}

impl LogEntry {
    /// A denied command of `username`'s connection.
    pub fn denied(
        d: &Denied,
        username: &[u8],
        context: LogContext,
        now_ms: u64,
        client_info: Vec<u8>,
    ) -> LogEntry {
        LogEntry {
            count: 1,
            reason: d.reason.into(),
            context,
            object: d.object.clone(),
            username: username.to_vec(),
            ctime_ms: now_ms,
            client_info,
        }
    }

    /// A failed authentication as `username`; `command_word` is the
    /// command's first word as the client sent it.
    pub fn auth(
        username: &[u8],
        command_word: &[u8],
        context: LogContext,
        now_ms: u64,
        client_info: Vec<u8>,
    ) -> LogEntry {
        LogEntry {
            count: 1,
            reason: LogReason::Auth,
            context,
            object: command_word.to_vec(),
            username: username.to_vec(),
            ctime_ms: now_ms,
            client_info,
        }
    }

    fn same_event(&self, other: &LogEntry) -> bool {
        self.reason == other.reason
            && self.context == other.context
            && self.ctime_ms.abs_diff(other.ctime_ms) <= 60_000
            && self.object == other.object
            && self.username == other.username
    }
}

/// The ACL log, newest first, at most `acllog-max-len` entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclLog {
    entries: VecDeque<LogEntry>,
    max_len: usize,
}

impl Default for AclLog {
    fn default() -> Self {
        AclLog::new(ACLLOG_DEFAULT_MAX_LEN)
    }
}

impl AclLog {
    /// An empty log of at most `max_len` entries.
    pub fn new(max_len: usize) -> AclLog {
        AclLog {
            entries: VecDeque::new(),
            max_len,
        }
    }

    /// Sets `acllog-max-len`; as in Redis the log is trimmed at the next
    /// new entry, not now.
    pub fn set_max_len(&mut self, max_len: usize) {
        self.max_len = max_len;
    }

    /// `acllog-max-len`.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// The entries, newest first.
    pub fn entries(&self) -> impl Iterator<Item = &LogEntry> {
        self.entries.iter()
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Logs an event (Redis' `addACLLogEntry`): when one of the 10 newest
    /// entries is the same event (reason, context, object, user) within
    /// 60 s, that entry moves to the front, counts one more and takes the
    /// new time and client; otherwise the event is a new entry at the
    /// front and the oldest go past `acllog-max-len`.
    pub fn add(&mut self, e: LogEntry) {
        let found = self
            .entries
            .iter()
            .take(10)
            .position(|old| old.same_event(&e));
        if let Some(i) = found {
            if let Some(mut old) = self.entries.remove(i) {
                old.count += 1;
                old.ctime_ms = e.ctime_ms;
                old.client_info = e.client_info;
                self.entries.push_front(old);
            }
            return;
        }
        self.entries.push_front(e);
        while self.entries.len() > self.max_len {
            self.entries.pop_back();
        }
    }

    /// `ACL LOG RESET`.
    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// `ACL LOG [count]` at `now_ms`.
    pub fn reply(&self, count: usize, now_ms: u64) -> Reply {
        Reply::Array(Some(
            self.entries
                .iter()
                .take(count)
                .map(|e| {
                    let age = (now_ms as i64 - e.ctime_ms as i64) as f64 / 1000.0;
                    Reply::Map(vec![
                        (Reply::bulk("count"), Reply::Integer(e.count as i64)),
                        (Reply::bulk("reason"), Reply::bulk(e.reason.name())),
                        (Reply::bulk("context"), Reply::bulk(e.context.name())),
                        (Reply::bulk("object"), Reply::bulk(e.object.clone())),
                        (Reply::bulk("username"), Reply::bulk(e.username.clone())),
                        (
                            Reply::bulk("age-seconds"),
                            Reply::Double(crate::value::fmt_score(age)),
                        ),
                        (
                            Reply::bulk("client-info"),
                            Reply::bulk(e.client_info.clone()),
                        ),
                    ])
                })
                .collect(),
        ))
    }
}
