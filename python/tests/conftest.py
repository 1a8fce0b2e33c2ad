"""Shared fixtures: the golden reference folder and the command-line binary to compare against."""
import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def golden_dir():
    d = pathlib.Path(os.environ.get("NANOBRAGG_GOLDEN", REPO.parent / "shared" / "golden"))
    return d if (d / "manifest.json").is_file() else None


def cli_path():
    p = pathlib.Path(os.environ.get("NANOBRAGG_CLI", REPO / "target" / "release" / "nanobragg-rs"))
    return p if p.is_file() else None


def skip_loudly(reason):
    print(f"SKIPPED: {reason}")
    pytest.skip(reason)


@pytest.fixture
def cli():
    p = cli_path()
    if p is None:
        skip_loudly("the nanobragg-rs binary was not found (build it with `cargo build --release` or set NANOBRAGG_CLI)")
    return p


@pytest.fixture
def golden():
    d = golden_dir()
    if d is None:
        skip_loudly("golden data not found (set NANOBRAGG_GOLDEN to the folder holding manifest.json)")
    return d
