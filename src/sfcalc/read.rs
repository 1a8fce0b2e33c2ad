//! Atomic models: PDB (fixed columns: CRYST1, ATOM/HETATM, ANISOU, MODEL) and mmCIF (`_cell`,
//! `_symmetry` / `_space_group`, the `_atom_site` and `_atom_site_anisotrop` loops). Only the first model
//! is used; every atom (alternate conformers included) counts with its own occupancy.

use crate::{Error, Result};
use std::collections::HashMap;
use std::path::Path;

/// One atom as read: Cartesian position (Å), occupancy, isotropic B (Å²), optional Cartesian U (Å²:
/// U11 U22 U33 U12 U13 U23), element symbol and formal charge, and the file's line that gave it (so
/// that a refusal of its B can name it; 0 when unknown).
#[derive(Clone, Debug, PartialEq)]
pub struct Atom {
    pub xyz: [f64; 3],
    pub occ: f64,
    pub b_iso: f64,
    pub u_aniso: Option<[f64; 6]>,
    pub element: String,
    pub charge: i32,
    pub line: usize,
}

/// The model: cell (a b c in Å, angles in degrees), space-group symbol as written, atoms.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    pub cell: Option<[f64; 6]>,
    pub space_group: Option<String>,
    pub atoms: Vec<Atom>,
    /// The line that gave the space group (CRYST1, a CIF item or loop), 0 when none: a space group that
    /// does not fit the cell is refused naming it.
    pub space_group_line: usize,
    /// A space group the file names in a form this reader does not understand (a Hall symbol only, or
    /// operators matching no tabulated setting), with its line: the model is refused unless
    /// `-spacegroup` says which group it is, never read as P 1 while the file names another group.
    pub space_group_unread: Option<(usize, String)>,
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

/// Element symbols as cctbx knows them (`eltbx.chemical_elements.proper_and_isotopes_upper_set`), upper case.
const ELEMENTS: [&str; 113] = [
    "AC", "AG", "AL", "AM", "AR", "AS", "AT", "AU", "B", "BA", "BE", "BH", "BI", "BK", "BR", "C", "CA", "CD", "CE", "CF", "CL",
    "CM", "CO", "CR", "CS", "CU", "D", "DB", "DS", "DY", "ER", "ES", "EU", "F", "FE", "FM", "FR", "GA", "GD", "GE", "H", "HE",
    "HF", "HG", "HO", "HS", "I", "IN", "IR", "K", "KR", "LA", "LI", "LR", "LU", "MD", "MG", "MN", "MO", "MT", "N", "NA", "NB",
    "ND", "NE", "NI", "NO", "NP", "O", "OS", "P", "PA", "PB", "PD", "PM", "PO", "PR", "PT", "PU", "RA", "RB", "RE", "RF", "RG",
    "RH", "RN", "RU", "S", "SB", "SC", "SE", "SG", "SI", "SM", "SN", "SR", "T", "TA", "TB", "TC", "TE", "TH", "TI", "TL", "TM",
    "U", "V", "W", "XE", "Y", "YB", "ZN", "ZR",
];

fn is_element(upper: &str) -> bool {
    ELEMENTS.contains(&upper)
}

/// Element symbol from a PDB atom name (columns 13-16) when columns 77-78 are blank, normalised as
/// columns 77-78 are ("ZN" -> "Zn"); `None` when the name does not say.
///
/// The PDB convention, as cctbx's `determine_chemical_element_simple` applies it: a two-letter element
/// is right-justified into columns 13-14 ("ZN  ", "CA  " = calcium, "FE  "), a one-letter one sits in
/// column 14 with column 13 blank or a digit (" CA " = alpha carbon, "1HB "). Where cctbx finds no
/// element, one reading is still certain and taken: a letter in column 13 followed by no letter
/// ("C1  ", "H   ") is that one-letter element, and a lower-case name ("Zn  ") is read as upper case.
fn element_from_name(name: &str) -> Option<String> {
    // by characters: a non-ASCII name (not PDB, but seen) must not split a character
    let mut ch = name.chars().chain(std::iter::repeat(' '));
    let (c0, c1) = (ch.next()?.to_ascii_uppercase(), ch.next()?.to_ascii_uppercase());
    let one = |c: char| c.is_ascii_alphabetic().then(|| c.to_string()).filter(|e| is_element(e));
    let e = if c0 == ' ' || c0.is_ascii_digit() {
        one(c1)?
    } else if c0.is_ascii_alphabetic() && c1.is_ascii_alphabetic() {
        Some(format!("{c0}{c1}")).filter(|e| is_element(e))?
    } else {
        one(c0)?
    };
    Some(normalize_element(&e))
}

