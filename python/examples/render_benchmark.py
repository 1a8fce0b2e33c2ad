"""The README's benchmark crystal from Python: render it, add Poisson noise, print shape and sum.
The same numbers as `nanobragg-rs simulate -detpixels 1024 -seed 42` (max_I, mean, photons on noise image)."""
import numpy as np
import nanobragg

sim = nanobragg.from_args(nanobragg.BENCHMARK_CRYSTAL + ["-detpixels", "1024", "-seed", "42"])
image = sim.render()                    # float32 (slow, fast), photons per pixel: the -floatfile image
counts = sim.noise(image)               # uint16 Poisson counts + ADC offset 40: the -noisefile image
st = sim.stats(image)
print(f"shape {image.shape} sum {image.sum(dtype=np.float64):.6g} max_I = {st['max_I']:g} mean= {st['mean']:g}")
print(f"{int(counts.sum(dtype=np.int64)) - 40 * counts.size} photons on noise image, shape {counts.shape}")
sim.write_smv("noise.img", counts)      # also write_float / write_pgm / write_png / write_outputs
