//! Tidy checks over the workspace sources: every Rust file starts with a `//!` line saying what
//! it owns, no test is marked ignored, the crate dependency rules of `ARCHITECTURE.md` hold (CEL
//! only through `ocm-cel`), no code outside a storage backend's own file names that backend's
//! crate, no source file outside tests and generated code is over 1,000 lines, and the
//! top-level modules of the apiserver, the agent, storage and cel form no import circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn all_rust_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&workspace_root(), &mut files);
    assert!(files.len() > 10, "found only {} Rust files", files.len());
    files
}

#[test]
fn every_rust_file_starts_with_a_module_doc_line() {
    let missing: Vec<_> = all_rust_files()
        .into_iter()
        .filter(|f| !std::fs::read_to_string(f).unwrap().starts_with("//!"))
        .collect();
    assert!(missing.is_empty(), "files without a leading `//!` line: {missing:?}");
}

#[test]
fn no_ignored_tests() {
    let marker = ["#[", "ignore"].concat();
    let offenders: Vec<_> = all_rust_files()
        .into_iter()
        .filter(|f| std::fs::read_to_string(f).unwrap().contains(&marker))
        .collect();
    assert!(
        offenders.is_empty(),
        "ignored tests in {offenders:?}; gate slow tests by environment instead"
    );
}

/// The workspace crates each crate's `Cargo.toml` names.
fn workspace_deps(folder: &str) -> Vec<String> {
    let manifest =
        std::fs::read_to_string(workspace_root().join(folder).join("Cargo.toml")).unwrap();
    ["ocm-proto", "ocm-storage", "ocm-cel", "ocm-apiserver", "ocm-agent", "ocm-conformance"]
        .into_iter()
        .filter(|name| manifest.lines().any(|l| l.trim_start().starts_with(name)))
        .map(str::to_owned)
        .collect()
}