/// Residues whose atom names all start with their one-letter element (amino acids, nucleotides, water):
/// their "CA", "CD1", "NE2", "HG" are carbon, nitrogen and hydrogen, never calcium, cadmium, neon or
/// mercury.
const ORGANIC_RESIDUES: [&str; 35] = [
    "ALA", "ARG", "ASN", "ASP", "CYS", "GLN", "GLU", "GLY", "HIS", "ILE", "LEU", "LYS", "MET", "PHE", "PRO", "SER", "THR", "TRP",
    "TYR", "VAL", "UNK", "A", "C", "G", "U", "I", "DA", "DC", "DG", "DT", "DI", "DU", "HOH", "WAT", "DOD",
];

/// Element of an mmCIF atom without `_atom_site.type_symbol`, from its name and residue, only where it
/// is certain; otherwise why not. mmCIF names are not column-justified, so "CA" may be an alpha carbon
/// or calcium and "SE" sulphur-something or selenium: one letter of a two-letter element must never be
/// guessed (cctbx refuses such a file outright). Certain: a name in a residue of [`ORGANIC_RESIDUES`]
/// (its first letter); a name whose first two letters are not an element ("CB", "OD1": the first
/// letter) or whose first letter alone is not ("ZN", "MG1": the two); a single-atom residue named as
/// its atom ("CA" in CA, "CL" in CL: the two letters).
fn element_from_cif_name(name: &str, comp: Option<&str>) -> std::result::Result<String, String> {
    let letters: String = name.trim_start_matches(|c: char| c.is_ascii_digit()).chars().take_while(|c| c.is_ascii_alphabetic()).collect();
    let up = letters.to_ascii_uppercase();
    let one = up.get(..1).filter(|e| is_element(e));
    let two = up.get(..2).filter(|e| is_element(e));
    let comp = comp.map(|c| c.trim().to_ascii_uppercase()).filter(|c| !c.is_empty() && c != "?" && c != ".");
    let e = match (one, two) {
        (Some(o), _) if comp.as_deref().is_some_and(|c| ORGANIC_RESIDUES.contains(&c)) => o,
        (Some(o), None) => o,
        (None, Some(t)) => t,
        (Some(o), Some(t)) => {
            if comp.as_deref() == Some(up.as_str()) && up.len() == 2 {
                t
            } else {
                return Err(format!(
                    "atom '{name}'{}: no _atom_site.type_symbol, and the name may mean {} or {}: add the type_symbol column",
                    comp.map(|c| format!(" of residue {c}")).unwrap_or_default(),
                    normalize_element(o),
                    normalize_element(t)
                ));
            }
        }
        (None, None) => return Err(format!("atom '{name}': no _atom_site.type_symbol, and the name is no element")),
    };
    Ok(normalize_element(e))
}

/// Formal charge from PDB columns 79-80, read as cctbx's `charge_tidy` does: "2+", "+2", "1-", "-1",
/// a lone sign ("+ ", " -": 1), "++"; anything else is no charge. Old-format files hold the entry's ID
/// and a serial in columns 73-80: their digits ("86") are not a charge (each would be an "ion N86+").
fn pdb_charge(s: &str) -> i32 {
    let mut c = s.chars().chain(std::iter::repeat(' '));
    let (a, b) = (c.next().unwrap_or(' '), c.next().unwrap_or(' '));
    let sign = |c: char| match c {
        '+' => Some(1),
        '-' => Some(-1),
        _ => None,
    };
    let digit = |c: char| c.to_digit(10).map(|d| d as i32);
    match (a, b) {
        (d, s) | (s, d) if digit(d).is_some() && sign(s).is_some() => digit(d).unwrap_or(0) * sign(s).unwrap_or(0),
        (s, ' ') | (' ', s) if sign(s).is_some() => sign(s).unwrap_or(0),
        (s, t) if s == t && sign(s).is_some() => 2 * sign(s).unwrap_or(0),
        _ => 0,
    }
}

