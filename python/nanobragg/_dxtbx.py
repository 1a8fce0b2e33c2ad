"""dxtbx (DIALS) models of a simulation's geometry. Imported only when asked for, as dxtbx is optional."""
from __future__ import annotations

import os


def _to_dials(v):
    # nanoBragg.c's DIALS frame (L1764-L1770): dials x = lab z, dials y = lab y, dials z = -lab x
    return (float(v[2]), float(v[1]), -float(v[0]))


def _frame(g):
    """The conversion of ``sim.geometry()``'s vectors to DIALS's frame: none for a simulation of a DIALS
    experiment list (it works in the list's frame), nanoBragg.c's otherwise."""
    return (lambda v: tuple(float(x) for x in v)) if g.get("frame") == "dials" else _to_dials


def dxtbx_models(sim):
    """(Beam, Detector) for ``sim``: every panel (one for the C's flags) flat, its origin pix0 (mm) and its
    axes fdet, sdet; the sensor's thickness and attenuation where it has one."""
    from dxtbx.model import Beam, Detector

    g = sim.geometry()
    dials = _frame(g)
    # dxtbx's beam direction points from the sample to the source
    beam = Beam(tuple(-x for x in dials(g["beam_vector"])), g["wavelength_m"] * 1e10)
    # polarization: nanoBragg's Kahn factor K = 2·fraction − 1 with the E-vector -polar_vector (the
    # fraction of the intensity along it); dxtbx wants that fraction and the normal of the
    # polarization plane, n = b × E for the beam's propagation direction b (so that E = n × b)
    b, e = dials(g["beam_vector"]), dials(g["polar_vector"])
    n = (b[1] * e[2] - b[2] * e[1], b[2] * e[0] - b[0] * e[2], b[0] * e[1] - b[1] * e[0])
    beam.set_polarization_normal(n)
    beam.set_polarization_fraction((1.0 + float(g["polarization"])) / 2.0)
    det = Detector()
    panels = g["panels"]
    for k, q in enumerate(panels):
        slow, fast = q["shape"]
        px_mm = q["pixel_size_m"] * 1000.0
        panel = det.add_panel()
        panel.set_frame(dials(q["fdet_vector"]), dials(q["sdet_vector"]),
                        tuple(1000.0 * x for x in dials(q["pix0_vector"])))
        panel.set_pixel_size((px_mm, px_mm))
        panel.set_image_size((int(fast), int(slow)))
        panel.set_trusted_range((-1.0, 65535.0))
        panel.set_name("nanobragg" if len(panels) == 1 else f"panel{k}")
        if q["thickness_m"] > 0:
            # dxtbx: thickness in mm, mu the linear attenuation coefficient in 1/mm
            panel.set_thickness(q["thickness_m"] * 1000.0)
            panel.set_mu(q["mu_per_m"] / 1000.0)
    return beam, det


def dxtbx_experiment(sim):
    """A dxtbx ``Experiment`` of ``sim``: the beam and detector of :func:`dxtbx_models`, the crystal the
    kernel renders at phi = 0 (real-space vectors in Å, P 1), the goniometer's spindle axis and a
    one-image scan from ``-phi`` over ``-osc`` degrees (dxtbx turns the crystal about the axis by the
    scan angle, as nanoBragg's phi does)."""
    from dxtbx.model import Crystal, Experiment, GoniometerFactory, ScanFactory

    beam, det = dxtbx_models(sim)
    c = sim.crystal()
    g = sim.geometry()
    dials = _frame(g)
    real = [tuple(1e10 * x for x in dials(c[k])) for k in ("a_m", "b_m", "c_m")]
    crystal = Crystal(real[0], real[1], real[2], space_group_symbol="P 1")
    gonio = GoniometerFactory.known_axis(dials(g["spindle_vector"]))
    osc = float(c["osc_deg"])
    scan = ScanFactory.make_scan(image_range=(1, 1), exposure_times=[1.0],
                                 oscillation=(float(c["phi0_deg"]), osc if osc > 0 else 0.0), epochs={1: 0.0}, deg=True)
    return Experiment(beam=beam, detector=det, crystal=crystal, goniometer=gonio, scan=scan)


def from_dxtbx(cls, beam, detector, crystal, goniometer=None, scan=None, args=None, **keywords):
    """A Simulation of dxtbx models: they are written as a DIALS experiment list and read with
    ``--expt`` (one reader for both), then ``args``/``keywords`` add or override flags."""
    import tempfile

    from dxtbx.model import Experiment, ExperimentList

    expts = ExperimentList([Experiment(beam=beam, detector=detector, crystal=crystal, goniometer=goniometer, scan=scan)])
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "models.expt")
        expts.as_file(path)
        return cls(["--expt", path] + list(args or []), **keywords)
