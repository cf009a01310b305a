use super::*;
use crate::value::{Score, ZSet};

fn zset_of(points: &[(f64, f64, &str)]) -> ZSet {
    let mut z = ZSet::default();
    for &(lon, lat, m) in points {
        let s = geoadd_score(lon, lat).and_then(Score::new);
        if let Some(s) = s {
            z.insert(m.as_bytes().to_vec(), s);
        }
    }
    z
}

fn args(line: &str) -> Vec<Vec<u8>> {
    line.split_whitespace()
        .map(|w| w.as_bytes().to_vec())
        .collect()
}

#[test]
fn scores_and_positions_equal_redis() {
    // Values observed on redis-server 7.0.15.
    for (lon, lat, score, plon, plat, hash) in [
        (
            180.0,
            0.0,
            10133099161583616.0,
            "180",
            "0.00000126736058093",
            "80000000000",
        ),
        (
            -180.0,
            85.05112878,
            4503599627370496.0,
            "-179.99999731779098511",
            "85.0511287799999991",
            "bp05b5048p0",
        ),
        (
            0.0,
            -85.05112878,
            2251799813685248.0,
            "0.00000268220901489",
            "-85.05112751263942528",
            "h0bh0hbj200",
        ),
        (
            13.361389,
            38.115556,
            3479099956230698.0,
            "13.36138933897018433",
            "38.11555639549629859",
            "sqc8b49rny0",
        ),
        (
            15.087269,
            37.502669,
            3479447370796909.0,
            "15.08726745843887329",
            "37.50266842333162032",
            "sqdtr74hyu0",
        ),
    ] {
        assert_eq!(geoadd_score(lon, lat), Some(score), "{lon},{lat}");
        let (x, y) = decode_score(score);
        assert_eq!(
            (format_coord(x).as_str(), format_coord(y).as_str()),
            (plon, plat)
        );
        assert_eq!(geohash_string(score), hash);
    }
}

#[test]
fn odd_scores_decode_as_redis_converts_them() {
    // ZADD of scores that are not geohashes, then GEOPOS / GEOHASH.
    for (score, plon, plat, hash) in [
        (-1.0, "180", "85.0511287799999991", "bp05b5048p0"),
        (1e19, "180", "85.0511287799999991", "bp05b5048p0"),
        (
            f64::INFINITY,
            "-179.99999731779098511",
            "-85.05112751263942528",
            "00bh0hbj200",
        ),
        (
            5.5,
            "-179.99999731779098511",
            "-85.05111990847595393",
            "00bh0hbj240",
        ),
        (-12345.75, "180", "85.0511287799999991", "bp05b5048p0"),
    ] {
        let (x, y) = decode_score(score);
        assert_eq!(
            (format_coord(x).as_str(), format_coord(y).as_str()),
            (plon, plat),
            "{score}"
        );
        assert_eq!(geohash_string(score), hash, "{score}");
    }
}

#[test]
fn distances_equal_redis() {
    // GEODIST Sicily Palermo Catania (Redis's documentation example).
    let z = zset_of(&[
        (13.361389, 38.115556, "Palermo"),
        (15.087269, 37.502669, "Catania"),
    ]);
    for (unit, want) in [
        (Unit::M, "166274.1516"),
        (Unit::Km, "166.2742"),
        (Unit::Mi, "103.3182"),
        (Unit::Ft, "545518.8700"),
    ] {
        let d = geodist(&z, b"Palermo", b"Catania", unit);
        assert_eq!(d.map(format_distance).as_deref(), Some(want), "{unit:?}");
    }
    assert_eq!(geodist(&z, b"Palermo", b"nope", Unit::M), None);
}

#[test]
fn distance_texts_round_half_even() {
    for (d, want) in [
        (0.0, "0.0000"),
        (-0.0, "0.0000"),
        (0.00004, "0.0000"),
        (0.00005, "0.0000"), // scales to exactly 0.5: half to even
        (0.00015, "0.0001"), // 1.4999999999999998 after scaling
        (1.5, "1.5000"),
        (0.0012, "0.0012"),
        (123456.78915, "123456.7892"),
        (-2.5, "-2.5000"),
        (-0.00001, "0.0000"),
    ] {
        assert_eq!(format_distance(d), want, "{d}");
    }
}

