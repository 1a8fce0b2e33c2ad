//! `simulate --help` and the Markdown flag reference (docs/flags.md), generated from the flag table.

use super::flags::{Category, Flag, FLAGS};

fn spellings_joined(f: &Flag, sep: &str) -> String {
    f.spellings().collect::<Vec<_>>().join(sep)
}

fn units_default(f: &Flag) -> String {
    let units = if f.units.is_empty() { "none" } else { f.units };
    let default = if f.default.is_empty() { "-" } else { f.default };
    format!("[units: {units}; default: {default}]")
}

fn wrap(text: &str, indent: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && indent.len() + line.len() + 1 + word.chars().count() > width {
            out.push_str(indent);
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(indent);
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `--help` text: every flag with its aliases, values, units and default, grouped by category.
pub fn help_text() -> String {
    let mut s = String::from(
        "Usage: nanobragg-rs simulate [FLAGS]\n\n\
         Flags are nanoBragg.c's (single dash), matched exactly by the names listed; a few have readable\n\
         --long aliases. Values that are negative numbers are fine (-fdet_vector -1 0 0). Later flags\n\
         override earlier ones. A crystal is a cell (-cell or -mat) with structure factors (-hkl, an\n\
         existing -dump file or -default_F); with no crystal flags at all the built-in benchmark crystal\n\
         (-cell 100 100 100 90 90 90 -N 5 -default_F 100 -lambda 6.2) is simulated.\n",
    );
    for cat in Category::ALL {
        s.push_str(&format!("\n{}:\n", cat.title()));
        for f in FLAGS.iter().filter(|f| f.category == cat) {
            let mut head = format!("  {}", spellings_joined(f, ", "));
            if !f.values.is_empty() {
                head.push_str(&format!("  <{}>", f.values));
            }
            s.push_str(&head);
            s.push('\n');
            s.push_str(&wrap(
                &format!("{} {}", f.help, units_default(f)),
                "        ",
                100,
            ));
        }
    }
    s
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The flag reference as Markdown (one table per category), for the README.
pub fn markdown_reference() -> String {
    let mut s = String::new();
    for cat in Category::ALL {
        s.push_str(&format!("### {}\n\n", cat.title()));
        s.push_str("| Flag | Aliases | Values | Units | Default | Description |\n");
        s.push_str("|---|---|---|---|---|---|\n");
        for f in FLAGS.iter().filter(|f| f.category == cat) {
            let aliases = f
                .aliases
                .iter()
                .map(|a| format!("`{a}`"))
                .collect::<Vec<_>>()
                .join(" ");
            let values = if f.values.is_empty() {
                String::new()
            } else {
                format!("`{}`", md_escape(f.values))
            };
            s.push_str(&format!(
                "| `{}` | {} | {} | {} | {} | {} |\n",
                f.name,
                aliases,
                values,
                md_escape(f.units),
                md_escape(f.default),
                md_escape(f.help)
            ));
        }
        s.push('\n');
    }
    s
}
