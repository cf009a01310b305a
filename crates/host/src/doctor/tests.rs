use super::*;
use std::io;

#[test]
fn cmdline_stops_at_double_dash() {
    struct One(&'static str);
    impl SysSource for One {
        fn read(&self, _: &str) -> io::Result<String> {
            Ok(self.0.to_string())
        }
        fn list(&self, _: &str) -> io::Result<Vec<String>> {
            Ok(Vec::new())
        }
        fn exists(&self, _: &str) -> bool {
            false
        }
        fn writable(&self, _: &str) -> bool {
            false
        }
    }
    let cl = cmdline(&One("quiet isolcpus=1 -- idle=poll"));
    assert_eq!(
        cl,
        vec![
            ("quiet".into(), None),
            ("isolcpus".into(), Some("1".into()))
        ]
    );
}

#[test]
fn param_cpus() {
    let cases = [
        ("1", "1"),
        ("domain,managed_irq,2-3", "2-3"),
        ("nohz,4,6-7", "4,6-7"),
        ("", ""),
        ("bogus", ""),
    ];
    for (v, want) in cases {
        assert_eq!(cpus_of_param(v).to_list(), want, "{v}");
    }
}

#[test]
fn config_values() {
    let c = "CONFIG_HZ_250=y\nCONFIG_HZ=250\n# CONFIG_NO_HZ_FULL is not set\nCONFIG_X=\"a\"\n";
    assert_eq!(config_value(c, "CONFIG_HZ").as_deref(), Some("250"));
    assert_eq!(config_value(c, "CONFIG_NO_HZ_FULL").as_deref(), Some("n"));
    assert_eq!(config_value(c, "CONFIG_X").as_deref(), Some("a"));
    assert_eq!(config_value(c, "CONFIG_Y"), None);
}

#[test]
fn interrupts_parse() {
    let t = "           CPU0       CPU1       \n 24:          1          0  IO-APIC   5-edge      ACPI:Ged\nLOC:      25051      25637   Local timer interrupts\nERR:          0\n";
    let i = Interrupts::parse(t);
    assert_eq!(i.cpus, vec![0, 1]);
    assert_eq!(i.count("LOC", 1), Some(25637));
    assert_eq!(i.count("24", 0), Some(1));
    assert_eq!(i.count("ERR", 0), Some(0));
    assert_eq!(i.count("ERR", 1), None);
    assert_eq!(i.count("LOC", 2), None);
}

#[test]
fn wrapping() {
    assert_eq!(wrap("", 10), vec![String::new()]);
    assert_eq!(wrap("a bb ccc dddd", 6), vec!["a bb", "ccc", "dddd"]);
    assert_eq!(wrap("abcdefghijk x", 5), vec!["abcdefghijk", "x"]);
}
