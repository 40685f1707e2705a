//! The layering rule of `src/lib.rs`: a module uses only modules declared before it there.
//!
//! Reads the order of the module lines of lib.rs (`pub mod` or `pub(crate) mod`), then every `crate::…` path in every file of
//! every module (its `use` lines, grouped `crate::{a, b}` imports and paths in code alike), and
//! fails on a path that names a module declared later: an import cycle or a lower layer
//! reaching up. `main.rs` may name only the dispatcher.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The modules of lib.rs in declaration order.
fn layers() -> Vec<String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| {
            let l = l.trim();
            l.strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("pub(crate) mod "))
        })
        .map(|m| m.trim_end_matches(';').to_string())
        .collect()
}

/// Every .rs file of a module: `src/m.rs` or everything under `src/m/`.
fn files_of(module: &str) -> Vec<PathBuf> {
    let file = src().join(format!("{module}.rs"));
    if file.exists() {
        return vec![file];
    }
    let out = rust_files(&src().join(module));
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

/// A new workload is its folder, its `pub(crate) mod` line in lib.rs and one line in the registry: the
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

// ---------------------------------------------------------------------------------------------
// No circle of uses inside a folder. The layering above orders the top-level modules; inside a
// folder, the modules side by side (its files and subfolders) must use each other one way
// only, so each can be read, tested and moved with the ones below it and nothing above.

/// A Rust source text with its comments, strings and character literals blanked (newlines
/// kept), so that a path or a brace written inside one is not read as code.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let start = i;
        let c = chars[i];
        // A raw string: r"…", r#"…"#, br"…", not the end of an identifier.
        let hashes = (i + 1..).take_while(|&j| at(j) == '#').count();
        let raw = c == 'r'
            && at(i + 1 + hashes) == '"'
            && (i == 0
                || !ident(chars[i - 1])
                || (chars[i - 1] == 'b' && (i < 2 || !ident(chars[i - 2]))));
        if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if raw {
            i += 2 + hashes;
            while i < chars.len() && !(chars[i] == '"' && (1..=hashes).all(|h| at(i + h) == '#')) {
                i += 1;
            }
            i = (i + 1 + hashes).min(chars.len());
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i = (i + 1).min(chars.len());
        } else if c == '\'' && at(i + 1) == '\\' {
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i = (i + 1).min(chars.len());
        } else if c == '\'' && at(i + 2) == '\'' {
            i += 3;
        } else {
            // Code, a lifetime's quote included.
            out.push(c);
            i += 1;
            continue;
        }
        out.extend(
            chars[start..i]
                .iter()
                .map(|&c| if c == '\n' { '\n' } else { ' ' }),
        );
    }
    out
}

/// The words and punctuation of code: identifiers (`$crate` as `crate`), `::` and single
/// characters.
fn tokens(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let word: String = chars[i..]
                .iter()
                .take_while(|c| c.is_alphanumeric() || **c == '_')
                .collect();
            i += word.chars().count();
            out.push(word);
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else {
            if !c.is_whitespace() && c != '$' {
                out.push(c.to_string());
            }
            i += 1;
        }
    }
    out
}

/// The module a file is, as words from the crate's root: `src/cpu/dense/gemm.rs` is
/// `cpu::dense::gemm`, `src/cpu/mod.rs` is `cpu`, lib.rs the root.
fn module_of(file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src()).unwrap().with_extension("");
    let mut words: Vec<String> = relative
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    if matches!(words.last().map(String::as_str), Some("mod" | "lib")) {
        words.pop();
    }
    words
}

/// The module paths a token list names from `at` on (a path starting with `crate`, `super` or
/// `self`, written in the module `scope`), resolved from the crate's root, with a group
/// `{a, b::c}` giving one path per item; and where the path ends.
fn paths_from(tokens: &[String], at: usize, scope: &[String]) -> (Vec<Vec<String>>, usize) {
    let path: Vec<String> = match tokens[at].as_str() {
        "crate" => Vec::new(),
        "super" => scope[..scope.len().saturating_sub(1)].to_vec(),
        _ => scope.to_vec(),
    };
    path_goes_on(tokens, at + 1, path)
}

