//! `nanobragg-rs series`: the series options split from the `simulate` flags, which the `simulate`
//! parser reads; then [`crate::apps::series`] runs or verifies the dataset.

use super::parse::parse_simulate_args;
use crate::apps::series::{run, verify, SeriesArgs};
use crate::{Error, Result};

/// `series --help`.
pub const SERIES_USAGE: &str = "usage: nanobragg-rs series [simulate flags] --frames N | --stills N [--orientation random|fixed] \
[--outputs LIST] [--max-output SIZE] [--name NAME] [--shard I/N] [--only K|K-L] [--resume] [--verify]
  --frames N       a rotation sweep: frame k starts at -phi + (k-1)*-osc
  --stills N       N stills, each at its own random crystal orientation and mosaic domains (--orientation random,
                   the default), or with --orientation fixed all at the flags' orientation (-misset, -matrix):
                   one crystal exposed N times, each still its own noise seed
  --outputs LIST   write only these: float,int,pgm,noise,png,cbf,nexus (default: what simulate writes)
  --max-output SIZE  refuse a run whose files would take more (k, M, G, T; env NANOBRAGG_MAX_OUTPUT);
                   it is always refused when they would not fit in the output folder's free space
  --name NAME      the manifests' name: NAME.shard-I-of-N.json (default series; frame files keep
                   their own names, see docs/datasets.md)
  --shard I/N      this job's share of the frames (Slurm and MPI set it themselves)
  --only K|K-L     only these frames, counted from 1
  --resume         skip frames already written and verified
  --verify         check a finished dataset against its manifest and write nothing
Every simulate flag applies to each frame (`nanobragg-rs simulate --help` lists them); those asking for
an output series does not write (--expt-out, --save-params, --gradients, --observed, -printout, ...) are refused.
";

fn parse_count(flag: &str, v: Option<&String>) -> Result<usize> {
    let w = v.ok_or_else(|| Error::flag(flag, "missing value: expects a frame count"))?;
    match w.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Error::flag(flag, format!("expects a positive whole number of frames (got '{w}')"))),
    }
}

/// The value after `flag`: refused when the command line ends, or when the next word is a flag
/// (simulate's or series's own), which would otherwise be taken as the value and the error then name
/// the word after it (`--outputs --out-dir o1` said "o1: unexpected word"), as simulate's parser
/// refuses `--geom -cell`.
fn value_of<'a>(flag: &str, next: Option<&'a String>, expects: &str) -> Result<&'a String> {
    let w = next.ok_or_else(|| Error::flag(flag, format!("missing value: expects {expects}")))?;
    let key = if w.starts_with("--") { w.split_once('=').map_or(w.as_str(), |(k, _)| k) } else { w.as_str() };
    if crate::cli::parse::lookup(key).is_some() || SERIES_FLAGS.contains(&key) {
        return Err(Error::flag(flag, format!("missing value: expects {expects} but is followed by {w}")));
    }
    Ok(w)
}

/// Split the series options from the `simulate` flags.
pub fn split_args(args: &[String]) -> Result<SeriesArgs> {
    let mut s = SeriesArgs::default();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let next = args.get(i + 1);
        let mut take = 1;
        match a {
            "--frames" => {
                s.frames = Some(parse_count(a, next)?);
                take = 2;
            }
            "--stills" => {
                s.stills = Some(parse_count(a, next)?);
                take = 2;
            }
            "--orientation" => {
                let w = next.ok_or_else(|| Error::flag(a, "missing value: expects 'random' or 'fixed'"))?;
                if w != "random" && w != "fixed" {
                    return Err(Error::flag(a, format!("expects 'random' or 'fixed' (got '{w}')")));
                }
                s.orientation = Some(w.clone());
                take = 2;
            }
            "--shard" => {
                s.shard = Some(next.ok_or_else(|| Error::flag(a, "missing value: expects I/N"))?.clone());
                take = 2;
            }
            "--only" => {
                let w = next.ok_or_else(|| Error::flag(a, "missing value: expects K or K-L"))?;
                let bad = || Error::flag(a, format!("expects a frame K or a range K-L, counted from 1 (got '{w}')"));
                let (lo, hi) = match w.split_once('-') {
                    Some((x, y)) => (x.parse::<usize>().map_err(|_| bad())?, y.parse::<usize>().map_err(|_| bad())?),
                    None => {
                        let k = w.parse::<usize>().map_err(|_| bad())?;
                        (k, k)
                    }
                };
                if lo == 0 || hi < lo {
                    return Err(bad());
                }
                s.only = Some((lo, hi));
                take = 2;
            }
            "--name" => {
                let w = value_of(a, next, "a dataset name")?;
                if w.is_empty() || w.contains('/') {
                    return Err(Error::flag(a, format!("'{w}' is not a plain file name")));
                }
                s.name = Some(w.clone());
                take = 2;
            }
            "--outputs" => {
                let w = value_of(a, next, "a list such as float,noise,cbf")?;
                s.outputs = Some(w.split(',').map(|k| k.trim().to_ascii_lowercase()).filter(|k| !k.is_empty()).collect());
                take = 2;
            }
            "--max-output" => {
                let w = next.ok_or_else(|| Error::flag(a, "missing value: expects a size such as 500G"))?;
                s.max_output = Some(crate::base::memory::parse_size(w).ok_or_else(|| Error::flag(a, format!("'{w}' is not a size (bytes, or with k, M, G, T)")))?);
                take = 2;
            }
            "--resume" => s.resume = true,
            "--verify" => s.verify = true,
            _ => s.simulate.push(args[i].clone()),
        }
        i += take;
    }
    s.config = parse_simulate_args(&s.simulate).map_err(with_series_suggestion)?;
    Ok(s)
}

