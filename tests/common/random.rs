//! The random case generator of the randomized parity tests: splitmix64, so a seed replays the
//! same cases on any machine.

/// splitmix64: a small, fully specified generator, so a seed replays the same cases on any machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, case: u64) -> Rng {
        let mut r = Rng(seed ^ case.wrapping_mul(0xA076_1D64_78BD_642F));
        r.next();
        r
    }
    /// The generator of case `case` of `program` (one stream per companion program), the same
    /// bits as `new(seed ^ program·K, case)`.
    pub fn for_program(seed: u64, case: u64, program: u64) -> Rng {
        Rng::new(seed ^ program.wrapping_mul(0xE703_7ED1_A0B4_28DB), case)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [lo, hi).
    pub fn f(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
    /// Uniform integer in [lo, hi].
    pub fn i(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % ((hi - lo + 1) as u64)) as i64
    }
    pub fn chance(&mut self, p: f64) -> bool {
        self.f(0.0, 1.0) < p
    }
    pub fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[self.next() as usize % v.len()]
    }
}

/// A number as a short decimal (what a user would type).
pub fn d(x: f64, places: usize) -> String {
    format!("{x:.places$}")
}
