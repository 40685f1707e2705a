//! The one check of a document read from outside: `import`, `report FILE`, `compare FILE`,
//! `explain FILE` and every stored document pass through [`Report::parse`], which calls
//! [`check_json`] on the parsed JSON and [`check_shapes`] on the typed document. A refusal names
//! the field (`results[3].samples[2]: not a finite number`), so the renderers can rely on what is
//! checked here: sizes bounded, numbers finite, a matrix as wide and as tall as its host list.
//!
//! [`Report::parse`]: super::Report::parse

use serde_json::Value;

use super::Report;

/// The largest document read: SQLite's largest value (`SQLITE_MAX_LENGTH`), so that whatever
/// is read can be stored. A cluster run is about 70 KB per host with the default matrix plan
/// (docs/cluster.md): 1,000 nodes ≈ 70 MB, 10,000 ≈ 700 MB.
pub(crate) const MAX_DOCUMENT_BYTES: usize = 1_000_000_000;
/// Documents up to this size are read without a look at the free memory (a few hundred MB at
/// most); a larger one must leave [`READ_BYTES_PER_BYTE`] × its size available.
pub(crate) const UNCHECKED_DOCUMENT_BYTES: usize = 64 << 20;
/// The memory reading a document takes per byte of its JSON, at its peak: the text, the
/// parsed JSON tree and the typed report at once (measured by bench/bigdoc.py: see
/// docs/cluster.md).
pub(crate) const READ_BYTES_PER_BYTE: u64 = 8;
/// The longest string of a document: a command line, a tool's output, a warning.
pub(crate) const MAX_STRING_BYTES: usize = 64 << 10;
/// The most elements of one list (samples, series points, results).
pub(crate) const MAX_LIST: usize = 1 << 20;
/// The most hosts of a cluster document.
pub(crate) const MAX_HOSTS: usize = 65_536;
/// The most hosts of a dense matrix (hosts² cells; peakbench writes dense ones up to 64 hosts
/// and sparse `cells` above, but a schema 3 document's are dense at any size).
pub(crate) const MAX_DENSE_HOSTS: usize = 4096;

/// Whether a document of `bytes` can be read here: at most [`MAX_DOCUMENT_BYTES`], and above
/// [`UNCHECKED_DOCUMENT_BYTES`] only with [`READ_BYTES_PER_BYTE`] × its size of memory
/// available (`available`, asked only then: MemAvailable, None where it cannot be read).
pub(crate) fn check_size(
    bytes: u64,
    available: impl FnOnce() -> Option<u64>,
) -> Result<(), String> {
    let mb = |b: u64| crate::units::format_size(b);
    if bytes > MAX_DOCUMENT_BYTES as u64 {
        return Err(format!(
            "{} bytes, more than a results document holds ({}, the largest value SQLite \
             stores)",
            bytes,
            mb(MAX_DOCUMENT_BYTES as u64)
        ));
    }
    if bytes <= UNCHECKED_DOCUMENT_BYTES as u64 {
        return Ok(());
    }
    let needed = bytes.saturating_mul(READ_BYTES_PER_BYTE);
    match available() {
        Some(free) if free < needed => Err(format!(
            "a document of {} takes about {} of memory to read and {} is available: read it \
             on a machine with more free memory",
            mb(bytes),
            mb(needed),
            mb(free)
        )),
        _ => Ok(()),
    }
}

