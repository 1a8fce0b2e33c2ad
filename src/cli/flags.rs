//! STUB.
use crate::{Config, Result};

/// Parse the words after `simulate` (C-style flags and long options) into a Config.
pub fn parse_simulate_args(_args: &[String]) -> Result<Config> {
    todo!()
}
pub fn help_text() -> String { todo!() }
pub fn markdown_reference() -> String { todo!() }
