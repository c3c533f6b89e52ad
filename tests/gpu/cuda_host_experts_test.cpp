// Experts in host memory (--cpu-moe; backend/cuda/moe/host_experts.h): the
// CUDA backend's moe_ffn over host-resident expert weights against the CPU
// backend's expert FFN on the same f16-rounded activations (plain and
// quantized formats, gpt-oss's biases and clamped SwiGLU, 1 to 128 tokens);
// the same call recorded into a graph and replayed on new inputs, with eager
// calls of another size in between; an expert id out of range reported by
// the next synchronize, not a crash; whole models with every layer's or the
// first layer's experts on the host against the CPU backend, their decode
// steps through captured graphs. Batches large enough copy the layer's
// experts to the device: bit for bit the device-resident experts' result.
#include <gtest/gtest.h>

#include <random>

#include "backend/cpu/cpu_qdot.h"
#include "core/fp16.h"
#include "gpu/f16_sensitivity.h"
#include "gpu/gpu_test_util.h"
#include "gpu/routing_margin.h"
#include "gguf/reader.h"
#include "model/runner.h"

namespace rf {
namespace {

struct HostCase {
  DType gate_type, down_type;
  int n_expert, k, d, ff;
  bool oai = false;  // biases and the clamped SwiGLU
};

// Host-resident experts and what the CPU needs to run them.
struct HostExpertSet {
  std::vector<uint8_t> gate, up, down;
  std::vector<float> gate_bias, up_bias, down_bias;
  ExpertWeights w;
  MoeParams p;
};

HostExpertSet make_host_experts(const HostCase& c, std::mt19937& rng) {
  HostExpertSet s;
  const int E = c.n_expert;
  auto quantized = [&](DType t, int rows, int cols, std::vector<uint8_t>& bytes) {
    const auto f = test::randn(size_t(rows) * cols, rng, 0.2f);
    bytes.resize(row_bytes(t, uint64_t(cols)) * size_t(rows));
    test::quantize_rows(t, f.data(), rows, cols, bytes.data());
    return make_tensor(bytes.data(), t, cols, rows);
  };
  s.w.gate = quantized(c.gate_type, E * c.ff, c.d, s.gate);
  s.w.up = quantized(c.gate_type, E * c.ff, c.d, s.up);
  s.w.down = quantized(c.down_type, E * c.d, c.ff, s.down);
  s.w.n_expert = E;
  if (c.oai) {
    s.gate_bias = test::randn(size_t(E) * c.ff, rng, 0.5f);
    s.up_bias = test::randn(size_t(E) * c.ff, rng, 0.5f);
    s.down_bias = test::randn(size_t(E) * c.d, rng, 0.5f);
    s.w.gate_bias = make_tensor(s.gate_bias.data(), DType::F32, c.ff, E);
    s.w.up_bias = make_tensor(s.up_bias.data(), DType::F32, c.ff, E);
    s.w.down_bias = make_tensor(s.down_bias.data(), DType::F32, c.d, E);
  }
  s.p.n_expert = E;
  s.p.n_used = c.k;
  s.p.n_ff = c.ff;
  s.p.act = c.oai ? Activation::SiLUClampedOai : Activation::SiLU;
  return s;
}

// n tokens' activations (f16-exact), ids and weights (routed on the host).
struct Inputs {
  std::vector<float> x, weights;
  std::vector<int32_t> ids;
};

Inputs make_inputs(int n, const HostCase& c, const MoeParams& p, std::mt19937& rng) {
  Inputs in;
  in.x = test::round_f16(test::randn(size_t(n) * c.d, rng));
  auto logits = test::randn(size_t(n) * c.n_expert, rng, 2.0f);
  in.ids.resize(size_t(n) * c.k);
  in.weights.resize(size_t(n) * c.k);
  Tensor tl = make_tensor(logits.data(), DType::F32, c.n_expert, n);
  Tensor ti = make_tensor(in.ids.data(), DType::I32, c.k, n), tw = make_tensor(in.weights.data(), DType::F32, c.k, n);
  cpu::moe_route(tl, p, ti, tw);
  return in;
}

// The CPU backend's expert FFN (its fast kernels, as the host path runs).
std::vector<float> cpu_reference(const HostExpertSet& s, const Inputs& in, int n, int d) {
  static ThreadPool pool(2);
  cpu::MoeScratch scratch;
  scratch.reserve(test::moe_limits(n, s.p.n_expert, s.p.n_used, s.p.n_ff, d));
  std::vector<float> out(size_t(n) * d);
  Tensor to = make_tensor(out.data(), DType::F32, d, n);
  cpu::moe_ffn(pool, make_tensor(const_cast<float*>(in.x.data()), DType::F32, d, n),
               make_tensor(const_cast<int32_t*>(in.ids.data()), DType::I32, s.p.n_used, n),
               make_tensor(const_cast<float*>(in.weights.data()), DType::F32, s.p.n_used, n), s.w, s.p, to, scratch,
               cpu::best_kernels());
  return out;
}

// Device buffers for up to n tokens.
struct DeviceIo {
  Backend& gpu;
  void *x, *ids, *weights, *out;
  DeviceIo(Backend& g, int n, const HostCase& c)
      : gpu(g),
        x(g.alloc(size_t(n) * c.d * 2, "x")),
        ids(g.alloc(size_t(n) * c.k * 4, "ids")),
        weights(g.alloc(size_t(n) * c.k * 4, "weights")),
        out(g.alloc(size_t(n) * c.d * 2, "out")) {}
  ~DeviceIo() {
    for (void* p : {x, ids, weights, out}) gpu.free(p);
  }
  void put(const Inputs& in) {
    const auto xh = test::to_f16(in.x);
    gpu.copy_to_device(x, xh.data(), xh.size() * 2);
    gpu.copy_to_device(ids, in.ids.data(), in.ids.size() * 4);
    gpu.copy_to_device(weights, in.weights.data(), in.weights.size() * 4);
  }
  void run(CudaBackend& g, const HostExpertSet& s, int n, int d) {
    Tensor tx = make_tensor(x, DType::F16, d, n, DeviceKind::CUDA);
    Tensor ti = make_tensor(ids, DType::I32, s.p.n_used, n, DeviceKind::CUDA);
    Tensor tw = make_tensor(weights, DType::F32, s.p.n_used, n, DeviceKind::CUDA);
    Tensor to = make_tensor(out, DType::F16, d, n, DeviceKind::CUDA);
    g.moe_ffn(tx, ti, tw, s.w, s.p, to);
  }
  std::vector<float> get(int n, int d) { return test::from_f16(test::download<uint16_t>(gpu, out, size_t(n) * d)); }
};

BackendLimits host_limits(int max_tokens, const HostCase& c) {
  BackendLimits lim = test::moe_limits(max_tokens, c.n_expert, c.k, c.ff, c.d);
  lim.host_experts = true;
  return lim;
}

class CudaHostExperts : public ::testing::TestWithParam<HostCase> {};

// The result is the CPU's rounded to f16 (the activations are f16 on both):
// a relative L2 of ~3e-4; allowed 2e-3.
TEST_P(CudaHostExperts, MatchesTheCpuBackend) {
  RF_REQUIRE_GPU();
  const HostCase c = GetParam();
  std::mt19937 rng(23 + int(c.gate_type));
  auto gpu = test::make_gpu();
  gpu->reserve(host_limits(128, c));
  const HostExpertSet s = make_host_experts(c, rng);
  DeviceIo io(*gpu, 128, c);
  for (const int n : {1, 3, 40, 128}) {
    const Inputs in = make_inputs(n, c, s.p, rng);
    io.put(in);
    io.run(*gpu, s, n, c.d);
    const double err = test::rel_l2(io.get(n, c.d), cpu_reference(s, in, n, c.d));
    std::printf("  %d tokens: rel. L2 %.2e\n", n, err);
    EXPECT_LT(err, 2e-3) << n << " tokens";
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaHostExperts,
                         ::testing::Values(HostCase{DType::F16, DType::F16, 8, 2, 256, 512},
                                           HostCase{DType::Q4_K, DType::Q6_K, 16, 4, 512, 256},
                                           HostCase{DType::Q8_0, DType::Q8_0, 8, 8, 256, 768},
                                           HostCase{DType::MXFP4, DType::MXFP4, 32, 4, 2880, 256, true},
                                           HostCase{DType::IQ4_XS, DType::IQ4_NL, 8, 2, 256, 512}),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.gate_type)) + "_" +
                                  dtype_name(info.param.down_type) + "_e" + std::to_string(info.param.n_expert) +
                                  (info.param.oai ? "_oai" : "");
                         });