/// The field at byte `offset` of a JSON text, as the refusals name fields (`results[3].value`,
/// `the document` at the top): where serde_json stopped on a text it refuses (a number beyond
/// the range of f64, a bad escape), so that this refusal names its field like every other.
/// A scan of the text up to `offset`: containers, keys and commas, strings skipped whole.
pub(crate) fn path_at(text: &str, offset: usize) -> String {
    enum Frame {
        Object { key: Option<String>, key_next: bool },
        Array { index: usize },
    }
    let bytes = text.as_bytes();
    let end = offset.min(bytes.len());
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < end {
        match bytes[i] {
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                if let Some(Frame::Object { key, key_next }) = stack.last_mut()
                    && *key_next
                {
                    let raw = &bytes[start..i.min(bytes.len())];
                    *key = Some(String::from_utf8_lossy(raw).into_owned());
                }
            }
            b'{' => stack.push(Frame::Object {
                key: None,
                key_next: true,
            }),
            b'[' => stack.push(Frame::Array { index: 0 }),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Frame::Array { index }) => *index += 1,
                Some(Frame::Object { key, key_next }) => {
                    *key = None;
                    *key_next = true;
                }
                None => {}
            },
            b':' => {
                if let Some(Frame::Object { key_next, .. }) = stack.last_mut() {
                    *key_next = false;
                }
            }
            _ => {}
        }
        i += 1;
    }
    let mut path = String::new();
    for frame in &stack {
        match frame {
            Frame::Object {
                key: Some(key),
                key_next: false,
            } => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&crate::text::printable_at_most(key, 64));
            }
            Frame::Array { index } => path.push_str(&format!("[{index}]")),
            Frame::Object { .. } => break,
        }
    }
    if path.is_empty() {
        "the document".to_string()
    } else {
        path
    }
}

/// The byte offset of serde_json's 1-based `line` and `column` in `text` (its column counts
/// bytes).
pub(crate) fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let before: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    before + column.saturating_sub(1)
}

/// Sizes and numbers of the raw JSON: every number finite, every string and list bounded.
/// (JSON has no NaN or infinity, and serde_json refuses a literal beyond the range of f64,
/// so a non-finite number here means a parser that allows them; the check costs nothing.)
pub(crate) fn check_json(value: &Value) -> Result<(), String> {
    let mut path = String::new();
    walk(value, &mut path)
}

fn walk(value: &Value, path: &mut String) -> Result<(), String> {
    let at = |path: &str| {
        if path.is_empty() {
            "the document".to_string()
        } else {
            path.to_string()
        }
    };
    match value {
        Value::Number(n) => {
            if n.as_f64().is_none_or(|f| !f.is_finite()) {
                return Err(format!("{}: not a finite number", at(path)));
            }
        }
        Value::String(s) => {
            if s.len() > MAX_STRING_BYTES {
                return Err(format!(
                    "{}: a string of {} bytes, more than {MAX_STRING_BYTES}",
                    at(path),
                    s.len()
                ));
            }
        }
        Value::Array(items) => {
            if items.len() > MAX_LIST {
                return Err(format!(
                    "{}: a list of {} elements, more than {MAX_LIST}",
                    at(path),
                    items.len()
                ));
            }
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(item, path)?;
                path.truncate(len);
            }
        }
        Value::Object(fields) => {
            if fields.len() > MAX_LIST {
                return Err(format!("{}: more than {MAX_LIST} fields", at(path)));
            }
            for (key, item) in fields {
                if key.len() > MAX_STRING_BYTES {
                    return Err(format!("{}: a key of {} bytes", at(path), key.len()));
                }
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&crate::text::printable(key));
                walk(item, path)?;
                path.truncate(len);
            }
        }
        Value::Null | Value::Bool(_) => {}
    }
    Ok(())
}

