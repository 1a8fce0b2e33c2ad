//! The house rule of docs/architecture.md, checked from the code's own text: the library is a stack
//! of layers (base → experiment, sfcalc → io → kernel, stats, noise → run → apps → cli) and a module
//! imports only from its own layer or below; files form no import loop; nothing in io/ names `Config`
//! or `Experiment`; sfcalc imports only base; no function is longer than 150 lines (the harness
//! crate included).
//!
//! Every `crate::…`, `super::…` and `self::…` path is read (uses, re-exports, paths in code, doc
//! links), with `use` groups expanded, and mapped to the file that defines its longest prefix. The
//! allow-list holds the exceptions still being moved; it may only shrink: a listed exception that no
//! longer occurs fails the test too, so the list always says exactly what is left.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Exceptions still to be removed by the architecture move. Empty when the move is done.
const ALLOWED: &[&str] = &[
];

/// The longest function the rule allows, in lines from `fn` to its closing brace.
const MAX_FN_LINES: usize = 150;

/// The layers by top-level module, lowest first (docs/architecture.md).
fn layer_of(module: &[String]) -> Option<(usize, &'static str)> {
    Some(match module.first()?.as_str() {
        "base" => (0, "base"),
        "experiment" | "sfcalc" => (1, "experiment"),
        "io" => (2, "io"),
        "kernel" | "stats" | "noise" => (3, "kernel"),
        "run" => (4, "run"),
        "apps" => (5, "apps"),
        "cli" => (6, "cli"),
        _ => return None,
    })
}

/// One source file: its module path, its code with comments and string contents blanked (`code`),
/// and the same with doc comments kept (`docs`), both the length of the original.
struct Source {
    rel: String,
    module: Vec<String>,
    code: Vec<u8>,
    docs: Vec<u8>,
}