// Recorded into a graph: each replay reads the inputs of its time; eager
// calls of another token count between the replays change nothing of it.
TEST(CudaHostExpertsGraph, ReplaysReadNewInputs) {
  RF_REQUIRE_GPU();
  const HostCase c{DType::Q4_K, DType::Q6_K, 16, 4, 256, 256};
  std::mt19937 rng(41);
  auto gpu = test::make_gpu();
  gpu->reserve(host_limits(64, c));
  const HostExpertSet s = make_host_experts(c, rng);
  DeviceIo graphed(*gpu, 4, c), eager(*gpu, 64, c);
  for (int rep = 0; rep < 3; ++rep) {
    const Inputs in = make_inputs(4, c, s.p, rng), other = make_inputs(9 + rep, c, s.p, rng);
    graphed.put(in);
    gpu->run_graph(7, [&] { graphed.run(*gpu, s, 4, c.d); });
    eager.put(other);
    eager.run(*gpu, s, 9 + rep, c.d);
    EXPECT_LT(test::rel_l2(graphed.get(4, c.d), cpu_reference(s, in, 4, c.d)), 2e-3) << "replay " << rep;
    EXPECT_LT(test::rel_l2(eager.get(9 + rep, c.d), cpu_reference(s, other, 9 + rep, c.d)), 2e-3) << "eager " << rep;
  }
  gpu->clear_graphs();
}

