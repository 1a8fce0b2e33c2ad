"""The benchmark crystal of the README in ten lines: render, add Poisson noise, print shape and sum.
Compare: nanobragg-rs simulate -detpixels 1024 -seed 42 (prints max_I, and the photons on the noise image)."""
import numpy as np
import nanobragg

sim = nanobragg.from_args(nanobragg.BENCHMARK_CRYSTAL + ["-detpixels", "1024", "-seed", "42"])
image = sim.render()                       # float32 (slow, fast): photons per pixel, as -floatfile
counts = sim.noise(image)                  # uint16 Poisson image with -adc 40, as -noisefile
print("shape", image.shape, "sum", float(image.sum(dtype=np.float64)), "max_I", float(image.max()))
print("noise photons", int(counts.sum(dtype=np.int64)) - 40 * counts.size, "noise shape", counts.shape)
sim.write_smv("noise.img", counts)         # any of the CLI's formats: write_float/_smv/_pgm/_png
