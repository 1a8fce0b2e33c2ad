//! The few HDF5 C-library calls the NeXus writer needs, bound at run time (libloading) so that the
//! program builds on any machine; `-nexusfile` needs the shared library (Debian: libhdf5-103-1 or
//! libhdf5-dev; any HDF5 ≥ 1.10, whose ids are 64-bit) only when it is used. The file-level API
//! below is small and safe: every id is closed by its owner's Drop.

use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::sync::{Mutex, OnceLock};

pub type Hid = i64;
type Herr = c_int;
type Hsize = u64;

const H5P_DEFAULT: Hid = 0;
const H5S_ALL: Hid = 0;
const H5F_ACC_TRUNC: c_uint = 0x0002;
const H5F_ACC_RDONLY: c_uint = 0x0000;
const H5S_SCALAR: c_int = 0;
const H5S_SELECT_SET: c_int = 0;

#[allow(clippy::type_complexity)]
pub struct Lib {
    fcreate: unsafe extern "C" fn(*const c_char, c_uint, Hid, Hid) -> Hid,
    fclose: unsafe extern "C" fn(Hid) -> Herr,
    gcreate2: unsafe extern "C" fn(Hid, *const c_char, Hid, Hid, Hid) -> Hid,
    gclose: unsafe extern "C" fn(Hid) -> Herr,
    screate: unsafe extern "C" fn(c_int) -> Hid,
    screate_simple: unsafe extern "C" fn(c_int, *const Hsize, *const Hsize) -> Hid,
    sselect_hyperslab: unsafe extern "C" fn(Hid, c_int, *const Hsize, *const Hsize, *const Hsize, *const Hsize) -> Herr,
    sclose: unsafe extern "C" fn(Hid) -> Herr,
    tcopy: unsafe extern "C" fn(Hid) -> Hid,
    tset_size: unsafe extern "C" fn(Hid, usize) -> Herr,
    tclose: unsafe extern "C" fn(Hid) -> Herr,
    dcreate2: unsafe extern "C" fn(Hid, *const c_char, Hid, Hid, Hid, Hid, Hid) -> Hid,
    dget_space: unsafe extern "C" fn(Hid) -> Hid,
    dwrite: unsafe extern "C" fn(Hid, Hid, Hid, Hid, Hid, *const c_void) -> Herr,
    dclose: unsafe extern "C" fn(Hid) -> Herr,
    acreate2: unsafe extern "C" fn(Hid, *const c_char, Hid, Hid, Hid, Hid) -> Hid,
    awrite: unsafe extern "C" fn(Hid, Hid, *const c_void) -> Herr,
    aclose: unsafe extern "C" fn(Hid) -> Herr,
    pcreate: unsafe extern "C" fn(Hid) -> Hid,
    pset_chunk: unsafe extern "C" fn(Hid, c_int, *const Hsize) -> Herr,
    pset_deflate: unsafe extern "C" fn(Hid, c_uint) -> Herr,
    pset_shuffle: unsafe extern "C" fn(Hid) -> Herr,
    /// `H5Pset_obj_track_times(plist, hbool_t)`: the flag passed as a zero-extended 32-bit value (an
    /// hbool_t of one byte or of an int reads the same register).
    pset_obj_track_times: unsafe extern "C" fn(Hid, c_uint) -> Herr,
    pclose: unsafe extern "C" fn(Hid) -> Herr,
    fopen: unsafe extern "C" fn(*const c_char, c_uint, Hid) -> Hid,
    dopen2: unsafe extern "C" fn(Hid, *const c_char, Hid) -> Hid,
    dread: unsafe extern "C" fn(Hid, Hid, Hid, Hid, Hid, *mut c_void) -> Herr,
    sget_simple_extent_ndims: unsafe extern "C" fn(Hid) -> c_int,
    sget_simple_extent_dims: unsafe extern "C" fn(Hid, *mut Hsize, *mut Hsize) -> c_int,
    t_double: Hid,
    t_int32: Hid,
    t_int64: Hid,
    t_c_s1: Hid,
    p_dataset_create: Hid,
    p_group_create: Hid,
    p_file_create: Hid,
    /// Kept open for the function pointers above (the library is loaded once, for the process).
    _library: libloading::Library,
}