/// Blank comments and string/char literal contents (newlines kept, so offsets and line numbers hold).
/// Returns (code without any comment, code with doc comments kept).
fn blank(text: &str) -> (Vec<u8>, Vec<u8>) {
    let b = text.as_bytes();
    let mut code = b.to_vec();
    let mut docs = b.to_vec();
    let blank_range = |v: &mut Vec<u8>, from: usize, to: usize| {
        for x in &mut v[from..to] {
            if *x != b'\n' {
                *x = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            let end = text[i..].find('\n').map_or(b.len(), |e| i + e);
            let doc = matches!(b.get(i + 2), Some(b'/') | Some(b'!')) && b.get(i + 3) != Some(&b'/');
            blank_range(&mut code, i, end);
            if !doc {
                blank_range(&mut docs, i, end);
            }
            i = end;
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                    depth += 1;
                    j += 1;
                } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                    depth -= 1;
                    j += 1;
                }
                j += 1;
            }
            blank_range(&mut code, i, j);
            blank_range(&mut docs, i, j);
            i = j;
        } else if c == b'r' && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#')) && (i == 0 || !is_ident(b[i - 1]) || b[i - 1] == b'b') {
            let hashes = b[i + 1..].iter().take_while(|&&x| x == b'#').count();
            if b.get(i + 1 + hashes) != Some(&b'"') {
                i += 1;
                continue;
            }
            let close: String = std::iter::once('"').chain(std::iter::repeat('#').take(hashes)).collect();
            let start = i + 2 + hashes;
            let end = text[start..].find(&close).map_or(b.len(), |e| start + e);
            blank_range(&mut code, start, end);
            blank_range(&mut docs, start, end);
            i = end + close.len();
        } else if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            blank_range(&mut code, i + 1, j.min(b.len()));
            blank_range(&mut docs, i + 1, j.min(b.len()));
            i = j + 1;
        } else if c == b'\'' {
            // a char literal ('x', '\n', '\u{..}') or a lifetime ('a)
            let end = if b.get(i + 1) == Some(&b'\\') {
                text[i + 2..].find('\'').map(|e| i + 2 + e)
            } else {
                let ch = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch) == Some(&b'\'')).then_some(i + 1 + ch)
            };
            match end {
                Some(e) => {
                    blank_range(&mut code, i + 1, e);
                    blank_range(&mut docs, i + 1, e);
                    i = e + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    (code, docs)
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn line_of(b: &[u8], pos: usize) -> usize {
    b[..pos].iter().filter(|&&c| c == b'\n').count() + 1
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// `src/a/b.rs` → `[a, b]`; `src/a/mod.rs` → `[a]`; `src/lib.rs` → `[]`.
fn module_of(rel_to_src: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel_to_src.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

fn load(root: &Path) -> Vec<Source> {
    let src = root.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .into_iter()
        .filter(|p| !p.starts_with(src.join("bin")) && p != &src.join("main.rs"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let (code, docs) = blank(&text);
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            Source { rel, module: module_of(p.strip_prefix(&src).unwrap()), code, docs }
        })
        .collect()
}

/// The inline modules (`mod x { … }`) open at each byte of `code`, as (start, end, name).
fn inline_modules(code: &[u8]) -> Vec<(usize, usize, String)> {
    let text = String::from_utf8_lossy(code);
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = text[i..].find("mod ") {
        let at = i + p;
        i = at + 4;
        if at > 0 && is_ident(code[at - 1]) {
            continue;
        }
        let rest = &text[at + 4..];
        let name: String = rest.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let after = rest.trim_start()[name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = at + 4 + (rest.len() - after.len());
        out.push((open, matching_brace(code, open), name));
    }
    out
}

fn matching_brace(code: &[u8], open: usize) -> usize {
    let mut depth = 0i64;
    for (j, &c) in code.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// Parse a path tree at `pos` (just after `crate::`, `super::` or `self::`): `a::b::{c, d::{e, f}}`.
fn parse_tree(b: &[u8], mut pos: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let skip_ws = |b: &[u8], mut p: usize| {
        while p < b.len() && (b[p] as char).is_whitespace() {
            p += 1;
        }
        p
    };
    let mut path = prefix;
    loop {
        pos = skip_ws(b, pos);
        if pos < b.len() && b[pos] == b'{' {
            pos += 1;
            loop {
                pos = skip_ws(b, pos);
                if pos >= b.len() || b[pos] == b'}' {
                    return pos + 1;
                }
                pos = parse_tree(b, pos, path.clone(), out);
                pos = skip_ws(b, pos);
                if pos < b.len() && b[pos] == b',' {
                    pos += 1;
                }
            }
        }
        let start = pos;
        while pos < b.len() && is_ident(b[pos]) {
            pos += 1;
        }
        if pos == start {
            out.push(path);
            return pos.max(start + 1);
        }
        let seg = String::from_utf8_lossy(&b[start..pos]).into_owned();
        if seg != "self" {
            path.push(seg);
        }
        let p2 = skip_ws(b, pos);
        if b.get(p2) == Some(&b':') && b.get(p2 + 1) == Some(&b':') {
            pos = p2 + 2;
        } else {
            out.push(path);
            return pos;
        }
    }
}

/// Every absolute module path that `s` refers to, with the byte offset where it is written.
fn references(s: &Source, children: &BTreeSet<Vec<String>>) -> Vec<(usize, Vec<String>)> {
    let inline = inline_modules(&s.code);
    let b = &s.docs;
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !is_ident(b[i]) || (i > 0 && (is_ident(b[i - 1]) || b[i - 1] == b':')) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && is_ident(b[i]) {
            i += 1;
        }
        if b.get(i) != Some(&b':') || b.get(i + 1) != Some(&b':') {
            continue;
        }
        let word = String::from_utf8_lossy(&b[start..i]).into_owned();
        // the module this text sits in: the file's module, then any inline modules around it
        let mut here = s.module.clone();
        here.extend(inline.iter().filter(|(o, e, _)| *o < start && start < *e).map(|(_, _, n)| n.clone()));
        let base = match word.as_str() {
            "crate" => Vec::new(),
            "self" => here.clone(),
            "super" => {
                let mut m = here.clone();
                m.pop();
                let mut p = i + 2;
                while b[p..].starts_with(b"super::") {
                    m.pop();
                    p += 7;
                }
                i = p - 2;
                m
            }
            // a child module named without a prefix (uniform paths), as `fast::render_row` in kernel/mod.rs
            w => {
                let mut m = here.clone();
                m.push(w.to_string());
                if !children.contains(&m) || s.module != here {
                    continue;
                }
                here.clone()
            }
        };
        let mut paths = Vec::new();
        let from = if matches!(word.as_str(), "crate" | "self" | "super") { i + 2 } else { start };
        let end = parse_tree(b, from, base, &mut paths);
        out.extend(paths.into_iter().map(|p| (start, p)));
        i = end.max(i + 2);
    }
    out
}

struct Graph {
    files: Vec<Source>,
    /// imports between distinct files (from, to)
    edges: BTreeSet<(usize, usize)>,
}

fn graph(root: &Path) -> Graph {
    let files = load(root);
    let by_module: BTreeMap<Vec<String>, usize> = files.iter().enumerate().map(|(i, f)| (f.module.clone(), i)).collect();
    let children: BTreeSet<Vec<String>> = by_module.keys().cloned().collect();
    // names lib.rs re-exports (`pub use a::b::{X, Y}`) resolve to their source
    let lib = &files[by_module[&Vec::new()]];
    let mut reexports: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (_, p) in references(lib, &children) {
        if let Some(last) = p.last() {
            reexports.insert(last.clone(), p.clone());
        }
    }
    let mut edges = BTreeSet::new();
    for (fi, f) in files.iter().enumerate() {
        if f.module.is_empty() {
            continue;
        }
        for (_, mut p) in references(f, &children) {
            if p.len() == 1 {
                if let Some(r) = reexports.get(&p[0]) {
                    p = r.clone();
                }
            }
            let target = (0..=p.len()).rev().find_map(|n| by_module.get(&p[..n]).copied());
            if let Some(t) = target {
                if t != fi && !files[t].module.is_empty() {
                    edges.insert((fi, t));
                }
            }
        }
    }
    Graph { files, edges }
}

/// Strongly connected components of more than one file (Tarjan).
fn loops(n: usize, edges: &BTreeSet<(usize, usize)>) -> Vec<Vec<usize>> {
    struct T<'a> {
        adj: Vec<Vec<usize>>,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: &'a mut Vec<Vec<usize>>,
    }
    fn visit(t: &mut T, v: usize) {
        t.index[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        for w in t.adj[v].clone() {
            match t.index[w] {
                None => {
                    visit(t, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut c = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on[w] = false;
                c.push(w);
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                t.out.push(c);
            }
        }
    }
    let mut adj = vec![Vec::new(); n];
    for &(a, b) in edges {
        adj[a].push(b);
    }
    let mut out = Vec::new();
    let mut t = T { adj, index: vec![None; n], low: vec![0; n], on: vec![false; n], stack: Vec::new(), next: 0, out: &mut out };
    for v in 0..n {
        if t.index[v].is_none() {
            visit(&mut t, v);
        }
    }
    out
}

/// Where the body of the `fn` at `at` opens: the first `{` outside brackets and parentheses (an
/// array type `[T; N]` in a signature holds a `;`); `None` for a declaration without a body.
fn body_start(code: &[u8], at: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (j, &c) in code.iter().enumerate().skip(at) {
        match c {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            b'{' if depth == 0 => return Some(j),
            b';' if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

/// Functions longer than the rule allows in every .rs file under `dir`, as "long fn PATH:NAME LINES".
fn long_functions(root: &Path, dir: &str, out: &mut BTreeSet<String>) {
    let mut files = Vec::new();
    rust_files(&root.join(dir), &mut files);
    for p in files {
        let text = std::fs::read_to_string(&p).unwrap();
        let (code, _) = blank(&text);
        let s = String::from_utf8_lossy(&code);
        let mut i = 0;
        while let Some(f) = s[i..].find("fn ") {
            let at = i + f;
            i = at + 3;
            if at > 0 && is_ident(code[at - 1]) {
                continue;
            }
            let name: String = s[at + 3..].trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            let Some(body) = body_start(&code, at) else { continue };
            if name.is_empty() {
                continue;
            }
            let lines = line_of(&code, matching_brace(&code, body)) - line_of(&code, at) + 1;
            if lines > MAX_FN_LINES {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(format!("long fn {rel}:{name} ({lines} lines)"));
            }
        }
    }
}

/// Every breach of the rule in the tree at `root`.
fn violations(root: &Path) -> BTreeSet<String> {
    let g = graph(root);
    let mut v = BTreeSet::new();
    for f in &g.files {
        if !f.module.is_empty() && layer_of(&f.module).is_none() {
            v.insert(format!("outside the layers: {}", f.rel));
        }
    }
    for &(a, b) in &g.edges {
        let (fa, fb) = (&g.files[a], &g.files[b]);
        if let (Some((la, na)), Some((lb, nb))) = (layer_of(&fa.module), layer_of(&fb.module)) {
            if lb > la {
                v.insert(format!("upward: {} ({na}) -> {} ({nb})", fa.rel, fb.rel));
            }
        }
    }
    // sfcalc sits beside the experiment and is called by it: it imports only base/ (the design card)
    for &(a, b) in &g.edges {
        let (fa, fb) = (&g.files[a], &g.files[b]);
        let top = |f: &Source| f.module.first().cloned().unwrap_or_default();
        if top(fa) == "sfcalc" && !matches!(top(fb).as_str(), "sfcalc" | "base") {
            v.insert(format!("sfcalc imports above base: {} -> {}", fa.rel, fb.rel));
        }
    }
    for c in loops(g.files.len(), &g.edges) {
        let mut names: Vec<&str> = c.iter().map(|&i| g.files[i].rel.as_str()).collect();
        names.sort();
        v.insert(format!("loop: {}", names.join(", ")));
    }
    for f in g.files.iter().filter(|f| f.module.first().is_some_and(|m| m == "io")) {
        let s = String::from_utf8_lossy(&f.code);
        for word in ["Config", "Experiment"] {
            let named = s.match_indices(word).any(|(p, _)| {
                (p == 0 || !is_ident(f.code[p - 1])) && f.code.get(p + word.len()).is_none_or(|&c| !is_ident(c))
            });
            if named {
                v.insert(format!("io names {word}: {}", f.rel));
            }
        }
    }
    long_functions(root, "src", &mut v);
    long_functions(root, "harness/src", &mut v);
    v
}

#[test]
fn imports_only_go_down() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = violations(root);
    let allowed: BTreeSet<String> = ALLOWED.iter().map(|s| s.to_string()).collect();
    let new: Vec<&String> = found.difference(&allowed).collect();
    let stale: Vec<&String> = allowed.difference(&found).collect();
    let mut msg = String::new();
    for n in &new {
        msg.push_str(&format!("breach: {n}\n"));
    }
    for s in &stale {
        msg.push_str(&format!("no longer occurs (remove it from ALLOWED): {s}\n"));
    }
    assert!(msg.is_empty(), "docs/architecture.md's rule:\n{msg}({} found, {} allowed)", found.len(), allowed.len());
}

/// The checker itself: a path tree, a doc link, a child module named without a prefix, `super::` from
/// an inline module, comments and strings ignored, and loops and upward imports found in a small tree.
#[test]
fn the_checker_reads_paths_as_rustc_does() {
    let (code, docs) = blank("use a; // crate::x::y\nlet s = \"crate::z::w\"; let c = '{'; /// [`crate::d::e`]\n");
    assert!(!String::from_utf8_lossy(&code).contains("crate::"));
    let d = String::from_utf8_lossy(&docs);
    assert!(d.contains("crate::d::e") && !d.contains("crate::x") && !d.contains("crate::z"));
    let mut out = Vec::new();
    parse_tree(b"a::{b, c::{d, self}, e::F}", 0, vec![], &mut out);
    let got: Vec<String> = out.iter().map(|p| p.join("::")).collect();
    assert_eq!(got, ["a::b", "a::c::d", "a::c", "a::e::F"]);

    let tmp = tempfile::tempdir().unwrap();
    let w = |p: &str, t: &str| {
        let f = tmp.path().join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, t).unwrap();
    };
    w("src/lib.rs", "pub mod base; pub mod io; pub mod kernel;\npub use base::error::{Error, Result};\n");
    w("src/base/mod.rs", "pub mod error; pub mod vec3;\n");
    w("src/base/error.rs", "pub struct Error;\n");
    w("src/base/vec3.rs", "use crate::Error;\n");
    w("src/io/mod.rs", "pub mod a; pub mod b;\nfn f() { a::g(); }\n");
    w("src/io/a.rs", "use super::b::X;\n/// [`crate::kernel::K`]\nfn g(c: &Config) {}\n");
    w("src/io/b.rs", "pub struct X;\nmod tests { use super::super::a; }\n");
    w("src/kernel/mod.rs", &format!("pub struct K;\nfn long(a: [u8; 2]) {{\n{}}}\n", "let x = 1;\n".repeat(150)));
    let v: Vec<String> = violations(tmp.path()).into_iter().collect();
    assert_eq!(
        v,
        [
            "io names Config: src/io/a.rs",
            "long fn src/kernel/mod.rs:long (152 lines)",
            "loop: src/io/a.rs, src/io/b.rs",
            "upward: src/io/a.rs (io) -> src/kernel/mod.rs (kernel)",
        ],
        "{v:#?}"
    );
}
