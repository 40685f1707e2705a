//! A document from outside (imported, or named as a FILE) can neither crash peakbench nor drive the
//! terminal. Crafted documents are refused with exit 2 naming the field, or read and shown with
//! every string escaped: no byte below 0x20 but `\n` and `\t`, no DEL, no C1 control (CSI U+009B
//! among them) on stdout or stderr of `history`, `show`, `compare`, `explain` and `report`.

mod common;

use std::path::Path;
use std::process::Output;

use peakbench::result::Report;

const FIXTURES: [&str; 2] = [
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/report.json"),
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/findings.json"),
];

/// Terminal sequences a hostile document may carry: OSC 52 (the clipboard), a screen clear, a CSI
/// in its one-character C1 form, DEL, a carriage return that rewrites a line, a newline that forges
/// one, and a right-to-left override.
const HOSTILE: &str =
    "\u{1b}]52;c;cGVha2JlbmNo\u{7}\u{1b}[2J\u{9b}31m\u{7f}\r\nforged | row <b>x</b>\u{202e}";

fn peakbench(args: &[&str]) -> Output {
    common::command(args).output().expect("the binary runs")
}

/// The first control character a terminal would act on, if any.
fn raw_control(bytes: &[u8]) -> Option<char> {
    String::from_utf8_lossy(bytes)
        .chars()
        .find(|&c| (c.is_control() && c != '\n' && c != '\t') || c == '\u{202e}')
}

/// Every string of the document that can carry text and still parse gets [`HOSTILE`]
/// appended (a name that must be one of a list, such as a status, cannot).
fn poisoned(fixture: &str) -> serde_json::Value {
    fn paths(value: &serde_json::Value, at: Vec<String>, out: &mut Vec<Vec<String>>) {
        match value {
            serde_json::Value::String(_) => out.push(at),
            serde_json::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let mut next = at.clone();
                    next.push(i.to_string());
                    paths(item, next, out);
                }
            }
            serde_json::Value::Object(fields) => {
                for (k, item) in fields {
                    let mut next = at.clone();
                    next.push(k.clone());
                    paths(item, next, out);
                }
            }
            _ => {}
        }
    }
    fn at<'a>(doc: &'a mut serde_json::Value, path: &[String]) -> &'a mut serde_json::Value {
        path.iter().fold(doc, |v, k| match v {
            serde_json::Value::Array(items) => &mut items[k.parse::<usize>().unwrap()],
            v => &mut v[k.as_str()],
        })
    }
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let mut all = Vec::new();
    paths(&doc, Vec::new(), &mut all);
    let mut poisoned = 0;
    for path in all {
        let slot = at(&mut doc, &path);
        let before = slot.clone();
        *slot = format!("{}{HOSTILE}", before.as_str().unwrap()).into();
        if Report::parse(&doc.to_string()).is_ok() {
            poisoned += 1;
        } else {
            *at(&mut doc, &path) = before;
        }
    }
    assert!(
        poisoned > 50,
        "only {poisoned} strings took the hostile text"
    );
    doc
}

