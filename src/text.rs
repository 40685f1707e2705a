//! Aligned plain-text tables, the one renderer behind the results table, the history list and
//! `compare`; and [`printable`] and [`terminal`], which make text from elsewhere safe to print
//! on a terminal.
//!
//! A document's strings are escaped where they are printed, not refused on the way in. A document
//! is the record of a run (a tool's output or a process name with a control character in it is what
//! the machine said) and `import` keeps it as it came; what must not happen is that a byte of it
//! drives the terminal. So every text renderer for a terminal escapes each string of a document
//! with [`printable`] where it puts it in a line (every [`Table`] cell, every header and list
//! line), and passes the whole text through [`terminal`] before returning it, a net for any string
//! a later change forgets.

/// Text that came from elsewhere (a peer, a document, another process's command name), made
/// safe to print on a terminal: control characters (ESC and the C1 range included, so no
/// terminal sequence gets through; tabs and newlines too, so one line stays one line) and
/// bidirectional overrides are written as visible escapes (`\u{1b}`, `\n`).
pub(crate) fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// [`printable`], then cut to at most `chars` characters (an ellipsis marks the cut): peer text
/// for a log line or an error, whose length the peer must not choose.
pub(crate) fn printable_at_most(text: &str, chars: usize) -> String {
    let shown = printable(text);
    match shown.char_indices().nth(chars) {
        Some((cut, _)) => format!("{}…", &shown[..cut]),
        None => shown,
    }
}

/// How a column's cells line up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Right,
}

/// Text made of lines, safe to print on a terminal: as [`printable`], but its own line breaks
/// stay. The last pass of every renderer whose text goes to a terminal (the results table,
/// `show`, `compare`, `explain`, the findings); a carriage return, a lone escape or a C1
/// control left in a line by a string that was not escaped where it was put is written as a
/// visible escape here.
pub(crate) fn terminal(text: &str) -> String {
    text.split('\n')
        .map(printable)
        .collect::<Vec<_>>()
        .join("\n")
}

/// JSON text safe to print on a terminal: serde_json escapes every character below 0x20, but
/// writes DEL, the C1 controls (CSI U+009B among them) and the bidirectional overrides as they
/// are; here they become `\uXXXX` escapes, which read back as the same characters. (In JSON
/// text such characters can only stand inside strings, where the escape is valid.) The
/// whitespace between tokens (newline, tab, carriage return), which serde_json escapes inside
/// strings, is left as it is: it is the layout of pretty-printed JSON.
pub(crate) fn json_for_terminal(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        let layout = matches!(c, '\n' | '\t' | '\r');
        if (c.is_control() && !layout)
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// A table of text cells: headers, then rows, each column as wide as its widest cell, columns
/// two spaces apart, no trailing spaces.
#[derive(Clone, Debug)]
pub(crate) struct Table {
    columns: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(columns: &[(&str, Align)]) -> Table {
        Table {
            columns: columns.iter().map(|(h, a)| (h.to_string(), *a)).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are empty, extra cells are a bug. Each cell is made
    /// [`printable`]: a cell is one line, whatever text it came from.
    pub(crate) fn row(&mut self, cells: impl IntoIterator<Item = String>) {
        let mut cells: Vec<String> = cells.into_iter().map(|c| printable(&c)).collect();
        assert!(cells.len() <= self.columns.len(), "more cells than columns");
        cells.resize(self.columns.len(), String::new());
        self.rows.push(cells);
    }

    pub(crate) fn render(&self) -> String {
        let width = |s: &str| s.chars().count();
        let mut widths: Vec<usize> = self.columns.iter().map(|(h, _)| width(h)).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(width(cell));
            }
        }
        let headers: Vec<String> = self.columns.iter().map(|(h, _)| h.clone()).collect();
        let mut out = String::new();
        for row in std::iter::once(&headers).chain(&self.rows) {
            let mut line = String::new();
            for ((cell, w), (_, align)) in row.iter().zip(&widths).zip(&self.columns) {
                let pad = " ".repeat(w - width(cell));
                match align {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&pad);
                    }
                    Align::Right => {
                        line.push_str(&pad);
                        line.push_str(cell);
                    }
                }
                line.push_str("  ");
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
    fn text_from_elsewhere_prints_without_terminal_sequences() {
        assert_eq!(printable("stress-ng µ 42"), "stress-ng µ 42");
        let shown = printable("\u{1b}[2J\u{1b}]0;owned\u{7}\r\nx\u{9b}31m\u{202e}txt");
        assert!(!shown.chars().any(|c| c.is_control()), "{shown}");
        assert!(
            shown.contains("\\u{1b}[2J") && shown.contains("\\n"),
            "{shown}"
        );
        assert!(!shown.contains('\u{202e}'), "{shown}");
        let long = printable_at_most(&"\u{1b}".repeat(1000), 50);
        assert_eq!(long.chars().count(), 51, "{long}");
        assert!(long.starts_with("\\u{1b}") && long.ends_with('…'), "{long}");
        assert_eq!(printable_at_most("short", 50), "short");
    }

    #[test]
    fn json_for_a_terminal_escapes_what_serde_json_leaves_raw() {
        let text = "a\u{7f}b\u{9b}31m\u{202e}\u{1b}\n";
        let json = json_for_terminal(&serde_json::to_string_pretty(&text).unwrap());
        assert!(!json.chars().any(|c| c.is_control() && c != '\n'), "{json}");
        assert_eq!(serde_json::from_str::<String>(&json).unwrap(), text);
        // The layout of a pretty-printed object stays: it is still JSON, on several lines.
        let object = serde_json::json!({"host": text, "n": [1, 2]});
        let json = json_for_terminal(&serde_json::to_string_pretty(&object).unwrap());
        assert!(json.lines().count() > 3, "{json}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&json).unwrap(),
            object
        );
    }

    #[test]
    fn columns_align_by_their_widest_cell() {
        let mut t = Table::new(&[("case", Align::Left), ("value", Align::Right)]);
        t.row(["read 8 KB".to_string(), "12.5".to_string()]);
        t.row(["copy".to_string(), "1234".to_string()]);
        t.row(["µ".to_string()]);
        assert_eq!(
            t.render(),
            "case       value\nread 8 KB   12.5\ncopy        1234\nµ\n"
        );
    }
}
