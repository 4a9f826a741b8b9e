// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// PowerSGD's low-rank products on the device (kernels/cuda/compress.h), with
// the CPU functions' layouts: row-major M (n x m), P and Q kept transposed as
// r rows (Pt: r x n, Qt: r x m).
//
// Note [low-rank kernels]: these are our own kernels, not cuBLAS, because
//  * libgradwire must not depend on a libcublas (it links cudart statically
//    and never clashes with the application's copy; a second libcublas.so
//    beside torch's is exactly that clash);
//  * the shapes are skinny (r is 1-8): each product is one pass over M, so
//    what matters is streaming M at the memory's speed, which the SGEMM
//    paths did not (lowrank_project ran at 56 % of the copy bandwidth);
//  * every sum runs in an order fixed by the shape alone (no atomics, no
//    device-dependent split), so one device gives the same bits every run,
//    and the expansion rounds as the CPU does (Note [rounded as written]).
// Ranks are taken four at a time (one pass over M per four columns of P or
// Q, as the CPU kernels do).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "gradwire/error.h"
#include "kernels/compress_math.h"
#include "kernels/cuda/compress.h"
#include "kernels/cuda/launch.h"

namespace gradwire::kernels::cuda {
namespace {

constexpr int kPass = 4;            // ranks per pass over M
constexpr int kThreads = 256;       // 8 warps
constexpr int kRowsPerBlock = 16;   // project: each warp takes two rows
constexpr int kTile = 512;          // project: columns of Qt staged in shared memory
constexpr int kSliceRows = 64;      // project_transposed: fewest rows per slice
constexpr int kTargetBlocks = 512;  // project_transposed: blocks to aim for
constexpr int kTileV = 1024;        // project, 16-byte path: columns per staged tile
constexpr int kExpandRows = 4;      // expand, 16-byte path: rows per iteration (Note [rows in flight])

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// Pt[k0 + c][i] = sum_j M[i][j] * Qt[k0 + c][j] for c < kr. A block takes 16
// rows; each column tile of Qt is staged once in shared memory for all of
// them, so Qt costs an L2 read per 16 elements of M. Lanes stride a row
// (coalesced), then a warp sums its lanes in a fixed tree.
__global__ void project_kernel(const float* __restrict__ M, size_t n, size_t m,
                               const float* __restrict__ Qt, size_t k0, int kr,
                               float* __restrict__ Pt) {
  __shared__ float q[kPass][kTile];
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  for (size_t row0 = size_t(blockIdx.x) * kRowsPerBlock; row0 < n;
       row0 += size_t(gridDim.x) * kRowsPerBlock) {
    float acc[2][kPass] = {};
    for (size_t j0 = 0; j0 < m; j0 += kTile) {
      const size_t len = m - j0 < size_t(kTile) ? m - j0 : size_t(kTile);
      __syncthreads();  // the previous tile is no longer read
      for (int c = 0; c < kr; ++c) {
        for (size_t t = threadIdx.x; t < len; t += blockDim.x) q[c][t] = Qt[(k0 + c) * m + j0 + t];
      }
      __syncthreads();
      for (int h = 0; h < 2; ++h) {
        const size_t i = row0 + size_t(warp) + 8u * size_t(h);
        if (i >= n) continue;
        const float* row = M + i * m + j0;
#pragma unroll 4
        for (size_t t = size_t(lane); t < len; t += 32) {
          const float x = __ldg(row + t);
#pragma unroll
          for (int c = 0; c < kPass; ++c) {
            if (c < kr) acc[h][c] += x * q[c][t];
          }
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      const size_t i = row0 + size_t(warp) + 8u * size_t(h);
#pragma unroll
      for (int c = 0; c < kPass; ++c) {
        float v = acc[h][c];
        for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
        if (lane == 0 && i < n && c < kr) Pt[(k0 + c) * n + i] = v;
      }
    }
  }
}

// Note [16-byte paths]: when m is a multiple of 4 and the matrices are
// 16-byte aligned (every row then is), each lane moves a float4: four times
// fewer load instructions per byte, which is what kept the scalar kernels
// well below the copy bandwidth (the loads of P or Q beside each element of
// M cost as much as the element). The sums keep a fixed order per shape.
// The scalar kernels remain for other shapes and offsets.

// project, 16-byte path: two rows per warp interleaved, so that each lane
// has several float4 loads in flight.
__global__ void project_vec_kernel(const float* __restrict__ M, size_t n, size_t m,
                                   const float* __restrict__ Qt, size_t k0, int kr,
                                   float* __restrict__ Pt) {
  __shared__ float4 q[kPass][kTileV / 4];
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  for (size_t row0 = size_t(blockIdx.x) * kRowsPerBlock; row0 < n;
       row0 += size_t(gridDim.x) * kRowsPerBlock) {
    const size_t i0 = row0 + size_t(warp), i1 = i0 + 8;
    float acc[2][kPass] = {};
    for (size_t j0 = 0; j0 < m; j0 += kTileV) {
      const size_t len4 = (m - j0 < size_t(kTileV) ? m - j0 : size_t(kTileV)) / 4;
      __syncthreads();
      for (int c = 0; c < kr; ++c) {
        const float4* src = reinterpret_cast<const float4*>(Qt + (k0 + c) * m + j0);
        for (size_t t = threadIdx.x; t < len4; t += blockDim.x) q[c][t] = src[t];
      }
      __syncthreads();
      const float4* r0 = reinterpret_cast<const float4*>(M + (i0 < n ? i0 : 0) * m + j0);
      const float4* r1 = reinterpret_cast<const float4*>(M + (i1 < n ? i1 : 0) * m + j0);
#pragma unroll 2
      for (size_t t = size_t(lane); t < len4; t += 32) {
        const float4 x0 = i0 < n ? __ldg(r0 + t) : float4{0, 0, 0, 0};
        const float4 x1 = i1 < n ? __ldg(r1 + t) : float4{0, 0, 0, 0};
#pragma unroll
        for (int c = 0; c < kPass; ++c) {
          if (c < kr) {
            const float4 y = q[c][t];
            acc[0][c] += x0.x * y.x + x0.y * y.y + x0.z * y.z + x0.w * y.w;
            acc[1][c] += x1.x * y.x + x1.y * y.y + x1.z * y.z + x1.w * y.w;
          }
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      const size_t i = h ? i1 : i0;
#pragma unroll
      for (int c = 0; c < kPass; ++c) {
        float v = acc[h][c];
        for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
        if (lane == 0 && i < n && c < kr) Pt[(k0 + c) * n + i] = v;
      }
    }
  }
}

// project_transposed, 16-byte path: a block is 128 columns (a float4 per
// lane) x 8 row lanes (its warps); the row lanes are summed in order.
__global__ void project_t_vec_kernel(const float* __restrict__ M, size_t n, size_t m,
                                     const float* __restrict__ Pt, size_t k0, int kr,
                                     size_t slice_rows, float* __restrict__ out) {
  __shared__ float4 part[kPass][8][32];
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const size_t m4 = m / 4, j4 = size_t(blockIdx.x) * 32 + size_t(lane);
  const size_t begin = size_t(blockIdx.y) * slice_rows;
  const size_t end = begin + slice_rows < n ? begin + slice_rows : n;
  float4 acc[kPass];
#pragma unroll
  for (int c = 0; c < kPass; ++c) acc[c] = float4{0, 0, 0, 0};
  if (j4 < m4) {
#pragma unroll 4
    for (size_t i = begin + size_t(warp); i < end; i += 8) {
      const float4 x = __ldg(reinterpret_cast<const float4*>(M + i * m) + j4);
#pragma unroll
      for (int c = 0; c < kPass; ++c) {
        if (c < kr) {
          const float p = __ldg(Pt + (k0 + c) * n + i);
          acc[c].x += p * x.x;
          acc[c].y += p * x.y;
          acc[c].z += p * x.z;
          acc[c].w += p * x.w;
        }
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kPass; ++c) part[c][warp][lane] = acc[c];
  __syncthreads();
  if (warp == 0 && j4 < m4) {
    for (int c = 0; c < kr; ++c) {
      float4 s{0, 0, 0, 0};
      for (int y = 0; y < 8; ++y) {
        const float4 v = part[c][y][lane];
        s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
      }
      reinterpret_cast<float4*>(out + (size_t(blockIdx.y) * kr + c) * m)[j4] = s;
    }
  }
}

// expand, 16-byte path (r <= 8): a thread owns four columns, their Q values
// in registers, and writes a float4 per row; each component rounds as the
// scalar kernel does. Note [rows in flight]: M is only written, so the
// kernel's speed is how many stores each SM keeps in flight. With one row
// per iteration a thread issues P's loads, waits for them, and stores one
// float4: 65 % of the copy bandwidth on an H100, where cuBLAS reached 87 %.
// A thread now takes kRows rows of a contiguous range per iteration: their
// P loads issue together and their kRows stores leave back to back. The
// per-element sum is unchanged (k = 0..r-1, mul_add_rounded), so the bits
// are the CPU's. kRows = 1 is the earlier kernel's schedule and 8 a deeper
// one, both for the A/B in gradwire_gpu_bench (none of them measured yet).
template <int kRows>
__global__ void expand_vec_kernel(const float* __restrict__ Pt, const float* __restrict__ Qt,
                                  size_t n, size_t m, int r, size_t rows_per_block,
                                  float* __restrict__ M) {
  const size_t m4 = m / 4, j4 = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j4 >= m4) return;
  float4 q[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    q[k] = k < r ? __ldg(reinterpret_cast<const float4*>(Qt + size_t(k) * m) + j4)
                 : float4{0, 0, 0, 0};
  }
  const size_t begin = size_t(blockIdx.y) * rows_per_block;
  const size_t end = begin + rows_per_block < n ? begin + rows_per_block : n;
  size_t i = begin;
  for (; i + kRows <= end; i += kRows) {
    float4 acc[kRows];
#pragma unroll
    for (int u = 0; u < kRows; ++u) acc[u] = float4{0, 0, 0, 0};
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if (k < r) {
        float p[kRows];
#pragma unroll
        for (int u = 0; u < kRows; ++u) p[u] = __ldg(Pt + size_t(k) * n + i + u);
#pragma unroll
        for (int u = 0; u < kRows; ++u) {
          acc[u].x = mul_add_rounded(acc[u].x, p[u], q[k].x);
          acc[u].y = mul_add_rounded(acc[u].y, p[u], q[k].y);
          acc[u].z = mul_add_rounded(acc[u].z, p[u], q[k].z);
          acc[u].w = mul_add_rounded(acc[u].w, p[u], q[k].w);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kRows; ++u) reinterpret_cast<float4*>(M + (i + u) * m)[j4] = acc[u];
  }
  for (; i < end; ++i) {  // the range's last rows (fewer than kRows)
    float4 acc{0, 0, 0, 0};
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if (k < r) {
        const float p = __ldg(Pt + size_t(k) * n + i);
        acc.x = mul_add_rounded(acc.x, p, q[k].x);
        acc.y = mul_add_rounded(acc.y, p, q[k].y);
        acc.z = mul_add_rounded(acc.z, p, q[k].z);
        acc.w = mul_add_rounded(acc.w, p, q[k].w);
      }
    }
    reinterpret_cast<float4*>(M + i * m)[j4] = acc;
  }
}

// Slices of rows: how many, so that (column chunks x slices) blocks fill the
// device; a function of the shape only (Note [low-rank kernels]).
// `columns` per block: 32 (scalar kernel) or 128 (16-byte kernel).
size_t slices_for(size_t n, size_t m, size_t columns) {
  const size_t chunks = (m + columns - 1) / columns;
  const size_t by_rows = std::max<size_t>(1, (n + kSliceRows - 1) / kSliceRows);
  const size_t by_blocks = chunks >= size_t(kTargetBlocks) ? 1 : (kTargetBlocks + chunks - 1) / chunks;
  return std::max<size_t>(1, std::min(by_rows, by_blocks));
}

// out[(s * kr + c) * m + j] = sum over the rows i of slice s of
// Pt[k0 + c][i] * M[i][j]. Block (32 columns) x (8 row lanes); the row
// lanes are summed in order through shared memory. With one slice `out` is
// Qt itself, offset to row k0 (written with stride m per c).
__global__ void project_t_kernel(const float* __restrict__ M, size_t n, size_t m,
                                 const float* __restrict__ Pt, size_t k0, int kr,
                                 size_t slice_rows, float* __restrict__ out) {
  __shared__ float part[kPass][8][33];
  const size_t j = size_t(blockIdx.x) * 32 + threadIdx.x;
  const size_t begin = size_t(blockIdx.y) * slice_rows;
  const size_t end = begin + slice_rows < n ? begin + slice_rows : n;
  float acc[kPass] = {};
  if (j < m) {
#pragma unroll 4
    for (size_t i = begin + threadIdx.y; i < end; i += 8) {
      const float x = __ldg(M + i * m + j);
#pragma unroll
      for (int c = 0; c < kPass; ++c) {
        if (c < kr) acc[c] += __ldg(Pt + (k0 + c) * n + i) * x;
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kPass; ++c) part[c][threadIdx.y][threadIdx.x] = acc[c];
  __syncthreads();
  if (threadIdx.y == 0 && j < m) {
    for (int c = 0; c < kr; ++c) {
      float s = 0;
      for (int y = 0; y < 8; ++y) s += part[c][y][threadIdx.x];
      out[(size_t(blockIdx.y) * kr + c) * m + j] = s;
    }
  }
}

// Qt[k0 + c][j] = sum over slices, in slice order.
__global__ void sum_slices_kernel(const float* __restrict__ part, size_t slices, size_t m, int kr,
                                  float* __restrict__ Qt) {
  const size_t total = size_t(kr) * m;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t t = size_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += stride) {
    const size_t c = t / m, j = t % m;
    float s = 0;
    for (size_t sl = 0; sl < slices; ++sl) s += part[(sl * kr + c) * m + j];
    Qt[t] = s;
  }
}

// M[i][j] = sum_k Pt[k][i] * Qt[k][j], k in order, rounded as the CPU does.
// A thread owns one column: its r values of Qt stay in registers (r <= 8)
// while it walks rows.
template <bool kRegisters>
__global__ void expand_kernel(const float* __restrict__ Pt, const float* __restrict__ Qt, size_t n,
                              size_t m, int r, float* __restrict__ M) {
  const size_t j = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= m) return;
  float q[8];
  if (kRegisters) {
#pragma unroll
    for (int k = 0; k < 8; ++k) q[k] = k < r ? Qt[size_t(k) * m + j] : 0.0f;
  }
  for (size_t i = blockIdx.y; i < n; i += gridDim.y) {
    float acc = 0.0f;
    if (kRegisters) {
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        if (k < r) acc = mul_add_rounded(acc, __ldg(Pt + size_t(k) * n + i), q[k]);
      }
    } else {
      for (int k = 0; k < r; ++k) {
        acc = mul_add_rounded(acc, __ldg(Pt + size_t(k) * n + i), __ldg(Qt + size_t(k) * m + j));
      }
    }
    M[i * m + j] = acc;
  }
}

// The residual of PowerSGD's error feedback (powersgd_residual).
__global__ void residual_kernel(const float* __restrict__ input, const float* __restrict__ approx,
                                float share, size_t n, float* __restrict__ error) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    error[i] = kernels::powersgd_residual(input[i], approx[i], share);
  }
}

__global__ void add_kernel(float* __restrict__ x, const float* __restrict__ y, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    x[i] = x[i] + y[i];
  }
}

}  // namespace

size_t lowrank_scratch_bytes() {
  // With more than one slice, chunks < kTargetBlocks and slices <=
  // ceil(kTargetBlocks / chunks), so slices * m <= (kTargetBlocks + chunks)
  // * columns < 2 * kTargetBlocks * 128 (slices_for).
  return size_t(2) * kTargetBlocks * 128 * kPass * sizeof(float);
}

void lowrank_project(const float* M, size_t n, size_t m, const float* Qt, size_t r, float* Pt,
                     void* stream) {
  if (n == 0 || r == 0) return;
  if (m == 0) {
    cudaMemsetAsync(Pt, 0, r * n * sizeof(float), as_stream(stream));
    check("lowrank_project");
    return;
  }
  const size_t blocks = std::min<size_t>((n + kRowsPerBlock - 1) / kRowsPerBlock, 65535);
  const bool vec = m % 4 == 0 && aligned16(M) && aligned16(Qt);  // Note [16-byte paths]
  for (size_t k0 = 0; k0 < r; k0 += kPass) {
    const int kr = int(std::min<size_t>(kPass, r - k0));
    if (vec) {
      project_vec_kernel<<<unsigned(blocks), kThreads, 0, as_stream(stream)>>>(M, n, m, Qt, k0, kr, Pt);
    } else {
      project_kernel<<<unsigned(blocks), kThreads, 0, as_stream(stream)>>>(M, n, m, Qt, k0, kr, Pt);
    }
  }
  check("lowrank_project");
}

void lowrank_project_transposed(const float* M, size_t n, size_t m, const float* Pt, size_t r,
                                float* Qt, void* scratch, void* stream) {
  if (m == 0 || r == 0) return;
  if (n == 0) {
    cudaMemsetAsync(Qt, 0, r * m * sizeof(float), as_stream(stream));
    check("lowrank_project_transposed");
    return;
  }
  // Note [16-byte paths]; Qt + k0 * m and the scratch stay aligned.
  const bool vec = m % 4 == 0 && aligned16(M) && aligned16(Qt) && aligned16(scratch);
  const size_t columns = vec ? 128 : 32;
  const size_t slices = slices_for(n, m, columns);
  const size_t slice_rows = (n + slices - 1) / slices;
  const dim3 grid(unsigned((m + columns - 1) / columns), unsigned(slices));
  const dim3 block = vec ? dim3(kThreads) : dim3(32, 8);
  auto launch = [&](size_t k0, int kr, float* out) {
    if (vec) {
      project_t_vec_kernel<<<grid, block, 0, as_stream(stream)>>>(M, n, m, Pt, k0, kr, slice_rows, out);
    } else {
      project_t_kernel<<<grid, block, 0, as_stream(stream)>>>(M, n, m, Pt, k0, kr, slice_rows, out);
    }
  };
  for (size_t k0 = 0; k0 < r; k0 += kPass) {
    const int kr = int(std::min<size_t>(kPass, r - k0));
    if (slices == 1) {
      launch(k0, kr, Qt + k0 * m);
    } else {
      auto* part = static_cast<float*>(scratch);
      launch(k0, kr, part);
      sum_slices_kernel<<<grid_for(size_t(kr) * m, kThreads), kThreads, 0, as_stream(stream)>>>(
          part, slices, m, kr, Qt + k0 * m);
    }
  }
  check("lowrank_project_transposed");
}

void lowrank_expand(const float* Pt, const float* Qt, size_t n, size_t m, size_t r, float* M,
                    void* stream) {
  lowrank_expand_rows(Pt, Qt, n, m, r, M, kExpandRows, stream);
}

void lowrank_expand_rows(const float* Pt, const float* Qt, size_t n, size_t m, size_t r, float* M,
                         int rows_per_iteration, void* stream) {
  if (rows_per_iteration != 1 && rows_per_iteration != 8) rows_per_iteration = kExpandRows;
  if (n == 0 || m == 0) return;
  if (r == 0) {
    cudaMemsetAsync(M, 0, n * m * sizeof(float), as_stream(stream));
    check("lowrank_expand");
    return;
  }
  if (r <= 8 && m % 4 == 0 && aligned16(M) && aligned16(Qt)) {  // Note [16-byte paths]
    // Note [rows in flight]: ~4096 blocks, each a contiguous range of rows
    // (a multiple of the rows per iteration where n allows).
    const size_t cols = (m / 4 + kThreads - 1) / kThreads;
    const size_t groups = std::min<size_t>(65535, std::max<size_t>(1, 4096 / cols));
    const size_t step = size_t(rows_per_iteration);
    const size_t per_block = std::max<size_t>(step, ((n + groups - 1) / groups + step - 1) / step * step);
    const dim3 grid(unsigned(cols), unsigned((n + per_block - 1) / per_block));
    if (rows_per_iteration == 1) {
      expand_vec_kernel<1><<<grid, kThreads, 0, as_stream(stream)>>>(Pt, Qt, n, m, int(r), per_block, M);
    } else if (rows_per_iteration == 8) {
      expand_vec_kernel<8><<<grid, kThreads, 0, as_stream(stream)>>>(Pt, Qt, n, m, int(r), per_block, M);
    } else {
      expand_vec_kernel<kExpandRows><<<grid, kThreads, 0, as_stream(stream)>>>(Pt, Qt, n, m, int(r),
                                                                             per_block, M);
    }
    check("lowrank_expand");
    return;
  }
  // Enough row groups that the device is full; each thread walks
  // n / grid.y rows of its column.
  const size_t cols = (m + kThreads - 1) / kThreads;
  const size_t rows = std::min<size_t>(n, std::max<size_t>(1, 2048 / cols));
  const dim3 grid(unsigned(cols), unsigned(std::min<size_t>(rows, 65535)));
  if (r <= 8) {
    expand_kernel<true><<<grid, kThreads, 0, as_stream(stream)>>>(Pt, Qt, n, m, int(r), M);
  } else {
    expand_kernel<false><<<grid, kThreads, 0, as_stream(stream)>>>(Pt, Qt, n, m, int(r), M);
  }
  check("lowrank_expand");
}

void powersgd_residual(const float* input, const float* approx, float share, size_t n,
                       float* error, void* stream) {
  if (n == 0) return;
  residual_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(input, approx, share,
                                                                            n, error);
  check("powersgd_residual");
}

void add(float* x, const float* y, size_t n, void* stream) {
  if (n == 0) return;
  add_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(x, y, n);
  check("add");
}

}  // namespace gradwire::kernels::cuda
