//! Atomic models: PDB (fixed columns: CRYST1, ATOM/HETATM, ANISOU, MODEL) and mmCIF (`_cell`,
//! `_symmetry` / `_space_group`, the `_atom_site` and `_atom_site_anisotrop` loops). Only the first model
//! is used; every atom (alternate conformers included) counts with its own occupancy.

use crate::{Error, Result};
use std::collections::HashMap;
use std::path::Path;

/// One atom as read: Cartesian position (Å), occupancy, isotropic B (Å²), optional Cartesian U (Å²:
/// U11 U22 U33 U12 U13 U23), element symbol and formal charge.
#[derive(Clone, Debug, PartialEq)]
pub struct Atom {
    pub xyz: [f64; 3],
    pub occ: f64,
    pub b_iso: f64,
    pub u_aniso: Option<[f64; 6]>,
    pub element: String,
    pub charge: i32,
}

/// The model: cell (a b c in Å, angles in degrees), space-group symbol as written, atoms.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    pub cell: Option<[f64; 6]>,
    pub space_group: Option<String>,
    pub atoms: Vec<Atom>,
}

fn num(path: &Path, lineno: usize, field: &str, s: &str) -> Result<f64> {
    let t = s.trim();
    t.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| Error::file_line(path, lineno, format!("{field} '{t}' is not a number")))
}

fn cols(line: &str, a: usize, b: usize) -> &str {
    // Byte columns a..b (0-based, exclusive), clipped to the line; PDB records are ASCII.
    let n = line.len();
    if a >= n || !line.is_char_boundary(a) {
        return "";
    }
    let b = b.min(n);
    if !line.is_char_boundary(b) {
        return "";
    }
    &line[a..b]
}

/// Element symbol from a PDB atom name (columns 13-16) when columns 77-78 are blank.
fn element_from_name(name: &str) -> String {
    // Two-letter element names are right-justified into columns 13-14; a one-letter one sits in column 14.
    // by characters: a non-ASCII name (not PDB, but seen) must not split a character
    let raw: String = name.chars().take(2).collect();
    let raw = raw.as_str();
    let letters: String = raw.chars().filter(|c| c.is_ascii_alphabetic()).collect();
    if raw.starts_with(' ') || raw.chars().next().map(|c| c.is_ascii_digit()).unwrap_or(false) || letters.len() < 2 {
        letters.chars().take(1).collect()
    } else {
        letters
    }
}

fn parse_charge(s: &str) -> i32 {
    // "2+", "1-", "+2", "-1", "2", "" (blank = 0)
    let t = s.trim();
    if t.is_empty() || t == "?" || t == "." {
        return 0;
    }
    let sign = if t.contains('-') { -1 } else { 1 };
    let digits: String = t.chars().filter(|c| c.is_ascii_digit()).collect();
    let mag = if digits.is_empty() { 1 } else { digits.parse::<i32>().unwrap_or(0) };
    sign * mag
}