/// Formal charge of an mmCIF `_atom_site.pdbx_formal_charge` ("2", "-1", "+1", "2+", "?" = 0).
fn parse_charge(s: &str) -> i32 {
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
    let mut sg_line = 0;
    // a CNS `REMARK sg= … a= …` line, used when there is no CRYST1 (as cctbx's iotbx.pdb does)
    let mut cns: Option<(String, [f64; 6], usize)> = None;
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
                    sg_line = lineno;
                }
                cell = Some(c);
            }
            "REMARK" if cns.is_none() => cns = cns_symmetry(line).map(|(s, c)| (s, c, lineno)),
            // the record name is columns 1-6: a bare "MODEL" (no serial, trailing blanks stripped) counts
            _ if rec.trim_end() == "MODEL" => {
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
                    let name = cols(line, 12, 16);
                    element = element_from_name(name).ok_or_else(|| {
                        Error::file_line(path, lineno, format!("cannot tell the element of atom '{name}': columns 77-78 are blank and the name (columns 13-16) gives none"))
                    })?;
                }
                let charge = pdb_charge(cols(line, 78, 80));
                atoms.push(Atom { xyz: [x, y, z], occ, b_iso, u_aniso: None, element, charge, line: lineno });
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
    if let (None, Some((s, c, l))) = (cell, cns) {
        cell = Some(c);
        sg = Some(s);
        sg_line = l;
    }
    Ok(Model { cell, space_group: sg, atoms, space_group_line: sg_line, space_group_unread: None })
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
    let mut model = Model { cell, space_group: None, atoms, space_group_line: 0, space_group_unread: None };
    match sg {
        Some((name, line)) => {
            model.space_group = Some(name);
            model.space_group_line = line;
        }
        None => cif_space_group_otherwise(path, &items, &loops, cell.map_or(90.0, |c| c[5]), &mut model)?,
    }
    Ok(model)
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

/// `_cell` lengths and angles (all six, or none) and the space group's Hermann–Mauguin symbol with
/// its line.
fn cif_cell_and_space_group(path: &Path, items: &CifItems) -> Result<(Option<[f64; 6]>, Option<(String, usize)>)> {
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
        if let Some((v, line)) = items.get(tag) {
            if v != "?" && v != "." && !v.trim().is_empty() {
                sg = Some((v.trim().to_string(), *line));
                break;
            }
        }
    }
    Ok((if have_cell { Some(cell) } else { None }, sg))
}

