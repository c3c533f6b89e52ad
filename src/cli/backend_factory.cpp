// Backend selection and KV sizing for the CLI commands.
#include "cli/backend_factory.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "core/log.h"
#ifdef ROCMFORGE_HAVE_GPU
#include "backend/cuda/cuda_backend.h"
#endif

namespace rf::cli {

namespace {
// "hip" is another name for "rocm".
std::string canonical_device(const std::string& d) { return d == "hip" ? "rocm" : d; }
}  // namespace

void add_backend_options(CLI::App& cmd, BackendOptions& o) {
  cmd.add_option("--device", o.device, "Backend: auto, cpu, cuda (NVIDIA) or rocm (AMD; alias hip)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "rocm", "hip"}))
      ->capture_default_str();
  cmd.add_option("-t,--threads", o.threads, "CPU threads (0: all cores)")->check(CLI::Range(0, 1024));
  cmd.add_option("--gpu-memory-utilization", o.gpu_memory_utilization,
                 "Share of GPU memory for weights, workspace and KV cache")
      ->check(CLI::Range(0.05, 0.99))
      ->capture_default_str();
  cmd.add_option("--tensor-parallel-size,--tp", o.tensor_parallel,
                 "Split the model over this many ranks (Megatron-style tensor parallelism)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
}

namespace {
std::unique_ptr<Backend> make_one_backend(const BackendOptions& o, size_t cpu_threads) {
  std::string device = canonical_device(o.device);
#ifdef ROCMFORGE_HAVE_GPU
  // The GPU backend of this build speaks one vendor: cuda or rocm.
  const std::string vendor = CudaBackend::vendor();
  if (device == "auto") device = CudaBackend::device_count() > 0 ? vendor : "cpu";
  if (device == vendor) {
    RF_CHECK(o.tensor_parallel == 1, "tensor parallelism on ", vendor,
             " needs NCCL communicators, which this build does not have yet; --tensor-parallel-size ",
             o.tensor_parallel, " runs on --device cpu");
    auto b = std::make_unique<CudaBackend>();
    log_info("backend: ", b->name());
    return b;
  }
  if (device != "cpu")
    fail("this build's GPU backend is ", vendor, ", not ", device, " (build with the ",
         device == "rocm" ? "hip" : "cuda", " preset)");
#else
  if (device == "cuda") fail("this build has no CUDA backend (build with the cuda preset)");
  if (device == "rocm") fail("this build has no ROCm backend (build with the hip preset)");
  if (device == "auto") device = "cpu";
#endif
  auto b = std::make_unique<CpuBackend>(cpu_threads);
  log_info("backend: ", b->name());
  return b;
}
}  // namespace

BackendSet make_backends(const BackendOptions& o) {
  const int n = o.tensor_parallel;
  RF_CHECK(n >= 1, "--tensor-parallel-size must be >= 1");
  BackendSet s;
  // CPU ranks share the cores: each gets its part of them.
  const size_t cores = o.threads > 0 ? size_t(o.threads) : size_t(std::max(1u, std::thread::hardware_concurrency()));
  const size_t per_rank = n > 1 ? std::max<size_t>(1, cores / size_t(n)) : size_t(o.threads);
  for (int r = 0; r < n; ++r) {
    s.owned.push_back(make_one_backend(o, per_rank));
    s.ranks.push_back(s.owned.back().get());
  }
  if (n > 1) {
    s.loopback = std::make_unique<LoopbackGroup>(n);
    for (int r = 0; r < n; ++r) s.comms.push_back(&s.loopback->rank(r));
    log_info("tensor parallel: ", n, " ranks of ", s.first().name(), " joined in-process");
  }
  return s;
}

std::string BackendSet::name() const {
  return ranks.size() > 1 ? std::to_string(ranks.size()) + " x " + first().name() : first().name();
}



void set_kv_budget(const Backend& backend, const BackendOptions& o, EngineConfig& cfg) {
  if (backend.device() != DeviceKind::CPU) cfg.memory_utilization = o.gpu_memory_utilization;
}

std::string resolve_model_path(const std::string& given, const char* argv0) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("ROCMFORGE_MODEL"); env && *env) return env;
  std::vector<std::filesystem::path> dirs;
  if (const char* td = std::getenv("ROCMFORGE_TESTDATA"); td && *td) dirs.emplace_back(td);
  dirs.emplace_back("../shared/testdata");
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec)  // build/<preset>/src/rocmforge -> <repo>/../shared/testdata
    dirs.push_back(exe.parent_path().parent_path().parent_path().parent_path().parent_path() / "shared" / "testdata");
  (void)argv0;
  for (const auto& d : dirs) {
    const auto p = d / "stories260K.gguf";
    if (std::filesystem::exists(p, ec)) return p.string();
  }
  fail("no model given: pass -m MODEL.gguf, set ROCMFORGE_MODEL, or put stories260K.gguf in ../shared/testdata "
       "(or set ROCMFORGE_TESTDATA to its folder)");
}

}  // namespace rf::cli
