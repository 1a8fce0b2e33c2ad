//! The diffuse background the kernel adds under every pixel (`-water`, nanoBragg.c L2600).

/// Water scattering from a `water_size` cube; `i_bg` already carries r_e²·fluence (checklist Q18).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Background {
    /// metres
    pub water_size: f64,
    pub i_bg: f64,
}