#[test]
fn coord_texts() {
    for (v, want) in [
        (0.0, "0"),
        (-0.0, "0"),
        (-1e-20, "0"),
        (180.0, "180"),
        (1.5, "1.5"),
        (0.1, "0.10000000000000001"),
        (f64::INFINITY, "inf"),
    ] {
        assert_eq!(format_coord(v), want, "{v}");
    }
}

#[test]
fn doubles_parse_as_strtod() {
    for (s, want) in [
        ("1", Some(1.0)),
        ("-2.5", Some(-2.5)),
        ("+.5", Some(0.5)),
        ("5.", Some(5.0)),
        ("1e3", Some(1000.0)),
        ("1E+3", Some(1000.0)),
        ("inf", Some(f64::INFINITY)),
        ("-Infinity", Some(f64::NEG_INFINITY)),
        ("0x10", Some(16.0)),
        ("0x1.8p1", Some(3.0)),
        ("-0X.8", Some(-0.5)),
        ("0x1p-1074", Some(f64::from_bits(1))),
        ("0x1p-1075", None),
        ("0x1.8p-1075", Some(f64::from_bits(1))),
        ("0x1p1024", None),
        ("0x1.fffffffffffff8p1023", None),
        ("0x1.fffffffffffff7p1023", Some(f64::MAX)),
        ("0x", None),
        ("0x1p", None),
        ("1e-310", Some(1e-310)),
        ("1e-400", None),
        ("0e-400", Some(0.0)),
        ("1e400", None),
        ("nan", None),
        ("", None),
        (" 1", None),
        ("1 ", None),
        (".", None),
        ("e5", None),
        ("1e", None),
        ("1x", None),
        ("infinit", None),
    ] {
        assert_eq!(parse_double(s.as_bytes()), want, "{s:?}");
    }
}

#[test]
fn errors_carry_redis_texts() {
    for (e, want) in [
        (
            check_lon_lat(180.1, 0.0).err(),
            "ERR invalid longitude,latitude pair 180.100000,0.000000",
        ),
        (
            check_lon_lat(-0.0, 200.0).err(),
            "ERR invalid longitude,latitude pair -0.000000,200.000000",
        ),
        (
            check_lon_lat(f64::INFINITY, 1.0).err(),
            "ERR invalid longitude,latitude pair inf,1.000000",
        ),
        (
            Unit::parse(b"yd").err(),
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        ),
    ] {
        assert_eq!(e.map(|e| e.to_string()).as_deref(), Some(want));
    }
    assert_eq!(Unit::parse(b"KM\0junk"), Ok(Unit::Km));
}

