"""nanobragg: James Holton's nanoBragg X-ray diffraction image simulator (Rust port) from Python.

The physics, the flag parser and the file writers are the command line's (``nanobragg-rs simulate``);
images come back as numpy arrays of shape (slow, fast)::

    import nanobragg
    sim = nanobragg.from_args(["-cell", "100", "100", "100", "90", "90", "90", "-N", "5",
                               "-default_F", "100", "-lambda", "6.2", "-distance", "100",
                               "-pixel", "0.1", "-detpixels", "512"])
    image = sim.render()                  # float32 (512, 512), identical to -floatfile
    counts = sim.noise(image, seed=42)    # uint16 Poisson image, identical to -noisefile with -seed 42

or with keywords in the flags' units (Angstrom, mm, degrees; see ``nanobragg.flag_help()``)::

    sim = nanobragg.Simulation(cell=(100, 100, 100, 90, 90, 90), N=5, default_F=100,
                               wavelength=6.2, distance=100, pixel=0.1, detpixels=512)

Errors in what you pass raise ValueError (bad flags, values, arrays, file contents) or OSError (files that
cannot be read or written) with the command line's one-line message.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import warnings
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Optional, Sequence

import numpy as np

from . import _nanobragg
from ._nanobragg import flag_help, flag_names

__version__ = _nanobragg.__version__

__all__ = [
    "Simulation",
    "from_args",
    "from_json",
    "render_stills",
    "Series",
    "Frame",
    "flag_help",
    "flag_names",
    "nearbragg",
    "refine",
    "BENCHMARK_CRYSTAL",
    "__version__",
]

#: The command line's built-in benchmark crystal (README "Quick start"): cubic 100 A cell, 5x5x5 cells,
#: every |F| = 100, lambda = 6.2 A, at 100 mm on 0.1 mm pixels. Add e.g. ``["-detpixels", "1024"]``.
BENCHMARK_CRYSTAL = ["-cell", "100", "100", "100", "90", "90", "90", "-N", "5", "-default_F", "100",
                     "-lambda", "6.2", "-distance", "100", "-pixel", "0.1"]

# Keyword names that differ from the flag they stand for (the rest map ``name=v`` to ``-name v``).
_ALIASES = {
    "wavelength": "-lambda",
    "lambda_": "-lambda",
    "mosaic_domains": "-mosaic_dom",
    "beam_center": None,  # (x, y) mm -> -Xbeam x -Ybeam y
    "misset_seed": "-misset_seed",
    "mosaic_seed": "-mosaic_seed",
}

# Keywords that are not flags.
_NOT_FLAGS = {"hkl", "amatrix", "args"}


def _format_value(v: Any) -> list[str]:
    if isinstance(v, (bool, np.bool_)):
        raise TypeError("booleans are switches, not values")
    if isinstance(v, (str, os.PathLike)):
        return [os.fspath(v)]
    if isinstance(v, (int, np.integer)):
        return [str(int(v))]
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if not math.isfinite(f):
            raise ValueError(f"{f} is not a finite number")
        return [repr(f)]
    if isinstance(v, (list, tuple, np.ndarray)):
        out: list[str] = []
        for x in (v.tolist() if isinstance(v, np.ndarray) else v):
            out += _format_value(x)
        return out
    raise TypeError(f"cannot use a {type(v).__name__} as a flag value")


def _check_keyword(name: str, v: Any) -> None:
    """Refuse keyword values that describe no crystal: ``N``/``Na``/``Nb``/``Nc`` below 1 and a ``cell``
    that is not six numbers with positive edges and angles inside (0, 180) degrees. The flags keep the
    C's leniency (``-N`` at or below 1 acts as 1, ``-cell`` takes 1 to 6 numbers), which an argv written
    for nanoBragg.c may rely on; a keyword has no such history, and there it built another crystal than
    the one asked for, in silence. Values that are not numbers are left to ``_format_value``."""
    if name in ("N", "Na", "Nb", "Nc"):
        if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)) \
                and math.isfinite(v) and v < 1:
            raise ValueError(f"{name}: must be at least 1 (unit cells), not {v!r}")
    elif name == "cell":
        vals = v.tolist() if isinstance(v, np.ndarray) else v
        if not isinstance(vals, (list, tuple)) or len(vals) != 6:
            raise ValueError(f"cell: give six numbers (a, b, c in Angstrom; alpha, beta, gamma in degrees), not {v!r}")
        try:
            nums = [float(x) for x in vals if not isinstance(x, (bool, np.bool_))]
        except (TypeError, ValueError):
            return
        if len(nums) != 6 or not all(math.isfinite(x) for x in nums):
            return
        if min(nums[:3]) <= 0:
            raise ValueError(f"cell: the edges a, b, c must be greater than 0 (Angstrom), not {tuple(vals[:3])}")
        if not all(0 < x < 180 for x in nums[3:]):
            raise ValueError(f"cell: the angles alpha, beta, gamma must be inside (0, 180) degrees, not {tuple(vals[3:])}")


def keywords_to_args(**kw: Any) -> list[str]:
    """Translate keyword parameters into nanoBragg flags: ``N=5`` -> ``-N 5``, ``cell=(a, b, c, al, be, ga)``
    -> ``-cell a b c al be ga``, ``nopolar=True`` -> ``-nopolar`` (False: left out), ``None``: left out.
    ``wavelength``/``lambda_`` -> ``-lambda``, ``beam_center=(x, y)`` (mm) -> ``-Xbeam x -Ybeam y``.
    Units are the flags' (``nanobragg.flag_help()``)."""
    args: list[str] = []
    for name, v in kw.items():
        if v is None or name in _NOT_FLAGS:
            continue
        if name == "beam_center":
            xy = _format_value(v)
            if len(xy) != 2:
                raise ValueError("beam_center: give (x, y) in mm")
            args += ["-Xbeam", xy[0], "-Ybeam", xy[1]]
            continue
        _check_keyword(name, v)
        flag = _ALIASES.get(name) or ("-" + name)
        if isinstance(v, (bool, np.bool_)):
            if v:
                args.append(flag)
            continue
        try:
            args += [flag] + _format_value(v)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{flag}: {e}") from None
    return args


