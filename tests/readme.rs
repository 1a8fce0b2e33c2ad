//! The README keeps its promises: the quick-start block's two commands are the ones that work (the
//! first renders an image, the second is what CI runs), the flag reference in docs/flags.md is the one
//! generated from the parser's table, and the README stays short with every relative link resolving.

use std::path::Path;
use std::process::Command;

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap()
}

/// The lines of the single ```sh block under "## Quick start".
fn quick_start_commands() -> Vec<String> {
    let text = readme();
    let start = text.find("## Quick start").expect("README has a '## Quick start' section");
    let section = &text[start..];
    let end = section[3..].find("\n## ").map(|e| e + 3).unwrap_or(section.len());
    let section = &section[..end];
    assert_eq!(section.matches("```sh").count(), 1, "exactly one sh block in Quick start");
    let block = section.split("```sh").nth(1).unwrap().split("```").next().unwrap();
    block.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect()
}

#[test]
fn quick_start_has_the_run_and_test_commands() {
    let cmds = quick_start_commands();
    assert_eq!(cmds.len(), 2, "{cmds:?}");
    assert!(cmds[0].starts_with("cargo run --release -- simulate"), "{}", cmds[0]);
    let ci = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/run")).unwrap();
    assert!(ci.lines().any(|l| l.trim() == cmds[1]), ".ci/run must call README's test command {:?}", cmds[1]);
}

#[test]
fn quick_start_main_command_writes_images_and_a_png() {
    let cmds = quick_start_commands();
    let args: Vec<&str> = cmds[0].trim_start_matches("cargo run --release --").split_whitespace().collect();
    let tmp = tempfile::tempdir().unwrap();
    // the binary cargo would run, in a fresh folder as a new user would
    let out = Command::new(env!("CARGO_BIN_EXE_nanobragg-rs")).args(&args).current_dir(tmp.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let float = tmp.path().join("floatimage.bin");
    let smv = tmp.path().join("intimage.img");
    assert!(float.is_file() && smv.is_file(), "float and SMV images written");
    let n = std::fs::metadata(&float).unwrap().len() / 4;
    let side = (n as f64).sqrt() as u32;
    let png_name = args.iter().position(|a| *a == "--png").map(|i| args[i + 1]).expect("quick start writes a PNG");
    let decoder = png::Decoder::new(std::fs::File::open(tmp.path().join(png_name)).unwrap());
    let reader = decoder.read_info().unwrap();
    let info = reader.info();
    assert_eq!((info.width, info.height), (side, side), "PNG has the detector's size");
}

#[test]
fn flag_reference_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/flags.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let a = text.find("<!-- BEGIN FLAGS").expect("docs/flags.md has the flag reference markers");
    let a = a + text[a..].find('\n').unwrap() + 1;
    let b = text.find("<!-- END FLAGS").expect("docs/flags.md has the END FLAGS marker");
    assert_eq!(
        text[a..b].trim(),
        nanobragg::cli::help::markdown_reference().trim(),
        "docs/flags.md flag reference is stale: run scripts/update-readme-flags.sh"
    );
}

/// The targets of the Markdown links and images in `text`: what stands between `](` and the next `)`,
/// without a title (`](file "title")`).
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let end = rest.find(')').unwrap_or(rest.len());
        let target = rest[..end].split_whitespace().next().unwrap_or("");
        targets.push(target.to_string());
        rest = &rest[end..];
    }
    targets
}

#[test]
fn readme_is_short_and_its_links_resolve() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lines = readme().lines().count();
    assert!(lines <= 400, "README.md has {lines} lines; at most 400 (move detail into docs/)");

    let mut files = vec![root.join("README.md"), root.join("reports/performance.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("a docs/ folder") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for target in link_targets(&text) {
            let skip = target.is_empty()
                || target.starts_with("http://")
                || target.starts_with("https://")
                || target.starts_with("mailto:")
                || target.starts_with('#');
            if skip {
                continue;
            }
            let target_path = target.split('#').next().unwrap();
            let resolved = file.parent().unwrap().join(target_path);
            if !resolved.exists() {
                broken.push(format!("{}: {target}", file.strip_prefix(root).unwrap().display()));
            }
        }
    }
    assert!(broken.is_empty(), "links to files that do not exist:\n{}", broken.join("\n"));
}