#[test]
fn geoadd_parses_options_and_points() {
    let ok = parse_geoadd(&args("GEOADD k ch NX 13.361389 38.115556 Palermo"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(ok.nx && ok.ch && !ok.xx);
    assert_eq!(ok.items.len(), 1);
    for (line, want) in [
        ("GEOADD k nx xx 1 2 m", GeoError::Syntax),
        ("GEOADD k 1 2 m 3", GeoError::Syntax),
        ("GEOADD k nx xx ch", GeoError::Syntax),
        (
            "GEOADD k 1 2 m 200 2 n",
            GeoError::InvalidLonLat {
                lon: 200.0,
                lat: 2.0,
            },
        ),
        ("GEOADD k GT 1 2", GeoError::NotFloat),
        ("GEOADD k 1 2", GeoError::WrongArity("geoadd".into())),
    ] {
        assert_eq!(parse_geoadd(&args(line)), Err(want), "{line}");
    }
    let mut z = ZSet::default();
    let add = |line: &str| parse_geoadd(&args(line)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(apply_geoadd(&mut z, &add("GEOADD k 1 2 a 3 4 b")), 2);
    assert_eq!(
        apply_geoadd(&mut z, &add("GEOADD k CH 1 2 a 5 6 b 7 8 c")),
        2
    );
    assert_eq!(apply_geoadd(&mut z, &add("GEOADD k NX 9 9 a 7 8 d")), 1);
    assert_eq!(apply_geoadd(&mut z, &add("GEOADD k XX CH 9 9 a 7 8 e")), 1);
    assert_eq!(z.len(), 4);
}

#[test]
fn step_estimate() {
    for (r, lat, want) in [
        (0.0, 0.0, 26),
        (1.0, 0.0, 24),
        (1000.0, 0.0, 14),
        (1000.0, 70.0, 13),
        (1000.0, -81.0, 12),
        (5_000_000.0, 0.0, 2),
        (10_000_000.0, 0.0, 1),
        (f64::INFINITY, 0.0, 1),
    ] {
        assert_eq!(estimate_steps_by_radius(r, lat), want, "{r} {lat}");
    }
}

#[test]
fn neighbors_wrap_around() {
    let h = HashBits { bits: 0, step: 2 };
    let n = neighbors(h);
    // Longitude index 0 → west wraps to 3 (odd bits), latitude 0 →
    // south wraps to 3 (even bits).
    assert_eq!(n.west.bits, 0b1010);
    assert_eq!(n.south.bits, 0b0101);
    assert_eq!(n.east.bits, 0b0010);
    assert_eq!(n.north.bits, 0b0001);
    assert_eq!(n.south_west.bits, 0b1111);
}

#[test]
fn search_finds_sicily_as_in_redis_docs() {
    let z = zset_of(&[
        (13.361389, 38.115556, "Palermo"),
        (15.087269, 37.502669, "Catania"),
        (12.758489, 38.788135, "edge1"),
        (17.241510, 38.788135, "edge2"),
    ]);
    let plan = parse_search(
        SearchCommand::GeoRadius,
        &args("GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD ASC"),
        Some(&z),
    );
    let Ok(SearchPlan::Run(req)) = plan else {
        panic!("{plan:?}")
    };
    let got: Vec<(String, String, (String, String))> = search(&z, &req)
        .iter()
        .map(|p| {
            (
                String::from_utf8_lossy(&p.member).into_owned(),
                p.dist_text(),
                p.coord_texts(),
            )
        })
        .collect();
    let want = [
        (
            "Catania",
            "56.4413",
            ("15.08726745843887329", "37.50266842333162032"),
        ),
        (
            "Palermo",
            "190.4424",
            ("13.36138933897018433", "38.11555639549629859"),
        ),
    ];
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!(
            (
                g.0.as_str(),
                g.1.as_str(),
                (g.2 .0.as_str(), g.2 .1.as_str())
            ),
            w
        );
    }
    // GEOSEARCH ... BYBOX 400 400 km ASC WITHDIST (Redis's docs).
    let plan = parse_search(
        SearchCommand::GeoSearch,
        &args("GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC WITHDIST"),
        Some(&z),
    );
    let Ok(SearchPlan::Run(req)) = plan else {
        panic!("{plan:?}")
    };
    let got: Vec<(Vec<u8>, String)> = search(&z, &req)
        .into_iter()
        .map(|p| (p.member.clone(), p.dist_text()))
        .collect();
    assert_eq!(
        got,
        vec![
            (b"Catania".to_vec(), "56.4413".into()),
            (b"Palermo".to_vec(), "190.4424".into()),
            (b"edge2".to_vec(), "279.7403".into()),
            (b"edge1".to_vec(), "279.7405".into()),
        ]
    );
}

#[test]
fn search_errors_in_redis_order() {
    let z = zset_of(&[(1.0, 1.0, "a")]);
    let e = |cmd: SearchCommand, line: &str, z: Option<&ZSet>| match parse_search(
        cmd,
        &args(line),
        z,
    ) {
        Err(e) => e.to_string(),
        Ok(p) => format!("{p:?}"),
    };
    use SearchCommand::*;
    for (cmd, line, want) in [
        (GeoRadius, "GEORADIUS k 200 0 1 km", "ERR invalid longitude,latitude pair 200.000000,0.000000"),
        (GeoRadius, "GEORADIUS k x 0 1 km", "ERR value is not a valid float"),
        (GeoRadius, "GEORADIUS k 0 0 x km", "ERR need numeric radius"),
        (GeoRadius, "GEORADIUS k 0 0 -1 km", "ERR radius cannot be negative"),
        (GeoRadius, "GEORADIUS k 0 0 1 yd", "ERR unsupported unit provided. please use M, KM, FT, MI"),
        (GeoRadius, "GEORADIUS k 0 0 1 km COUNT", "ERR syntax error"),
        (GeoRadius, "GEORADIUS k 0 0 1 km COUNT 0", "ERR COUNT must be > 0"),
        (GeoRadius, "GEORADIUS k 0 0 1 km COUNT x", "ERR value is not an integer or out of range"),
        (GeoRadius, "GEORADIUS k 0 0 1 km ANY", "ERR the ANY argument requires COUNT argument"),
        (GeoRadius, "GEORADIUS k 0 0 1 km STORE d WITHDIST", "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"),
        (GeoRadiusRo, "GEORADIUS_RO k 0 0 1 km STORE d", "ERR syntax error"),
        (GeoRadiusByMember, "GEORADIUSBYMEMBER k zz 1 km", "ERR could not decode requested zset member"),
        (GeoSearch, "GEOSEARCH k FROMLONLAT 0 0 COUNT 1", "ERR exactly one of BYRADIUS and BYBOX can be specified for GEOSEARCH"),
        (GeoSearch, "geosearch k BYRADIUS 1 m COUNT 1", "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for geosearch"),
        (GeoSearch, "GEOSEARCH k FROMMEMBER a FROMLONLAT 0 0 BYRADIUS 1 m", "ERR syntax error"),
        (GeoSearch, "GEOSEARCH k FROMMEMBER zz BYRADIUS 1 m foo", "ERR could not decode requested zset member"),
        (GeoSearch, "GEOSEARCH k FROMMEMBER a BYBOX 1 x m", "ERR need numeric height"),
        (GeoSearch, "GEOSEARCH k FROMMEMBER a BYBOX 1 -1 m", "ERR height or width cannot be negative"),
        (GeoSearch, "GEOSEARCH k FROMMEMBER a BYRADIUS 1 m STORE x", "ERR syntax error"),
        (GeoSearchStore, "GEOSEARCHSTORE d k FROMMEMBER a BYRADIUS 1 m WITHDIST", "ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options"),
    ] {
        assert_eq!(e(cmd, line, Some(&z)), want, "{line}");
    }
    // A missing key skips the member (and GEORADIUSBYMEMBER's radius).
    assert_eq!(
        parse_search(
            GeoRadiusByMember,
            &args("GEORADIUSBYMEMBER k zz x km"),
            None
        ),
        Ok(SearchPlan::KeyMissing { store: None })
    );
    assert_eq!(
        parse_search(
            GeoSearchStore,
            &args("GEOSEARCHSTORE d k FROMMEMBER zz BYRADIUS 1 m STOREDIST"),
            None
        ),
        Ok(SearchPlan::KeyMissing {
            store: Some(StoreTarget {
                key: b"d".to_vec(),
                dist: true
            })
        })
    );
}

#[test]
fn pqsort_sorts_the_prefix() {
    let mut rng = crate::value::SplitMix::new(7);
    for n in [0usize, 1, 5, 7, 8, 30, 41, 100, 500] {
        for keep in [1usize, 2, 10, 50] {
            let mut pts: Vec<GeoPoint> = (0..n)
                .map(|i| GeoPoint {
                    member: i.to_string().into_bytes(),
                    score: 0.0,
                    lon: 0.0,
                    lat: 0.0,
                    dist: rng.below(20) as f64,
                })
                .collect();
            let mut want: Vec<f64> = pts.iter().map(|p| p.dist).collect();
            want.sort_by(f64::total_cmp);
            sort_points(&mut pts, Sort::Asc, keep.min(n));
            let k = keep.min(n);
            let got: Vec<f64> = pts[..k].iter().map(|p| p.dist).collect();
            assert_eq!(got, want[..k].to_vec(), "n={n} keep={keep}");
            assert_eq!(pts.len(), n);
        }
    }
}
