//! Forward-mode dual numbers with `K` tangents: a value and its derivatives by K parameters, carried
//! through arithmetic by the chain rule.
//!
//! Our own small type rather than `num-dual`: num-dual's vector duals are built on nalgebra (a large
//! dependency tree to compile for four operators and five functions), and its dynamically sized
//! tangents allocate on every operation, which the pixel loop cannot afford; a `[f64; K]` on the
//! stack with K fixed at compile time is what the loop needs.

use std::ops::{Add, AddAssign, Div, Mul, MulAssign, Neg, Sub};

/// A value `v` and its derivatives `d` by K parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dual<const K: usize> {
    pub v: f64,
    pub d: [f64; K],
}

/// A vector of three duals.
pub type DV3<const K: usize> = [Dual<K>; 3];

impl<const K: usize> Dual<K> {
    /// A constant (all derivatives 0).
    #[inline(always)]
    pub fn c(v: f64) -> Self {
        Dual { v, d: [0.0; K] }
    }
    #[inline(always)]
    fn chain(self, v: f64, dv: f64) -> Self {
        Dual { v, d: self.d.map(|x| x * dv) }
    }
    #[inline(always)]
    pub fn sin(self) -> Self {
        self.chain(self.v.sin(), self.v.cos())
    }
    #[inline(always)]
    pub fn cos(self) -> Self {
        self.chain(self.v.cos(), -self.v.sin())
    }
    #[inline(always)]
    pub fn exp(self) -> Self {
        let e = self.v.exp();
        self.chain(e, e)
    }
    #[inline(always)]
    pub fn sqrt(self) -> Self {
        let r = self.v.sqrt();
        self.chain(r, 0.5 / r)
    }
    /// atan2(self, x): d = (x·dy − y·dx)/(x² + y²).
    #[inline(always)]
    pub fn atan2(self, x: Self) -> Self {
        let r2 = x.v * x.v + self.v * self.v;
        let mut d = [0.0; K];
        for (i, o) in d.iter_mut().enumerate() {
            *o = (x.v * self.d[i] - self.v * x.d[i]) / r2;
        }
        Dual { v: self.v.atan2(x.v), d }
    }
}

impl<const K: usize> Add for Dual<K> {
    type Output = Self;
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        let mut d = self.d;
        for (a, b) in d.iter_mut().zip(o.d) {
            *a += b;
        }
        Dual { v: self.v + o.v, d }
    }
}
impl<const K: usize> Sub for Dual<K> {
    type Output = Self;
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        let mut d = self.d;
        for (a, b) in d.iter_mut().zip(o.d) {
            *a -= b;
        }
        Dual { v: self.v - o.v, d }
    }
}
impl<const K: usize> Mul for Dual<K> {
    type Output = Self;
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        let mut d = [0.0; K];
        for (i, x) in d.iter_mut().enumerate() {
            *x = self.d[i] * o.v + self.v * o.d[i];
        }
        Dual { v: self.v * o.v, d }
    }
}
impl<const K: usize> Div for Dual<K> {
    type Output = Self;
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        let q = self.v / o.v;
        let mut d = [0.0; K];
        for (i, x) in d.iter_mut().enumerate() {
            *x = (self.d[i] - q * o.d[i]) / o.v;
        }
        Dual { v: q, d }
    }
}
impl<const K: usize> Neg for Dual<K> {
    type Output = Self;
    #[inline(always)]
    fn neg(self) -> Self {
        Dual { v: -self.v, d: self.d.map(|x| -x) }
    }
}
impl<const K: usize> Add<f64> for Dual<K> {
    type Output = Self;
    #[inline(always)]
    fn add(self, o: f64) -> Self {
        Dual { v: self.v + o, d: self.d }
    }
}
impl<const K: usize> Sub<f64> for Dual<K> {
    type Output = Self;
    #[inline(always)]
    fn sub(self, o: f64) -> Self {
        Dual { v: self.v - o, d: self.d }
    }
}
impl<const K: usize> Mul<f64> for Dual<K> {
    type Output = Self;
    #[inline(always)]
    fn mul(self, o: f64) -> Self {
        Dual { v: self.v * o, d: self.d.map(|x| x * o) }
    }
}
impl<const K: usize> Div<f64> for Dual<K> {
    type Output = Self;
    #[inline(always)]
    fn div(self, o: f64) -> Self {
        Dual { v: self.v / o, d: self.d.map(|x| x / o) }
    }
}
impl<const K: usize> Mul<Dual<K>> for f64 {
    type Output = Dual<K>;
    #[inline(always)]
    fn mul(self, o: Dual<K>) -> Dual<K> {
        o * self
    }
}
impl<const K: usize> Add<Dual<K>> for f64 {
    type Output = Dual<K>;
    #[inline(always)]
    fn add(self, o: Dual<K>) -> Dual<K> {
        o + self
    }
}
impl<const K: usize> Sub<Dual<K>> for f64 {
    type Output = Dual<K>;
    #[inline(always)]
    fn sub(self, o: Dual<K>) -> Dual<K> {
        -o + self
    }
}
impl<const K: usize> Div<Dual<K>> for f64 {
    type Output = Dual<K>;
    #[inline(always)]
    fn div(self, o: Dual<K>) -> Dual<K> {
        Dual::c(self) / o
    }
}
impl<const K: usize> AddAssign for Dual<K> {
    #[inline(always)]
    fn add_assign(&mut self, o: Self) {
        *self = *self + o;
    }
}
impl<const K: usize> MulAssign for Dual<K> {
    #[inline(always)]
    fn mul_assign(&mut self, o: Self) {
        *self = *self * o;
    }
}

/// a·b.
#[inline(always)]
pub fn dot<const K: usize>(a: &DV3<K>, b: &DV3<K>) -> Dual<K> {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

/// a × b.
#[inline(always)]
pub fn cross<const K: usize>(a: &DV3<K>, b: &DV3<K>) -> DV3<K> {
    [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
}

/// (v/|v|, |v|), and (v, 0) for a zero vector, as `vec3::unitize`.
#[inline(always)]
pub fn unitize<const K: usize>(v: &DV3<K>) -> (DV3<K>, Dual<K>) {
    let m = dot(v, v).sqrt();
    if m.v != 0.0 {
        (v.map(|x| x / m), m)
    } else {
        (*v, Dual::c(0.0))
    }
}

/// Rotation of v about a unit axis by phi (`vec3::rotate_axis`).
#[inline(always)]
pub fn rotate_axis<const K: usize>(v: &DV3<K>, axis: &DV3<K>, phi: Dual<K>) -> DV3<K> {
    let (s, c) = (phi.sin(), phi.cos());
    let d = dot(axis, v) * (1.0 - c);
    [
        axis[0] * d + v[0] * c + (-axis[2] * v[1] + axis[1] * v[2]) * s,
        axis[1] * d + v[1] * c + (axis[2] * v[0] - axis[0] * v[2]) * s,
        axis[2] * d + v[2] * c + (-axis[1] * v[0] + axis[0] * v[1]) * s,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_rule_matches_a_difference() {
        let f = |x: Dual<1>| ((x * x).sin() / (x + 2.0)).exp() * x.sqrt() + x.atan2(Dual::c(0.3) + x * x);
        let x0 = 0.7;
        let d = f(Dual { v: x0, d: [1.0] }).d[0];
        let h = 1e-5;
        let fd = (f(Dual::c(x0 + h)).v - f(Dual::c(x0 - h)).v) / (2.0 * h);
        assert!((d - fd).abs() < 1e-8, "{d} vs {fd}");
    }
}
