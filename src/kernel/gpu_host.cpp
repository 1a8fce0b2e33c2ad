// The GPU kernel (gpu.cu) built for the host, so the CPU machine can run the very source the device
// runs: `g++ -O2 -fopenmp -shared -fPIC -I src/kernel src/kernel/gpu_host.cpp -o libgpu_host.so`
// (tests/gpu.rs does it) and NANOBRAGG_GPU_HOST_EMULATION=that library. Blocks run on OpenMP threads,
// the threads of a block one after another. Only the CUDA names gpu.cu uses are defined here.
#include <cmath>
#include <cstring>

#define __global__
#define __launch_bounds__(threads, blocks)
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __device__

struct HostDim {
    unsigned x;
};
static thread_local HostDim blockIdx, threadIdx, blockDim;

// sin(pi x): the device computes it with exact range reduction; the host reduces x to [-1, 1] first.
static inline double sinpi(double x) {
    double r = std::remainder(x, 2.0);
    return std::sin(M_PI * r);
}
static inline double cospi(double x) {
    double r = std::remainder(x, 2.0);
    return std::cos(M_PI * r);
}
static inline float sinpif(float x) {
    return (float)sinpi((double)x);
}
static inline int atomicMin(int* address, int value) {
    int old = __atomic_load_n(address, __ATOMIC_RELAXED);
    while (value < old && !__atomic_compare_exchange_n(address, &old, value, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}

#include "gpu.cu"

extern "C" void host_launch(const char* kernel, const Params* p, unsigned blocks, unsigned threads, double* sums) {
    int which = std::strcmp(kernel, "render_f64") == 0 ? 0 : std::strcmp(kernel, "render_f32") == 0 ? 1 : 2;
#pragma omp parallel for schedule(dynamic, 16)
    for (long long b = 0; b < (long long)blocks; b++) {
        blockIdx.x = (unsigned)b;
        blockDim.x = threads;
        for (unsigned t = 0; t < threads; t++) {
            threadIdx.x = t;
            if (which == 0) render_f64(p);
            else if (which == 1) render_f32(p);
            else row_omega(p, sums);
        }
    }
}
