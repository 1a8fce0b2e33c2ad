//! Command-line words as bytes: arguments that are not UTF-8 (file names) survive the parsers (which
//! take text) and come back as the same bytes when used as paths, in every subcommand.

use std::collections::HashMap;
use std::sync::OnceLock;

/// Arguments that were not UTF-8, by the text that stands for them in the parser (each byte that is
/// not part of valid UTF-8 becomes the private-use character U+10FF00 + byte, so distinct byte strings
/// stay distinct). [`os_path`] turns such a text back into the original bytes.
fn non_utf8() -> &'static std::sync::Mutex<HashMap<String, std::ffi::OsString>> {
    static MAP: OnceLock<std::sync::Mutex<HashMap<String, std::ffi::OsString>>> = OnceLock::new();
    MAP.get_or_init(Default::default)
}

/// The command-line words as text for the parser; file names keep their exact bytes (see [`os_path`]).
pub fn os_args(args: Vec<std::ffi::OsString>) -> Vec<String> {
    use std::os::unix::ffi::OsStrExt;
    args.into_iter()
        .map(|a| match a.to_str() {
            Some(s) => s.to_string(),
            None => {
                let mut text = String::new();
                for chunk in a.as_bytes().utf8_chunks() {
                    text.push_str(chunk.valid());
                    for &b in chunk.invalid() {
                        text.push(char::from_u32(0x10FF00 + b as u32).unwrap_or('?'));
                    }
                }
                non_utf8().lock().unwrap_or_else(|e| e.into_inner()).insert(text.clone(), a);
                text
            }
        })
        .collect()
}

/// The path a command-line word names, with the original bytes of a non-UTF-8 argument.
pub fn os_path(word: &str) -> std::path::PathBuf {
    match non_utf8().lock().unwrap_or_else(|e| e.into_inner()).get(word) {
        Some(os) => std::path::PathBuf::from(os),
        None => std::path::PathBuf::from(word),
    }
}
