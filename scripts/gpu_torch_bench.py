#!/usr/bin/env python3
"""The PyTorch port of nanoBragg (hoidn/nanoBragg, src/nanobrag_torch) on the GPU check's cases: one
case per process, warm-up then timed forward renders on the device (torch.cuda.synchronize around
each), in eager mode or with the port's own torch.compile (its default on CUDA). Prints one JSON
line; an out-of-memory or other failure is reported in it, not raised.

usage: gpu_torch_bench.py CASE PRECISION MODE REPEATS [OUR_FLOAT_FILE]
  CASE: crystal-4096 | mosaic-1024 (or crystal-N / mosaic-N for other sizes)
  PRECISION: double | single;  MODE: eager | compiled;  device: cuda if available, else cpu
  OUR_FLOAT_FILE: our image of the same case, for the correlation of the two images
"""
import json
import os
import sys
import time

case, precision, mode, repeats = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ours = sys.argv[5] if len(sys.argv) > 5 else None
if mode == "eager":
    os.environ["NANOBRAGG_DISABLE_COMPILE"] = "1"
out = {"case": case, "precision": precision, "mode": mode}
t0 = time.perf_counter()
try:
    import torch
    from nanobrag_torch.config import BeamConfig, CrystalConfig, DetectorConfig
    from nanobrag_torch.models.crystal import Crystal
    from nanobrag_torch.models.detector import Detector
    from nanobrag_torch.simulator import Simulator
except Exception as e:  # noqa: BLE001
    out["error"] = f"import: {e!r}"
    print(json.dumps(out))
    sys.exit(0)
out["import_s"] = time.perf_counter() - t0
out["torch"] = torch.__version__
device = "cuda" if torch.cuda.is_available() else "cpu"
out["device"] = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
dtype = torch.float64 if precision == "double" else torch.float32
kind, size = case.split("-")
size = int(size)
# the benchmark crystal (cubic 100 A, N = 5, |F| = 100, lambda 6.2 A, 0.1 mm pixels at 100 mm, one
# sample per pixel) and a mosaic-heavy crystal (lambda 1 A, 1,000 mosaic domains of 0.5 degrees)
wavelength = 6.2 if kind == "crystal" else 1.0
domains = 1 if kind == "crystal" else 1000
spread = 0.0 if kind == "crystal" else 0.5


def sync():
    if device == "cuda":
        torch.cuda.synchronize()


def simulate(batch_rows=None):
    cc = CrystalConfig(cell_a=100.0, cell_b=100.0, cell_c=100.0, cell_alpha=90.0, cell_beta=90.0, cell_gamma=90.0,
                       N_cells=(5, 5, 5), default_F=100.0, mosaic_spread_deg=spread, mosaic_domains=domains, mosaic_seed=12345)
    dc = DetectorConfig(distance_mm=100.0, pixel_size_mm=0.1, spixels=size, fpixels=size, oversample=1)
    bc = BeamConfig(wavelength_A=wavelength)
    crystal = Crystal(config=cc, device=device, dtype=dtype)
    detector = Detector(config=dc, device=device, dtype=dtype)
    sim = Simulator(crystal, detector, crystal_config=cc, beam_config=bc, device=device, dtype=dtype)
    with torch.no_grad():
        return sim.run(pixel_batch_size=batch_rows) if batch_rows else sim.run()


batch = None
times = []
try:
    t = time.perf_counter()
    try:
        img = simulate()
        sync()
    except torch.cuda.OutOfMemoryError:
        # the whole detector at once does not fit: the port's own row chunks
        del_err = "out of memory for the whole detector at once; rows in chunks of 64"
        out["note"] = del_err
        torch.cuda.empty_cache()
        batch = 64
        t = time.perf_counter()
        img = simulate(batch)
        sync()
    out["first_s"] = time.perf_counter() - t
    for _ in range(repeats):
        t = time.perf_counter()
        img = simulate(batch)
        sync()
        times.append(time.perf_counter() - t)
    out["forward_s"] = times
    # the image to the host, as a user writing it would need (ours is timed the same way)
    downloads = []
    for _ in range(repeats):
        sync()
        t = time.perf_counter()
        host = img.cpu()
        downloads.append(time.perf_counter() - t)
    out["download_s"] = downloads
    out["image_sum"] = float(img.double().sum())
    if device == "cuda":
        out["peak_gpu_mib"] = torch.cuda.max_memory_allocated() / 2**20
    if ours and os.path.exists(ours):
        import numpy as np

        a = np.fromfile(ours, dtype=np.float32).astype(np.float64)
        b = img.detach().double().cpu().numpy().ravel()
        if a.size == b.size:
            out["corr_with_ours"] = float(np.corrcoef(a, b)[0, 1])
            out["sum_ratio_ours_over_torch"] = float(a.sum() / b.sum())
except Exception as e:  # noqa: BLE001
    out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
    out["forward_s"] = times
print(json.dumps(out))
