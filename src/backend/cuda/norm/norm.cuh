// The norm family's launchers (norm.cu): RMSNorm of rows, the q/k head
// norms in one launch, and the residual add + RMSNorm. Each takes device
// pointers, sizes and the LaunchCtx and checks its launch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/gpu.h"
#include "core/dtype.h"

namespace rf::gpu {

// out = x / rms(x) * w per row; x and out f16 or f32.
void rms_norm(const void* x, DType in_type, const float* w, void* out, DType out_type, int rows, int cols, float eps,
              const LaunchCtx& ctx);
// Two f16 RMSNorms of rows of width cols in one launch (q and k head norms).
void rms_norm_pair_f16(const void* a, const float* wa, void* a_out, int rows_a, const void* b, const float* wb,
                       void* b_out, int rows_b, int cols, float eps, const LaunchCtx& ctx);
// x (f32) += y (f16; with wy, rms_norm(y) * wy rounded to f16), then
// out = rms_norm(x) * w (f16 or f32), per row.
void add_rms_norm(float* x, const void* y, const float* wy, const float* w, void* out, DType out_type, int rows,
                  int cols, float eps, const LaunchCtx& ctx);

}  // namespace rf::gpu
