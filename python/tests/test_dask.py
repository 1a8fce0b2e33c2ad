"""Many stills on an existing engine: Dask distributed, 2 worker processes, same images as serial."""
import importlib.util
import os
import subprocess
import sys
import pathlib

import pytest

import nanobragg

HERE = pathlib.Path(__file__).resolve().parent


def test_dask_two_workers_equal_serial():
    if importlib.util.find_spec("distributed") is None:
        print("SKIPPED: Dask test because dask.distributed is not installed")
        pytest.skip("dask.distributed not installed")
    from dask.distributed import Client, LocalCluster

    jobs = [nanobragg.BENCHMARK_CRYSTAL + ["-detpixels", "64", "-misset", str(5 * i), "0", "0"] for i in range(8)]
    serial = nanobragg.render_stills(jobs)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        images = nanobragg.render_stills(jobs, client=client, threads=1)
        # a Simulation object travels to a worker too (pickled as its flags)
        sim = nanobragg.from_args(jobs[3])
        remote = client.submit(lambda s: s.render(), sim).result()
    assert len(images) == 8
    assert all(a.tobytes() == b.tobytes() for a, b in zip(images, serial))
    assert len({a.tobytes() for a in images}) == 8
    assert remote.tobytes() == serial[3].tobytes()


def test_dask_example_runs():
    if importlib.util.find_spec("distributed") is None:
        print("SKIPPED: Dask example because dask.distributed is not installed")
        pytest.skip("dask.distributed not installed")
    r = subprocess.run([sys.executable, str(HERE.parent / "examples" / "dask_stills.py"), "8", "64"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "8 stills rendered on 2 Dask workers; identical to the serial run: True" in r.stdout
