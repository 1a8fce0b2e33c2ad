#!/usr/bin/env python3
"""Print the folders where pip's NVIDIA wheels (nvidia-cuda-nvrtc, PyTorch's CUDA dependencies) keep
libnvrtc, one per line (scripts/gpu_check.sh, scripts/test.sh)."""
import os

try:
    import nvidia
except ImportError:
    raise SystemExit(0)
for base in nvidia.__path__:
    for sub in ("cu13", "cuda_nvrtc", "cu12"):
        d = os.path.join(base, sub, "lib")
        if os.path.isdir(d):
            print(d)
