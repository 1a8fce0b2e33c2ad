//! File formats: one module per format. STUB.
pub mod atomic;
pub mod float;
pub mod pgm;
pub mod png;
pub mod smv;
pub mod text;
