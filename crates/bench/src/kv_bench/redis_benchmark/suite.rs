//! The default tests of `redis-benchmark` (Redis 7.0, no `-t`, no `-r`,
//! `-d 3`): their names as its `--csv` output prints them, the command
//! each sends (captured with `redis-cli monitor` on a scratch server), and
//! which of them write; and the parser of that CSV output.
//!
//! Without `-r` every request of a test uses the literal key
//! `key:__rand_int__` (`counter:__rand_int__`, member
//! `element:__rand_int__`): one key per data type, as redis-benchmark
//! sends. The 3-byte value is `VXK`, redis-benchmark's own data for
//! `-d 3`.
//!
//! **Write tests** are those whose command Redis flags `write` in its
//! command table (it may change the data set, and Redis replicates it):
//! SET, INCR, LPUSH, RPUSH, LPOP, RPOP, SADD, HSET, SPOP, ZADD, ZPOPMIN,
//! the LPUSH that fills the list for LRANGE, and MSET. PING, GET and LRANGE
//! are reads. A pop on an empty key changes nothing but is still a write
//! command; with the default list's order the pops always find elements.

use xlane_kv::resp::encode_command;

/// The value redis-benchmark sends with its default `-d 3`.
pub const VALUE: &[u8] = b"VXK";

/// One default test of redis-benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Test {
    /// Its name in redis-benchmark's CSV output (`"SET"`, `"LRANGE_100
    /// (first 100 elements)"`, ...).
    pub name: &'static str,
    /// Whether its command writes (see the module docs).
    pub write: bool,
    /// The command, as arguments; `PING_INLINE` is sent inline.
    pub args: &'static [&'static [u8]],
    /// Sent in the inline form (`PING\r\n`) rather than as a RESP array.
    pub inline: bool,
}

const K: &[u8] = b"key:__rand_int__";
const E: &[u8] = b"element:__rand_int__";

/// The default tests, in the order redis-benchmark runs them (each test
/// leaves the keys the next one finds, so order matters).
pub const DEFAULT_TESTS: [Test; 20] = [
    t("PING_INLINE", false, &[b"PING"], true),
    t("PING_MBULK", false, &[b"PING"], false),
    t("SET", true, &[b"SET", K, VALUE], false),
    t("GET", false, &[b"GET", K], false),
    t("INCR", true, &[b"INCR", b"counter:__rand_int__"], false),
    t("LPUSH", true, &[b"LPUSH", b"mylist", VALUE], false),
    t("RPUSH", true, &[b"RPUSH", b"mylist", VALUE], false),
    t("LPOP", true, &[b"LPOP", b"mylist"], false),
    t("RPOP", true, &[b"RPOP", b"mylist"], false),
    t("SADD", true, &[b"SADD", b"myset", E], false),
    t("HSET", true, &[b"HSET", b"myhash", E, VALUE], false),
    t("SPOP", true, &[b"SPOP", b"myset"], false),
    t("ZADD", true, &[b"ZADD", b"myzset", b"0", E], false),
    t("ZPOPMIN", true, &[b"ZPOPMIN", b"myzset"], false),
    t(
        "LPUSH (needed to benchmark LRANGE)",
        true,
        &[b"LPUSH", b"mylist", VALUE],
        false,
    ),
    t(
        "LRANGE_100 (first 100 elements)",
        false,
        &[b"LRANGE", b"mylist", b"0", b"99"],
        false,
    ),
    t(
        "LRANGE_300 (first 300 elements)",
        false,
        &[b"LRANGE", b"mylist", b"0", b"299"],
        false,
    ),
    t(
        "LRANGE_500 (first 500 elements)",
        false,
        &[b"LRANGE", b"mylist", b"0", b"499"],
        false,
    ),
    t(
        "LRANGE_600 (first 600 elements)",
        false,
        &[b"LRANGE", b"mylist", b"0", b"599"],
        false,
    ),
    t(
        "MSET (10 keys)",
        true,
        &[
            b"MSET", K, VALUE, K, VALUE, K, VALUE, K, VALUE, K, VALUE, K, VALUE, K, VALUE, K,
            VALUE, K, VALUE, K, VALUE,
        ],
        false,
    ),
];

const fn t(name: &'static str, write: bool, args: &'static [&'static [u8]], inline: bool) -> Test {
    Test {
        name,
        write,
        args,
        inline,
    }
}

impl Test {
    /// The bytes of one request, appended to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        if self.inline {
            for (i, a) in self.args.iter().enumerate() {
                if i > 0 {
                    out.push(b' ');
                }
                out.extend_from_slice(a);
            }
            out.extend_from_slice(b"\r\n");
        } else {
            let args: Vec<Vec<u8>> = self.args.iter().map(|a| a.to_vec()).collect();
            encode_command(&args, out);
        }
    }
}

/// The test called `name` (as in the CSV output).
pub fn by_name(name: &str) -> Option<&'static Test> {
    DEFAULT_TESTS.iter().find(|t| t.name == name)
}

/// One line of redis-benchmark's `--csv` output.
#[derive(Clone, Debug, PartialEq)]
pub struct CsvRow {
    /// The test's name.
    pub test: String,
    /// Requests per second; `None` when redis-benchmark printed `inf` (the
    /// test took less than its millisecond clock's tick).
    pub rps: Option<f64>,
}

/// Why a line of redis-benchmark's output is not a result.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CsvError {
    /// A line that is not `"name","rps",...`.
    #[error("not a CSV result line: {0:?}")]
    NotCsv(String),
    /// The requests/s field does not parse as a positive number.
    #[error("bad requests/s in {0:?}")]
    BadRps(String),
}