// Batches of Tuning::host_experts_upload_tokens tokens and more, outside
// graphs, copy the layer's experts to the device and run the device's
// kernels: bit for bit what the same experts loaded onto the device give.
// Smaller batches, and graphs, stay on the host (the CPU's bound). The
// experts' memory page-locked (Backend::pin_host_memory) changes nothing.
TEST(CudaHostExpertsCopied, LargeBatchesRunOnTheDeviceCopy) {
  RF_REQUIRE_GPU();
  for (const HostCase& c : {HostCase{DType::Q4_K, DType::Q6_K, 16, 4, 512, 256},
                            HostCase{DType::MXFP4, DType::MXFP4, 32, 4, 2880, 256, true}}) {
    std::mt19937 rng(47);
    auto gpu = test::make_gpu();
    const HostExpertSet s = make_host_experts(c, rng);
    BackendLimits lim = host_limits(128, c);
    lim.host_expert_bytes = s.w.copy_bytes();
    gpu->reserve(lim);
    std::vector<std::shared_ptr<const void>> pins;
    for (const Tensor* t : s.w.tensors())
      if (t->data) pins.push_back(gpu->pin_host_memory(t->data, t->bytes()));
    for (const auto& pin : pins) EXPECT_TRUE(pin) << "page-locking a test buffer failed";
    ExpertWeights on_device = s.w;
    for (Tensor* t : on_device.tensors())
      if (t->data) *t = gpu->load_weight(*t, "expert tensor");
    DeviceIo io(*gpu, 128, c);
    const int upload = gpu->tuning().host_experts_upload_tokens;
    ASSERT_GT(upload, 1);
    for (const int n : {upload - 1, upload, 128}) {
      const Inputs in = make_inputs(n, c, s.p, rng);
      io.put(in);
      io.run(*gpu, s, n, c.d);
      const auto from_host = io.get(n, c.d);
      if (n < upload) {
        EXPECT_LT(test::rel_l2(from_host, cpu_reference(s, in, n, c.d)), 2e-3) << n << " tokens";
        continue;
      }
      HostExpertSet d = s;
      d.w = on_device;
      io.run(*gpu, d, n, c.d);
      EXPECT_EQ(from_host, io.get(n, c.d)) << dtype_name(c.gate_type) << ", " << n << " tokens";
      // Recorded into a graph, the same batch runs on the host.
      gpu->run_graph(9, [&] { io.run(*gpu, s, n, c.d); });
      EXPECT_LT(test::rel_l2(io.get(n, c.d), cpu_reference(s, in, n, c.d)), 2e-3) << n << " tokens, graph";
      gpu->clear_graphs();
    }
  }
}

// A model file's mapped pages (gguf::File, read-only) page-lock, and
// copies from them carry the file's bytes.
TEST(CudaHostExpertsCopied, PinsAModelFilesPages) {
  RF_REQUIRE_GPU();
  RF_REQUIRE_TESTDATA("arch/tiny-qwen3moe.gguf");
  auto gpu = test::make_gpu();
  const auto file = gguf::File::open(test::testdata_path("arch/tiny-qwen3moe.gguf"));
  const gguf::TensorInfo* t = file->find_tensor("blk.0.ffn_up_exps.weight");
  ASSERT_NE(t, nullptr);
  const uint8_t* data = file->tensor_data(*t);
  const std::vector<uint8_t> want(data, data + t->n_bytes);
  const auto pin = gpu->pin_host_memory(data, t->n_bytes);
  EXPECT_TRUE(pin);
  void* dst = gpu->alloc(t->n_bytes, "copy");
  gpu->copy_to_device(dst, data, t->n_bytes);
  EXPECT_EQ(test::download<uint8_t>(*gpu, dst, t->n_bytes), want);
  gpu->free(dst);
}

