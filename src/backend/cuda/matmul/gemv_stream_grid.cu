// The streaming GEMV's launches for the grid i-quants (IQ1_S, IQ1_M,
// IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S; gemv_stream_grid.cuh has their
// chunks): two rows per warp, the row rules of the other formats. A
// translation unit of its own so that these kernels compile beside
// gemv_stream.cu's.
#include "backend/cuda/matmul/gemv_stream_grid.cuh"
#include "backend/cuda/matmul/gemv_stream_kernel.cuh"

namespace rf::gpu {

bool stream_grid_format(DType t) {
  switch (t) {
    case DType::IQ1_S:
    case DType::IQ1_M:
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S: return true;
    default: return false;
  }
}

void launch_stream_grid(DType w_type, const GemvArgs& a, DType out_type, bool paired, int m, int grid_y,
                        const LaunchCtx& ctx) {
  switch (w_type) {
    case DType::IQ1_S: return launch_stream_rows_n<DType::IQ1_S, 2>(a, out_type, paired, m, grid_y, ctx);
    case DType::IQ1_M: return launch_stream_rows_n<DType::IQ1_M, 2>(a, out_type, paired, m, grid_y, ctx);
    case DType::IQ2_XXS: return launch_stream_rows_n<DType::IQ2_XXS, 2>(a, out_type, paired, m, grid_y, ctx);
    case DType::IQ2_XS: return launch_stream_rows_n<DType::IQ2_XS, 2>(a, out_type, paired, m, grid_y, ctx);
    case DType::IQ2_S: return launch_stream_rows_n<DType::IQ2_S, 2>(a, out_type, paired, m, grid_y, ctx);
    case DType::IQ3_XXS: return launch_stream_rows_n<DType::IQ3_XXS, 2>(a, out_type, paired, m, grid_y, ctx);
    case DType::IQ3_S: return launch_stream_rows_n<DType::IQ3_S, 2>(a, out_type, paired, m, grid_y, ctx);
    default: RF_CHECK(false, "launch_stream_grid: ", dtype_name(w_type), " is not a grid i-quant");
  }
}

}  // namespace rf::gpu