/// The crates that name `kube-cel` in their `Cargo.toml`.
fn kube_cel_users() -> Vec<String> {
    ["proto", "storage", "cel", "apiserver", "agent", "conformance"]
        .into_iter()
        .filter(|folder| {
            let manifest =
                std::fs::read_to_string(workspace_root().join(folder).join("Cargo.toml")).unwrap();
            manifest.lines().any(|l| l.trim_start().starts_with("kube-cel"))
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn crate_dependency_rules_hold() {
    assert_eq!(
        workspace_deps("proto"),
        Vec::<String>::new(),
        "proto depends on no workspace crate"
    );
    assert_eq!(
        workspace_deps("storage"),
        Vec::<String>::new(),
        "storage depends on no workspace crate"
    );
    assert_eq!(workspace_deps("cel"), Vec::<String>::new(), "cel depends on no workspace crate");
    let agent = workspace_deps("agent");
    assert!(
        agent.iter().all(|d| d == "ocm-proto" || d == "ocm-cel"),
        "the agent may depend on proto and cel only: {agent:?}"
    );
    let apiserver = workspace_deps("apiserver");
    assert!(
        apiserver.iter().all(|d| d == "ocm-proto" || d == "ocm-storage" || d == "ocm-cel"),
        "apiserver may depend on proto, storage and cel only: {apiserver:?}"
    );
    // CEL runs through ocm-cel alone, so hub and agent share its limits and its cost bound.
    assert_eq!(kube_cel_users(), ["cel"], "only ocm-cel depends on kube-cel");
}

#[test]
fn storage_backends_stay_in_their_files() {
    let root = workspace_root();
    let allowed = |path: &Path, needle: &str| {
        let rel = path.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        if rel == "conformance/tests/tidy.rs" {
            return true; // this file names the crates in order to look for them
        }
        match needle {
            // The sled backend and its store of large values by content.
            "sled::" => rel == "storage/src/sled.rs" || rel == "storage/src/chunked.rs",
            // Only the benchmark names etcd-client: it measures raw etcd through that client,
            // next to our backend (which has its own client, `storage/src/etcd/`).
            _ => rel == "conformance/src/bin/storage-bench.rs",
        }
    };
    for file in all_rust_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for needle in ["sled::", "etcd_client::"] {
            // The external crate's path, not our own module (`crate::sled::open`).
            let names_crate = text.match_indices(needle).any(|(i, _)| {
                let before = text[..i].chars().next_back();
                !before.is_some_and(|c| c == ':' || c == '_' || c.is_alphanumeric())
            });
            if names_crate {
                assert!(
                    allowed(&file, needle),
                    "{} names `{needle}` outside its backend",
                    file.display()
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// No source file over 1,000 lines.

/// The most lines a source file may have.
const MAX_LINES: usize = 1000;

/// Whether `rel` (relative to the workspace root) is a test file or generated code: under any
/// `tests/` folder, or under a `gen/` folder inside a `src/` folder (`proto/src/gen/`).
fn exempt_from_length(rel: &Path) -> bool {
    let parts: Vec<String> =
        rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let in_src_gen = parts.iter().position(|p| p == "src").is_some_and(|src| {
        parts[src + 1..parts.len().saturating_sub(1)].iter().any(|p| p == "gen")
    });
    let in_tests = parts[..parts.len().saturating_sub(1)].iter().any(|p| p == "tests");
    in_tests || in_src_gen
}

#[test]
fn no_source_file_over_1000_lines() {
    let root = workspace_root();
    let mut long: Vec<(usize, String)> = all_rust_files()
        .into_iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(&root).unwrap().to_path_buf();
            if exempt_from_length(&rel) {
                return None;
            }
            let lines = std::fs::read_to_string(&f).unwrap().lines().count();
            (lines > MAX_LINES).then(|| (lines, rel.display().to_string()))
        })
        .collect();
    long.sort_by(|a, b| b.cmp(a));
    let list: Vec<String> = long.iter().map(|(n, f)| format!("  {f}: {n} lines")).collect();
    assert!(
        long.is_empty(),
        "{} source files have more than {MAX_LINES} lines (tests/ and src/**/gen/ aside); split \
         them by what they own:\n{}",
        long.len(),
        list.join("\n")
    );
}

#[test]
fn the_length_rule_exempts_tests_and_generated_code_only() {
    assert!(exempt_from_length(Path::new("conformance/tests/rest_api.rs")));
    assert!(exempt_from_length(Path::new("apiserver/tests/x.rs")));
    assert!(exempt_from_length(Path::new("proto/src/gen/io.cloudevents.v1.rs")));
    assert!(exempt_from_length(Path::new("apiserver/src/grpc/gen/x.rs")));
    assert!(!exempt_from_length(Path::new("apiserver/src/rest.rs")));
    assert!(!exempt_from_length(Path::new("apiserver/src/gen.rs")));
    assert!(!exempt_from_length(Path::new("apiserver/src/tests.rs")));
    assert!(!exempt_from_length(Path::new("conformance/src/bin/fleet-sim.rs")));
}

// ---------------------------------------------------------------------------------------------
// No import circles between a crate's top-level modules.

/// `src` with every comment blanked and the contents of every string and character literal
/// blanked (line breaks kept, so lines still count), leaving code only: a path in a doc comment,
/// a doc link or a string names nothing.
fn code_only(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            // Block comments nest.
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && !(i > 0 && ident(c[i - 1]) && !(c[i - 1] == 'b' || c[i - 1] == 'c'))
            && matches!(next, Some('"' | '#'))
            && {
                let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
                c.get(i + 1 + hashes) == Some(&'"')
            }
        {
            // A raw string: r"...", r#"..."#, br"...", ...
            let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
            out.push('r');
            out.extend(std::iter::repeat_n('#', hashes));
            out.push('"');
            i += 2 + hashes;
            while i < c.len() {
                if c[i] == '"'
                    && c[i + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes
                {
                    out.push('"');
                    out.extend(std::iter::repeat_n('#', hashes));
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c[i] == '\'' && (next == Some('\\') || c.get(i + 2) == Some(&'\'')) {
            // A character literal ('x', '\n', '\u{1F600}', '"'); a lifetime ('a) stays.
            out.push('\'');
            i += 1;
            if c.get(i) == Some(&'\\') {
                out.push_str("  ");
                i += 2;
            }
            while i < c.len() && c[i] != '\'' {
                blank(&mut out, c[i]);
                i += 1;
            }
            out.push('\'');
            i += 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// A token of code: an identifier (or number), `::`, or another punctuation character; with
/// its line.
#[derive(Debug, PartialEq)]
enum Token {
    Word(String, usize),
    PathSep(usize),
    Punct(char, usize),
}

fn tokens(code: &str) -> Vec<Token> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < c.len() {
        if c[i] == '\n' {
            line += 1;
            i += 1;
        } else if c[i].is_whitespace() {
            i += 1;
        } else if c[i].is_alphanumeric() || c[i] == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Token::Word(c[start..i].iter().collect(), line));
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            out.push(Token::PathSep(line));
            i += 2;
        } else {
            out.push(Token::Punct(c[i], line));
            i += 1;
        }
    }
    out
}

/// The first segment of every path `t[at..]` starts: `name` for `name::...` or `name`, each
/// item's first segment for a group `{a::X, b, c::{..}}`; with its line.
fn heads(t: &[Token], at: usize) -> Vec<(String, usize)> {
    match t.get(at) {
        Some(Token::Word(name, line)) => vec![(name.clone(), *line)],
        Some(Token::Punct('{', _)) => {
            let mut out = Vec::new();
            let (mut depth, mut item_start) = (0usize, true);
            for tok in &t[at..] {
                match tok {
                    Token::Punct('{', _) => {
                        depth += 1;
                        item_start = depth == 1;
                    }
                    Token::Punct('}', _) => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    Token::Punct(',', _) if depth == 1 => item_start = true,
                    Token::Word(name, line) if depth == 1 && item_start => {
                        out.push((name.clone(), *line));
                        item_start = false;
                    }
                    _ => {
                        if depth == 1 {
                            item_start = false;
                        }
                    }
                }
            }
            out
        }
        _ => Vec::new(),
    }
}

/// The names a file reaches at the crate root, with their lines: `crate::name` (and
/// `$crate::name`), `crate::{a, b::..}` groups, and `super::name` where the `super`s climb to
/// the root from where they stand: the file's own depth below the root (1 for `src/x.rs` and
/// `src/x/mod.rs`, 2 for `src/x/y.rs`) plus the inline `mod m { .. }` blocks around them, so
/// `super::` in a top-level file's `mod tests` names that file's own items.
fn root_references(src: &str, file_depth: usize) -> Vec<(String, usize)> {
    let t = tokens(&code_only(src));
    let mut out = Vec::new();
    let (mut braces, mut inline_mods, mut mod_pending) = (0usize, Vec::new(), false);
    let word = |i: usize, w: &str| matches!(t.get(i), Some(Token::Word(x, _)) if x == w);
    let sep = |i: usize| matches!(t.get(i), Some(Token::PathSep(_)));
    let mut i = 0;
    while i < t.len() {
        match &t[i] {
            Token::Punct('{', _) => {
                braces += 1;
                if mod_pending {
                    inline_mods.push(braces);
                    mod_pending = false;
                }
            }
            Token::Punct('}', _) => {
                if inline_mods.last() == Some(&braces) {
                    inline_mods.pop();
                }
                braces = braces.saturating_sub(1);
            }
            Token::Punct(';', _) => mod_pending = false,
            Token::Word(w, _) if w == "mod" => {
                mod_pending = matches!(t.get(i + 1), Some(Token::Word(..)))
                    && matches!(t.get(i + 2), Some(Token::Punct('{', _)));
            }
            Token::Word(w, _) if w == "crate" && sep(i + 1) && !(i > 0 && sep(i - 1)) => {
                out.extend(heads(&t, i + 2));
            }
            Token::Word(w, _) if w == "super" && sep(i + 1) && !(i > 0 && sep(i - 1)) => {
                let mut at = i;
                let mut climbed = 0;
                while word(at, "super") && sep(at + 1) {
                    climbed += 1;
                    at += 2;
                }
                if file_depth + inline_mods.len() == climbed {
                    out.extend(heads(&t, at));
                }
                i = at;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// One reference from a top-level module to another: the file and line it is on.
type Site = (String, usize);

/// The graph of a crate's top-level modules from its files (paths relative to `src/`, with
/// their text): for each edge `from -> to`, every place that makes it. A top-level module is a
/// file or folder directly under `src/` other than `lib.rs`, `main.rs` and `bin/`; its files are
/// the file and everything under the folder of that name.
fn module_graph(files: &[(PathBuf, String)]) -> BTreeMap<(String, String), Vec<Site>> {
    let module_of = |rel: &Path| -> Option<String> {
        let first = rel.components().next()?.as_os_str().to_string_lossy().into_owned();
        let single = rel.components().count() == 1;
        match first.as_str() {
            "lib.rs" | "main.rs" | "bin" => None,
            _ if single => first.strip_suffix(".rs").map(str::to_owned),
            _ => Some(first),
        }
    };
    let modules: BTreeSet<String> = files.iter().filter_map(|(rel, _)| module_of(rel)).collect();
    let mut edges: BTreeMap<(String, String), Vec<Site>> = BTreeMap::new();
    for (rel, text) in files {
        let Some(from) = module_of(rel) else { continue };
        let parts = rel.components().count();
        let depth = if rel.file_name().is_some_and(|n| n == "mod.rs") { parts - 1 } else { parts };
        for (to, line) in root_references(text, depth) {
            if to != from && modules.contains(&to) {
                let site = (rel.display().to_string(), line);
                edges.entry((from.clone(), to)).or_default().push(site);
            }
        }
    }
    edges
}

/// The strongly connected components of more than one module (Tarjan), each sorted.
fn circles(edges: &BTreeMap<(String, String), Vec<Site>>) -> Vec<Vec<String>> {
    let mut nodes: BTreeSet<&str> = BTreeSet::new();
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        nodes.insert(from);
        nodes.insert(to);
        next.entry(from).or_default().push(to);
    }
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(v: &'a str, next: &BTreeMap<&'a str, Vec<&'a str>>, s: &mut State<'a>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in next.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(w, next, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for &v in &nodes {
        if !s.index.contains_key(v) {
            visit(v, &next, &mut s);
        }
    }
    s.out.sort();
    s.out
}

/// Every circle of `edges` with the edges inside it, each with its first site and how many
/// references make it: what to cut.
fn describe_circles(crate_dir: &str, edges: &BTreeMap<(String, String), Vec<Site>>) -> String {
    let mut text = String::new();
    for circle in circles(edges) {
        let inside: Vec<_> = edges
            .iter()
            .filter(|((from, to), _)| circle.contains(from) && circle.contains(to))
            .collect();
        text += &format!(
            "{crate_dir}: {} modules in a circle ({} edges): {}\n",
            circle.len(),
            inside.len(),
            circle.join(", ")
        );
        for ((from, to), sites) in inside {
            let (file, line) = &sites[0];
            let more = match sites.len() {
                1 => String::new(),
                n => format!(", {} more", n - 1),
            };
            text += &format!("    {from} -> {to}  ({file}:{line}{more})\n");
        }
    }
    text
}

/// Every `.rs` file under `src/` of a crate folder, relative to that `src/`, with its text.
fn crate_sources(crate_dir: &str) -> Vec<(PathBuf, String)> {
    let src = workspace_root().join(crate_dir).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            (f.strip_prefix(&src).unwrap().to_path_buf(), text)
        })
        .collect()
}

#[test]
fn no_import_circles() {
    let mut report = String::new();
    for (crate_dir, at_least) in [("apiserver", 4), ("agent", 4), ("storage", 4), ("cel", 3)] {
        let files = crate_sources(crate_dir);
        assert!(files.len() >= at_least, "found only {} files in {crate_dir}/src", files.len());
        report += &describe_circles(crate_dir, &module_graph(&files));
    }
    assert!(
        report.is_empty(),
        "import circles between top-level modules (by `crate::` and root-reaching `super::` \
         paths); cut one edge of each so the modules form layers:\n{report}"
    );
}

fn graph_of(files: &[(&str, &str)]) -> BTreeMap<(String, String), Vec<Site>> {
    let files: Vec<(PathBuf, String)> =
        files.iter().map(|(p, t)| (PathBuf::from(p), (*t).to_owned())).collect();
    module_graph(&files)
}

fn edge_list(edges: &BTreeMap<(String, String), Vec<Site>>) -> Vec<String> {
    edges.keys().map(|(from, to)| format!("{from}->{to}")).collect()
}

#[test]
fn circle_check_finds_a_circle_and_names_its_edges() {
    let edges = graph_of(&[
        ("lib.rs", "pub mod a; pub mod b; pub mod c; pub mod d;\nuse crate::d::X;"),
        ("a.rs", "use crate::b::Thing;\n"),
        ("b/mod.rs", "mod inner;\n"),
        ("b/inner.rs", "fn f() {\n    crate::c::g();\n}\n"),
        ("c.rs", "use super::a;\nuse super::d;\n"),
        ("d.rs", "pub struct X;\nuse crate::a::Y;\n"),
        ("main.rs", "use crate::a::Y;\n"),
    ]);
    assert_eq!(edge_list(&edges), ["a->b", "b->c", "c->a", "c->d", "d->a"]);
    assert_eq!(circles(&edges), [vec!["a", "b", "c", "d"]]);
    let text = describe_circles("x", &edges);
    assert!(text.contains("x: 4 modules in a circle (5 edges): a, b, c, d"), "{text}");
    assert!(text.contains("b -> c  (b/inner.rs:2)"), "{text}");
    // Cut d -> a and the circle is a, b, c.
    let edges = graph_of(&[
        ("a.rs", "use crate::b::Thing;"),
        ("b.rs", "use crate::c::Thing;"),
        ("c.rs", "use crate::a::Thing;"),
        ("d.rs", "use crate::a::Thing;"),
    ]);
    assert_eq!(circles(&edges), [vec!["a", "b", "c"]]);
    let layered =
        graph_of(&[("a.rs", "use crate::b::X;"), ("b.rs", "use crate::c::X;"), ("c.rs", "")]);
    assert!(circles(&layered).is_empty());
}

#[test]
fn circle_check_ignores_comments_doc_links_and_strings() {
    let a = r####"//! Uses [`crate::b::Thing`].
/// See [crate::b::Thing] and [`super::b`].
fn f() -> &'static str {
    // crate::b::g();
    /* crate::b::g(); /* nested */ crate::b::g(); */
    let _c = '"';
    let _q = '\'';
    let _s = "crate::b::g() \" crate::b";
    let _r = r#"crate::b "quoted" crate::b"#;
    let _b = br"crate::b";
    "crate::b"
}
fn g<'a>(x: &'a str) -> &'a str { x }
"####;
    let edges = graph_of(&[("a.rs", a), ("b.rs", "use crate::a::f;")]);
    assert_eq!(edge_list(&edges), ["b->a"]);
    assert!(circles(&edges).is_empty());
    // The code after the literals is still read.
    let edges = graph_of(&[("a.rs", &format!("{a}\nuse crate::b::X;\n")), ("b.rs", "")]);
    assert_eq!(edge_list(&edges), ["a->b"]);
    assert_eq!(edges[&("a".to_owned(), "b".to_owned())], [("a.rs".to_owned(), 15)]);
}

#[test]
fn circle_check_reads_use_groups() {
    let edges = graph_of(&[
        ("a.rs", ""),
        ("b.rs", ""),
        ("c.rs", "use crate::{a::X, b};\n"),
        ("d.rs", "use crate::{\n    a::{X, Y},\n    b::{self, Z},\n    e as _,\n};\n"),
        ("e.rs", "use super::{a, b::Q};\n"),
        ("f.rs", "macro_rules! m { () => { $crate::a::X } }\nuse crate::b::{c, d};\n"),
    ]);
    assert_eq!(
        edge_list(&edges),
        ["c->a", "c->b", "d->a", "d->b", "d->e", "e->a", "e->b", "f->a", "f->b"]
    );
}

#[test]
fn circle_check_reads_super_from_where_it_stands() {
    let a = "pub fn b() {}\nuse super::c;\n#[cfg(test)]\nmod tests {\n    use super::b;\n    \
             use super::super::d;\n    fn t() { super::b(); }\n}\npub(super) fn e() {}\n";
    let inner = "use super::b;\nuse super::super::e;\nmod m { use super::super::super::c; }\n";
    let edges = graph_of(&[
        ("a.rs", a),
        ("a/inner.rs", inner),
        ("b.rs", ""),
        ("c.rs", ""),
        ("d.rs", ""),
        ("e.rs", ""),
    ]);
    // `super::b` in `a`'s tests and in `a/inner.rs` name `a`'s own `b`, not the module `b`.
    assert_eq!(edge_list(&edges), ["a->c", "a->d", "a->e"]);
}