/// Parses one line of redis-benchmark's `--csv` output: `Ok(None)` for the
/// header line (`"test","rps",...`), `Ok(Some(row))` for a result.
pub fn parse_csv_line(line: &str) -> Result<Option<CsvRow>, CsvError> {
    let line = line.trim();
    let fields = split_quoted(line).ok_or_else(|| CsvError::NotCsv(line.to_string()))?;
    if fields.len() < 2 {
        return Err(CsvError::NotCsv(line.to_string()));
    }
    if fields[0] == "test" && fields[1] == "rps" {
        return Ok(None);
    }
    let rps = if fields[1] == "inf" {
        None
    } else {
        let x: f64 = fields[1]
            .parse()
            .map_err(|_| CsvError::BadRps(line.to_string()))?;
        if !(x.is_finite() && x >= 0.0) {
            return Err(CsvError::BadRps(line.to_string()));
        }
        Some(x)
    };
    Ok(Some(CsvRow {
        test: fields[0].clone(),
        rps,
    }))
}

/// Fields of a line of comma-separated, double-quoted fields (`""` inside
/// a field is a quote); `None` unless every field is quoted.
fn split_quoted(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        if chars.next()? != '"' {
            return None;
        }
        let mut f = String::new();
        loop {
            match chars.next()? {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    f.push('"');
                }
                '"' => break,
                c => f.push(c),
            }
        }
        out.push(f);
        match chars.next() {
            None => return Some(out),
            Some(',') => {}
            Some(_) => return None,
        }
    }
}

/// What one redis-benchmark run printed, test by test: the CSV results in
/// output order, and the error lines printed before each result (a test's
/// line comes when it ends, so errors printed before it are its own).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parsed {
    /// Per result line: the row and the error lines printed before it
    /// (since the previous result).
    pub rows: Vec<(CsvRow, Vec<String>)>,
    /// Error lines after the last result.
    pub trailing: Vec<String>,
}

/// Parses redis-benchmark's merged standard output and error (`--csv -q`,
/// in the order it printed them). Lines that are neither CSV nor empty nor
/// its warning that the server's CONFIG could not be read are errors.
pub fn parse_output(text: &str) -> Parsed {
    let mut p = Parsed::default();
    let mut pending = Vec::new();
    for raw in text.split(['\n', '\r']) {
        let line = raw.trim();
        if line.is_empty() || line.starts_with("WARNING: Could not fetch server CONFIG") {
            continue;
        }
        match parse_csv_line(line) {
            Ok(None) => {}
            Ok(Some(row)) => p.rows.push((row, std::mem::take(&mut pending))),
            Err(_) => pending.push(line.to_string()),
        }
    }
    p.trailing = pending;
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// redis-benchmark 7.0.15's output (`-P 16 -q -n 200 -c 2 --csv`)
    /// against redis-server, with two made-up error lines; `inf` is what it
    /// prints for a test shorter than a millisecond.
    const SAMPLE: &str = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
\"PING_INLINE\",\"69333.34\",\"0.299\",\"0.176\",\"0.207\",\"0.487\",\"1.879\",\"1.879\"\n\
Error from server: ERR unknown command 'PING'\n\
\"PING_MBULK\",\"inf\",\"0.278\",\"0.128\",\"0.175\",\"0.319\",\"2.199\",\"2.199\"\n\
\"LRANGE_100 (first 100 elements)\",\"52000.00\",\"0.423\",\"0.288\",\"0.415\",\"0.615\",\"0.615\",\"0.615\"\n\
\"MSET (10 keys)\",\"29714.29\",\"1.146\",\"0.712\",\"1.159\",\"1.359\",\"1.359\",\"1.359\"\n\
Error: Connection reset by peer\n";

    #[test]
    fn csv_results_and_errors_go_to_their_tests() {
        let p = parse_output(SAMPLE);
        let got: Vec<(&str, Option<f64>, usize)> = p
            .rows
            .iter()
            .map(|(r, e)| (r.test.as_str(), r.rps, e.len()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("PING_INLINE", Some(69333.34), 0),
                ("PING_MBULK", None, 1),
                ("LRANGE_100 (first 100 elements)", Some(52000.0), 0),
                ("MSET (10 keys)", Some(29714.29), 0),
            ]
        );
        assert_eq!(p.trailing, vec!["Error: Connection reset by peer"]);
        for (r, _) in &p.rows {
            assert!(by_name(&r.test).is_some(), "{} is a default test", r.test);
        }
    }

    #[test]
    fn bad_lines_are_refused() {
        let cases = [
            ("\"SET\"", false),
            ("SET,1000", false),
            ("\"SET\",\"fast\"", false),
            ("\"SET\",\"-3\"", false),
            ("\"a\"\"b\",\"7\"", true),
        ];
        for (line, ok) in cases {
            assert_eq!(parse_csv_line(line).is_ok(), ok, "{line}");
        }
        assert_eq!(
            parse_csv_line("\"a\"\"b\",\"7\"").unwrap().unwrap().test,
            "a\"b"
        );
    }

    #[test]
    fn requests_are_encoded_as_redis_benchmark_sends_them() {
        let mut out = Vec::new();
        DEFAULT_TESTS[0].encode(&mut out);
        assert_eq!(out, b"PING\r\n");
        out.clear();
        by_name("SET").unwrap().encode(&mut out);
        assert_eq!(
            out,
            b"*3\r\n$3\r\nSET\r\n$16\r\nkey:__rand_int__\r\n$3\r\nVXK\r\n"
        );
        let mset = by_name("MSET (10 keys)").unwrap();
        assert_eq!(mset.args.len(), 21);
        let writes: Vec<&str> = DEFAULT_TESTS
            .iter()
            .filter(|t| t.write)
            .map(|t| t.name)
            .collect();
        assert_eq!(writes.len(), 13, "{writes:?}");
    }
}