// SAFETY: the ids and function pointers are plain values; every call goes through `LOCK`.
unsafe impl Send for Lib {}
unsafe impl Sync for Lib {}

/// Serialises every HDF5 call (the distribution library is usually built without thread safety).
pub static LOCK: Mutex<()> = Mutex::new(());

const NAMES: &[&str] = &[
    "libhdf5_serial.so.103",
    "libhdf5.so.103",
    "libhdf5.so.200",
    "libhdf5.so.310",
    "libhdf5_serial.so.200",
    "libhdf5_serial.so.310",
    "libhdf5_serial.so",
    "libhdf5.so",
    "libhdf5.dylib",
];

/// The function or variable `name` of the loaded library.
///
/// # Safety
/// `T` must be the symbol's C type.
unsafe fn sym<T: Copy>(lib: &libloading::Library, name: &str) -> Result<T, String> {
    lib.get::<T>(name.as_bytes()).map(|s| *s).map_err(|_| format!("the HDF5 library has no {name}"))
}

/// The value of the global id `name` (e.g. `H5T_NATIVE_DOUBLE_g`).
///
/// # Safety
/// `name` must be an `hid_t` variable of the library, initialised (after `H5open`).
unsafe fn global(lib: &libloading::Library, name: &str) -> Result<Hid, String> {
    let p: *const Hid = sym(lib, name)?;
    Ok(*p)
}

/// Open one shared library by name or path.
fn open_one(name: &str) -> Result<libloading::Library, libloading::Error> {
    // SAFETY: loading HDF5 runs its initialisers, which have no requirements on the caller.
    #[cfg(unix)]
    let opened = unsafe { libloading::os::unix::Library::open(Some(name), libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL).map(libloading::Library::from) };
    #[cfg(not(unix))]
    let opened = unsafe { libloading::Library::new(name) };
    opened
}

/// The HDF5 shared library: the one `NANOBRAGG_HDF5_LIB` names (an error when it does not open: the
/// system's was used silently instead), else the first of the usual names that opens.
fn open_library() -> Result<libloading::Library, String> {
    if let Some(name) = std::env::var_os("NANOBRAGG_HDF5_LIB").filter(|v| !v.is_empty()) {
        let name = name.to_string_lossy();
        return open_one(&name).map_err(|e| format!("NANOBRAGG_HDF5_LIB={name}: cannot load it as the HDF5 library: {e}"));
    }
    if let Some(lib) = NAMES.iter().find_map(|name| open_one(name).ok()) {
        return Ok(lib);
    }
    Err("-nexusfile needs the HDF5 shared library (libhdf5, version 1.10 or later) at run time, and none was found \
         (Debian/Ubuntu: apt-get install libhdf5-dev; or set NANOBRAGG_HDF5_LIB to its path)"
        .into())
}

