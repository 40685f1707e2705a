//! The layering rule of `src/lib.rs`: a module uses only modules declared before it there.
//!
//! Reads the order of the `pub mod` lines of lib.rs, then every `crate::…` path in every file of
//! every module (its `use` lines, grouped `crate::{a, b}` imports and paths in code alike), and
//! fails on a path that names a module declared later: an import cycle or a lower layer
//! reaching up. `main.rs` may name only the dispatcher.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The modules of lib.rs in declaration order.
fn layers() -> Vec<String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect()
}

/// Every .rs file of a module: `src/m.rs` or everything under `src/m/`.
fn files_of(module: &str) -> Vec<PathBuf> {
    let file = src().join(format!("{module}.rs"));
    if file.exists() {
        return vec![file];
    }
    let mut out = Vec::new();
    let mut stack = vec![src().join(module)];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    assert!(!out.is_empty(), "module {module} has no files");
    out
}

/// A file's code without its comments: comments (doc links included) name modules without
/// depending on them.
fn code_of(file: &Path) -> String {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules a text names through `crate::`.
fn named_modules(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in text.match_indices("crate::") {
        // `$crate::` in macros is the crate too.
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // crate::{a, b::c, d::{e, f}}: the first word of each top-level item.
            let mut depth = 0;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if c.is_whitespace() => {}
                    _ if item_start && depth == 0 => {
                        names.push(ident(&group[i..]));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            names.push(ident(rest));
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

#[test]
fn no_module_uses_one_declared_after_it() {
    let order = layers();
    let rank: BTreeMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    let mut violations = Vec::new();
    for (i, module) in order.iter().enumerate() {
        for file in files_of(module) {
            for name in named_modules(&code_of(&file)) {
                match rank.get(name.as_str()) {
                    Some(&j) if j > i => violations.push(format!(
                        "{} ({module}, layer {i}) uses crate::{name} (declared later, {j})",
                        file.strip_prefix(src()).unwrap().display()
                    )),
                    Some(_) => {}
                    None => violations.push(format!(
                        "{} names crate::{name}, which lib.rs does not declare",
                        file.display()
                    )),
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "the layering of src/lib.rs is broken:\n{}",
        violations.join("\n")
    );
}

/// A new workload is its folder, its `pub mod` line in lib.rs and one line in the registry: the
/// session below the workloads cannot name one (the layering above sees to that), and the
/// commands above the registry reach them only through it. `cluster` is the one exception: it
/// is built on the network workload's transport and server.
#[test]
fn the_commands_reach_the_workloads_only_through_the_registry() {
    let order = layers();
    let at = |name: &str| order.iter().position(|m| m == name).unwrap();
    let workloads = &order[at("session") + 1..at("registry")];
    assert!(workloads.contains(&"net".to_string()), "{workloads:?}");
    let mut named = Vec::new();
    for command in &order[at("registry") + 1..] {
        if command == "cluster" {
            continue;
        }
        for file in files_of(command) {
            for name in named_modules(&code_of(&file)) {
                if workloads.contains(&name) {
                    named.push(format!("{} names crate::{name}", file.display()));
                }
            }
        }
    }
    assert!(
        named.is_empty(),
        "go through crate::registry:\n{}",
        named.join("\n")
    );
}

#[test]
fn only_main_names_the_dispatcher() {
    let main = std::fs::read_to_string(src().join("main.rs")).unwrap();
    assert!(main.contains("dispatch"), "main.rs runs the dispatcher");
    let order = layers();
    assert_eq!(order.last().map(String::as_str), Some("dispatch"));
}

#[test]
fn the_parser_finds_grouped_and_nested_imports() {
    let text = "use crate::{a, b::c, d::{e, f}};\nlet x = crate::g::h();\n$crate::names::X";
    assert_eq!(named_modules(text), ["a", "b", "d", "g", "names"]);
}

#[test]
fn every_test_runs_the_binary_through_the_harness_that_isolates_the_history() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut direct = Vec::new();
    for entry in std::fs::read_dir(&tests).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().unwrap() != "architecture.rs"
        {
            let text = std::fs::read_to_string(&path).unwrap();
            if text.contains(concat!("CARGO_BIN_", "EXE_peakbench")) {
                direct.push(path.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
    }
    assert!(
        direct.is_empty(),
        "these tests run the binary without tests/common (which isolates the history): {direct:?}"
    );
}

/// The layer table of docs/architecture.md names lib.rs's modules, every one, in lib.rs's
/// order: the page a newcomer reads cannot drift from the rule this file enforces.
#[test]
fn the_architecture_page_lists_the_layers_of_lib_rs() {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .unwrap();
    let table = page
        .split("## The layers")
        .nth(1)
        .expect("docs/architecture.md has a section 'The layers'");
    let mut documented = Vec::new();
    for row in table
        .lines()
        .skip_while(|l| !l.starts_with("| layer"))
        .skip(2)
    {
        let Some(modules) = row.split('|').nth(2) else {
            break;
        };
        documented.extend(
            modules
                .split(',')
                .map(|m| m.trim().trim_matches('`').to_string())
                .filter(|m| !m.is_empty()),
        );
    }
    assert_eq!(
        documented,
        layers(),
        "docs/architecture.md's layer table and src/lib.rs's order differ"
    );
}
