//! [`GeoError`]: the errors of the `GEO*` commands, with Redis's texts.

/// An error of a `GEO*` command; its text (`Display`) is Redis's, code
/// included (`ERR ...`), ready for [`Reply::err`](crate::resp::Reply::err).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GeoError {
    /// A longitude/latitude outside `[-180,180]` × `[-85.05112878,85.05112878]`
    /// (`GEOADD`, `GEORADIUS`, `FROMLONLAT`); printed with C's `%f`.
    #[error("ERR invalid longitude,latitude pair {lon:.6},{lat:.6}")]
    InvalidLonLat {
        /// The longitude given.
        lon: f64,
        /// The latitude given.
        lat: f64,
    },
    /// A coordinate that is not a double.
    #[error("ERR value is not a valid float")]
    NotFloat,
    /// `COUNT`'s argument is not an integer.
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    /// The radius is not a double.
    #[error("ERR need numeric radius")]
    NeedNumericRadius,
    /// `BYBOX`'s width is not a double.
    #[error("ERR need numeric width")]
    NeedNumericWidth,
    /// `BYBOX`'s height is not a double.
    #[error("ERR need numeric height")]
    NeedNumericHeight,
    /// A negative radius.
    #[error("ERR radius cannot be negative")]
    NegativeRadius,
    /// A negative width or height.
    #[error("ERR height or width cannot be negative")]
    NegativeBox,
    /// A unit other than m, km, ft, mi.
    #[error("ERR unsupported unit provided. please use M, KM, FT, MI")]
    BadUnit,
    /// `COUNT 0` or a negative count.
    #[error("ERR COUNT must be > 0")]
    CountNotPositive,
    /// An unknown or misplaced option.
    #[error("ERR syntax error")]
    Syntax,
    /// `GEORADIUSBYMEMBER`'s member or `FROMMEMBER`'s is not in the set.
    #[error("ERR could not decode requested zset member")]
    MemberNotFound,
    /// `STORE`/`STOREDIST`/`GEOSEARCHSTORE` with `WITHDIST`, `WITHHASH` or
    /// `WITHCOORD`; `geosearchstore` tells which text.
    #[error(
        "ERR {} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
        store_option_name(*.geosearchstore)
    )]
    StoreWithOptions {
        /// True for `GEOSEARCHSTORE`, false for the `GEORADIUS` family.
        geosearchstore: bool,
    },
    /// `GEOSEARCH`/`GEOSEARCHSTORE` without `FROMMEMBER` or `FROMLONLAT`;
    /// carries the command name as the client typed it.
    #[error("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {0}")]
    NeedFrom(String),
    /// `GEOSEARCH`/`GEOSEARCHSTORE` without `BYRADIUS` or `BYBOX`.
    #[error("ERR exactly one of BYRADIUS and BYBOX can be specified for {0}")]
    NeedBy(String),
    /// `ANY` without `COUNT`.
    #[error("ERR the ANY argument requires COUNT argument")]
    AnyWithoutCount,
    /// Fewer arguments than the command's arity (normally refused by the
    /// command table first); carries the lowercase command name.
    #[error("ERR wrong number of arguments for '{0}' command")]
    WrongArity(String),
}

/// What the store error calls the store option.
pub(super) fn store_option_name(geosearchstore: bool) -> &'static str {
    if geosearchstore {
        "GEOSEARCHSTORE"
    } else {
        "STORE option in GEORADIUS"
    }
}