fn load() -> Result<Lib, String> {
    let library = open_library()?;
    // SAFETY: the symbols are HDF5's public API with the C signatures declared in `Lib` (HDF5 ≥ 1.10).
    let lib = unsafe {
        let h5open: unsafe extern "C" fn() -> Herr = sym(&library, "H5open")?;
        if h5open() < 0 {
            return Err("the HDF5 library failed to initialise".into());
        }
        let eset: unsafe extern "C" fn(Hid, *const c_void, *mut c_void) -> Herr = sym(&library, "H5Eset_auto2")?;
        eset(0, std::ptr::null(), std::ptr::null_mut()); // errors come back as return codes, not printed
        Lib {
            fcreate: sym(&library, "H5Fcreate")?,
            fclose: sym(&library, "H5Fclose")?,
            gcreate2: sym(&library, "H5Gcreate2")?,
            gclose: sym(&library, "H5Gclose")?,
            screate: sym(&library, "H5Screate")?,
            screate_simple: sym(&library, "H5Screate_simple")?,
            sselect_hyperslab: sym(&library, "H5Sselect_hyperslab")?,
            sclose: sym(&library, "H5Sclose")?,
            tcopy: sym(&library, "H5Tcopy")?,
            tset_size: sym(&library, "H5Tset_size")?,
            tclose: sym(&library, "H5Tclose")?,
            dcreate2: sym(&library, "H5Dcreate2")?,
            dget_space: sym(&library, "H5Dget_space")?,
            dwrite: sym(&library, "H5Dwrite")?,
            dclose: sym(&library, "H5Dclose")?,
            acreate2: sym(&library, "H5Acreate2")?,
            awrite: sym(&library, "H5Awrite")?,
            aclose: sym(&library, "H5Aclose")?,
            pcreate: sym(&library, "H5Pcreate")?,
            pset_chunk: sym(&library, "H5Pset_chunk")?,
            pset_deflate: sym(&library, "H5Pset_deflate")?,
            pset_shuffle: sym(&library, "H5Pset_shuffle")?,
            pset_obj_track_times: sym(&library, "H5Pset_obj_track_times")?,
            pclose: sym(&library, "H5Pclose")?,
            fopen: sym(&library, "H5Fopen")?,
            dopen2: sym(&library, "H5Dopen2")?,
            dread: sym(&library, "H5Dread")?,
            sget_simple_extent_ndims: sym(&library, "H5Sget_simple_extent_ndims")?,
            sget_simple_extent_dims: sym(&library, "H5Sget_simple_extent_dims")?,
            t_double: global(&library, "H5T_NATIVE_DOUBLE_g")?,
            t_int32: global(&library, "H5T_NATIVE_INT_g")?,
            t_int64: global(&library, "H5T_NATIVE_LLONG_g")?,
            t_c_s1: global(&library, "H5T_C_S1_g")?,
            p_dataset_create: global(&library, "H5P_CLS_DATASET_CREATE_ID_g")?,
            p_group_create: global(&library, "H5P_CLS_GROUP_CREATE_ID_g")?,
            p_file_create: global(&library, "H5P_CLS_FILE_CREATE_ID_g")?,
            _library: library,
        }
    };
    Ok(lib)
}

/// The library, loaded once.
pub fn lib() -> Result<&'static Lib, String> {
    static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(load).as_ref().map_err(|e| e.clone())
}

fn cstr(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("name {s:?} contains a NUL byte"))
}

/// A creation property list of `class` whose objects carry no time stamps: HDF5 stamps every object
/// header with the time by default, so two runs of the same parameters would give files that differ
/// in those bytes alone.
fn untimed(lib: &'static Lib, class: Hid) -> Result<Guard, String> {
    // SAFETY: a property list of a class the library exports; owned by the guard.
    unsafe {
        let p = Guard(check((lib.pcreate)(class), "make a property list")?, lib.pclose);
        check((lib.pset_obj_track_times)(p.0, 0) as i64, "turn off object time stamps")?;
        Ok(p)
    }
}

fn check(id: i64, what: &str) -> Result<i64, String> {
    if id < 0 {
        Err(format!("HDF5 failed to {what}"))
    } else {
        Ok(id)
    }
}

/// An open HDF5 file or group (closed on drop).
pub struct Node {
    lib: &'static Lib,
    id: Hid,
    is_file: bool,
}

impl Drop for Node {
    fn drop(&mut self) {
        // SAFETY: `id` is an open file/group id owned by this value.
        unsafe {
            if self.is_file {
                (self.lib.fclose)(self.id);
            } else {
                (self.lib.gclose)(self.id);
            }
        }
    }
}