/// The flags `series` reads itself (the rest go to `simulate`'s parser).
const SERIES_FLAGS: &[&str] = &["--frames", "--stills", "--orientation", "--shard", "--only", "--name", "--outputs", "--max-output", "--resume", "--verify"];

/// A flag simulate's parser does not know, with a "did you mean" among series's own flags where one
/// is close (`--frame`, `--resum`: simulate's spellings alone offered nothing).
fn with_series_suggestion(e: Error) -> Error {
    match e {
        Error::Flag { flag, reason } if reason.starts_with("unknown flag") && !reason.contains("did you mean") => match crate::cli::parse::suggest_among(&flag, SERIES_FLAGS) {
            Some(s) => Error::flag(flag, format!("unknown flag; did you mean {s}? (see series --help)")),
            None => Error::Flag { flag, reason },
        },
        e => e,
    }
}

/// `nanobragg-rs series ...`: run or verify; messages to `out` (standard output).
pub fn main(args: &[String], out: &mut dyn std::io::Write) -> Result<()> {
    let sa = split_args(args)?;
    if sa.verify {
        let r = verify(&sa)?;
        let _ = writeln!(out, "series verify: complete and consistent: {} frames, {} files, {} shard(s), every sha256 matches", r.frames, r.files, r.shards);
        return Ok(());
    }
    let env = |k: &str| std::env::var(k).ok();
    run(&sa, &env, out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_simulate_flags() {
        let a: Vec<String> = "-cell 10 10 10 90 90 90 --frames 3 -phi 1 --shard 0/2 --resume --only 2-3 -osc 0.5".split(' ').map(String::from).collect();
        let s = split_args(&a).unwrap();
        assert_eq!(s.frames, Some(3));
        assert_eq!(s.shard.as_deref(), Some("0/2"));
        assert!(s.resume);
        assert_eq!(s.only, Some((2, 3)));
        assert_eq!(s.simulate.join(" "), "-cell 10 10 10 90 90 90 -phi 1 -osc 0.5");
        assert!(split_args(&["--frames".into(), "0".into()]).is_err());
        // series's own flags are offered for a typo (simulate's parser knew only its own)
        for (typo, want) in [("--frame", "--frames"), ("--resum", "--resume"), ("--stils", "--stills"), ("--shards", "--shard")] {
            let e = split_args(&["--frames".into(), "2".into(), typo.into()]).unwrap_err().to_string();
            assert!(e.contains(&format!("did you mean {want}?")), "{typo}: {e}");
        }
        assert!(split_args(&["--only".into(), "3-2".into()]).is_err());
    }

    /// `--outputs`/`--name` followed by a flag: the error names them, not the word after the flag
    /// they took as their value.
    #[test]
    fn a_flag_after_outputs_or_name_is_a_missing_value() {
        for (flag, next) in [("--outputs", "--out-dir"), ("--name", "--out-dir"), ("--outputs", "-floatfile"), ("--name", "--resume"), ("--outputs", "--out-dir=o1")] {
            let a: Vec<String> = ["--frames", "2", "-osc", "1", flag, next, "o1"].iter().map(|s| s.to_string()).collect();
            let e = split_args(&a).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{flag}: missing value: expects")) && e.ends_with(&format!("but is followed by {next}")), "{flag} {next}: {e}");
        }
        let a: Vec<String> = "--frames 2 -osc 1 --name -odd --outputs float".split(' ').map(String::from).collect();
        assert_eq!(split_args(&a).unwrap().name.as_deref(), Some("-odd"), "a word that is no flag is a name");
    }

    /// The help says what `--name` does: it names the manifests, not the frame files.
    #[test]
    fn help_says_name_is_the_manifests() {
        let line = SERIES_USAGE.lines().find(|l| l.trim_start().starts_with("--name")).unwrap();
        assert!(line.contains("NAME.shard-I-of-N.json") && !line.contains("per frame"), "{line}");
    }
}