/// What the types alone do not hold: the shapes one field's length ties to another's.
pub(crate) fn check_shapes(report: &Report) -> Result<(), String> {
    let Some(cluster) = &report.cluster else {
        return Ok(());
    };
    if cluster.hosts.len() > MAX_HOSTS {
        return Err(format!(
            "cluster.hosts: {} hosts, more than {MAX_HOSTS}",
            cluster.hosts.len()
        ));
    }
    for (m, matrix) in cluster.matrices.iter().enumerate() {
        let n = matrix.hosts.len();
        if n > MAX_HOSTS {
            return Err(format!(
                "cluster.matrices[{m}].hosts: {n} hosts, more than {MAX_HOSTS}"
            ));
        }
        if matrix.cells.is_empty() && n > MAX_DENSE_HOSTS {
            return Err(format!(
                "cluster.matrices[{m}].values: a dense matrix of {n} hosts, more than \
                 {MAX_DENSE_HOSTS} (larger matrices keep their measured links in cells)"
            ));
        }
        if matrix.cells.is_empty() {
            if matrix.values.len() != n {
                return Err(format!(
                    "cluster.matrices[{m}].values: {} rows for {n} hosts",
                    matrix.values.len()
                ));
            }
            for (r, row) in matrix.values.iter().enumerate() {
                if row.len() != n {
                    return Err(format!(
                        "cluster.matrices[{m}].values[{r}]: {} columns for {n} hosts",
                        row.len()
                    ));
                }
            }
        } else {
            if !matrix.values.is_empty() {
                return Err(format!(
                    "cluster.matrices[{m}]: both values and cells; a matrix has one of them"
                ));
            }
            let mut seen = std::collections::HashSet::new();
            for (c, &(from, to, _)) in matrix.cells.iter().enumerate() {
                if from >= n || to >= n || from == to {
                    return Err(format!(
                        "cluster.matrices[{m}].cells[{c}]: a link from {from} to {to}, not between \
                         two of its {n} hosts"
                    ));
                }
                if !seen.insert((from, to)) {
                    return Err(format!(
                        "cluster.matrices[{m}].cells[{c}]: the link from {from} to {to} twice"
                    ));
                }
            }
        }
        for (f, [from, to]) in matrix.flagged.iter().enumerate() {
            if !matrix.hosts.contains(from) || !matrix.hosts.contains(to) {
                return Err(format!(
                    "cluster.matrices[{m}].flagged[{f}]: a link between hosts not in its host list"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_json_text_is_refused_naming_the_field_it_stopped_in() {
        let at = |text: &str| {
            let e = serde_json::from_str::<Value>(text).unwrap_err();
            path_at(text, offset_of(text, e.line(), e.column()))
        };
        assert_eq!(
            at(r#"{"results": [{"id": "a", "value": 1}, {"id": "b,[{", "value": 1e999}]}"#),
            "results[1].value"
        );
        assert_eq!(
            at("{\n  \"peaks\": {\n    \"dram\": [1, 2,\n 3e400]\n  }\n}"),
            "peaks.dram[2]"
        );
        assert_eq!(at(r#"{"a": {"b": "x\q"}}"#), "a.b");
        assert_eq!(at("1e999"), "the document");
        // A key is named as written, its escapes not decoded: no control character from it
        // reaches a terminal (a raw one is refused by serde_json before it).
        assert_eq!(at(r#"{"\u001b[2J": 1e999}"#), r"\u001b[2J");
    }

    #[test]
    fn a_documents_size_is_bounded_by_sqlite_and_by_the_free_memory() {
        const MB: u64 = 1_000_000;
        // Small documents never look at the memory.
        assert!(check_size(UNCHECKED_DOCUMENT_BYTES as u64, || unreachable!("asked")).is_ok());
        // A 1,000-node cluster run (about 70 MB) reads with the memory it needs ...
        assert!(check_size(70 * MB, || Some(READ_BYTES_PER_BYTE * 70 * MB)).is_ok());
        assert!(
            check_size(70 * MB, || None).is_ok(),
            "no MemAvailable: tried"
        );
        // ... and is refused, saying what it needs, without it.
        let why = check_size(70 * MB, || Some(100 * MB)).unwrap_err();
        assert!(
            why.contains("takes about") && why.contains("is available"),
            "{why}"
        );
        // Beyond what SQLite stores, whatever the memory.
        let why = check_size(MAX_DOCUMENT_BYTES as u64 + 1, || Some(u64::MAX)).unwrap_err();
        assert!(why.contains("the largest value SQLite stores"), "{why}");
    }
}