#[test]
fn no_string_of_a_document_reaches_the_terminal_raw() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("history.db");
    let db = db.to_str().unwrap();
    let mut files = Vec::new();
    for (i, fixture) in FIXTURES.iter().enumerate() {
        let file = dir.path().join(format!("hostile-{i}.json"));
        std::fs::write(&file, poisoned(fixture).to_string()).unwrap();
        let imported = peakbench(&["import", file.to_str().unwrap(), "--db", db]);
        assert!(imported.status.success(), "{imported:?}");
        files.push(file.to_str().unwrap().to_string());
    }
    let md = dir.path().join("r.md");
    let html = dir.path().join("r.html");
    let commands: Vec<Vec<&str>> = vec![
        vec!["history", "--db", db],
        vec!["show", "1", "--db", db],
        vec!["show", "2", "--db", db],
        vec!["show", "1", "--json", "--db", db],
        vec!["explain", "2", "--json", "--db", db],
        vec!["compare", "1", "2", "--db", db],
        vec!["compare", &files[0], &files[1], "--db", db],
        vec!["explain", "1", "--db", db],
        vec!["explain", "2", "--db", db],
        vec!["explain", &files[1], "--db", db],
        vec![
            "report",
            "1",
            "2",
            "--db",
            db,
            "--markdown",
            md.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
        ],
    ];
    for args in &commands {
        let out = peakbench(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        assert!(out.stdout.len() + out.stderr.len() > 0, "{args:?}");
        for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            if let Some(c) = raw_control(bytes) {
                panic!(
                    "{args:?}: raw {c:?} on {name}:\n{}",
                    String::from_utf8_lossy(bytes)
                );
            }
        }
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !text.contains("\nforged"),
            "{args:?}: a forged line\n{text}"
        );
    }
    // Markdown: no raw HTML, no control character, no line that a document's newline forged,
    // every table row with as many cells as its header.
    let markdown = std::fs::read_to_string(&md).unwrap();
    assert_eq!(raw_control(markdown.as_bytes()), None, "{markdown}");
    assert!(!markdown.contains("<b>"), "raw HTML in the Markdown");
    assert!(
        !markdown.lines().any(|l| l.starts_with("forged")),
        "{markdown}"
    );
    // HTML: the document's markup is text, not markup.
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(!page.contains("<b>x</b>"), "raw HTML in the HTML report");
    assert!(page.contains("&lt;b&gt;x&lt;/b&gt;"));
}

/// A copy of the fixture with a cluster section holding `matrix` for the hosts `a` and `b`.
fn cluster_doc(dir: &Path, name: &str, matrix: serde_json::Value) -> String {
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(FIXTURES[0]).unwrap()).unwrap();
    doc["cluster"] = serde_json::json!({
        "ranks": 2,
        "hosts": [{"name": "a", "ranks": [0]}, {"name": "b", "ranks": [1]}],
        "phase": "done",
        "threshold": 0.9,
        "matrices": [matrix],
    });
    let file = dir.join(name);
    std::fs::write(&file, doc.to_string()).unwrap();
    file.to_str().unwrap().to_string()
}

/// A matrix row wider than its host list (which once panicked `report --html`, exit 101) is
/// refused by every command that reads a document, with exit 2 naming the field.
#[test]
fn a_malformed_matrix_is_refused_naming_the_field_by_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("history.db");
    let db = db.to_str().unwrap();
    // `cells` (the sparse form of schema 4) where the key is given, else `values`.
    let matrix = |values: serde_json::Value| {
        let mut m = serde_json::json!({
            "metric": "TCP throughput", "unit": "Gb/s", "higher_is_better": true,
            "counting": "payload", "hosts": ["a", "b"], "median": 9.0,
        });
        match values.get("cells") {
            Some(cells) => {
                m["cells"] = cells.clone();
                if let Some(v) = values.get("values") {
                    m["values"] = v.clone();
                }
            }
            None => m["values"] = values,
        }
        m
    };
    let good = cluster_doc(
        dir.path(),
        "good.json",
        matrix(serde_json::json!([[null, 9.0], [9.5, null]])),
    );
    let sparse = cluster_doc(
        dir.path(),
        "sparse.json",
        matrix(serde_json::json!({"cells": [[0, 1, 9.0], [1, 0, 9.5]]})),
    );
    let html = dir.path().join("r.html");
    let out = peakbench(&[
        "report",
        &good,
        "--html",
        html.to_str().unwrap(),
        "--db",
        db,
    ]);
    assert!(out.status.success(), "{out:?}");
    let out = peakbench(&[
        "report",
        &sparse,
        "--html",
        html.to_str().unwrap(),
        "--db",
        db,
    ]);
    assert!(out.status.success(), "{out:?}");
    for (name, values, field) in [
        (
            "beyond.json",
            serde_json::json!({"cells": [[0, 1, 9.0], [1, 2, 9.5]]}),
            "cluster.matrices[0].cells[1]",
        ),
        (
            "itself.json",
            serde_json::json!({"cells": [[1, 1, 9.0]]}),
            "cluster.matrices[0].cells[0]",
        ),
        (
            "twice.json",
            serde_json::json!({"cells": [[0, 1, 9.0], [1, 0, 9.5], [0, 1, 8.0]]}),
            "cluster.matrices[0].cells[2]",
        ),
        (
            "both.json",
            serde_json::json!({"cells": [[0, 1, 9.0]], "values": [[null, 9.0], [9.5, null]]}),
            "cluster.matrices[0]: both values and cells",
        ),
        (
            "wide.json",
            serde_json::json!([[null, 9.0, 7.0], [9.5, null]]),
            "cluster.matrices[0].values[0]",
        ),
        (
            "short.json",
            serde_json::json!([[null, 9.0]]),
            "cluster.matrices[0].values",
        ),
        (
            "narrow.json",
            serde_json::json!([[null, 9.0], [9.5]]),
            "cluster.matrices[0].values[1]",
        ),
    ] {
        let file = cluster_doc(dir.path(), name, matrix(values));
        for args in [
            vec!["import", file.as_str(), "--db", db],
            vec![
                "report",
                file.as_str(),
                "--html",
                html.to_str().unwrap(),
                "--db",
                db,
            ],
            vec!["compare", file.as_str(), good.as_str(), "--db", db],
            vec!["explain", file.as_str(), "--db", db],
        ] {
            let out = peakbench(&args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(
                stderr.contains(field),
                "{args:?} should name {field}: {stderr}"
            );
            assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        }
    }
}