/// Scalar or 1-D values for a dataset or attribute.
pub enum Val<'a> {
    F64(&'a [f64]),
    /// Always 1-D, even with one value.
    F64Array(&'a [f64]),
    I64(&'a [i64]),
    Str(&'a str),
}

struct Guard(Hid, unsafe extern "C" fn(Hid) -> Herr);
impl Drop for Guard {
    fn drop(&mut self) {
        if self.0 >= 0 {
            // SAFETY: an id created by this module and not closed elsewhere.
            unsafe {
                (self.1)(self.0);
            }
        }
    }
}

impl Node {
    /// Create (truncate) a file.
    pub fn create_file(path: &std::path::Path) -> Result<Node, String> {
        let lib = lib()?;
        let c = cstr(&path.to_string_lossy())?;
        let fcpl = untimed(lib, lib.p_file_create)?;
        // SAFETY: valid C string and property list (the root group without time stamps).
        let id = unsafe { (lib.fcreate)(c.as_ptr(), H5F_ACC_TRUNC, fcpl.0, H5P_DEFAULT) };
        Ok(Node { lib, id: check(id, "create the file")?, is_file: true })
    }

    pub fn group(&self, name: &str, nx_class: &str) -> Result<Node, String> {
        let c = cstr(name)?;
        let gcpl = untimed(self.lib, self.lib.p_group_create)?;
        // SAFETY: valid parent id, C string and property list.
        let id = unsafe { (self.lib.gcreate2)(self.id, c.as_ptr(), H5P_DEFAULT, gcpl.0, H5P_DEFAULT) };
        let g = Node { lib: self.lib, id: check(id, &format!("create group {name}"))?, is_file: false };
        g.attr("NX_class", Val::Str(nx_class))?;
        Ok(g)
    }

    /// (memory type, dataspace, data pointer, element count, string type guard) for a value.
    fn prepare(&self, v: &Val, scalar: bool) -> Result<(Hid, Guard, Option<Guard>, *const c_void, Option<CString>), String> {
        let lib = self.lib;
        // SAFETY: dataspace/type creation with valid arguments; the returned ids are owned by guards.
        unsafe {
            let mut keep = None;
            let (n, ty, ptr, tguard) = match v {
                Val::F64(x) => (x.len(), lib.t_double, x.as_ptr() as *const c_void, None),
                Val::F64Array(x) => (x.len(), lib.t_double, x.as_ptr() as *const c_void, None),
                Val::I64(x) => (x.len(), lib.t_int64, x.as_ptr() as *const c_void, None),
                Val::Str(s) => {
                    // fixed-length, NUL-terminated (the length includes the NUL)
                    let t = check((lib.tcopy)(lib.t_c_s1), "make a string type")?;
                    let g = Guard(t, lib.tclose);
                    let cs = cstr(s)?;
                    (lib.tset_size)(t, s.len() + 1);
                    let p = cs.as_ptr() as *const c_void;
                    keep = Some(cs);
                    (1, t, p, Some(g))
                }
            };
            let space = if scalar && n == 1 && !matches!(v, Val::F64Array(_)) {
                (lib.screate)(H5S_SCALAR)
            } else {
                let d = [n as Hsize];
                (lib.screate_simple)(1, d.as_ptr(), std::ptr::null())
            };
            let space = Guard(check(space, "make a dataspace")?, lib.sclose);
            Ok((ty, space, tguard, ptr, keep))
        }
    }

    /// Attribute on this group.
    pub fn attr(&self, name: &str, v: Val) -> Result<(), String> {
        attr_on(self.lib, self.id, name, v, self)
    }

    /// A small dataset (scalar when one value), with attributes.
    pub fn data(&self, name: &str, v: Val, attrs: &[(&str, Val)]) -> Result<(), String> {
        let lib = self.lib;
        let (ty, space, _tg, ptr, _keep) = self.prepare(&v, true)?;
        let c = cstr(name)?;
        let dcpl = untimed(lib, lib.p_dataset_create)?;
        // SAFETY: valid ids; `ptr` points at data of the declared type and count.
        unsafe {
            let d = check((lib.dcreate2)(self.id, c.as_ptr(), ty, space.0, H5P_DEFAULT, dcpl.0, H5P_DEFAULT), &format!("create {name}"))?;
            let dg = Guard(d, lib.dclose);
            check((lib.dwrite)(d, ty, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptr) as i64, &format!("write {name}"))?;
            for (an, av) in attrs {
                attr_on(lib, dg.0, an, match av {
                    Val::F64(x) => Val::F64(x),
                    Val::F64Array(x) => Val::F64Array(x),
                    Val::I64(x) => Val::I64(x),
                    Val::Str(s) => Val::Str(s),
                }, self)?;
            }
        }
        Ok(())
    }

    /// A chunked, byte-shuffled and deflate-compressed 32-bit integer dataset of shape `dims`, one
    /// chunk per `chunk`, written later piece by piece. Both filters are built into every HDF5 (zlib
    /// aside), so h5py and DIALS read the file without plugins; the shuffle groups the counts' mostly
    /// zero high bytes, which makes the frames of a sweep a few times smaller than deflate alone.
    pub fn big_i32(&self, name: &str, dims: &[u64], chunk: &[u64], deflate: u32) -> Result<Dataset, String> {
        let lib = self.lib;
        let c = cstr(name)?;
        // SAFETY: valid ids and arrays of `dims.len()` elements.
        unsafe {
            let space = Guard(check((lib.screate_simple)(dims.len() as c_int, dims.as_ptr(), std::ptr::null()), "make a dataspace")?, lib.sclose);
            let p = untimed(lib, lib.p_dataset_create)?;
            check((lib.pset_chunk)(p.0, chunk.len() as c_int, chunk.as_ptr()) as i64, "set chunks")?;
            check((lib.pset_shuffle)(p.0) as i64, "set the shuffle filter")?;
            check((lib.pset_deflate)(p.0, deflate) as i64, "set deflate (is zlib in this HDF5?)")?;
            let d = check((lib.dcreate2)(self.id, c.as_ptr(), lib.t_int32, space.0, H5P_DEFAULT, p.0, H5P_DEFAULT), &format!("create {name}"))?;
            Ok(Dataset { lib, id: d, dims: dims.to_vec() })
        }
    }
}

fn attr_on(lib: &'static Lib, obj: Hid, name: &str, v: Val, n: &Node) -> Result<(), String> {
    let (ty, space, _tg, ptr, _keep) = n.prepare(&v, true)?;
    let c = cstr(name)?;
    // SAFETY: valid ids; `ptr` points at data of the declared type and count.
    unsafe {
        let a = check((lib.acreate2)(obj, c.as_ptr(), ty, space.0, H5P_DEFAULT, H5P_DEFAULT), &format!("create attribute {name}"))?;
        let _ag = Guard(a, lib.aclose);
        check((lib.awrite)(a, ty, ptr) as i64, &format!("write attribute {name}"))?;
    }
    Ok(())
}

/// A large dataset being filled.
pub struct Dataset {
    lib: &'static Lib,
    id: Hid,
    dims: Vec<u64>,
}

impl Drop for Dataset {
    fn drop(&mut self) {
        // SAFETY: an open dataset id owned by this value.
        unsafe {
            (self.lib.dclose)(self.id);
        }
    }
}

impl Dataset {
    /// Write `data` as index `i` along the first dimension.
    pub fn write_slab(&self, i: u64, data: &[i32]) -> Result<(), String> {
        let lib = self.lib;
        let per: u64 = self.dims[1..].iter().product();
        if data.len() as u64 != per || i >= self.dims[0] {
            return Err(format!("frame {i} has {} values, expected {per}", data.len()));
        }
        let mut start = vec![0u64; self.dims.len()];
        start[0] = i;
        let mut count = self.dims.clone();
        count[0] = 1;
        // SAFETY: valid ids; arrays of the dataset's rank; `data` holds `per` i32 values.
        unsafe {
            let fs = Guard(check((lib.dget_space)(self.id), "get the dataspace")?, lib.sclose);
            check((lib.sselect_hyperslab)(fs.0, H5S_SELECT_SET, start.as_ptr(), std::ptr::null(), count.as_ptr(), std::ptr::null()) as i64, "select a frame")?;
            let ms = Guard(check((lib.screate_simple)(count.len() as c_int, count.as_ptr(), std::ptr::null()), "make a dataspace")?, lib.sclose);
            check((lib.dwrite)(self.id, lib.t_int32, ms.0, fs.0, H5P_DEFAULT, data.as_ptr() as *const c_void) as i64, "write a frame")?;
        }
        Ok(())
    }
}

/// Frame `frame` of the dataset `name` (shape [frames, slow, fast], or [slow, fast] for frame 0) of
/// the HDF5 file `path`, converted by the library to f64 (integer pixels included): (slow, fast,
/// values, frames). For `--observed` NeXus images (`/entry/data/data`, as `-nexusfile` writes it).
pub fn read_frame_f64(path: &std::path::Path, name: &str, frame: u64) -> Result<(usize, usize, Vec<f64>, u64), String> {
    let lib = lib()?;
    let _lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let c = cstr(&path.to_string_lossy())?;
    let dn = cstr(name)?;
    // SAFETY: valid C strings and ids; every id is closed by its guard; the buffer holds the
    // selected slow × fast values of the memory type (f64).
    unsafe {
        let f = Node { lib, id: check((lib.fopen)(c.as_ptr(), H5F_ACC_RDONLY, H5P_DEFAULT), "open the file")?, is_file: true };
        let d = Guard(check((lib.dopen2)(f.id, dn.as_ptr(), H5P_DEFAULT), &format!("find the dataset {name}"))?, lib.dclose);
        let fs = Guard(check((lib.dget_space)(d.0), "get the dataspace")?, lib.sclose);
        let rank = (lib.sget_simple_extent_ndims)(fs.0);
        if !(2..=3).contains(&rank) {
            return Err(format!("{name} has {rank} dimensions; an image has 2 (slow, fast) or 3 (frames, slow, fast)"));
        }
        let mut dims = vec![0 as Hsize; rank as usize];
        check((lib.sget_simple_extent_dims)(fs.0, dims.as_mut_ptr(), std::ptr::null_mut()) as i64, "read the dimensions")?;
        let frames = if rank == 3 { dims[0] } else { 1 };
        if frame >= frames {
            return Err(format!("{name} has {frames} frame(s), frame {frame} asked for"));
        }
        let (slow, fast) = (dims[rank as usize - 2], dims[rank as usize - 1]);
        let mut start = vec![0 as Hsize; rank as usize];
        let mut count = dims.clone();
        if rank == 3 {
            start[0] = frame;
            count[0] = 1;
        }
        check((lib.sselect_hyperslab)(fs.0, H5S_SELECT_SET, start.as_ptr(), std::ptr::null(), count.as_ptr(), std::ptr::null()) as i64, "select a frame")?;
        let mem = [slow, fast];
        let ms = Guard(check((lib.screate_simple)(2, mem.as_ptr(), std::ptr::null()), "make a dataspace")?, lib.sclose);
        let mut out = vec![0.0f64; (slow * fast) as usize];
        check((lib.dread)(d.0, lib.t_double, ms.0, fs.0, H5P_DEFAULT, out.as_mut_ptr() as *mut c_void) as i64, &format!("read {name}"))?;
        drop(f);
        Ok((slow as usize, fast as usize, out, frames))
    }
}
