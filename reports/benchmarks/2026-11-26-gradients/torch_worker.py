"""One process of the PyTorch port of nanoBragg (hoidn/nanoBragg, src/nanobrag_torch) on the
benchmark crystal (cubic 100 A cell, N = 5, |F| = 100, lambda = 6.2 A, SIZE^2 pixels of 0.1 mm at
100 mm): the forward image, then forward + backward of a scalar loss (sum of squares of the image
against a fixed target) by the six cell parameters and the distance, in float64 on the CPU with
the given number of threads. Prints one JSON line: import, forward and forward+backward seconds.

usage: python torch_worker.py SIZE THREADS REPEATS
"""
import json
import sys
import time

t0 = time.perf_counter()
import torch  # noqa: E402
from nanobrag_torch.config import BeamConfig, CrystalConfig, DetectorConfig  # noqa: E402
from nanobrag_torch.models.crystal import Crystal  # noqa: E402
from nanobrag_torch.models.detector import Detector  # noqa: E402
from nanobrag_torch.simulator import Simulator  # noqa: E402

t_import = time.perf_counter() - t0
size, threads, repeats = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
dtype = torch.float64


def simulate(grad):
    p = [torch.tensor(v, dtype=dtype, requires_grad=grad) for v in (100.0, 100.0, 100.0, 90.0, 90.0, 90.0, 100.0)]
    cc = CrystalConfig(cell_a=p[0], cell_b=p[1], cell_c=p[2], cell_alpha=p[3], cell_beta=p[4], cell_gamma=p[5],
                       N_cells=(5, 5, 5), default_F=100.0, mosaic_spread_deg=0.0, mosaic_domains=1)
    dc = DetectorConfig(distance_mm=p[6], pixel_size_mm=0.1, spixels=size, fpixels=size)
    bc = BeamConfig(wavelength_A=6.2)
    crystal = Crystal(config=cc, device="cpu", dtype=dtype)
    detector = Detector(config=dc, device="cpu", dtype=dtype)
    sim = Simulator(crystal, detector, crystal_config=cc, beam_config=bc, device="cpu", dtype=dtype)
    return sim.run(), p


out = {"size": size, "threads": threads, "import_s": t_import, "forward_s": [], "forward_backward_s": []}
for _ in range(repeats):
    t = time.perf_counter()
    with torch.no_grad():
        img, _ = simulate(False)
    out["forward_s"].append(time.perf_counter() - t)
    target = img.detach() * 1.01
    t = time.perf_counter()
    img, p = simulate(True)
    loss = ((img - target) ** 2).sum()
    loss.backward()
    out["forward_backward_s"].append(time.perf_counter() - t)
    out["grad_distance"] = float(p[6].grad)
out["image_sum"] = float(img.detach().sum())
out["peak_rss_mib"] = __import__("resource").getrusage(__import__("resource").RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