def _miller_columns(ma: Any) -> list[np.ndarray]:
    """A cctbx ``miller.array`` as (h, k, l, F) columns: expanded to P1 with its Friedel mates (the kernel
    looks F up in P1), complex F as |F|; intensities are refused (take amplitudes first)."""
    if ma.is_xray_intensity_array():
        raise ValueError("hkl: this miller.array holds intensities; give amplitudes (e.g. .f_sq_as_f())")
    p1 = ma.expand_to_p1()
    if not p1.anomalous_flag():
        p1 = p1.generate_bijvoet_mates()
    if p1.is_complex_array():
        p1 = p1.amplitudes()
    idx = np.array(list(p1.indices()), dtype=np.float64).reshape(-1, 3)
    f = np.array(list(p1.data()), dtype=np.float64)
    return [idx[:, 0], idx[:, 1], idx[:, 2], f]


def _hkl_arrays(hkl: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validate structure factors given as (h, k, l, F) arrays, an (n, 4) array or a cctbx miller.array."""
    if hasattr(hkl, "expand_to_p1") and hasattr(hkl, "indices") and hasattr(hkl, "data"):
        cols = _miller_columns(hkl)
    elif isinstance(hkl, np.ndarray) and hkl.ndim == 2:
        if hkl.shape[1] != 4:
            raise ValueError(f"hkl: an array of reflections must have shape (n, 4), not {hkl.shape}")
        cols = [hkl[:, i] for i in range(4)]
    else:
        try:
            cols = list(hkl)
        except TypeError:
            raise ValueError("hkl: give (h, k, l, F) arrays, an (n, 4) array or a file name") from None
        if len(cols) != 4:
            raise ValueError(f"hkl: give four arrays (h, k, l, F), not {len(cols)}")
    def column(c: Any, name: str) -> np.ndarray:
        a = np.asarray(c)
        if np.iscomplexobj(a):
            if name == "F":
                return np.abs(a).astype(np.float64)  # complex structure factors: the kernel takes |F|
            if (a.imag != 0).any():
                raise ValueError(f"hkl: {name} must be real (Miller indices), not complex")
            a = a.real
        return np.asarray(a, dtype=np.float64)

    try:
        arrs = [column(c, name) for c, name in zip(cols, "hklF")]
    except (TypeError, ValueError) as e:
        raise ValueError(f"hkl: arrays must be numeric: {e}") from None
    for name, a in zip("hklF", arrs):
        if a.ndim != 1:
            raise ValueError(f"hkl: {name} must be one-dimensional, not of shape {a.shape}")
    n = arrs[0].shape[0]
    if any(a.shape[0] != n for a in arrs):
        raise ValueError(f"hkl: h, k, l and F must have the same length, not {[a.shape[0] for a in arrs]}")
    if n == 0:
        raise ValueError("hkl: no reflections (the arrays are empty)")
    for name, a in zip("hklF", arrs):
        bad = ~np.isfinite(a)
        if bad.any():
            raise ValueError(f"hkl: {name}[{int(np.argmax(bad))}] is {a[bad][0]} (not finite)")
    idx = np.stack(arrs[:3])
    if (idx != np.round(idx)).any() or (np.abs(idx) > 1e6).any():
        i = int(np.argmax(((idx != np.round(idx)) | (np.abs(idx) > 1e6)).any(axis=0)))
        raise ValueError(f"hkl: Miller indices must be integers, reflection {i} has {tuple(idx[:, i])}")
    return idx.astype(np.int64), arrs[3]


def _write_hkl(path: str, hkl: Any) -> None:
    idx, f = _hkl_arrays(hkl)
    with open(path, "w") as fh:
        # repr() of a float is the shortest text that reads back to the same double
        fh.writelines(f"{h} {k} {l} {float(v)!r}\n" for (h, k, l), v in zip(idx.T.tolist(), f))


def _write_amatrix(path: str, a: Any) -> None:
    try:
        m = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"amatrix: must be a numeric 3x3 array: {e}") from None
    if m.shape != (3, 3):
        raise ValueError(f"amatrix: must have shape (3, 3), not {m.shape}")
    if not np.isfinite(m).all():
        raise ValueError("amatrix: holds NaN or infinite values")
    with open(path, "w") as fh:
        for row in m.tolist():
            fh.write(" ".join(repr(float(x)) for x in row) + "\n")


class Simulation:
    """One simulated experiment, resolved once and rendered as often as you like.

    ``Simulation(args=None, *, hkl=None, amatrix=None, **keywords)``

    * ``args``: nanoBragg flags as on the command line (list of strings), e.g. ``["-cell", "100", ...]``.
    * ``keywords``: the same flags as keywords in the flags' units, e.g. ``cell=(100, 100, 100, 90, 90, 90),
      misset=(10, 20, 30), N=5, default_F=100, wavelength=6.2, distance=100, pixel=0.1, detpixels=512,
      mosaic=0.3, mosaic_domains=10, seed=42, nopolar=True`` (see ``keywords_to_args``).
    * ``hkl``: structure factors: a file name (as ``-hkl``), (h, k, l, F) arrays, an (n, 4) array, or a
      cctbx ``miller.array`` of amplitudes (expanded to P1 with Friedel mates; complex F as |F|).
    * ``amatrix``: the crystal orientation as a 3x3 MOSFLM A matrix, the nine numbers of a ``-mat`` file
      (rows x, y, z; columns a*, b*, c*, in 1/Angstrom multiplied by the wavelength).

    Files named by the flags (``-hkl``, ``-mat``, ...) are read now; nothing is written until you call a
    ``write_*`` method (except the ``Fdump.bin`` cache that ``-hkl`` files write, as the command line does).
    """

    def __init__(self, args: Optional[Sequence[str]] = None, *, hkl: Any = None, amatrix: Any = None,
                 **keywords: Any) -> None:
        if isinstance(args, (str, bytes)):
            raise ValueError("args: give a list of flags, e.g. ['-cell', '100', ...], not one string")
        flags = [os.fspath(a) if isinstance(a, os.PathLike) else a for a in (args or [])]
        for a in flags:
            if not isinstance(a, str):
                raise ValueError(f"args: every flag and value must be a string, found {a!r}")
        flags += keywords_to_args(**keywords)
        if isinstance(hkl, (str, os.PathLike)):
            flags += ["-hkl", os.fspath(hkl)]
            hkl = None
        self._user_flags = list(flags)
        self._inputs: dict[str, Any] = {}
        scratch: dict[str, str] = {}  # scratch file -> the argument it holds
        with tempfile.TemporaryDirectory(prefix="nanobragg-") as tmp:
            if hkl is not None:
                p = os.path.join(tmp, "F.hkl")
                _write_hkl(p, hkl)
                # the Fdump.bin cache of these arrays goes to the scratch folder, not the user's
                flags += ["-hkl", p, "-dump", os.path.join(tmp, "Fdump.bin")]
                self._inputs["hkl"] = hkl
                scratch[p] = "hkl"
            if amatrix is not None:
                p = os.path.join(tmp, "A.mat")
                _write_amatrix(p, amatrix)
                flags += ["-mat", p]
                self._inputs["amatrix"] = amatrix
                scratch[p] = "amatrix"
            try:
                core = _nanobragg.Core(flags)
            except (ValueError, OSError) as e:
                # an error about a scratch file is about the argument it holds (the file is deleted)
                msg = str(e)
                for p, name in scratch.items():
                    msg = msg.replace(p, name)
                if msg == str(e):
                    raise
                raise type(e)(msg) from None
        self._attach(core, flags)
        for line in self._core.log:
            if line.startswith("reading Fs from "):
                # the C's cache, found in the working folder: easy to miss when the log is not printed
                warnings.warn(f"structure factors read from the cache {line[len('reading Fs from '):]} (no -hkl given, as "
                              "nanoBragg.c does); give hkl= or -hkl, or remove the file, for other F", stacklevel=2)

    def _attach(self, core: Any, flags: list[str]) -> None:
        self._core = core
        self._flags = flags
        # (slow, fast) of every panel, in image order (one for the C's flags)
        self._shapes = [tuple(p["shape"]) for p in self._core.geometry()["panels"]]

    @classmethod
    def _from_core(cls, core: Any, user_flags: list[str], flags: list[str], inputs: dict) -> "Simulation":
        """A simulation of a core built on another's inputs (a refined fit): no file is read again."""
        sim = cls.__new__(cls)
        sim._user_flags = list(user_flags)
        sim._inputs = dict(inputs)
        sim._attach(core, list(flags))
        return sim

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_args(cls, args: Sequence[str]) -> "Simulation":
        """Build from nanoBragg flags, exactly as ``nanobragg-rs simulate ARGS`` would."""
        if isinstance(args, (str, bytes)):
            raise ValueError("args: give a list of flags, e.g. ['-cell', '100', ...], not one string")
        return cls(list(args))

    @classmethod
    def from_expt(cls, path: str | os.PathLike, experiment: Optional[int] = None, image: Optional[int] = None,
                  flags: Optional[Sequence[str]] = None, **keywords: Any) -> "Simulation":
        """What a DIALS experiment list describes (``simulate --expt PATH``): its beam, every detector
        panel, goniometer, crystal and scan image ``image`` (default the first); ``experiment`` chooses
        one of several experiments (from 0). ``flags`` and keywords add nanoBragg flags after it (structure
        factors, N, mosaic, ``--panel N``, ...), which override the list's values. The image files the list
        names are never opened."""
        if isinstance(flags, (str, bytes)):
            raise ValueError("flags: give a list of flags, e.g. ['-N', '10'], not one string")
        args = ["--expt", os.fspath(path)]
        if experiment is not None:
            args += ["--experiment", str(_int("experiment", experiment))]
        if image is not None:
            args += ["--image", str(_int("image", image))]
        return cls(args + list(flags or []), **keywords)

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "Simulation":
        """Build from a parameter file written by ``save_json`` (``{"args": [...]}``)."""
        try:
            with open(path) as fh:
                doc = json.load(fh)
        except json.JSONDecodeError as e:
            raise ValueError(f"{os.fspath(path)} line {e.lineno}: not JSON: {e.msg}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("args"), list):
            raise ValueError(f"{os.fspath(path)}: expected an object with an \"args\" list of flags")
        return cls(doc["args"])

    def save_json(self, path: str | os.PathLike) -> None:
        """Save the flags of this simulation as JSON (``from_json`` reads it back). Simulations built
        from numpy structure factors or an A matrix reference scratch files and cannot be saved."""
        if self._inputs:
            raise ValueError("save_json: this simulation was built from numpy arrays (" +
                             ", ".join(self._inputs) + "); save them yourself or use files")
        with open(path, "w") as fh:
            json.dump({"nanobragg": __version__, "args": self._user_flags}, fh, indent=1)

    def __reduce__(self):
        # pickling (Dask, multiprocessing) rebuilds from the flags and arrays on the other side
        return (_rebuild, (self._user_flags, self._inputs))

    # ------------------------------------------------------------------ rendering
    @property
    def args(self) -> list[str]:
        """The nanoBragg flags this simulation was built from."""
        return list(self._flags)

    @property
    def shape(self) -> tuple:
        """The shape of the images ``render`` returns: (slow, fast) for one panel, (panels, slow, fast) for
        several panels of one size; for panels of different sizes ``render`` returns a list and this is
        the tuple of their (slow, fast)."""
        sh = self._shapes
        if len(sh) == 1:
            return sh[0]
        if all(x == sh[0] for x in sh):
            return (len(sh),) + sh[0]
        return tuple(sh)

    @property
    def panels(self) -> int:
        """Number of detector panels: 1 for the C's flags, those of a DIALS experiment list or CrystFEL
        geometry file otherwise."""
        return len(self._shapes)

    def _split(self, a: np.ndarray) -> Any:
        """The image of the kernel, every panel's rows one after another, as ``shape`` says."""
        sh = self._shapes
        if len(sh) == 1:
            return a
        if all(x == sh[0] for x in sh):
            return a.reshape((len(sh),) + sh[0])
        out, r = [], 0
        for s, _ in sh:
            out.append(a[r:r + s])
            r += s
        return out

    def _stack(self, parts: list) -> Any:
        """Per-panel arrays in the form ``_split`` gives."""
        if len(parts) == 1:
            return parts[0]
        if all(p.shape == parts[0].shape for p in parts):
            return np.stack(parts)
        return parts

    def _join(self, image: Any, what: str) -> np.ndarray:
        """An image in any of the forms ``render`` gives (or the panels' rows one after another) as the
        kernel's (rows, fast) array."""
        sh = self._shapes
        rows, fast = sum(s for s, _ in sh), sh[0][1]
        if len(sh) > 1 and isinstance(image, (list, tuple)):
            if len(image) != len(sh):
                raise ValueError(f"{what}: {len(image)} panels given, the detector has {len(sh)}")
            parts = [np.asarray(p) for p in image]
            for k, (p, want) in enumerate(zip(parts, sh)):
                if p.shape != want:
                    raise ValueError(f"{what}: panel {k} has shape {p.shape}, the panel is (slow, fast) = {want}")
            return np.concatenate(parts, axis=0)
        try:
            a = np.asarray(image)
        except Exception as e:  # noqa: BLE001 - anything numpy refuses is a bad value
            raise ValueError(f"{what}: not an array: {e}") from None
        if a.shape == (rows, fast):
            return a
        if len(sh) > 1 and a.shape == self.shape:
            return a.reshape(rows, fast)
        if len(sh) == 1:
            raise ValueError(f"{what} has shape {a.shape} but the detector is (slow, fast) = {self.shape}")
        raise ValueError(f"{what} has shape {a.shape} but the detector's {len(sh)} panels are {self.shape} "
                         f"(or ({rows}, {fast}) with the panels' rows one after another)")

    @property
    def steps(self) -> int:
        """Samples per pixel as the C counts them (sources x domains x phi steps x oversample^2)."""
        return self._core.steps

    @property
    def log(self) -> list[str]:
        """The setup messages the command line prints before rendering."""
        return self._core.log

    def render(self, threads: Optional[int] = None,
               progress: Optional[Callable[[int, int], Any]] = None) -> np.ndarray:
        """Render the float image: numpy float32 (slow, fast), photons per pixel, bit-identical to the
        command line's ``-floatfile`` for the same flags. The GIL is released while ``threads`` threads
        (default: all cores, or ``RAYON_NUM_THREADS``) work. ``progress(rows_done, rows_total)`` is called
        about every 0.1 s; an exception it raises is raised here after the render."""
        if threads is not None:
            threads = _positive_int("threads", threads)
        if progress is not None and not callable(progress):
            raise ValueError("progress: must be callable as progress(rows_done, rows_total)")
        return self._split(self._core.render(threads, progress))

    def render_gradients(self, names: Sequence[str], threads: Optional[int] = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``(image, {name: d image/d name})``: the float image and its derivative by each named
        parameter (the command line's ``--gradients`` names, in the flag's unit), float32 (slow, fast),
        bit for bit the command line's ``-floatfile`` and ``grad_<name>.bin``. The GIL is released."""
        names = _names(names)
        if threads is not None:
            threads = _positive_int("threads", threads)
        image, grads = self._core.render_gradients(names, threads)
        return self._split(image), {n: self._split(g) for n, g in zip(names, grads)}

    def loss_gradient(self, observed: Any, names: Sequence[str] = (), loss: str = "poisson",
                      threads: Optional[int] = None) -> tuple[float, dict[str, float], np.ndarray]:
        """``(L, {name: dL/d name}, hkl_dLdF)`` of this simulation's image against ``observed``
        (photons, (slow, fast)): poisson L = sum(mu - y ln mu), lsq L = 1/2 sum(mu - y)^2 over the unmasked
        pixels of the ROI; ``hkl_dLdF`` is an n x 4 array (h, k, l, dL/dF) per ``-hkl`` reflection in file
        order (empty without ``-hkl``), as the command line's ``--observed``/``--dfhkl-out``."""
        names = _names(names)
        obs = self._real_array(observed, "observed").astype(np.float64)
        if threads is not None:
            threads = _positive_int("threads", threads)
        value, grads, rows = self._core.loss_gradient(obs.ravel().tolist(), names, loss, threads)
        return value, dict(zip(names, grads)), np.array(rows, dtype=np.float64).reshape(-1, 4)

    def noise(self, image: np.ndarray, seed: Optional[int] = None, adc: Optional[float] = None) -> np.ndarray:
        """Poisson photon-counting image (uint16, slow x fast) of ``image`` plus the ADC offset, as the
        command line's ``-noisefile``: identical to it for the same ``-seed`` (``seed`` here overrides the
        flags' ``-seed``; ``adc`` overrides ``-adc``, default 40)."""
        if seed is not None:
            seed = _int("seed", seed)
        if adc is not None:
            adc = _finite("adc", adc)
        # in the layout ``render`` gives (a multi-panel detector's panels, not their rows joined)
        return self._split(self._core.noise(self._image(image), seed, adc))

    def stats(self, image: np.ndarray) -> dict:
        """max_I, mean, rms, rmsd, sum over the rendered pixels (ROI, unmasked), as the command line prints."""
        return self._core.stats(self._image(image))

    # ------------------------------------------------------------------ writers (the command line's formats)
    def write_float(self, path: str | os.PathLike, image: np.ndarray) -> None:
        """Raw 4-byte little-endian floats, fast axis fastest (``-floatfile``)."""
        self._core.write_float(os.fspath(path), self._image(image))

    def write_smv(self, path: str | os.PathLike, image: np.ndarray, scale: Optional[float] = None) -> float:
        """SMV (ADSC) 16-bit image (``-intfile``): pixels x ``scale`` (default 55000 / max_I) + adc.
        ``image`` may also be a uint16 array (for example from ``noise``), written as it is. Returns the scale."""
        if isinstance(image, np.ndarray) and image.dtype == np.uint16:
            self._core.write_smv_counts(os.fspath(path), self._counts(image))
            return 1.0
        if scale is not None:
            scale = _finite("scale", scale)
        return self._core.write_smv(os.fspath(path), self._image(image), scale)

    def write_pgm(self, path: str | os.PathLike, image: np.ndarray, scale: Optional[float] = None) -> float:
        """8-bit PGM (``-pgmfile``), scale default 250 / (5 rmsd). Returns the scale used."""
        if scale is not None:
            scale = _finite("scale", scale)
        return self._core.write_pgm(os.fspath(path), self._image(image), scale)

    def write_png(self, path: str | os.PathLike, image: np.ndarray, legend: bool | None = None) -> None:
        """8-bit PNG preview (``--png``): white background, spots dark, grey = log of each pixel's excess
        over the local background; ``legend=True`` adds the scale strip of ``--png-legend`` below it."""
        self._core.write_png(os.fspath(path), self._image(image), legend)

    def write_cbf(self, path: str | os.PathLike, counts: np.ndarray) -> None:
        """A CBF file as ``-cbffile`` writes it (32-bit byte offset, miniCBF geometry header) of integer
        ``counts`` (slow, fast), e.g. ``sim.noise(image)`` or photon counts of your own."""
        self._core.write_cbf(os.fspath(path), np.ascontiguousarray(self._join(self._int32(counts, 3), "counts")))

    def write_nexus(self, path: str | os.PathLike, counts: np.ndarray) -> None:
        """An NXmx file as ``-nexusfile`` writes it (the full geometry) of integer ``counts``: (slow, fast),
        or (frames, slow, fast) for a sweep whose frame k starts at ``-phi`` + k ``-osc``; with several
        panels, (panels, slow, fast) or (frames, panels, slow, fast) (one NXdetector_module each)."""
        a = self._int32(counts, 4)
        sh = self._shapes
        if len(sh) > 1 and all(x == sh[0] for x in sh):
            # (panels, slow, fast) or (frames, panels, slow, fast): the panels' rows one after another
            if a.shape == self.shape:
                a = a.reshape(-1, sh[0][1])
            elif a.ndim == 4 and a.shape[1:] == self.shape:
                a = a.reshape(a.shape[0], -1, sh[0][1])
        self._core.write_nexus(os.fspath(path), np.ascontiguousarray(a))

    @staticmethod
    def _int32(counts: Any, max_dims: int) -> np.ndarray:
        a = np.asarray(counts)
        if a.dtype.kind not in "iu":
            raise ValueError(f"counts: give integers (got {a.dtype}); round photons first, e.g. np.rint(x).astype(np.int32)")
        if a.ndim < 2 or a.ndim > max_dims:
            raise ValueError(f"counts: {a.ndim} dimensions")
        if a.size and (a.min() < np.iinfo(np.int32).min or a.max() > np.iinfo(np.int32).max):
            raise ValueError("counts: values beyond 32-bit integers")
        return np.ascontiguousarray(a, dtype=np.int32)

    def write_outputs(self, image: np.ndarray) -> list[str]:
        """Write every file the command line writes for these flags (float, SMV, PGM, noise, PNG, with the
        flags' names and ``--out-dir``), byte-identical to its files. Returns the paths."""
        return [os.fspath(p) for p in self._core.write_outputs(self._image(image))]

    # ------------------------------------------------------------------ geometry
    def geometry(self) -> dict:
        """The resolved detector geometry in the C's lab frame: ``pix0_vector`` (m, sample to the corner of
        pixel (0, 0)), unit vectors ``fdet_vector``, ``sdet_vector``, ``odet_vector``, ``beam_vector``,
        ``polar_vector``, ``spindle_vector``; ``distance_m``, ``pixel_size_m``, ``wavelength_m``; the beam
        centre as each convention writes it (``beam_center_mm``, ``mosflm_center_mm``, ``denzo_beam_mm``,
        ``adxv_center_mm``, ``xds_org_px``, ``dials_origin_mm``) and on the detector (``fbeam_m``, ``sbeam_m``).
        ``panels``: every panel in image order (``shape``, ``pixel_size_m``, ``distance_m``, ``pix0_vector``,
        ``fdet_vector``, ``sdet_vector``, ``odet_vector``, ``thickness_m``, ``mu_per_m``); the top-level
        detector values are the first panel's. ``frame``: ``"nanobragg"`` (the C's lab frame) or ``"dials"``
        (a simulation of a DIALS experiment list works in the list's frame)."""
        return self._core.geometry()

    def crystal(self) -> dict:
        """The crystal at phi = 0: real vectors ``a_m`` ... (m), reciprocal ``a_star_per_A`` ... (1/A), ``N``."""
        return self._core.crystal()

    @property
    def pix0_vector(self) -> np.ndarray:
        """Sample to the outer corner of pixel (0, 0), metres (lab frame)."""
        return np.array(self.geometry()["pix0_vector"])

    @property
    def fdet_vector(self) -> np.ndarray:
        """Unit vector along the fast pixel axis."""
        return np.array(self.geometry()["fdet_vector"])

    @property
    def sdet_vector(self) -> np.ndarray:
        """Unit vector along the slow pixel axis."""
        return np.array(self.geometry()["sdet_vector"])

    @property
    def odet_vector(self) -> np.ndarray:
        """Unit detector normal."""
        return np.array(self.geometry()["odet_vector"])

    @property
    def beam_center_mm(self) -> tuple[float, float]:
        """Beam centre (Xbeam, Ybeam) in mm in the detector convention of the flags (the SMV header's)."""
        return tuple(self.geometry()["beam_center_mm"])

    def pixel_positions(self) -> np.ndarray:
        """Lab position (m) of every pixel centre, shape (slow, fast, 3) (flat detector, the C's
        pix0 + (f + 1/2) p fdet + (s + 1/2) p sdet)."""
        g = self.geometry()
        if g["curved_detector"]:
            raise ValueError("pixel_positions: not available for -curved_det (flat detectors only)")
        out = []
        for q in g["panels"]:
            p = q["pixel_size_m"]
            s, f = q["shape"]
            fi = (np.arange(f) + 0.5) * p
            si = (np.arange(s) + 0.5) * p
            out.append(np.asarray(q["pix0_vector"])[None, None, :]
                       + fi[None, :, None] * np.asarray(q["fdet_vector"])[None, None, :]
                       + si[:, None, None] * np.asarray(q["sdet_vector"])[None, None, :])
        return self._stack(out)

    def scattering_vectors(self) -> np.ndarray:
        """Scattering vector S = (unit(pixel) - beam) / lambda of every pixel centre, 1/Angstrom,
        shape (slow, fast, 3)."""
        g = self.geometry()

        def one(pos: np.ndarray) -> np.ndarray:
            d = pos / np.linalg.norm(pos, axis=-1, keepdims=True)
            return (d - np.asarray(g["beam_vector"])) / (g["wavelength_m"] * 1e10)
        pos = self.pixel_positions()
        return [one(p) for p in pos] if isinstance(pos, list) else one(pos)

    def resolution(self) -> np.ndarray:
        """Resolution d = lambda / (2 sin theta) of every pixel centre in Angstrom (inf on the beam)."""
        def one(sv: np.ndarray) -> np.ndarray:
            with np.errstate(divide="ignore"):
                return 1.0 / np.linalg.norm(sv, axis=-1)
        sv = self.scattering_vectors()
        return [one(v) for v in sv] if isinstance(sv, list) else one(sv)

    # ------------------------------------------------------------------ DIALS
    def dxtbx_models(self):
        """(Beam, Detector) dxtbx models of this geometry (needs dxtbx, e.g. Debian ``python3-dials``); the
        beam carries the polarization (fraction (1 + K)/2 of ``-polar`` K, the plane's normal beam × E).
        The detector's origin is pix0 and its axes fdet/sdet, in dxtbx's frame (mm; the C's lab frame
        with x along the beam is turned into dxtbx's with z against it)."""
        from ._dxtbx import dxtbx_models
        return dxtbx_models(self)

    @classmethod
    def from_dxtbx(cls, beam, detector, crystal, goniometer=None, scan=None, args=None, **keywords) -> "Simulation":
        """A Simulation of dxtbx models (beam, detector, crystal; goniometer and scan optional), read as
        ``--expt`` reads a DIALS experiment list (every panel, polarization, S·F·A, scan image 1); ``args``
        and keywords add flags (structure factors, N, mosaic, ...) and override the models."""
        from ._dxtbx import from_dxtbx
        return from_dxtbx(cls, beam, detector, crystal, goniometer, scan, args, **keywords)

    def dxtbx_experiment(self):
        """A dxtbx ``Experiment``: beam and detector as :meth:`dxtbx_models`, the crystal the kernel renders
        (its real-space vectors at phi = 0, P 1), the spindle as goniometer and a one-image scan from
        ``-phi`` over ``-osc`` (needs dxtbx)."""
        from ._dxtbx import dxtbx_experiment
        return dxtbx_experiment(self)

    # ------------------------------------------------------------------ helpers
    def _real_array(self, image: Any, what: str) -> np.ndarray:
        """``image`` in any form ``_join`` takes as the kernel's (rows, fast) array of real numbers:
        complex (its imaginary part would be dropped) and boolean arrays are refused, naming ``what``."""
        if not (len(self._shapes) > 1 and isinstance(image, (list, tuple))):
            _real_dtype(image, what)
        return _real_dtype(self._join(image, what), what)

    def _image(self, image: Any) -> np.ndarray:
        a = np.ascontiguousarray(self._real_array(image, "image"), dtype=np.float32)
        _check_finite(a, "image")
        return a

    def _counts(self, counts: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(self._join(counts, "counts"), dtype=np.uint16)

    def __repr__(self) -> str:
        return repr(self._core)


def _rebuild(flags: list[str], inputs: dict) -> Simulation:
    return Simulation(flags, hkl=inputs.get("hkl"), amatrix=inputs.get("amatrix"))


def _int(name: str, v: Any) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise ValueError(f"{name}: must be an integer, not {v!r}")
    v = int(v)
    # a C int, as the flags take it (-2147483648 included)
    if not -2**31 <= v < 2**31:
        raise ValueError(f"{name}: {v} is out of range")
    return v


def _positive_int(name: str, v: Any) -> int:
    v = _int(name, v)
    if v < 1:
        raise ValueError(f"{name}: must be at least 1")
    return v


def _finite(name: str, v: Any) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a number, not {v!r}") from None
    if not math.isfinite(f):
        raise ValueError(f"{name}: must be finite, not {f}")
    return f


def _real_dtype(a: Any, what: str) -> np.ndarray:
    """``a`` as a numpy array of real numbers (float, int or unsigned): complex (whose imaginary part a
    conversion drops with only a warning), boolean and object arrays are refused, naming ``what``."""
    try:
        arr = np.asarray(a)
    except Exception as e:  # noqa: BLE001 - anything numpy refuses is a bad value
        raise ValueError(f"{what}: not an array: {e}") from None
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"{what}: must be a real number array, not of dtype {arr.dtype}")
    return arr


def _check_finite(a: np.ndarray, what: str) -> None:
    """Refuse a NaN or infinite pixel of the 2-D image ``a``, naming ``what`` and the pixel."""
    if not np.isfinite(a).all():
        i = int(np.flatnonzero(~np.isfinite(a.ravel()))[0])
        s, f = divmod(i, a.shape[1])
        raise ValueError(f"{what}: pixel {i} (fast {f}, slow {s}) is {a.ravel()[i]}: the image must hold finite values")


def from_args(args: Sequence[str]) -> Simulation:
    """``sim = nanobragg.from_args(["-cell", "100", ...])``: a simulation from nanoBragg flags, exactly as
    the command line reads them. ``sim.render()`` returns the ``-floatfile`` image as float32 (slow, fast)."""
    return Simulation.from_args(args)


def _names(names: Any) -> list[str]:
    if isinstance(names, str):
        names = [n for n in names.split(",") if n.strip()]
    return [str(n).strip() for n in names]


def refine(sim: Simulation, observed: Any, names: Sequence[str], loss: str = "poisson",
           max_iterations: int = 50) -> tuple[Simulation, dict]:
    """Fit the named parameters of ``sim`` to ``observed`` (a float image (slow, fast) of photons, or the
    path of a raw float, SMV, CBF or NeXus file) as ``nanobragg-rs refine`` does (Levenberg-Marquardt on the
    derivative images), on the structure factors and files ``sim`` read when it was built. Returns the
    refined simulation (the same inputs with the fitted values) and a report ``{"converged", "iterations",
    "loss", "values", "message"}`` (``values``: name -> value in flag units, ``rot_*`` the rotation relative
    to the start, as the command line's ``--refined-out``); a fit that does not converge is returned with
    ``converged`` False. The GIL is released."""
    names = _names(names)
    max_iterations = _positive_int("max_iterations", max_iterations)
    if isinstance(observed, (str, os.PathLike)):
        obs: Any = os.fspath(observed)
    else:
        a = sim._real_array(observed, "observed")
        with np.errstate(over="ignore", invalid="ignore"):
            # float32, as the command line reads a raw float file (the same fit from the array and the file)
            a32 = np.ascontiguousarray(a, dtype=np.float32)
        if not np.isfinite(a32).all():
            # a float64 past 3.4e38 overflows float32: said with the value given
            i = int(np.flatnonzero(~np.isfinite(a32.ravel()))[0])
            s, f = divmod(i, a32.shape[1])
            raise ValueError(f"observed: pixel {i} (fast {f}, slow {s}) is {a.ravel()[i]}: observed pixels must be finite float32 values")
        obs = a32.astype(np.float64).ravel().tolist()
    converged, iterations, value, values, message, flags, core = sim._core.refine(obs, names, loss, max_iterations)
    report = {"converged": converged, "iterations": iterations, "loss": value, "values": dict(values), "message": message}
    fit = Simulation._from_core(core, list(sim._user_flags) + list(flags), list(sim._flags) + list(flags), sim._inputs)
    return fit, report


def from_json(path: str | os.PathLike) -> Simulation:
    """A simulation from a parameter file written by ``Simulation.save_json``."""
    return Simulation.from_json(path)


class Frame(NamedTuple):
    """One frame of a series: its number (from 1), the simulation that makes it, and its float image."""
    index: int
    simulation: Simulation
    image: np.ndarray


class Series:
    """A dataset as ``nanobragg-rs series`` makes it, as an iterator of frames::

        for frame in nanobragg.Series(flags + ["--frames", "90", "-osc", "1"]):       # rotation sweep
            frame.image                                                              # float32 (slow, fast)
        nanobragg.Series(flags + ["--stills", "100", "--orientation", "random"])      # random stills
        nanobragg.Series(flags + ["--stills", "20", "--orientation", "fixed"])        # one crystal, 20 noise draws

    Frame k is byte-identical to the command line's frame k (same phi or misset, seeds and file names:
    ``frame.simulation.write_outputs(frame.image)`` writes the files the series would). ``--only K-L``
    and ``--shard I/N`` choose the frames it yields (``frames``); each is made when it is reached."""

    def __init__(self, args: Sequence[str], threads: Optional[int] = None) -> None:
        if isinstance(args, (str, bytes)):
            raise ValueError("args: give a list of flags, not one string")
        self._args = [os.fspath(a) for a in args]
        self._base, self._first, self._last, self._total = _nanobragg.series_frames(self._args)
        self._threads = threads

    @property
    def frames(self) -> range:
        """The frame numbers the iteration yields: all of the series', or those ``--only K-L`` and
        ``--shard I/N`` choose (the Slurm/MPI variables are not read here: split the work as you like)."""
        return range(self._first, self._last + 1)

    def __len__(self) -> int:
        return len(self.frames)

    def frame_args(self, k: int) -> list[str]:
        """The ``simulate`` flags of frame k of the series (1 .. its --frames/--stills), made when asked."""
        k = _int("k", k)
        if not 1 <= k <= self._total:
            raise IndexError(f"frame {k} is not in 1..{self._total}")
        return self._base + _nanobragg.series_frame(self._args, k)

    def simulation(self, k: int) -> Simulation:
        """The simulation of frame k of the series (counted from 1)."""
        return Simulation(self.frame_args(k))

    def __iter__(self) -> Iterator[Frame]:
        # each frame reads the inputs again: their warnings once per iteration, as the command line's
        _nanobragg.warnings_once(True)
        try:
            for k in self.frames:
                sim = self.simulation(k)
                yield Frame(k, sim, sim.render(threads=self._threads))
        finally:
            _nanobragg.warnings_once(False)


def _render_one(args: Sequence[str], threads: Optional[int] = None) -> np.ndarray:
    return Simulation(list(args)).render(threads=threads)


def _still_flags(stills: Iterable[Sequence[str]]) -> Iterator[list[str]]:
    """Each still as its list of flags (one string would be split into its characters)."""
    for s in stills:
        if isinstance(s, (str, bytes)):
            raise ValueError(f"each still is a list of flags, not one string: {s[:40]!r}")
        yield list(s)


def render_stills(stills: Iterable[Sequence[str]], client: Any = None, threads: Optional[int] = None) -> list[np.ndarray]:
    """Render a list of stills (each a list of flags). With a ``dask.distributed.Client`` the stills are
    rendered on its workers (one task per still), else one after the other here. Same images either way."""
    stills = list(_still_flags(stills))
    if client is None:
        return [_render_one(s, threads) for s in stills]
    futures = client.map(_render_one, stills, threads=threads, pure=False)
    return client.gather(futures)


def iter_renders(stills: Iterable[Sequence[str]], threads: Optional[int] = None) -> Iterator[np.ndarray]:
    """Render stills one at a time, yielding each float image."""
    for s in _still_flags(stills):
        yield _render_one(s, threads)


def nearbragg(flags: Sequence[str] | str, threads: Optional[int] = None):
    """``nanobragg-rs nearbragg`` (nearBragg.c: point scatterers summed over exact source -> atom ->
    pixel paths) in memory: ``flags`` are nearBragg.c's command-line flags, verbatim (a list, or one
    string split like a shell would), e.g. ``["-file", "atoms.txt", "-detpixels", "256"]``.

    Returns the float image (float32, shape (slow, fast), photons/pixel), the same pixels as the
    command line's ``-floatfile``; with ``-coherent`` a tuple ``(image, sin, cos)`` with the sin and cos
    images. Nothing is written (``-accumulate`` reads the earlier run's files). Bad flags or a bad atom
    list raise ValueError, an unreadable file OSError."""
    if isinstance(flags, str):
        import shlex
        flags = shlex.split(flags)
    if threads is not None:
        threads = _positive_int("threads", threads)
    image, sin, cos = _nanobragg.nearbragg([os.fspath(f) for f in flags], threads)
    if sin is None:
        return image
    return image, sin, cos


def _companion_args(args: Optional[Sequence[str] | str], kw: dict) -> list[str]:
    if isinstance(args, str):
        import shlex
        args = shlex.split(args)
    out = [os.fspath(a) for a in (args or [])]
    for name, v in kw.items():
        if v is None or v is False:
            continue
        out.append("-" + name)
        if v is not True:
            out += _format_value(v)
    return out


def noisify(image: np.ndarray, args: Optional[Sequence[str] | str] = None, **kw: Any) -> np.ndarray:
    """``nanobragg-rs noisify -noisefile`` (noisify.c) on an in-memory float image: photon, read-out,
    flicker and calibration noise, PSF, gain and ADC offset. ``args`` are noisify.c's flags, verbatim;
    keywords add more (``readout_noise=3`` -> ``-readout_noise 3``, ``seed=1``; True: a switch). The image's
    shape gives the detector's pixels. Returns the noise image (uint16, slow x fast), the pixels of the
    command line's ``-noisefile``."""
    a = np.ascontiguousarray(_real_dtype(image, "image"), dtype=np.float32)
    if a.ndim != 2:
        raise ValueError(f"image: give a 2-D (slow, fast) array, not {a.ndim}-D")
    if a.size == 0:
        raise ValueError(f"image: has no pixels (shape {a.shape})")
    _check_finite(a, "image")
    return _nanobragg.noisify(a, _companion_args(args, kw))


def nonbragg(args: Optional[Sequence[str] | str] = None, **kw: Any) -> np.ndarray:
    """``nanobragg-rs nonbragg -floatfile`` (nonBragg.c: water, air or solvent background from a ``stol F``
    table) in memory: ``args`` are nonBragg.c's flags, verbatim; keywords add more. Returns the float image
    (float32, slow x fast, photons/pixel), the pixels of the command line's ``-floatfile``."""
    return _nanobragg.nonbragg(_companion_args(args, kw))


def apply_psf(image: np.ndarray, psf: str = "gauss", psf_fwhm: float = 46.0, pixel: float = 0.1,
              psf_radius: Optional[int] = None) -> np.ndarray:
    """noisify's point-spread function on a float image: ``psf`` "gauss" or "fiber", ``psf_fwhm`` its full
    width at half maximum in µm, ``pixel`` the pixel size in mm, ``psf_radius`` in pixels (None: noisify's
    automatic radius). Photons are spread, not made: the sum is kept (less what spreads off the edges)."""
    a = np.ascontiguousarray(_real_dtype(image, "image"), dtype=np.float32)
    if a.ndim != 2:
        raise ValueError(f"image: give a 2-D (slow, fast) array, not {a.ndim}-D")
    fwhm = _finite("psf_fwhm", psf_fwhm)
    pix = _finite("pixel", pixel)
    if pix <= 0:
        raise ValueError("pixel: must be greater than 0 (mm)")
    radius = 0 if psf_radius is None else _positive_int("psf_radius", psf_radius)
    return _nanobragg.apply_psf(a, psf, fwhm / 1000.0 / pix, radius)

