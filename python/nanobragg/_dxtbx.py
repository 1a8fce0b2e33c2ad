"""dxtbx (DIALS) models of a simulation's geometry. Imported only when asked for, as dxtbx is optional."""
from __future__ import annotations


def _to_dials(v):
    # nanoBragg.c's DIALS frame (L1764-L1770): dials x = lab z, dials y = lab y, dials z = -lab x
    return (float(v[2]), float(v[1]), -float(v[0]))


def dxtbx_models(sim):
    """(Beam, Detector) for ``sim``: one flat panel whose origin is pix0 (mm) and whose axes are fdet, sdet."""
    from dxtbx.model import Beam, Detector

    g = sim.geometry()
    slow, fast = g["shape"]
    px_mm = g["pixel_size_m"] * 1000.0
    # dxtbx's beam direction points from the sample to the source
    beam = Beam(tuple(-x for x in _to_dials(g["beam_vector"])), g["wavelength_m"] * 1e10)
    # polarization: nanoBragg's Kahn factor K = 2·fraction − 1 with the E-vector -polar_vector (the
    # fraction of the intensity along it); dxtbx wants that fraction and the normal of the
    # polarization plane, n = b × E for the beam's propagation direction b (so that E = n × b)
    b, e = _to_dials(g["beam_vector"]), _to_dials(g["polar_vector"])
    n = (b[1] * e[2] - b[2] * e[1], b[2] * e[0] - b[0] * e[2], b[0] * e[1] - b[1] * e[0])
    beam.set_polarization_normal(n)
    beam.set_polarization_fraction((1.0 + float(g["polarization"])) / 2.0)
    det = Detector()
    panel = det.add_panel()
    panel.set_frame(_to_dials(g["fdet_vector"]), _to_dials(g["sdet_vector"]),
                    tuple(1000.0 * x for x in _to_dials(g["pix0_vector"])))
    panel.set_pixel_size((px_mm, px_mm))
    panel.set_image_size((int(fast), int(slow)))
    panel.set_trusted_range((-1.0, 65535.0))
    panel.set_name("nanobragg")
    return beam, det