// An expert id out of range fails the call the host function runs; the
// backend says so at its next synchronize and keeps working.
TEST(CudaHostExpertsGraph, BadExpertIdIsReportedNotFatal) {
  RF_REQUIRE_GPU();
  const HostCase c{DType::Q8_0, DType::Q8_0, 8, 2, 256, 256};
  std::mt19937 rng(43);
  auto gpu = test::make_gpu();
  gpu->reserve(host_limits(8, c));
  const HostExpertSet s = make_host_experts(c, rng);
  DeviceIo io(*gpu, 8, c);
  Inputs in = make_inputs(3, c, s.p, rng);
  in.ids[4] = 99;
  io.put(in);
  io.run(*gpu, s, 3, c.d);
  try {
    gpu->synchronize();
    ADD_FAILURE() << "no error for expert 99 of 8";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chose expert 99"), std::string::npos) << e.what();
  }
  in = make_inputs(3, c, s.p, rng);
  io.put(in);
  io.run(*gpu, s, 3, c.d);
  EXPECT_LT(test::rel_l2(io.get(3, c.d), cpu_reference(s, in, 3, c.d)), 2e-3);
}

// Whole models: every layer's experts (and only those up to the first MoE layer) in host
// memory, a 40-token prefill and decode steps through graphs, against the
// CPU backend (the bound of CudaModelVsCpu: f16_tolerance).
class CudaHostExpertModel : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaHostExpertModel, LogitsMatchCpu) {
  RF_REQUIRE_GPU();
  const std::string rel = GetParam();
  RF_REQUIRE_TESTDATA(rel);
  const std::string path = test::testdata_path(rel);
  constexpr int kSteps = 6;
  test::RoutingMarginCpu cpu(2);
  std::mt19937 rng(5);
  const std::vector<int32_t> prompt = test::clear_routing_prompt(path, cpu, rng, 40, kSteps, 400);
  ASSERT_FALSE(prompt.empty()) << rel << ": no prompt with clear routing";
  const double tolerance = test::f16_tolerance(test::f16_sensitivity(path, prompt, kSteps));
  const int32_t first_moe = [&] {
    const ModelConfig cfg = test::ModelRunner(path, cpu).config();
    int32_t i = 0;
    while (i < cfg.n_layer && !cfg.is_moe_layer(i)) ++i;
    return i;
  }();
  // Every layer, then the first N layers up to the first with experts
  // (layers before it are dense: --n-cpu-moe counts layers, as llama.cpp's).
  for (const int32_t host_layers : {1 << 30, first_moe + 1}) {
    auto gpu = test::make_gpu();
    WeightPlacement placement;
    placement.host_expert_layers = host_layers;
    test::ModelRunner g(path, *gpu, 256, 8, 256, 16, KVCacheDType::Auto, 0, 0, placement), c(path, cpu);
    const int32_t moe_layers = [&] {
      int32_t m = 0;
      for (int32_t i = 0; i < g.n_layer(); ++i) m = g.config().is_moe_layer(i) ? i + 1 : m;
      return m;
    }();
    EXPECT_EQ(g.model().weights().host_expert_layers, std::min(host_layers, moe_layers));
    EXPECT_GT(g.model().weights().host_expert_bytes, 0u);
    g.warmup();
    test::ModelRunner::Seq sg, sc;
    sg.tokens = sc.tokens = prompt;
    for (int step = 0; step < kSteps; ++step) {
      const auto lg = g.step({&sg})[0];
      const auto lc = c.step({&sc})[0];
      const double err = test::rel_l2(lg, lc);
      std::printf("  %s, %d host layers, step %d: rel. L2 %.2e (bound %.2e)\n", rel.c_str(),
                  g.model().weights().host_expert_layers, step, err, tolerance);
      EXPECT_LT(err, tolerance) << rel << " step " << step;
      const int32_t next = test::ModelRunner::argmax(lc);
      sg.tokens.push_back(next);
      sc.tokens.push_back(next);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaHostExpertModel,
                         ::testing::Values("arch/tiny-qwen3moe.gguf", "arch/tiny-mixtral.gguf", "arch/tiny-gpt-oss.gguf",
                                           "arch/tiny-qwen35moe.gguf", "arch/tiny-glm4moe.gguf",
                                           "arch/tiny-gemma4moe.gguf"),
                         [](const auto& info) { return test::param_name(info.param); });

}  // namespace
}  // namespace rf
