//! `XADD`, `XTRIM` and `XDEL`: their trimming options, parsing and
//! execution in Redis's order.

use super::command::{outcome, touched, KeyMut, Outcome};
use super::entry::StreamConfig;
use super::error::{arg, arity, int, is, is_exact, msg, StreamError};
use super::id::{StreamId, XaddId};
use super::log::{Stream, Trim, TrimStrategy};

/// MAXLEN/MINID as parsed, before the server's defaults apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrimSpec {
    /// MAXLEN or MINID.
    pub strategy: TrimStrategy,
    /// `~`.
    pub approx: bool,
    /// `LIMIT n` (only with `~`).
    pub limit: Option<i64>,
}

impl TrimSpec {
    /// The trim with `cfg`'s default LIMIT ([`Trim::new`]).
    pub fn resolve(&self, cfg: &StreamConfig) -> Trim {
        Trim::new(self.strategy, self.approx, self.limit, cfg)
    }
}

/// Redis's `streamParseAddOrTrimArgsOrReply`: the options after the key;
/// returns the trim, NOMKSTREAM, the XADD ID and the index of the ID (of
/// the first field minus one).
pub(super) fn parse_add_or_trim(
    args: &[Vec<u8>],
    xadd: bool,
) -> Result<(Option<TrimSpec>, bool, XaddId, usize), StreamError> {
    let n = args.len();
    let mut i = 2;
    let mut strategy: Option<TrimStrategy> = None;
    let mut approx = false;
    let mut limit: i64 = 0;
    let mut limit_given = false;
    let mut no_mkstream = false;
    let mut id = XaddId::Auto;
    while i < n {
        let more = n - 1 - i;
        let opt = arg(args, i);
        if xadd && is_exact(opt, "*") {
            break;
        } else if (is(opt, "maxlen") || is(opt, "minid")) && more > 0 {
            if strategy.is_some() {
                return Err(StreamError::Msg(msg::MAXLEN_AND_MINID));
            }
            approx = false;
            let next = arg(args, i + 1);
            if more >= 2 && is_exact(next, "~") {
                approx = true;
                i += 1;
            } else if more >= 2 && is_exact(next, "=") {
                i += 1;
            }
            let v = arg(args, i + 1);
            strategy = Some(if is(opt, "maxlen") {
                let m = int(v)?;
                if m < 0 {
                    return Err(StreamError::Msg(msg::MAXLEN_NEGATIVE));
                }
                TrimStrategy::MaxLen(m as u64)
            } else {
                TrimStrategy::MinId(StreamId::parse_strict(v, 0)?)
            });
            i += 1;
        } else if is(opt, "limit") && more > 0 {
            limit = int(arg(args, i + 1))?;
            if limit < 0 {
                return Err(StreamError::Msg(msg::LIMIT_NEGATIVE));
            }
            limit_given = true;
            i += 1;
        } else if xadd && is(opt, "nomkstream") {
            no_mkstream = true;
        } else if xadd {
            id = XaddId::parse(opt)?;
            break;
        } else {
            return Err(StreamError::Syntax);
        }
        i += 1;
    }
    if limit != 0 && strategy.is_none() {
        return Err(StreamError::Msg(msg::LIMIT_WITHOUT_STRATEGY));
    }
    if !xadd && strategy.is_none() {
        return Err(StreamError::Msg(msg::XTRIM_WITHOUT_STRATEGY));
    }
    if limit_given && !approx {
        return Err(StreamError::Msg(msg::LIMIT_WITHOUT_APPROX));
    }
    let trim = strategy.map(|strategy| TrimSpec {
        strategy,
        approx,
        limit: limit_given.then_some(limit),
    });
    Ok((trim, no_mkstream, id, i))
}

