#!/usr/bin/python3
"""Reference structure factors from cctbx for tests/model_cctbx.rs.
usage: cctbx_fcalc.py MODEL D_MIN WAVELENGTH_OR_0 OUT.txt [CIF_OUT] [-- MODEL D_MIN ...]
Writes 'h k l |F| phase' for the P1 set with Bijvoet mates (WK1995 table; Henke f'/f'' at the wavelength
when it is not 0). With CIF_OUT also writes the model as mmCIF (for the -cif reader test)."""
import sys
import iotbx.pdb
import iotbx.cif.model
from cctbx.eltbx import henke


def job(model, d_min, wl, out, cif_out=None):
    d_min, wl = float(d_min), float(wl)
    pdb_inp = iotbx.pdb.input(file_name=model)
    xs = pdb_inp.xray_structure_simple()
    xs.scattering_type_registry(table="wk1995")
    if wl > 0:
        for sc in xs.scatterers():
            f = henke.table(sc.element_symbol()).at_angstrom(wl)
            sc.fp, sc.fdp = f.fp(), f.fdp()
    fc = xs.structure_factors(d_min=d_min, algorithm="direct", anomalous_flag=(wl > 0)).f_calc()
    fc = fc.expand_to_p1()
    if not fc.anomalous_flag():
        fc = fc.generate_bijvoet_mates()
    with open(out, "w") as f:
        for h, a, p in zip(fc.indices(), fc.amplitudes().data(), fc.phases(deg=True).data()):
            f.write("%d %d %d %.6f %.3f\n" % (h[0], h[1], h[2], a, p))
    if cif_out:
        block = pdb_inp.construct_hierarchy().as_cif_block(crystal_symmetry=pdb_inp.crystal_symmetry())
        cif = iotbx.cif.model.cif()
        cif["model"] = block
        open(cif_out, "w").write(str(cif))


args = sys.argv[1:]
while args:
    n = args.index("--") if "--" in args else len(args)
    job(*args[:n])
    args = args[n + 1:]
