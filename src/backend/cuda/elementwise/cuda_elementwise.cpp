// CudaBackend's elementwise ops: the embedding lookups, bias add, the gated
// activations, scale, soft-cap, the residual add (and the f16 sum) and the
// row gather, each a checked call of its launcher (elementwise.cuh).
#include "backend/cuda/cuda_backend.h"

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/elementwise/elementwise.cuh"

namespace rf {

void CudaBackend::embed(const Tensor& table, const StepMeta& m, Tensor& out) {
  OpTimer timer(profiler(), "embed");
  RF_CHECK(out.type == DType::F32 && out.cols() == table.cols(), "cuda embed: output must be f32 [n, embd]");
  gpu::embed_rows(table.type, table.data, table.row_bytes(), int(table.cols()), m.token_ids, m.n_tokens,
                  int(table.rows()), out.ptr<float>(), ctx());
}

void CudaBackend::embed_range(const Tensor& table, int64_t first, const StepMeta& m, Tensor& out) {
  OpTimer timer(profiler(), "embed");
  RF_CHECK(out.type == DType::F32 && out.cols() == table.cols(), "cuda embed_range: output must be f32 [n, embd]");
  gpu::embed_rows_range(table.type, table.data, table.row_bytes(), int(table.cols()), m.token_ids, m.n_tokens,
                        int(first), int(table.rows()), true, out.ptr<float>(), ctx());
}

void CudaBackend::add_bias(Tensor& x, const Tensor& bias) {
  RF_CHECK((x.type == DType::F16 || x.type == DType::F32) && bias.type == DType::F32 && bias.numel() == x.cols(),
           "cuda add_bias: f16 or f32 x [n, ", bias.numel(), "] and f32 bias expected, x is ", x.shape_string());
  OpTimer timer(profiler(), "add_bias");
  if (x.type == DType::F32) gpu::add_bias_f32(x.ptr<float>(), bias.ptr<float>(), x.rows(), int(x.cols()), ctx());
  else gpu::add_bias_f16(x.data, bias.ptr<float>(), x.rows(), int(x.cols()), ctx());
}

void CudaBackend::geglu(const Tensor& gate, const Tensor& up, Tensor& out) {
  RF_CHECK(gate.type == DType::F16 && up.type == DType::F16 && out.type == DType::F16, "cuda geglu: f16 only");
  RF_CHECK(gate.numel() == up.numel() && out.numel() >= gate.numel(), "cuda geglu: bad shapes");
  OpTimer timer(profiler(), "geglu");
  gpu::geglu(gate.data, up.data, out.data, gate.numel(), ctx());
}

void CudaBackend::scale(Tensor& x, float s) {
  RF_CHECK(x.type == DType::F32 || x.type == DType::F16, "cuda scale: f32 or f16 rows");
  OpTimer timer(profiler(), "scale");
  if (x.type == DType::F16) gpu::scale_f16(x.data, s, x.numel(), ctx());
  else gpu::scale_f32(x.ptr<float>(), s, x.numel(), ctx());
}

void CudaBackend::convert(const Tensor& x, Tensor& out) {
  RF_CHECK(x.numel() == out.numel() && (x.type == out.type || (x.type == DType::F32 && out.type == DType::F16)),
           "cuda convert: f32 to f16, or a copy, of one size (", dtype_name(x.type), " to ", dtype_name(out.type),
           ")");
  OpTimer timer(profiler(), "convert");
  if (x.type == out.type) copy_on_device(out.data, x.data, x.bytes());
  else gpu::f32_to_f16(x.ptr<float>(), out.data, x.numel(), ctx());
}

void CudaBackend::softcap(Tensor& x, float cap) {
  RF_CHECK(x.type == DType::F32 && cap > 0.0f, "cuda softcap: f32 and a positive cap");
  OpTimer timer(profiler(), "softcap");
  gpu::softcap_f32(x.ptr<float>(), cap, x.numel(), ctx());
}

void CudaBackend::swiglu_oai(const Tensor& gate, const Tensor& up, Tensor& out) {
  RF_CHECK(gate.type == DType::F16 && up.type == DType::F16 && out.type == DType::F16, "cuda swiglu_oai: f16 only");
  RF_CHECK(gate.numel() == up.numel() && out.numel() >= gate.numel(), "cuda swiglu_oai: bad shapes");
  OpTimer timer(profiler(), "swiglu_oai");
  gpu::glu(gate.data, up.data, out.data, gate.numel(), Activation::SiLUClampedOai, ctx());
}

void CudaBackend::swiglu(const Tensor& gate, const Tensor& up, Tensor& out) {
  RF_CHECK(gate.type == DType::F16 && up.type == DType::F16 && out.type == DType::F16, "cuda swiglu: f16 only");
  OpTimer timer(profiler(), "swiglu");
  gpu::swiglu(gate.data, up.data, out.data, gate.numel(), ctx());
}

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  if (a.type == DType::F16 && b.type == DType::F16 && out.type == DType::F16) {  // (the shared expert's sum)
    RF_CHECK(a.numel() == b.numel() && out.numel() >= a.numel(), "cuda add: f16 operands of different sizes");
    OpTimer timer(profiler(), "add");
    gpu::add_f16(a.data, b.data, out.data, a.numel(), ctx());
    return;
  }
  RF_CHECK(a.type == DType::F32 && out.data == a.data && b.type == DType::F16 && a.numel() == b.numel(),
           "cuda add: supports residual (f32) += f16 in place and f16 = f16 + f16");
  OpTimer timer(profiler(), "add");
  gpu::add_f16_to_f32(out.ptr<float>(), b.data, a.numel(), ctx());
}

void CudaBackend::gather_rows(const Tensor& x, const StepMeta& m, Tensor& out) {
  const size_t bytes = row_bytes(x.type, uint64_t(x.cols()));
  RF_CHECK((x.type == DType::F32 || x.type == DType::F16) && out.type == x.type && out.cols() == x.cols() &&
               out.rows() >= m.n_logits && bytes % 4 == 0,
           "cuda gather_rows: f32 or f16 rows of 4-byte words, the same on both sides");
  OpTimer timer(profiler(), "gather");
  gpu::gather_rows(x.data, m.logits_rows, m.n_logits, int(bytes / 4), out.data, ctx());
}

}  // namespace rf
