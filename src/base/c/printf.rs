//! C printf-compatible number formatting (`%g`, `%f`, `%.15g`, `%11.8f`, `%4d`, `%lu` ...).
//!
//! nanoBragg's stdout and file headers are read by people and scripts that compare them with the C
//! program's, so numbers are formatted by the C library's own `snprintf` rather than re-implemented: this
//! gives glibc's exact rounding and exponent rules (`%g` switching, `-0`, `inf`, `nan`) for free. Rust
//! never calls `setlocale`, so the "C" locale (decimal point `.`) is always in effect.
//!
//! A spec is validated before it reaches `snprintf` (an unchecked `%s` or `%n` would be undefined
//! behaviour); an invalid one falls back to `%g` / plain decimal instead of panicking.

use std::ffi::{c_char, c_double, c_long, CString};

/// Longest width or precision accepted; bigger ones are treated as invalid specs.
const MAX_FIELD: u32 = 4096;

/// A checked spec: the text to hand to `snprintf`, holding exactly one conversion.
struct Spec {
    c: CString,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Float,
    Int,
}

/// Parse `spec`: any literal text (no NUL, `%%` allowed) around exactly one conversion
/// `%[-+ #0]*[width][.prec][length]conv`. For floats the length may be `l` (ignored by printf);
/// for integers the length is rewritten to `l` because the value is always passed as a C `long`.
fn parse(spec: &str, kind: Kind) -> Option<Spec> {
    let b = spec.as_bytes();
    if b.contains(&0) {
        return None;
    }
    let mut out = String::with_capacity(spec.len() + 2);
    let mut convs = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            // copy one UTF-8 char of literal text
            let ch = spec[i..].chars().next()?;
            out.push(ch);
            i += ch.len_utf8();
            continue;
        }
        i += 1;
        if i < b.len() && b[i] == b'%' {
            out.push_str("%%");
            i += 1;
            continue;
        }
        convs += 1;
        out.push('%');
        while i < b.len() && b"-+ #0".contains(&b[i]) {
            out.push(b[i] as char);
            i += 1;
        }
        let field = |i: &mut usize, out: &mut String| -> Option<()> {
            let start = *i;
            while *i < b.len() && b[*i].is_ascii_digit() {
                *i += 1;
            }
            let digits = &spec[start..*i];
            if !digits.is_empty() && digits.parse::<u32>().ok()? > MAX_FIELD {
                return None;
            }
            out.push_str(digits);
            Some(())
        };
        field(&mut i, &mut out)?;
        if i < b.len() && b[i] == b'.' {
            out.push('.');
            i += 1;
            field(&mut i, &mut out)?;
        }
        // length modifiers: none or one/two 'l'
        let mut nl = 0;
        while i < b.len() && b[i] == b'l' {
            nl += 1;
            i += 1;
        }
        if nl > 2 || (kind == Kind::Float && nl > 1) {
            return None;
        }
        let conv = *b.get(i)?;
        i += 1;
        match kind {
            Kind::Float if b"fFgGeEaA".contains(&conv) => {}
            Kind::Int if b"diuxXo".contains(&conv) => out.push('l'),
            _ => return None,
        }
        out.push(conv as char);
    }
    if convs != 1 {
        return None;
    }
    Some(Spec { c: CString::new(out).ok()? })
}

/// Run `snprintf` twice: once to size the output, once to fill it.
fn run(spec: &Spec, call: impl Fn(*mut c_char, usize, *const c_char) -> i32) -> Option<String> {
    let n = call(std::ptr::null_mut(), 0, spec.c.as_ptr());
    if n < 0 {
        return None;
    }
    let mut buf = vec![0u8; n as usize + 1];
    let m = call(buf.as_mut_ptr() as *mut c_char, buf.len(), spec.c.as_ptr());
    if m != n {
        return None;
    }
    buf.truncate(n as usize);
    String::from_utf8(buf).ok()
}

/// Format one double with a single C conversion spec such as "%g", "%11.8f", "%.15g", "%lg".
/// An invalid spec formats `x` with "%g".
pub fn cf(spec: &str, x: f64) -> String {
    let fmt = |s: &Spec| {
        // SAFETY: the spec holds exactly one floating conversion, which consumes one double.
        run(s, |buf, len, f| unsafe { libc::snprintf(buf, len, f, x as c_double) })
    };
    parse(spec, Kind::Float)
        .and_then(|s| fmt(&s))
        .or_else(|| fmt(&parse("%g", Kind::Float)?))
        .unwrap_or_else(|| x.to_string())
}