/// The rest of a path from `at` on, after its first words `path`: `::word`, `::super` or a
/// group `::{…}` whose items each go on from `path`.
fn path_goes_on(
    tokens: &[String],
    mut at: usize,
    mut path: Vec<String>,
) -> (Vec<Vec<String>>, usize) {
    let word = |t: &str| t.chars().all(|c| c.is_alphanumeric() || c == '_');
    while tokens.get(at).map(String::as_str) == Some("::") {
        at += 1;
        match tokens.get(at).map(String::as_str) {
            Some("super") => {
                path.pop();
                at += 1;
            }
            Some("{") => {
                let mut found = Vec::new();
                at += 1;
                while at < tokens.len() && tokens[at] != "}" {
                    match tokens[at].as_str() {
                        "," => {
                            at += 1;
                            continue;
                        }
                        "self" => {
                            found.push(path.clone());
                            at += 1;
                        }
                        item if word(item) => {
                            let (items, end) = path_goes_on(tokens, at + 1, path_with(&path, item));
                            found.extend(items);
                            at = end;
                        }
                        // `*`.
                        _ => at += 1,
                    }
                    // `as` and its name.
                    while at < tokens.len() && tokens[at] != "," && tokens[at] != "}" {
                        at += 1;
                    }
                }
                return (found, at + 1);
            }
            Some(next) if word(next) => {
                path.push(next.to_string());
                at += 1;
            }
            _ => break,
        }
    }
    (vec![path], at)
}

/// `path` with one more word.
fn path_with(path: &[String], word: &str) -> Vec<String> {
    let mut longer = path.to_vec();
    longer.push(word.to_string());
    longer
}

/// Every module path a file names through `crate::`, `super::` or `self::`, resolved from the
/// crate's root, inline modules (`mod tests { use super::*; }`) followed.
fn paths_named(file: &Path) -> Vec<Vec<String>> {
    let tokens = tokens(&code_only(&std::fs::read_to_string(file).unwrap()));
    let mut scope = module_of(file);
    // The inline modules open around the current token, each with the depth of its brace.
    let mut open: Vec<usize> = Vec::new();
    let mut depth = 0;
    let mut found = Vec::new();
    let mut at = 0;
    while at < tokens.len() {
        let word = tokens[at].as_str();
        let starts_path = matches!(word, "crate" | "super" | "self")
            && tokens.get(at + 1).map(String::as_str) == Some("::")
            && (at == 0 || tokens[at - 1] != "::");
        if starts_path {
            let (paths, end) = paths_from(&tokens, at, &scope);
            found.extend(paths);
            at = end;
            continue;
        }
        match word {
            "mod" if tokens.get(at + 2).map(String::as_str) == Some("{") => {
                scope.push(tokens[at + 1].clone());
                depth += 1;
                open.push(depth);
                at += 3;
                continue;
            }
            "{" => depth += 1,
            "}" => {
                if open.last() == Some(&depth) {
                    open.pop();
                    scope.pop();
                }
                depth -= 1;
            }
            _ => {}
        }
        at += 1;
    }
    found
}

/// Every .rs file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
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
    out.sort();
    out
}

/// Whether the folder of module `folder` has a module `name` of its own: `name.rs` or `name/`.
fn is_module_of(folder: &[String], name: &str) -> bool {
    let dir = folder.iter().fold(src(), |d, w| d.join(w));
    name != "mod" && (dir.join(format!("{name}.rs")).is_file() || dir.join(name).is_dir())
}

/// Which modules of one folder use which: module → the modules it uses.
type Uses = BTreeMap<String, BTreeSet<String>>;

