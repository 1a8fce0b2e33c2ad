//! The rotation scan: the spindle axis and the phi steps of one image (nanoBragg.c L1381-L1420).

use crate::base::vec3::V3;

/// Phi from `phi0` in `phisteps` steps of `phistep` (radians) over the oscillation `osc`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scan {
    pub phi0: f64,
    pub phistep: f64,
    pub phisteps: i32,
    pub osc: f64,
    /// The spindle (rotation) axis, unit vector.
    pub spindle_vector: V3,
}
