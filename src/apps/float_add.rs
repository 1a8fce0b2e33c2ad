//! `float-add`: sum raw float images (nanoBragg/nonBragg `-floatfile` output), each optionally
//! scaled: `float-add A.bin B.bin ... [-scale s1 s2 ...] -o sum.bin`. Each output pixel is
//! Σ scale_k · image_k[i], summed in double in the order given and stored as float.

use crate::base::os_text::os_path;
use crate::io::float::{read_float_image, write_float_image};
use crate::{Error, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Σ scale_k · image_k in double, stored as float; the images must have the same length.
pub fn add_images(images: &[Vec<f32>], scales: &[f64]) -> Vec<f32> {
    let n = images.first().map_or(0, |v| v.len());
    (0..n)
        .map(|i| {
            let mut s = 0.0f64;
            for (img, &k) in images.iter().zip(scales) {
                s += k * img[i] as f64;
            }
            s as f32
        })
        .collect()
}

pub const FLOAT_ADD_USAGE: &str = "usage: float-add A.bin B.bin ... [-scale s1 s2 ...] -o sum.bin";

/// A word made of what numbers are made of (`1,5`, `2.5.1`, `-inf`, `nan`): a mistyped scale. A word
/// with other letters (`3.bin`) is a file name.
fn looks_numeric(w: &str) -> bool {
    let t = w.trim_start_matches(['+', '-']).to_ascii_lowercase();
    ["nan", "inf", "infinity"].contains(&t.as_str()) || (t.starts_with(|c: char| c.is_ascii_digit() || c == '.') && t.chars().all(|c| c.is_ascii_digit() || ".,e+-".contains(c)))
}

pub fn run(args: &[String], out: &mut dyn Write) -> Result<()> {
    let mut inputs: Vec<PathBuf> = Vec::new();
    let mut scales: Vec<f64> = Vec::new();
    let mut output: Option<PathBuf> = None;
    let mut i = 0;
    let usage = FLOAT_ADD_USAGE;
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "-o" | "-out" | "-floatfile" => {
                output = Some(os_path(args.get(i + 1).ok_or_else(|| Error::flag(a, "needs a file name"))?));
                i += 2;
            }
            "-scale" => {
                i += 1;
                while i < args.len() {
                    match args[i].parse::<f64>() {
                        Ok(v) if v.is_finite() => scales.push(v),
                        // a word that starts like a number but is none, and names no file, is a
                        // mistyped scale (`1,5`, `2x`, `nan`), not an input image
                        _ if looks_numeric(&args[i]) && !Path::new(&args[i]).exists() => {
                            return Err(Error::flag(a, format!("{} is not a finite number", args[i])));
                        }
                        _ => break,
                    }
                    i += 1;
                }
                if scales.is_empty() {
                    return Err(Error::flag(a, "needs one number per input image"));
                }
            }
            s if s.starts_with('-') && s.len() > 1 => return Err(Error::flag(s, format!("unknown float-add flag ({usage})"))),
            s => {
                inputs.push(os_path(s));
                i += 1;
            }
        }
    }
    let output = output.ok_or_else(|| Error::flag("-o", format!("no output file given ({usage})")))?;
    if inputs.is_empty() {
        return Err(Error::flag("float-add", format!("no input images ({usage})")));
    }
    if scales.is_empty() {
        scales = vec![1.0; inputs.len()];
    } else if scales.len() == 1 {
        scales = vec![scales[0]; inputs.len()];
    } else if scales.len() != inputs.len() {
        return Err(Error::flag("-scale", format!("{} scales for {} images", scales.len(), inputs.len())));
    }
    let named: Vec<(&str, PathBuf)> = inputs.iter().map(|p| ("float-add", p.clone())).collect();
    crate::io::atomic::check_no_clobber(&named, &[("-o", output.clone())])?;
    let mut images = Vec::with_capacity(inputs.len());
    for p in &inputs {
        let img = read_float_image(p)?;
        if img.is_empty() {
            // a sum of empty images is a 0-pixel file that no reader takes as an image
            return Err(Error::file(p, "float-add: the image is empty (0 pixels)"));
        }
        crate::io::float::require_finite(&img, p, "float-add", None)?;
        if let Some(first) = images.first() {
            let first: &Vec<f32> = first;
            if first.len() != img.len() {
                return Err(Error::file(p, format!("has {} pixels, {} has {}", img.len(), inputs[0].display(), first.len())));
            }
        }
        images.push(img);
    }
    let sum = add_images(&images, &scales);
    if let Some((i, v)) = crate::io::float::first_non_finite(&sum) {
        // finite inputs, but a scale too large for a float pixel
        return Err(Error::flag("-scale", format!("the sum's pixel {i} is {v} (beyond the largest float): use smaller scales")));
    }
    write_float_image(&output, &sum)?;
    let _ = writeln!(out, "wrote {} ({} pixels, sum of {} images)", output.display(), sum.len(), images.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_with_scales() {
        let s = add_images(&[vec![1.0, 2.0], vec![10.0, 20.0]], &[2.0, 0.5]);
        assert_eq!(s, vec![7.0, 14.0]);
    }
}