/// For every folder under src/ (as its module path), which of its modules use which: a file
/// of module x that names a path into module y of the same folder is an edge x → y. A path to
/// an item of the folder's own mod.rs is no edge (a child may use its parent's items).
fn uses_by_folder() -> BTreeMap<Vec<String>, Uses> {
    let mut graphs: BTreeMap<Vec<String>, Uses> = BTreeMap::new();
    for file in rust_files(&src()) {
        // main.rs is the binary, a crate of its own.
        if file == src().join("main.rs") {
            continue;
        }
        let from = module_of(&file);
        for to in paths_named(&file) {
            let shared = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if shared < from.len() && shared < to.len() {
                let folder = from[..shared].to_vec();
                if is_module_of(&folder, &to[shared]) {
                    graphs
                        .entry(folder)
                        .or_default()
                        .entry(from[shared].clone())
                        .or_default()
                        .insert(to[shared].clone());
                }
            }
        }
    }
    graphs
}

/// The circles of a graph: its strongly connected components of more than one module, each
/// with its edges, e.g. `a → b, b → a`.
fn circles(graph: &Uses) -> Vec<String> {
    let reaches = |from: &str, to: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_string()];
        while let Some(node) = stack.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if next == to {
                    return true;
                }
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        false
    };
    let mut placed = BTreeSet::new();
    let mut out = Vec::new();
    for node in graph.keys() {
        if placed.contains(node) {
            continue;
        }
        let component: Vec<&String> = graph
            .keys()
            .chain(graph.values().flatten())
            .filter(|other| *other == node || (reaches(node, other) && reaches(other, node)))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if component.len() < 2 {
            continue;
        }
        let mut edges = Vec::new();
        for &from in &component {
            placed.insert(from.clone());
            for to in graph.get(from).into_iter().flatten() {
                if component.contains(&to) {
                    edges.push(format!("{from} → {to}"));
                }
            }
        }
        out.push(edges.join(", "));
    }
    out
}

/// The folder of a module path, as written in messages: `src/cpu/dense`.
fn folder_name(folder: &[String]) -> String {
    std::iter::once("src")
        .chain(folder.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("/")
}

#[test]
fn no_folder_has_a_circle_of_uses() {
    let mut found = Vec::new();
    for (folder, graph) in uses_by_folder() {
        let name = folder_name(&folder);
        found.extend(circles(&graph).into_iter().map(|c| format!("{name}: {c}")));
    }
    assert!(
        found.is_empty(),
        "modules side by side use each other in a circle:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_path_reader_follows_super_self_groups_and_inline_modules() {
    let code = code_only(
        "use super::{a, b::{c, self}};\n// crate::commented\nlet s = \"crate::quoted {\";\n\
         let c = '{';\nfn f<'a>() {}\nuse crate::x::y::{z::W, v};\n\
         mod tests { use super::*; use super::super::q; }\nself::inner::f();",
    );
    let scope: Vec<String> = vec!["top".into(), "here".into()];
    let tokens = tokens(&code);
    let mut found = Vec::new();
    let mut at = 0;
    while at < tokens.len() {
        if matches!(tokens[at].as_str(), "crate" | "super" | "self")
            && tokens.get(at + 1).map(String::as_str) == Some("::")
        {
            let (paths, end) = paths_from(&tokens, at, &scope);
            found.extend(paths.into_iter().map(|p| p.join("::")));
            at = end;
        } else {
            at += 1;
        }
    }
    // Inline modules are not followed here (paths_named does that): `tests`'s super is read
    // from `here`.
    assert_eq!(
        found,
        [
            "top::a",
            "top::b::c",
            "top::b",
            "x::y::z::W",
            "x::y::v",
            "top",
            "q",
            "top::here::inner::f"
        ]
    );
    assert!(!code.contains("commented") && !code.contains("quoted"));
    assert_eq!(code.matches('{').count(), code.matches('}').count());
}
