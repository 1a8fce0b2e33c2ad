//! MOSFLM A-matrix files (`-mat`), nanoBragg.c L1800-L1830.

use crate::{Error, Result};
use std::path::Path;

/// Read the first nine numbers of a MOSFLM A-matrix file: rows x, y, z; columns a*, b*, c*.
pub fn read_matrix_file(path: &Path) -> Result<[[f64; 3]; 3]> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::read(path, "cannot read orientation matrix", e))?;
    let mut nums = Vec::with_capacity(9);
    for (lineno, line) in text.lines().enumerate() {
        for tok in line.split_whitespace() {
            if nums.len() == 9 {
                break;
            }
            let v: f64 = tok
                .parse()
                .map_err(|_| Error::file_line(path, lineno + 1, format!("expected a number in the A matrix, found '{tok}'")))?;
            nums.push(v);
        }
    }
    if let Some(v) = nums.iter().find(|v| !v.is_finite()) {
        return Err(Error::file(path, format!("the A matrix holds {v}, not a finite number")));
    }
    if nums.len() < 9 {
        return Err(Error::file(path, format!("an A matrix needs 9 numbers, found {}", nums.len())));
    }
    // rows are x, y, z; columns a*, b*, c* (as the C's three fscanf calls)
    let a = [[nums[0], nums[1], nums[2]], [nums[3], nums[4], nums[5]], [nums[6], nums[7], nums[8]]];
    let det = a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
        + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]);
    if !(det.abs() > 1e-300) || !det.is_finite() {
        return Err(Error::file(path, "the A matrix is singular (its reciprocal vectors span no volume)"));
    }
    Ok(a)
}

