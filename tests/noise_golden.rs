//! The noise image reproduces the C program's `noise.img` bit for bit, starting from the golden
//! `float.bin`, so the RNG (ran1's shared table, poidev's three regimes, gaussdev's spare) and the
//! ROI / ADC / overload handling are checked independently of the simulation kernel.
mod common;

use nanobragg::base::image::{ImageView, Roi};
use nanobragg::noise::noise_image;
use nanobragg::base::c::rng::NrRandom;

/// The C's value for the last occurrence of an exact flag (the golden cases use exact names).
fn flag_values<'a>(args: &'a [String], flag: &str, n: usize) -> Option<&'a [String]> {
    let i = args.iter().rposition(|a| a == flag)?;
    args.get(i + 1..i + 1 + n)
}

/// C `atoi`/`atof` of the golden arguments, which are plain numbers.
fn num<T: std::str::FromStr>(s: &str) -> T {
    s.parse().unwrap_or_else(|_| panic!("not a number: {s}"))
}

#[test]
fn noise_images_match_c() {
    let Some(golden) = common::golden_dir() else {
        return;
    };
    let manifest = common::load_manifest(&golden);
    let cases = common::cases_with_output(&manifest, "noise");
    assert!(!cases.is_empty(), "no golden case has a noise image");
    for case in cases {
        let id = common::case_id(case);
        let args = common::args(case);
        let (fpixels, spixels) = common::detector(case);

        // `seed = -atoi(argv[i+1])`; every golden case fixes it.
        let mut seed: i64 =
            -num::<i64>(&flag_values(&args, "-seed", 1).expect("case has no -seed")[0]);
        let adc: f64 = flag_values(&args, "-adc", 1).map_or(40.0, |v| num(&v[0]));
        // The C resolves unset (negative) bounds to 0 and to fpixels/spixels (one past the end).
        let mut roi = [-1i64; 4];
        if let Some(v) = flag_values(&args, "-roi", 4) {
            for (r, s) in roi.iter_mut().zip(v) {
                *r = num(s);
            }
        }
        let defaults = [0, fpixels as i64, 0, spixels as i64];
        for (r, d) in roi.iter_mut().zip(defaults) {
            if *r < 0 {
                *r = d;
            }
        }

        let float = common::read_f32_le(&common::output_path(&golden, case, "float"));
        assert_eq!(float.len(), fpixels * spixels, "{id}: float.bin size");
        let mut rng = NrRandom::new();
        let img = noise_image(&mut rng, &mut seed, &ImageView::new(&float, fpixels, spixels, Roi::from_c_bounds(roi, fpixels, spixels)), adc);

        let (header_bytes, want) = common::read_smv(&common::output_path(&golden, case, "noise"));
        assert_eq!(header_bytes, 512, "{id}: HEADER_BYTES");
        assert_eq!(want.len(), img.pixels.len(), "{id}: noise.img pixel count");
        if let Some(i) = (0..want.len()).find(|&i| want[i] != img.pixels[i]) {
            let n = (0..want.len())
                .filter(|&i| want[i] != img.pixels[i])
                .count();
            panic!(
                "{id}: {n} pixels differ; first at fast {} slow {}: port {} C {} (mean {})",
                i % fpixels,
                i / fpixels,
                img.pixels[i],
                want[i],
                float[i]
            );
        }
        if let Some(p) = common::stat(case, "noise_photons") {
            // Printed with %.0f.
            assert_eq!(
                format!("{:.0}", img.photons),
                format!("{p:.0}"),
                "{id}: photons"
            );
        }
        if let Some(o) = common::stat(case, "noise_overloads") {
            assert_eq!(img.overloads as f64, o, "{id}: overloads");
        }
        eprintln!(
            "{id}: {} pixels identical, {:.0} photons, {} overloads",
            want.len(),
            img.photons,
            img.overloads
        );
    }
}
