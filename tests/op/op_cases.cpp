// The table of op cases (op_cases.h): the registry, the list of cases a
// backend does not run yet, the error metrics and the device buffers the
// cases run on.
#include "op/op_cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"

namespace rf::test {

// The cases a backend does not run yet: (backend, case name prefix, why).
// A listed case must still fail there with an error (the GPU test checks
// it); when the op lands, its entry goes.
namespace {
struct Gap {
  const char* backend;
  const char* prefix;
  const char* why;
};
const std::vector<Gap> kBackendGaps = {
};
}  // namespace

const char* backend_gap(const std::string& backend, const std::string& name) {
  for (const Gap& g : kBackendGaps)
    if (backend == g.backend && name.rfind(g.prefix, 0) == 0) return g.why;
  return nullptr;
}

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> c;
    add_matmul_cases(c);
    add_elementwise_cases(c);
    add_attention_cases(c);
    add_moe_sample_cases(c);
    add_mla_cases(c);
    return c;
  }();
  return cases;
}

uint32_t op_case_seed(const OpCase& c) {
  uint32_t h = 2166136261u;  // FNV-1a of the name
  for (char ch : c.name) h = (h ^ uint8_t(ch)) * 16777619u;
  return h;
}

double op_error(Metric metric, const std::vector<float>& got, const std::vector<double>& want) {
  RF_CHECK(got.size() == want.size(), "op case: ", got.size(), " outputs, ", want.size(), " expected");
  if (metric == Metric::Exact) {
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i) bad += double(got[i]) != want[i];
    return double(bad);
  }
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = double(got[i]) - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  const double nmse = num / std::max(den, 1e-300);
  return metric == Metric::Nmse ? nmse : std::sqrt(nmse);
}

DeviceBuffers::~DeviceBuffers() {
  for (void* p : owned_) be_.free(p);
}

void* DeviceBuffers::alloc(size_t bytes) {
  void* p = be_.alloc(std::max<size_t>(bytes, 4), "op case buffer");
  owned_.push_back(p);
  return p;
}

Tensor DeviceBuffers::upload(const std::vector<float>& v, DType type, int64_t cols, int64_t rows) {
  RF_CHECK(v.size() == size_t(cols * rows), "op case: ", v.size(), " values for ", cols, " x ", rows);
  std::vector<uint8_t> host;
  if (type == DType::F32) {
    host.resize(v.size() * 4);
    std::memcpy(host.data(), v.data(), host.size());
  } else {
    RF_CHECK(type == DType::F16 || type == DType::BF16, "op case: cannot upload ", dtype_name(type));
    host.resize(v.size() * 2);
    auto* h = reinterpret_cast<uint16_t*>(host.data());
    for (size_t i = 0; i < v.size(); ++i) h[i] = type == DType::F16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
  }
  void* p = alloc(host.size());
  be_.copy_to_device(p, host.data(), host.size());
  return make_tensor(p, type, cols, rows, be_.device());
}

Tensor DeviceBuffers::upload_i32(const std::vector<int32_t>& v, int64_t cols, int64_t rows) {
  void* p = alloc(v.size() * 4);
  be_.copy_to_device(p, v.data(), v.size() * 4);
  return make_tensor(p, DType::I32, cols, rows, be_.device());
}

Tensor DeviceBuffers::zeros(DType type, int64_t cols, int64_t rows) {
  const size_t bytes = row_bytes(type, uint64_t(cols)) * size_t(rows);
  void* p = alloc(bytes);
  const std::vector<uint8_t> z(bytes, 0);
  be_.copy_to_device(p, z.data(), bytes);
  return make_tensor(p, type, cols, rows, be_.device());
}

Tensor DeviceBuffers::weight(const std::vector<uint8_t>& bytes, DType type, int64_t cols, int64_t rows) {
  Tensor host = make_tensor(const_cast<uint8_t*>(bytes.data()), type, cols, rows);
  Tensor t = be_.load_weight(host, "op case weight");
  if (t.data != host.data) owned_.push_back(t.data);
  return t;
}

Tensor DeviceBuffers::f32(const std::vector<float>& v, int64_t cols, int64_t rows) {
  Tensor t = be_.load_f32(v.data(), cols, rows, "op case f32");
  owned_.push_back(t.data);
  return t;
}

KVLayer DeviceBuffers::kv(const std::vector<float>& k, const std::vector<float>& v, int32_t num_blocks,
                          int32_t block_size, int32_t n_kv, int32_t head_dim, int64_t slot_stride) {
  const DType type = be_.kv_type();
  const int64_t slots = int64_t(num_blocks) * block_size;
  const int64_t width = slot_stride > 0 ? slot_stride : int64_t(n_kv) * head_dim;
  KVLayer c;
  c.k = upload(k, type, width, slots).data;
  c.v = upload(v, type, width, slots).data;
  c.type = type;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  c.n_kv_heads = n_kv;
  c.head_dim = head_dim;
  if (width != int64_t(n_kv) * head_dim) c.slot_stride = width;  // (scales: f16 and f32 caches have none)
  return c;
}

std::vector<float> DeviceBuffers::read(const void* p, DType type, size_t n) {
  std::vector<float> out(n);
  if (type == DType::F32) {
    be_.copy_to_host(out.data(), p, n * 4);
  } else if (type == DType::I32) {
    std::vector<int32_t> h(n);
    be_.copy_to_host(h.data(), p, n * 4);
    for (size_t i = 0; i < n; ++i) out[i] = float(h[i]);
  } else {
    RF_CHECK(type == DType::F16 || type == DType::BF16, "op case: cannot read ", dtype_name(type));
    std::vector<uint16_t> h(n);
    be_.copy_to_host(h.data(), p, n * 2);
    for (size_t i = 0; i < n; ++i) out[i] = type == DType::F16 ? f16_to_f32(h[i]) : bf16_to_f32(h[i]);
  }
  return out;
}

BackendLimits step_limits(int32_t max_tokens, int32_t max_seqs, int32_t max_blocks, int32_t n_heads,
                          int32_t head_dim, int32_t n_kv_heads) {
  BackendLimits lim;
  lim.max_tokens = max_tokens;
  lim.max_seqs = max_seqs;
  lim.max_blocks_per_seq = max_blocks;
  lim.max_logits = max_tokens;
  lim.vocab = 256;
  lim.max_weight_elems = int64_t(1) << 20;
  lim.n_heads = n_heads;
  lim.head_dim = head_dim;
  lim.n_kv_heads = n_kv_heads;
  lim.n_embd = 256;
  lim.vocab_total = 256;
  return lim;
}

}  // namespace rf::test