/// The space group of a CIF without a Hermann–Mauguin name: from its symmetry-operator loop
/// (`_space_group_symop.operation_xyz`, `_symmetry_equiv.pos_as_xyz`), matched to a tabulated setting,
/// else from its number (`_space_group.IT_number`, `_symmetry.Int_Tables_number`: the standard
/// setting, as `-spacegroup N`). A group named only in a form not read here (a Hall symbol, operators
/// of no tabulated setting) is recorded in `space_group_unread`, which the model loader (`load`, one level up) refuses
/// unless `-spacegroup` is given. Nothing at all: P 1, as before. (cctbx reads these files' groups.)
fn cif_space_group_otherwise(path: &Path, items: &CifItems, loops: &[CifLoop], gamma: f64, model: &mut Model) -> Result<()> {
    let given = |tags: &[&str]| {
        tags.iter().find_map(|t| items.get(*t)).filter(|(v, _)| v != "?" && v != "." && !v.trim().is_empty()).map(|(v, l)| (v.trim().to_string(), *l))
    };
    let number = given(&["_space_group.it_number", "_symmetry.int_tables_number", "_space_group_it_number", "_symmetry_int_tables_number"]);
    let hall = given(&["_space_group.name_hall", "_symmetry.space_group_name_hall", "_space_group_name_hall", "_symmetry_space_group_name_hall"]);
    let op_tags = ["_space_group_symop.operation_xyz", "_symmetry_equiv.pos_as_xyz", "_space_group_symop_operation_xyz", "_symmetry_equiv_pos_as_xyz"];
    let op_loop = loops.iter().find_map(|(tags, rows)| tags.iter().position(|t| op_tags.contains(&t.as_str())).map(|c| rows.iter().map(move |r| &r[c])));
    if let Some(rows) = op_loop {
        let rows: Vec<&(String, usize)> = rows.collect();
        let line = rows.first().map_or(0, |r| r.1);
        let mut ops = Vec::with_capacity(rows.len());
        for (v, l) in &rows {
            let op = super::spacegroup::parse_op(v).ok_or_else(|| Error::file_line(path, *l, format!("symmetry operator '{v}' is not of the form x,y,z")))?;
            ops.push(op);
        }
        match super::spacegroup::from_ops(&ops) {
            Some(sg) => {
                if let Some((n, l)) = &number {
                    if n.parse::<u32>().ok() != Some(sg.number) {
                        return Err(Error::file_line(path, *l, format!("space group number {n} contradicts the symmetry operators (those of {}, number {})", sg.name, sg.number)));
                    }
                }
                model.space_group = Some(sg.name);
                model.space_group_line = line;
            }
            None => model.space_group_unread = Some((line, format!("{} symmetry operators that form no space-group setting this program knows", ops.len()))),
        }
    } else if let Some((n, l)) = number {
        let sg = super::spacegroup::lookup(&n, gamma).map_err(|e| Error::file_line(path, l, e.to_string()))?;
        model.space_group = Some(sg.name);
        model.space_group_line = l;
    } else if let Some((h, l)) = hall {
        model.space_group_unread = Some((l, format!("the Hall symbol '{h}' (only Hermann-Mauguin names, numbers and operators are read)")));
    }
    Ok(())
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
    let c_comp = col("label_comp_id").or(col("auth_comp_id"));
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
            let Some(c) = c_label else {
                return Err(Error::file_line(path, line, "cannot tell the element of this atom: no _atom_site.type_symbol and no atom name"));
            };
            let comp = c_comp.map(|k| row[k].0.as_str());
            element = element_from_cif_name(&row[c].0, comp).map_err(|e| Error::file_line(path, line, e))?;
        }
        let charge = c_charge.map(|c| parse_charge(&row[c].0)).unwrap_or(0);
        if let Some(c) = c_id {
            id_index.insert(row[c].0.clone(), atoms.len());
        }
        atoms.push(Atom { xyz: [x, y, z], occ, b_iso, u_aniso: None, element, charge, line });
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
        assert_eq!(element_from_name(" \u{e9} "), None);
        assert_eq!(element_from_name("\u{e9}N"), None);
        assert_eq!(element_from_name(" N  ").as_deref(), Some("N"));
    }

    #[test]
    fn element_from_pdb_name_as_cctbx_types_it() {
        // iotbx.pdb atom.determine_chemical_element_simple() with columns 77-78 blank, for these names
        let cctbx = [
            ("ZN  ", Some("Zn")), ("CA  ", Some("Ca")), (" CA ", Some("C")), ("FE  ", Some("Fe")), ("MG  ", Some("Mg")),
            ("CL  ", Some("Cl")), ("1HB ", Some("H")), (" HG1", Some("H")), ("HG11", Some("Hg")), ("NA+ ", Some("Na")),
            ("SE  ", Some("Se")), (" D1 ", Some("D")), (" ZN ", None), ("XX  ", None), ("'C1 ", None), ("*C1 ", None), ("   1", None),
        ];
        for (name, e) in cctbx {
            assert_eq!(element_from_name(name).as_deref(), e, "{name:?}");
        }
        // where cctbx finds none but the name can only mean one element
        assert_eq!(element_from_name("C1  ").as_deref(), Some("C"));
        assert_eq!(element_from_name("H   ").as_deref(), Some("H"));
        assert_eq!(element_from_name("Zn  ").as_deref(), Some("Zn"));
    }

    #[test]
    fn pdb_charge_as_cctbx_reads_it() {
        // iotbx.pdb hierarchy atom.charge_tidy() of columns 79-80 (None: no charge)
        let cctbx = [
            ("2+", 2), ("+2", 2), ("1-", -1), ("-1", -1), (" 2", 0), ("2 ", 0), ("86", 0), ("+ ", 1), ("- ", -1), (" +", 1),
            (" -", -1), ("  ", 0), ("0+", 0), ("3+", 3), ("A1", 0), ("++", 2), ("9+", 9), ("2-", -2), ("", 0),
        ];
        for (c, q) in cctbx {
            assert_eq!(pdb_charge(c), q, "{c:?}");
        }
    }

    #[test]
    fn blank_element_columns_and_old_format_serials() {
        // cctbx's xray_structure_simple types these Zn, Ca, C, Fe, Mg, Cl with no charge (columns 73-80
        // of an old-format file hold the ID code and a serial)
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.pdb");
        std::fs::write(
            &p,
            "CRYST1   20.000   22.000   24.000  90.00  90.00  90.00 P 1\n\
HETATM    4 ZN    ZN A 101       5.000   6.000   7.000  1.00 15.00      1HPV 86\n\
HETATM    5 CA    CA A 102       5.000   6.000   7.000  1.00 15.00      1HPV 87\n\
ATOM      6  CA  ALA A 103       5.000   6.000   7.000  1.00 15.00      1HPV 88\n\
HETATM    7 FE   HEM A 104       5.000   6.000   7.000  1.00 15.00\n\
HETATM    8 MG    MG A 105       5.000   6.000   7.000  1.00 15.00\n\
HETATM    9 CL    CL A 106       5.000   6.000   7.000  1.00 15.00\n\
HETATM   10 *C1   XX A 107       5.000   6.000   7.000  1.00 15.00\n",
        )
        .unwrap();
        let e = read_pdb(&p).unwrap_err().to_string();
        assert!(e.contains("line 8") && e.contains("'*C1 '"), "{e}");
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, text.lines().take(7).collect::<Vec<_>>().join("\n")).unwrap();
        let m = read_pdb(&p).unwrap();
        let el: Vec<(&str, i32)> = m.atoms.iter().map(|a| (a.element.as_str(), a.charge)).collect();
        assert_eq!(el, [("Zn", 0), ("Ca", 0), ("C", 0), ("Fe", 0), ("Mg", 0), ("Cl", 0)]);
        assert_eq!(m.atoms[0].line, 2);
        assert_eq!(m.space_group_line, 1);
    }

    #[test]
    fn only_the_first_model_even_with_bare_model_records() {
        // "MODEL" with no serial (trailing blanks stripped): cctbx finds 2 models here
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.pdb");
        let atom = |i: usize| format!("ATOM  {i:5}  CA  ALA A   1       1.000   2.000   3.000  1.00 10.00           C\n");
        let text = format!("CRYST1   20.000   22.000   24.000  90.00  90.00  90.00 P 1\nMODEL\n{}{}ENDMDL\nMODEL\n{}ENDMDL\n", atom(1), atom(2), atom(3));
        std::fs::write(&p, text).unwrap();
        assert_eq!(read_pdb(&p).unwrap().atoms.len(), 2);
    }

    fn cif_with(atom_rows: &str, type_col: bool, symmetry: &str) -> String {
        format!(
            "data_x\n_cell.length_a 20\n_cell.length_b 22\n_cell.length_c 24\n_cell.angle_alpha 90\n_cell.angle_beta 90\n\
_cell.angle_gamma 90\n{symmetry}\nloop_\n_atom_site.group_PDB\n_atom_site.id\n{}_atom_site.label_atom_id\n\
_atom_site.label_comp_id\n_atom_site.Cartn_x\n_atom_site.Cartn_y\n_atom_site.Cartn_z\n{atom_rows}",
            if type_col { "_atom_site.type_symbol\n" } else { "" }
        )
    }

    #[test]
    fn cif_without_type_symbol_never_guesses_one_letter_of_two() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.cif");
        // the elements of ions3.pdb's atoms as cctbx types them (columns 77-78 given there)
        let rows = "ATOM 1 N ALA 1 2 3\nATOM 2 CA ALA 2 2.5 3.5\nATOM 3 D ALA 2.5 1.5 3.9\nHETATM 5 CL CL 8 3 9\n\
HETATM 6 CA CA 3 9 2\nHETATM 8 O HOH 9 9 9\nHETATM 10 NA NA 14 13 1\nHETATM 12 O1 SO4 15 16 17\nHETATM 13 ZN1 ZNX 1 1 1\n\
ATOM 14 CD1 LEU 1 1 1\nATOM 15 HG SER 1 1 1\nHETATM 16 C1' LIG 1 1 1\n";
        std::fs::write(&p, cif_with(rows, false, "")).unwrap();
        let m = read_mmcif(&p).unwrap();
        let el: Vec<&str> = m.atoms.iter().map(|a| a.element.as_str()).collect();
        assert_eq!(el, ["N", "C", "D", "Cl", "Ca", "O", "Na", "O", "Zn", "C", "H", "C"]);
        assert_eq!(m.atoms[3].line, 20);
        // Se or S, Fe or F: refused with the line, not read as S and F
        for (row, line, pair) in [("HETATM 7 SE MSE 6 4 11\n", 17, "S or Se"), ("HETATM 11 FE HEM 11 10 8\n", 17, "F or Fe")] {
            std::fs::write(&p, cif_with(row, false, "")).unwrap();
            let e = read_mmcif(&p).unwrap_err().to_string();
            assert!(e.contains(&format!("line {line}")) && e.contains(pair) && e.contains("type_symbol"), "{e}");
        }
        // with type_symbol, the column decides
        std::fs::write(&p, cif_with("HETATM 7 Se SE MSE 6 4 11\n", true, "")).unwrap();
        assert_eq!(read_mmcif(&p).unwrap().atoms[0].element, "Se");
    }

    #[test]
    fn cif_space_group_by_number_operators_or_refused() {
        // cctbx reads each of these as the group asserted (iotbx.pdb.input(...).crystal_symmetry())
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.cif");
        let row = "ATOM 1 C C ALA 1 2 3\n";
        let cases = [
            ("_space_group.IT_number 2", Some("P-1")),
            ("_symmetry.Int_Tables_number 19", Some("P212121")),
            ("loop_\n_space_group_symop.id\n_space_group_symop.operation_xyz\n1 x,y,z\n2 -x,-y,z+1/2", Some("P1121")),
            ("_symmetry.space_group_name_Hall '-P 1'\nloop_\n_symmetry_equiv.id\n_symmetry_equiv.pos_as_xyz\n1 x,y,z\n2 -x,-y,-z", Some("P-1")),
            ("_space_group.IT_number 4\nloop_\n_space_group_symop.id\n_space_group_symop.operation_xyz\n1 x,y,z\n2 -x,-y,z+1/2", Some("P1121")),
            ("", None),
        ];
        for (sym, want) in cases {
            std::fs::write(&p, cif_with(row, true, sym)).unwrap();
            let m = read_mmcif(&p).unwrap();
            assert_eq!(m.space_group.as_deref(), want, "{sym}");
            assert!(m.space_group_unread.is_none());
        }
        std::fs::write(&p, cif_with(row, true, "_symmetry.space_group_name_Hall '-P 2ac 2n'")).unwrap();
        let m = read_mmcif(&p).unwrap();
        assert_eq!((m.space_group.as_deref(), m.space_group_unread.map(|u| u.0)), (None, Some(8)));
        std::fs::write(&p, cif_with(row, true, "_space_group.IT_number 19\nloop_\n_space_group_symop.id\n_space_group_symop.operation_xyz\n1 x,y,z\n2 -x,-y,-z")).unwrap();
        assert!(read_mmcif(&p).unwrap_err().to_string().contains("contradicts"));
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