fn normalize_element(e: &str) -> String {
    let t = e.trim();
    let mut out = String::new();
    for (i, c) in t.chars().filter(|c| c.is_ascii_alphabetic()).enumerate() {
        if i == 0 {
            out.push(c.to_ascii_uppercase());
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The symmetry of a CNS remark, `REMARK sg= P2(1)2(1)2(1) a= 61.2 b= 71.3 c= 80.1 alpha= 90 beta= 90
/// gamma= 90` (spaces after `=` optional), as cctbx's `iotbx.cns.pdb_remarks.extract_symmetry` reads it;
/// `None` for any other remark or a number that does not parse.
pub fn cns_symmetry(line: &str) -> Option<(String, [f64; 6])> {
    let rest = line.strip_prefix("REMARK")?.trim_start();
    if !rest.starts_with("sg=") {
        return None;
    }
    let spaced = rest.replace('=', "= ");
    let mut tokens = spaced.split_whitespace();
    let mut value_of = |key: &str| if tokens.next()? == key { tokens.next() } else { None };
    let sg = value_of("sg=")?.to_string();
    let mut cell = [0.0; 6];
    for (c, key) in cell.iter_mut().zip(["a=", "b=", "c=", "alpha=", "beta=", "gamma="]) {
        *c = value_of(key)?.parse::<f64>().ok().filter(|v| v.is_finite())?;
    }
    Some((sg, cell))
}

/// Read a PDB-format coordinate file.
pub fn read_pdb(path: &Path) -> Result<Model> {
    let bytes = std::fs::read(path).map_err(|e| Error::file(path, format!("cannot read PDB file: {e}")))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut cell = None;
    let mut sg = None;
    let mut atoms: Vec<Atom> = Vec::new();
    // serial+name+altloc+resseq+chain key of the last ATOM, to attach the ANISOU that follows it
    let mut last_key: Option<String> = None;
    let mut models_seen = 0;
    // a CNS `REMARK sg= … a= …` line, used when there is no CRYST1 (as cctbx's iotbx.pdb does)
    let mut cns: Option<(String, [f64; 6])> = None;
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let rec = cols(line, 0, 6);
        match rec {
            "CRYST1" => {
                let mut c = [0.0; 6];
                let ranges = [(6, 15), (15, 24), (24, 33), (33, 40), (40, 47), (47, 54)];
                for (j, (a, b)) in ranges.iter().enumerate() {
                    c[j] = num(path, lineno, "CRYST1 cell parameter", cols(line, *a, *b))?;
                }
                let s = cols(line, 55, 66).trim().to_string();
                if !s.is_empty() {
                    sg = Some(s);
                }
                cell = Some(c);
            }
            "REMARK" if cns.is_none() => cns = cns_symmetry(line),
            "MODEL " => {
                models_seen += 1;
            }
            "ENDMDL" => {
                if models_seen >= 1 {
                    break; // first model only
                }
            }
            "ATOM  " | "HETATM" => {
                let x = num(path, lineno, "x", cols(line, 30, 38))?;
                let y = num(path, lineno, "y", cols(line, 38, 46))?;
                let z = num(path, lineno, "z", cols(line, 46, 54))?;
                let occ_s = cols(line, 54, 60);
                let occ = if occ_s.trim().is_empty() { 1.0 } else { num(path, lineno, "occupancy", occ_s)? };
                let b_s = cols(line, 60, 66);
                let b_iso = if b_s.trim().is_empty() { 0.0 } else { num(path, lineno, "B-factor", b_s)? };
                let mut element = normalize_element(cols(line, 76, 78));
                if element.is_empty() {
                    element = element_from_name(cols(line, 12, 16));
                }
                if element.is_empty() {
                    return Err(Error::file_line(path, lineno, "cannot tell the element of this atom"));
                }
                let charge = parse_charge(cols(line, 78, 80));
                atoms.push(Atom { xyz: [x, y, z], occ, b_iso, u_aniso: None, element, charge });
                last_key = Some(cols(line, 6, 27).to_string());
            }
            "ANISOU" => {
                let key = cols(line, 6, 27).to_string();
                if last_key.as_deref() == Some(key.as_str()) {
                    let mut u = [0.0; 6];
                    let ranges = [(28, 35), (35, 42), (42, 49), (49, 56), (56, 63), (63, 70)];
                    for (j, (a, b)) in ranges.iter().enumerate() {
                        u[j] = num(path, lineno, "ANISOU U", cols(line, *a, *b))? * 1e-4;
                    }
                    // PDB order U11 U22 U33 U12 U13 U23 (x 10^4 Å^2).
                    if let Some(a) = atoms.last_mut() {
                        a.u_aniso = Some(u);
                    }
                } else {
                    return Err(Error::file_line(path, lineno, "ANISOU record does not follow its ATOM/HETATM record"));
                }
            }
            _ => {}
        }
    }
    if atoms.is_empty() {
        return Err(Error::file(path, "no ATOM or HETATM records"));
    }
    if let (None, Some((s, c))) = (cell, cns) {
        cell = Some(c);
        sg = Some(s);
    }
    Ok(Model { cell, space_group: sg, atoms })
}

// ------------------------------------------------------------------ mmCIF

/// A CIF token: a value (with its line number) or a reserved word / tag.
#[derive(Debug)]
struct Tok<'a> {
    text: std::borrow::Cow<'a, str>,
    quoted: bool,
    line: usize,
}

fn cif_tokens(text: &str) -> Vec<Tok<'_>> {
    let mut out = Vec::new();
    let mut lines = text.split('\n').enumerate().peekable();
    while let Some((ln, raw)) = lines.next() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if let Some(rest) = line.strip_prefix(';') {
            // text field up to a line starting with ';'
            let mut s = String::from(rest);
            for (_, l2) in lines.by_ref() {
                let l2 = l2.strip_suffix('\r').unwrap_or(l2);
                if l2.starts_with(';') {
                    break;
                }
                s.push('\n');
                s.push_str(l2);
            }
            out.push(Tok { text: s.into(), quoted: true, line: ln + 1 });
            continue;
        }
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if c == b' ' || c == b'\t' {
                i += 1;
                continue;
            }
            if c == b'#' {
                break;
            }
            if c == b'\'' || c == b'"' {
                // quoted: ends at a matching quote followed by whitespace or end of line
                let mut j = i + 1;
                while j < b.len() && !(b[j] == c && (j + 1 == b.len() || b[j + 1] == b' ' || b[j + 1] == b'\t')) {
                    j += 1;
                }
                out.push(Tok { text: line[i + 1..j.min(b.len())].into(), quoted: true, line: ln + 1 });
                i = j + 1;
                continue;
            }
            let mut j = i;
            while j < b.len() && b[j] != b' ' && b[j] != b'\t' {
                j += 1;
            }
            out.push(Tok { text: line[i..j].into(), quoted: false, line: ln + 1 });
            i = j;
        }
    }
    out
}

