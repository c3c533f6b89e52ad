// The table of op cases: every op's cases written once (shapes, types, edge
// cases), each run on the CPU against a naive double-precision reference
// (op_cases_cpu_test.cpp) and on each GPU backend against the CPU on the
// same inputs (tests/gpu/op_cases_gpu_test.cpp). A case fills its inputs
// from a seed, runs its op on any Backend (device buffers of that backend's
// activation, residual and KV types) and returns the outputs as f32 host
// vectors; its tolerances follow DESIGN.md's correctness ladder. The list
// of cases a backend does not run yet (kBackendGaps) is in op_cases.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/batch.h"
#include "core/activation.h"

namespace rf::test {

// How two outputs are compared: relative L2 error ||a - b|| / ||b||,
// normalized mean squared error (its square), or bit equality (token ids,
// copied rows).
enum class Metric { RelL2, Nmse, Exact };

struct Tolerance {
  Metric metric = Metric::RelL2;
  double bound = 0.0;
};

// DESIGN.md's ladder.
// f32 arithmetic: ~1e-6 (2e-6: sums of up to a few thousand f32 terms).
inline Tolerance tol_f32() { return {Metric::RelL2, 2e-6}; }
// f16/bf16 activations or outputs: ~1e-3 (2e-3: an f16 output's rounding
// is ~3e-4 of each value, and an op over f16 intermediates, such as
// attention's probabilities, rounds several times).
inline Tolerance tol_f16() { return {Metric::RelL2, 2e-3}; }
// A quantized matmul against the CPU's: NMSE 5e-4 (the GPU may quantize
// the activations to 8 bits, ~2e-5 NMSE, then rounds the output to f16).
inline Tolerance tol_quant_matmul() { return {Metric::Nmse, 5e-4}; }
inline Tolerance tol_exact() { return {Metric::Exact, 0.0}; }
// The CPU's fast matmul over a quantized weight against the double
// reference: it quantizes the activations to 8 bits (d = max/127 per 32 or
// 256 values, an NMSE of ~2e-5 to ~5e-5 on random rows); 2e-4 leaves room
// for ops that multiply two such products (GLU). Float weights (and
// F8_E4M3_ROW, read with f32 activations) stay at tol_f32.
inline Tolerance tol_cpu_fast_matmul(DType w) {
  const bool f32_act = w == DType::F32 || w == DType::F16 || w == DType::BF16 || w == DType::F8_E4M3_ROW;
  return f32_act ? tol_f32() : Tolerance{Metric::Nmse, 2e-4};
}

// The error of `got` against `want` by `metric` (Exact: the number of
// differing elements).
double op_error(Metric metric, const std::vector<float>& got, const std::vector<double>& want);

// A case's inputs: float arrays (activations f16-exact, so that every
// backend reads the same values), weights in their stored format, integer
// arrays, and the step's batch where the op reads one.
struct OpInputs {
  std::vector<std::vector<float>> f;
  std::vector<std::vector<uint8_t>> w;
  std::vector<std::vector<int32_t>> i;
  Batch batch;
};

using OpOutputs = std::vector<std::vector<float>>;
using RefOutputs = std::vector<std::vector<double>>;

struct OpCase {
  std::string name;  // op, shapes and types; letters, digits and '_' only (a test name)
  std::function<OpInputs(uint32_t seed)> inputs;
  // Runs the op on `be` (reserving what it needs) and reads the outputs back.
  std::function<OpOutputs(Backend& be, const OpInputs& in)> run;
  // The outputs in double precision, from the definition.
  std::function<RefOutputs(const OpInputs& in)> reference;
  Tolerance vs_reference = tol_f32();  // the CPU against reference
  Tolerance vs_cpu = tol_f16();        // another backend against the CPU
  // The CPU with CpuMatmul::Fast (8-bit activations for quantized weights)
  // against reference; bound < 0: as vs_reference.
  Tolerance vs_reference_fast = {Metric::RelL2, -1.0};
};

// Every case, in a fixed order.
const std::vector<OpCase>& op_cases();
// The seed a case's inputs are drawn from (a function of its name).
uint32_t op_case_seed(const OpCase& c);
// Why `backend` ("cuda") does not run case `name` yet, or null where it
// must: the visible list of gaps in op_cases.cpp.
const char* backend_gap(const std::string& backend, const std::string& name);

// Allocations on one backend for one run, freed with this object.
class DeviceBuffers {
 public:
  explicit DeviceBuffers(Backend& be) : be_(be) {}
  ~DeviceBuffers();
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;

  void* alloc(size_t bytes);
  // v as `type` (F32, F16 or BF16), [cols, rows].
  Tensor upload(const std::vector<float>& v, DType type, int64_t cols, int64_t rows);
  Tensor upload_i32(const std::vector<int32_t>& v, int64_t cols, int64_t rows);
  Tensor zeros(DType type, int64_t cols, int64_t rows);
  // A weight in its stored format through load_weight; f32 rows through load_f32.
  Tensor weight(const std::vector<uint8_t>& bytes, DType type, int64_t cols, int64_t rows);
  Tensor f32(const std::vector<float>& v, int64_t cols, int64_t rows = 1);
  // A paged KV layer of the backend's kv_type() holding k and v values
  // ([num_blocks * block_size slots, slot_stride] each; slot_stride 0:
  // n_kv * head_dim, else the layer's rows at the front of each slot:
  // KVLayer::slot_stride).
  KVLayer kv(const std::vector<float>& k, const std::vector<float>& v, int32_t num_blocks, int32_t block_size,
             int32_t n_kv, int32_t head_dim, int64_t slot_stride = 0);
  // n elements of `type` (F32, F16, BF16, I32) at p as floats.
  std::vector<float> read(const void* p, DType type, size_t n);
  std::vector<float> read(const Tensor& t) { return read(t.data, t.type, size_t(t.numel())); }

 private:
  Backend& be_;
  std::vector<void*> owned_;
};

// Limits for a step of up to `max_tokens` tokens (attention fields as given).
BackendLimits step_limits(int32_t max_tokens, int32_t max_seqs, int32_t max_blocks, int32_t n_heads,
                          int32_t head_dim, int32_t n_kv_heads);

// RoPE from its definition (op_cases_attention.cpp): the first n_rot dims
// of each of `heads` heads hd apart at x turned for position pos: pair
// (a, b) by theta = pos * base^(-i/n_rot) [/ ff[i/2]], linear or YaRN
// scaling.
void rope_ref(double* x, int heads, int hd, int pos, const RopeParams& p, const std::vector<float>& ff);

// act(gate) * up from the definition (GeGLU with ggml's f16 steps).
double glu_reference(Activation a, double gate, double up);

// The families of cases (op_cases_*.cpp).
void add_matmul_cases(std::vector<OpCase>& cases);
void add_elementwise_cases(std::vector<OpCase>& cases);
void add_attention_cases(std::vector<OpCase>& cases);
void add_moe_sample_cases(std::vector<OpCase>& cases);
void add_mla_cases(std::vector<OpCase>& cases);

}  // namespace rf::test