/// Sizes and lengths are bounded on the way in, each refusal naming the field.
#[test]
fn oversized_fields_are_refused_naming_them() {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(FIXTURES[0]).unwrap()).unwrap();
    let mut long = doc.clone();
    long["results"][3]["warnings"] = serde_json::json!(["x".repeat(100_000)]);
    let why = Report::parse(&long.to_string()).unwrap_err();
    assert!(
        why.starts_with("results[3].warnings[0]: a string of 100000 bytes"),
        "{why}"
    );
    let mut many = doc.clone();
    many["results"][1]["samples"] = serde_json::json!(vec![1.0; (1 << 20) + 1]);
    let why = Report::parse(&many.to_string()).unwrap_err();
    assert!(why.starts_with("results[1].samples: a list of"), "{why}");
    let beyond = doc
        .to_string()
        .replacen("\"value\":", "\"value\":1e999,\"x\":", 1);
    // A number beyond f64 is refused by serde_json itself, still naming its field.
    let why = Report::parse(&beyond).unwrap_err();
    assert!(
        why.contains(".value: not JSON: number out of range"),
        "{why}"
    );
    // A dense matrix of more hosts than a dense one may have (hosts² cells); the same hosts'
    // measured links as cells are read.
    let hosts: Vec<String> = (0..4097).map(|i| format!("n{i}")).collect();
    let wide = |form: serde_json::Value| {
        let mut d = doc.clone();
        let mut m = serde_json::json!({
            "metric": "TCP throughput", "unit": "Gb/s", "higher_is_better": true,
            "counting": "payload", "hosts": hosts, "median": 9.0,
        });
        for (k, v) in form.as_object().unwrap() {
            m[k] = v.clone();
        }
        d["cluster"] = serde_json::json!({
            "ranks": 2,
            "hosts": [{"name": "n0", "ranks": [0]}, {"name": "n1", "ranks": [1]}],
            "phase": "done", "threshold": 0.9, "matrices": [m],
        });
        d.to_string()
    };
    let why = Report::parse(&wide(serde_json::json!({"values": []}))).unwrap_err();
    assert!(
        why.starts_with("cluster.matrices[0].values: a dense matrix of 4097 hosts"),
        "{why}"
    );
    Report::parse(&wide(serde_json::json!({"cells": [[0, 4096, 9.0]]}))).unwrap();
    let mut version = doc;
    version["schema_version"] = 99.into();
    assert!(
        Report::parse(&version.to_string())
            .unwrap_err()
            .contains("v99")
    );
}