/// Format one integer with a single C conversion spec such as "%d", "%4d", "%ld", "%lu".
/// The value is passed as a C `long` (so `%lu` of a negative number wraps as in C);
/// an invalid spec gives plain decimal.
pub fn ci(spec: &str, x: i64) -> String {
    match parse(spec, Kind::Int) {
        // SAFETY: the spec holds exactly one integer conversion with an `l` length, consuming one long.
        Some(s) => run(&s, |buf, len, f| unsafe { libc::snprintf(buf, len, f, x as c_long) })
            .unwrap_or_else(|| x.to_string()),
        None => x.to_string(),
    }
}

/// Shorthand for `cf("%g", x)`.
pub fn g(x: f64) -> String {
    cf("%g", x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_matches_glibc() {
        assert_eq!(g(0.0), "0");
        assert_eq!(g(-0.0), "-0");
        assert_eq!(g(1.0), "1");
        assert_eq!(g(100.0), "100");
        assert_eq!(g(0.1), "0.1");
        assert_eq!(g(565.3751), "565.375");
        assert_eq!(g(123456.0), "123456");
        assert_eq!(g(1234567.0), "1.23457e+06");
        assert_eq!(g(0.0001), "0.0001");
        assert_eq!(g(0.00001), "1e-05");
        assert_eq!(g(1e100), "1e+100");
        assert_eq!(g(2.5e33), "2.5e+33");
        assert_eq!(g(f64::INFINITY), "inf");
        assert_eq!(g(f64::NEG_INFINITY), "-inf");
        assert_eq!(g(f64::NAN), "nan");
        assert_eq!(g(-f64::NAN), "-nan");
        assert_eq!(g(0.5), "0.5");
        assert_eq!(g(2.5), "2.5");
        assert_eq!(g(999999.5), "1e+06");
        assert_eq!(cf("%lg", 6.4), "6.4");
    }

    #[test]
    fn fixed_and_precision() {
        assert_eq!(cf("%f", 1.0 / 3.0), "0.333333");
        assert_eq!(cf("%f", 1e20), "100000000000000000000.000000");
        assert_eq!(cf("%.0f", 0.5), "0");
        assert_eq!(cf("%.0f", 1.5), "2");
        assert_eq!(cf("%.0f", 2.5), "2");
        assert_eq!(cf("%11.8f", std::f64::consts::PI), " 3.14159265");
        assert_eq!(cf("%11.8f", -0.25), "-0.25000000");
        assert_eq!(cf("%.15g", 0.1), "0.1");
        assert_eq!(cf("%.15g", 1.0 / 3.0), "0.333333333333333");
        assert_eq!(cf("%.25g", 0.1), "0.1000000000000000055511151");
        assert_eq!(cf("%15.10g", std::f64::consts::E), "    2.718281828");
        assert_eq!(cf("%e", 12345.678), "1.234568e+04");
        assert_eq!(cf("%-8.2f|", 1.0), "1.00    |");
        assert_eq!(cf("x=%g;", 2.0), "x=2;");
        assert_eq!(cf("%g%%", 50.0), "50%");
    }

    #[test]
    fn invalid_specs_fall_back() {
        assert_eq!(cf("%s", 1.5), "1.5");
        assert_eq!(cf("%n", 1.5), "1.5");
        assert_eq!(cf("%g %g", 1.5), "1.5");
        assert_eq!(cf("no conversion", 1.5), "1.5");
        assert_eq!(cf("%Lg", 1.5), "1.5");
        assert_eq!(cf("%d", 1.5), "1.5");
        assert_eq!(cf("%99999g", 1.5), "1.5");
        assert_eq!(cf("%g\0", 1.5), "1.5");
        assert_eq!(cf("%", 1.5), "1.5");
        assert_eq!(ci("%g", 7), "7");
        assert_eq!(ci("%s", 7), "7");
    }

    #[test]
    fn integers() {
        assert_eq!(ci("%d", 42), "42");
        assert_eq!(ci("%4d", -7), "  -7");
        assert_eq!(ci("%-4d|", 7), "7   |");
        assert_eq!(ci("%ld", 1 << 40), "1099511627776");
        assert_eq!(ci("%lu", 16384), "16384");
        assert_eq!(ci("%lu", -1), "18446744073709551615");
        assert_eq!(ci("%03d", 5), "005");
        assert_eq!(ci("%x", 255), "ff");
    }
}
