//! Plain-text tables for reports.

pub use xlane_stats::fmt_ns;

/// A table with a header row, right-aligned cells after the first column.
#[derive(Clone, Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new<S: AsRef<str>>(header: &[S]) -> Self {
        Table {
            header: header.iter().map(|s| s.as_ref().to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Add a row (cells beyond the header are ignored, missing ones blank).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Render with two spaces between columns.
    pub fn render(&self) -> String {
        let ncol = self.header.len();
        let cell = |r: &Vec<String>, i: usize| r.get(i).cloned().unwrap_or_default();
        let mut width = vec![0usize; ncol];
        for (i, w) in width.iter_mut().enumerate() {
            *w = std::iter::once(&self.header)
                .chain(self.rows.iter())
                .map(|r| cell(r, i).chars().count())
                .max()
                .unwrap_or(0);
        }
        let mut out = String::new();
        for r in std::iter::once(&self.header).chain(self.rows.iter()) {
            let mut line = String::new();
            for (i, w) in width.iter().enumerate() {
                let c = cell(r, i);
                let pad = w - c.chars().count();
                if i == 0 {
                    line.push_str(&c);
                    line.push_str(&" ".repeat(pad));
                } else {
                    line.push_str("  ");
                    line.push_str(&" ".repeat(pad));
                    line.push_str(&c);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_units() {
        let cases = [
            (0, "0ns"),
            (999, "999ns"),
            (1_000, "1.0µs"),
            (12_345, "12.3µs"),
            (4_560_000, "4.56ms"),
            (1_200_000_000, "1.20s"),
        ];
        for (ns, want) in cases {
            assert_eq!(fmt_ns(ns), want);
        }
    }

    #[test]
    fn aligns_columns() {
        let mut t = Table::new(&["name", "p50"]);
        t.row(vec!["lane".into(), "1.0µs".into()]);
        t.row(vec!["plain-udp".into(), "12.00ms".into()]);
        let s = t.render();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].chars().count(), lines[2].chars().count());
        assert!(lines[1].ends_with("1.0µs"));
    }
}