/// Strip a CIF standard uncertainty: "12.345(6)" -> "12.345".
fn cif_num(s: &str) -> &str {
    match s.find('(') {
        Some(p) => &s[..p],
        None => s,
    }
}

/// The items and loops of a CIF's first data block.
type CifItems = HashMap<String, (String, usize)>;
/// A CIF loop: its tags, and its rows of (value, line).
type CifLoop = (Vec<String>, Vec<Vec<(String, usize)>>);

/// Read an mmCIF coordinate file (first data block).
pub fn read_mmcif(path: &Path) -> Result<Model> {
    let bytes = std::fs::read(path).map_err(|e| Error::file(path, format!("cannot read mmCIF file: {e}")))?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let toks = cif_tokens(&text);
    let (items, loops) = cif_first_block(path, &toks)?;
    let (cell, sg) = cif_cell_and_space_group(path, &items)?;
    let (mut atoms, id_index) = cif_atoms(path, &loops)?;
    cif_anisou(path, &loops, &id_index, &mut atoms)?;
    Ok(Model { cell, space_group: sg, atoms })
}

/// The first data block's items and loops (a single-row loop's values are items too).
fn cif_first_block(path: &Path, toks: &[Tok<'_>]) -> Result<(CifItems, Vec<CifLoop>)> {
    let mut items: CifItems = HashMap::new();
    // loops keyed by category prefix ("_atom_site." ...): (tags, rows of (value, line))
    let mut loops: Vec<CifLoop> = Vec::new();
    let mut i = 0;
    let mut blocks = 0;
    while i < toks.len() {
        let t = &toks[i];
        let lower = t.text.to_ascii_lowercase();
        if !t.quoted && lower.starts_with("data_") {
            blocks += 1;
            if blocks > 1 {
                break;
            }
            i += 1;
        } else if !t.quoted && lower == "loop_" {
            i += 1;
            let mut tags = Vec::new();
            while i < toks.len() && !toks[i].quoted && toks[i].text.starts_with('_') {
                tags.push(toks[i].text.to_ascii_lowercase());
                i += 1;
            }
            let mut vals = Vec::new();
            while i < toks.len() {
                let v = &toks[i];
                let vl = v.text.to_ascii_lowercase();
                if !v.quoted && (v.text.starts_with('_') || vl == "loop_" || vl.starts_with("data_") || vl.starts_with("save_")) {
                    break;
                }
                vals.push((v.text.to_string(), v.line));
                i += 1;
            }
            if tags.is_empty() || vals.len() % tags.len() != 0 {
                let line = toks.get(i.saturating_sub(1)).map(|t| t.line).unwrap_or(0);
                return Err(Error::file_line(path, line, "CIF loop: number of values is not a multiple of the number of tags"));
            }
            let rows = vals.chunks(tags.len()).map(|c| c.to_vec()).collect();
            loops.push((tags, rows));
        } else if !t.quoted && t.text.starts_with('_') {
            let tag = lower;
            if i + 1 >= toks.len() {
                return Err(Error::file_line(path, t.line, format!("CIF item {tag} has no value")));
            }
            items.insert(tag, (toks[i + 1].text.to_string(), toks[i + 1].line));
            i += 2;
        } else {
            i += 1;
        }
    }
    // single-row loops are also items
    for (tags, rows) in &loops {
        if rows.len() == 1 {
            for (t, v) in tags.iter().zip(&rows[0]) {
                items.entry(t.clone()).or_insert_with(|| v.clone());
            }
        }
    }
    Ok((items, loops))
}

/// `_cell` lengths and angles (all six, or none) and the space group's Hermann–Mauguin symbol.
fn cif_cell_and_space_group(path: &Path, items: &CifItems) -> Result<(Option<[f64; 6]>, Option<String>)> {
    let get_num = |tag: &str| -> Result<Option<f64>> {
        match items.get(tag) {
            None => Ok(None),
            Some((v, _)) if v == "?" || v == "." => Ok(None),
            Some((v, line)) => Ok(Some(num(path, *line, tag, cif_num(v))?)),
        }
    };
    let cell_tags = ["_cell.length_a", "_cell.length_b", "_cell.length_c", "_cell.angle_alpha", "_cell.angle_beta", "_cell.angle_gamma"];
    let mut cell = [0.0; 6];
    let mut have_cell = true;
    for (j, t) in cell_tags.iter().enumerate() {
        match get_num(t)? {
            Some(v) => cell[j] = v,
            None => have_cell = false,
        }
    }
    let mut sg = None;
    for tag in ["_symmetry.space_group_name_h-m", "_space_group.name_h-m_alt", "_space_group.name_h-m_full"] {
        if let Some((v, _)) = items.get(tag) {
            if v != "?" && v != "." && !v.trim().is_empty() {
                sg = Some(v.trim().to_string());
                break;
            }
        }
    }
    Ok((if have_cell { Some(cell) } else { None }, sg))
}

/// The atoms of the `_atom_site` loop (first model only), and each atom's index by its `id`.
fn cif_atoms(path: &Path, loops: &[CifLoop]) -> Result<(Vec<Atom>, HashMap<String, usize>)> {
    let site = loops.iter().find(|(tags, _)| tags.iter().any(|t| t == "_atom_site.cartn_x"));
    let Some((tags, rows)) = site else {
        return Err(Error::file(path, "no _atom_site loop with Cartn_x/y/z"));
    };
    let col = |name: &str| tags.iter().position(|t| t == &format!("_atom_site.{name}"));
    let (cx, cy, cz) = match (col("cartn_x"), col("cartn_y"), col("cartn_z")) {
        (Some(a), Some(b), Some(c)) => (a, b, c),
        _ => return Err(Error::file(path, "_atom_site loop lacks Cartn_x, Cartn_y or Cartn_z")),
    };
    let c_type = col("type_symbol");
    let c_label = col("label_atom_id").or(col("auth_atom_id"));
    let c_occ = col("occupancy");
    let c_b = col("b_iso_or_equiv");
    let c_charge = col("pdbx_formal_charge");
    let c_model = col("pdbx_pdb_model_num");
    let c_id = col("id");
    let mut atoms = Vec::new();
    let mut id_index: HashMap<String, usize> = HashMap::new();
    let mut first_model: Option<String> = None;
    for row in rows {
        if let Some(m) = c_model {
            let mv = &row[m].0;
            match &first_model {
                None => first_model = Some(mv.clone()),
                Some(f) if f != mv => continue,
                _ => {}
            }
        }
        let line = row[cx].1;
        let x = num(path, line, "Cartn_x", cif_num(&row[cx].0))?;
        let y = num(path, line, "Cartn_y", cif_num(&row[cy].0))?;
        let z = num(path, line, "Cartn_z", cif_num(&row[cz].0))?;
        let opt = |c: Option<usize>, name: &str, dflt: f64| -> Result<f64> {
            match c {
                Some(c) if row[c].0 != "?" && row[c].0 != "." => num(path, line, name, cif_num(&row[c].0)),
                _ => Ok(dflt),
            }
        };
        let occ = opt(c_occ, "occupancy", 1.0)?;
        let b_iso = opt(c_b, "B_iso_or_equiv", 0.0)?;
        let mut element = c_type.map(|c| normalize_element(&row[c].0)).unwrap_or_default();
        if element.is_empty() {
            if let Some(c) = c_label {
                element = normalize_element(&row[c].0.chars().take(1).collect::<String>());
            }
        }
        if element.is_empty() {
            return Err(Error::file_line(path, line, "cannot tell the element of this atom (no type_symbol)"));
        }
        let charge = c_charge.map(|c| parse_charge(&row[c].0)).unwrap_or(0);
        if let Some(c) = c_id {
            id_index.insert(row[c].0.clone(), atoms.len());
        }
        atoms.push(Atom { xyz: [x, y, z], occ, b_iso, u_aniso: None, element, charge });
    }
    if atoms.is_empty() {
        return Err(Error::file(path, "the _atom_site loop has no atoms"));
    }
    Ok((atoms, id_index))
}

/// ANISOU from the `_atom_site_anisotrop` loop, matched to the atoms by `id`.
fn cif_anisou(path: &Path, loops: &[CifLoop], id_index: &HashMap<String, usize>, atoms: &mut [Atom]) -> Result<()> {
    if let Some((tags, rows)) = loops.iter().find(|(tags, _)| tags.iter().any(|t| t == "_atom_site_anisotrop.u[1][1]")) {
        let col = |name: &str| tags.iter().position(|t| t == &format!("_atom_site_anisotrop.{name}"));
        let names = ["u[1][1]", "u[2][2]", "u[3][3]", "u[1][2]", "u[1][3]", "u[2][3]"];
        let idx: Vec<Option<usize>> = names.iter().map(|n| col(n)).collect();
        if let (Some(cid), true) = (col("id"), idx.iter().all(|c| c.is_some())) {
            for row in rows {
                let Some(&ai) = id_index.get(&row[cid].0) else { continue };
                let mut u = [0.0; 6];
                for (j, c) in idx.iter().enumerate() {
                    let (v, line) = &row[c.unwrap()];
                    u[j] = num(path, *line, names[j], cif_num(v))?;
                }
                atoms[ai].u_aniso = Some(u);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_ascii_atom_name_is_no_panic() {
        // " é " in columns 13-16: the element rule takes characters, not bytes
        assert_eq!(element_from_name(" \u{e9} "), "");
        assert_eq!(element_from_name("\u{e9}N"), "N");
        assert_eq!(element_from_name(" N  "), "N");
        assert_eq!(element_from_name("FE  "), "FE");
    }

    #[test]
    fn pdb_columns() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.pdb");
        std::fs::write(
            &p,
            "CRYST1   21.937    4.866   23.477  90.00 107.08  90.00 P 1 21 1      2\n\
ATOM      1  N   GLY A   1      -9.009   4.612   6.102  1.00 16.77           N\n\
ANISOU    1  N   GLY A   1     2406   1892   1614    198    519   -328       N\n\
HETATM    2 FE   HEM A   2       1.000   2.000   3.000  0.50 10.00          FE2+\n\
HETATM    3  O   HOH A   3       1.000   2.000   3.000  1.00 10.00\n",
        )
        .unwrap();
        let m = read_pdb(&p).unwrap();
        assert_eq!(m.cell.unwrap()[4], 107.08);
        assert_eq!(m.space_group.as_deref(), Some("P 1 21 1"));
        assert_eq!(m.atoms.len(), 3);
        assert_eq!(m.atoms[0].u_aniso.unwrap()[0], 0.2406);
        assert_eq!(m.atoms[1].element, "Fe");
        assert_eq!(m.atoms[1].charge, 2);
        assert_eq!(m.atoms[1].occ, 0.5);
        assert_eq!(m.atoms[2].element, "O");
    }

    #[test]
    fn cif_tokens_and_atoms() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.cif");
        std::fs::write(
            &p,
            "data_x\n_cell.length_a 10\n_cell.length_b 11\n_cell.length_c 12.0(1)\n_cell.angle_alpha 90\n\
_cell.angle_beta 90\n_cell.angle_gamma 90\n_symmetry.space_group_name_H-M 'P 21 21 21'\n\
loop_\n_atom_site.group_PDB\n_atom_site.id\n_atom_site.type_symbol\n_atom_site.Cartn_x\n_atom_site.Cartn_y\n\
_atom_site.Cartn_z\n_atom_site.occupancy\n_atom_site.B_iso_or_equiv\n_atom_site.pdbx_formal_charge\n\
ATOM 1 C 1 2 3 1 20 ?\nHETATM 2 ZN 4 5 6 0.5 30 2\n\
loop_\n_atom_site_anisotrop.id\n_atom_site_anisotrop.U[1][1]\n_atom_site_anisotrop.U[2][2]\n\
_atom_site_anisotrop.U[3][3]\n_atom_site_anisotrop.U[1][2]\n_atom_site_anisotrop.U[1][3]\n_atom_site_anisotrop.U[2][3]\n\
2 0.1 0.2 0.3 0.01 0.02 0.03\n",
        )
        .unwrap();
        let m = read_mmcif(&p).unwrap();
        assert_eq!(m.cell.unwrap(), [10.0, 11.0, 12.0, 90.0, 90.0, 90.0]);
        assert_eq!(m.space_group.as_deref(), Some("P 21 21 21"));
        assert_eq!(m.atoms[1].element, "Zn");
        assert_eq!(m.atoms[1].charge, 2);
        assert_eq!(m.atoms[1].u_aniso.unwrap()[5], 0.03);
        assert!(m.atoms[0].u_aniso.is_none());
    }

    #[test]
    fn cns_remark_symmetry_as_cctbx_reads_it() {
        // iotbx.pdb.input(...).crystal_symmetry() of these lines: P 21 21 21 (61.2, 71.3, 80.1, 90, 90, 90)
        // and C 1 2 1 (61.2, 71.3, 80.1, 90, 101.5, 90)
        let (sg, c) = cns_symmetry("REMARK sg= P2(1)2(1)2(1) a= 61.2 b= 71.3 c= 80.1 alpha= 90 beta= 90 gamma= 90").unwrap();
        assert_eq!((sg.as_str(), c), ("P2(1)2(1)2(1)", [61.2, 71.3, 80.1, 90.0, 90.0, 90.0]));
        assert_eq!(crate::sfcalc::spacegroup::lookup(&sg, c[5]).unwrap().number, 19);
        let (sg, c) = cns_symmetry("REMARK sg=C2 a=61.2 b= 71.3 c= 80.1 alpha= 90 beta= 101.5 gamma= 90").unwrap();
        assert_eq!((sg.as_str(), c[4]), ("C2", 101.5));
        assert_eq!(crate::sfcalc::spacegroup::lookup(&sg, c[5]).unwrap().name, "C121");
        assert!(cns_symmetry("REMARK   2 RESOLUTION. 1.80 ANGSTROMS.").is_none());
        assert!(cns_symmetry("REMARK sg= P1 a= 61.2 b= x c= 80.1 alpha= 90 beta= 90 gamma= 90").is_none());
    }
}
