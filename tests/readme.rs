//! The README keeps its promises: the quick-start block's two commands are the ones that work (the
//! first renders an image, the second is what CI runs), and the flag reference is the one generated
//! from the parser's table.

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
    let text = readme();
    let a = text.find("<!-- BEGIN FLAGS").expect("README has the flag reference markers");
    let a = a + text[a..].find('\n').unwrap() + 1;
    let b = text.find("<!-- END FLAGS").unwrap();
    assert_eq!(
        text[a..b].trim(),
        nanobragg::cli::flags::markdown_reference().trim(),
        "README flag reference is stale: run scripts/update-readme-flags.sh"
    );
}
