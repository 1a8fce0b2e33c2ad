"""Render a list of stills on a Dask distributed cluster (2 worker processes on this machine) and check
that the images are the same as rendering them one after the other here.

    python examples/dask_stills.py            # 8 stills of 256x256 pixels
    python examples/dask_stills.py 16 512     # 16 stills of 512x512

Each still is one list of nanoBragg flags: here the benchmark crystal at 8 orientations (-misset).
Point ``Client`` at a real scheduler address to use a cluster instead of LocalCluster.
"""
import sys

import numpy as np
from dask.distributed import Client, LocalCluster

import nanobragg


def stills(n, pixels):
    return [nanobragg.BENCHMARK_CRYSTAL + ["-detpixels", str(pixels), "-misset", str(7.0 * i), "10", "20",
                                           "-mosaic", "0.5", "-mosaic_dom", "5", "-mosaic_seed", str(100 + i)]
            for i in range(n)]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    pixels = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    jobs = stills(n, pixels)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        # threads=1: each worker process renders one still on one core; the cluster runs 2 at a time
        images = nanobragg.render_stills(jobs, client=client, threads=1)
        workers = len(client.scheduler_info()["workers"])
    serial = nanobragg.render_stills(jobs)
    same = all(a.tobytes() == b.tobytes() for a, b in zip(images, serial))
    for i, img in enumerate(images):
        print(f"still {i}: shape {img.shape}, sum {img.sum(dtype=np.float64):.6g}, max {img.max():.6g}")
    print(f"{len(images)} stills rendered on {workers} Dask workers; identical to the serial run: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