/// `XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]]
/// *|id field value [field value ...]`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xadd {
    /// NOMKSTREAM.
    pub no_mkstream: bool,
    /// MAXLEN/MINID.
    pub trim: Option<TrimSpec>,
    /// The ID argument.
    pub id: XaddId,
    /// The field/value pairs.
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Xadd {
    /// Parses XADD's words (the command name first); errors are those
    /// Redis gives before looking the key up: options, arity, `0-0`.
    pub fn parse(args: &[Vec<u8>]) -> Result<Xadd, StreamError> {
        arity(args, -5, "xadd")?;
        let (trim, no_mkstream, id, idpos) = parse_add_or_trim(args, true)?;
        let field_pos = idpos + 1;
        let rest = args.get(field_pos..).unwrap_or(&[]);
        if rest.len() < 2 || rest.len() % 2 == 1 {
            return Err(StreamError::Arity("xadd"));
        }
        if id == XaddId::Explicit(StreamId::MIN) {
            return Err(StreamError::IdZero);
        }
        let fields = rest
            .chunks_exact(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect();
        Ok(Xadd {
            no_mkstream,
            trim,
            id,
            fields,
        })
    }
}

/// Runs XADD: the new ID, or `None` (nil reply) with NOMKSTREAM on a
/// missing key. Events: `xadd`, then `xtrim` if the trim removed entries.
pub fn xadd(
    key: KeyMut<'_>,
    a: Xadd,
    now_ms: u64,
    cfg: &StreamConfig,
) -> Result<Outcome<Option<StreamId>>, StreamError> {
    let KeyMut::Slot(slot) = key else {
        return Err(StreamError::WrongType);
    };
    if slot.is_none() {
        if a.no_mkstream {
            return Ok(outcome(None, vec![]));
        }
        *slot = Some(Stream::new());
    }
    let Some(s) = slot.as_mut() else {
        return Err(StreamError::WrongType);
    };
    let id = s.add(a.id, a.fields, now_ms, cfg)?;
    let mut events = vec!["xadd"];
    if let Some(t) = a.trim {
        if s.trim(&t.resolve(cfg)) > 0 {
            events.push("xtrim");
        }
    }
    Ok(touched(Some(id), events, true))
}

/// `XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xtrim {
    /// The trim.
    pub trim: TrimSpec,
}

impl Xtrim {
    /// Parses XTRIM's words.
    pub fn parse(args: &[Vec<u8>]) -> Result<Xtrim, StreamError> {
        arity(args, -4, "xtrim")?;
        let (trim, _, _, _) = parse_add_or_trim(args, false)?;
        let trim = trim.ok_or(StreamError::Msg(msg::XTRIM_WITHOUT_STRATEGY))?;
        Ok(Xtrim { trim })
    }
}

/// Runs XTRIM: the number of entries removed (0 for a missing key).
/// Event: `xtrim` when some were.
pub fn xtrim(key: KeyMut<'_>, a: &Xtrim, cfg: &StreamConfig) -> Result<Outcome<u64>, StreamError> {
    match key {
        KeyMut::WrongType => Err(StreamError::WrongType),
        KeyMut::Slot(slot) => match slot.as_mut() {
            None => Ok(outcome(0, vec![])),
            Some(s) => {
                let n = s.trim(&a.trim.resolve(cfg));
                Ok(touched(
                    n,
                    if n > 0 { vec!["xtrim"] } else { vec![] },
                    n > 0,
                ))
            }
        },
    }
}

/// `XDEL key id [id ...]`, parsed (the IDs are checked after the key, as
/// in Redis: a missing key answers 0 whatever they are).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xdel {
    /// The ID words.
    pub ids: Vec<Vec<u8>>,
}

impl Xdel {
    /// Parses XDEL's words.
    pub fn parse(args: &[Vec<u8>]) -> Result<Xdel, StreamError> {
        arity(args, -3, "xdel")?;
        Ok(Xdel {
            ids: args.get(2..).unwrap_or(&[]).to_vec(),
        })
    }
}

pub(super) fn strict_ids(words: &[Vec<u8>]) -> Result<Vec<StreamId>, StreamError> {
    words.iter().map(|w| StreamId::parse_strict(w, 0)).collect()
}

/// Runs XDEL: entries deleted. Event: `xdel` when some were.
pub fn xdel(key: KeyMut<'_>, a: &Xdel) -> Result<Outcome<u64>, StreamError> {
    match key {
        KeyMut::WrongType => Err(StreamError::WrongType),
        KeyMut::Slot(slot) => match slot.as_mut() {
            None => Ok(outcome(0, vec![])),
            Some(s) => {
                let ids = strict_ids(&a.ids)?;
                let n = s.delete(&ids);
                Ok(touched(n, if n > 0 { vec!["xdel"] } else { vec![] }, n > 0))
            }
        },
    }
}
