// Backend selection and KV sizing for the CLI commands.
#include "cli/backend_factory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "core/env.h"
#include "core/log.h"
#ifdef ROCMFORGE_HAVE_GPU
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/collective/nccl_comm.h"
#endif

namespace rf::cli {

namespace {
// "hip" is another name for "rocm".
std::string canonical_device(const std::string& d) { return d == "hip" ? "rocm" : d; }
}  // namespace

void add_backend_options(CLI::App& cmd, BackendOptions& o) {
  cmd.add_option("--device", o.device,
                 "Backend: auto, cpu, cuda (NVIDIA) or rocm (AMD; alias hip); a GPU kind may name its GPUs, one "
                 "per tensor-parallel rank: cuda:1, cuda:0,1")
      ->check([](const std::string& v) {
        try {
          parse_device(v);
          return std::string();
        } catch (const std::exception& e) {
          return std::string(e.what());
        }
      })
      ->capture_default_str();
  cmd.add_option("-t,--threads", o.threads, "CPU threads (0: all cores)")->check(CLI::Range(0, 1024));
  cmd.add_option("--gpu-memory-utilization", o.gpu_memory_utilization,
                 "Share of GPU memory for weights, workspace and KV cache")
      ->check(CLI::Range(0.05, 0.99))
      ->capture_default_str();
  cmd.add_option("--kv-cache-dtype", o.kv_cache_dtype,
                 "KV cache elements: auto (f16 on GPUs, f32 on the CPU) or fp8 (e4m3 with a scale per token and KV "
                 "head: half the memory of f16)")
      ->check(CLI::IsMember({"auto", "fp8", "fp8_e4m3"}))
      ->capture_default_str();
  cmd.add_option("--load-format", o.load_format,
                 "auto: read the model file; dummy: random weights in the shape of the mkmodel preset given as -m "
                 "PRESET[:TYPE] (e.g. llama3-70b:f16), made on the backends")
      ->check(CLI::IsMember({"auto", "dummy"}))
      ->capture_default_str();
  cmd.add_flag("--cpu-moe", o.cpu_moe,
               "Keep every layer's MoE experts in host memory and run their FFNs on the CPU (the router, attention "
               "and shared experts stay on the GPU): models larger than the GPU's memory");
  cmd.add_option("--n-cpu-moe", o.n_cpu_moe, "As --cpu-moe, for the experts of the first N layers only")
      ->check(CLI::Range(0, 100000));
  cmd.add_option("--tensor-parallel-size,--tp", o.tensor_parallel,
                 "Split the model over this many ranks (Megatron-style tensor parallelism)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
}

DeviceSpec parse_device(const std::string& text) {
  DeviceSpec d;
  const size_t colon = text.find(':');
  d.kind = canonical_device(text.substr(0, colon));
  RF_CHECK(d.kind == "auto" || d.kind == "cpu" || d.kind == "cuda" || d.kind == "rocm",
           "--device '", text, "': expected auto, cpu, cuda or rocm (alias hip), optionally with GPU indices (cuda:1, "
           "cuda:0,1)");
  if (colon == std::string::npos) return d;
  RF_CHECK(d.kind == "cuda" || d.kind == "rocm", "--device '", text, "': only a GPU kind takes indices");
  const std::string list = text.substr(colon + 1);
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, comma - at);
    RF_CHECK(!item.empty() && item.size() <= 3 && item.find_first_not_of("0123456789") == std::string::npos,
             "--device '", text, "': '", item, "' is not a GPU index");
    const int g = std::stoi(item);
    RF_CHECK(std::find(d.gpus.begin(), d.gpus.end(), g) == d.gpus.end(), "--device '", text, "': GPU ", g,
             " is listed twice");
    d.gpus.push_back(g);
    at = comma + 1;
  }
  return d;
}

BackendSet make_backends(const BackendOptions& o) {
  const int n = o.tensor_parallel;
  RF_CHECK(n >= 1, "--tensor-parallel-size must be >= 1");
  DeviceSpec d = parse_device(o.device);
  BackendSet s;
#ifdef ROCMFORGE_HAVE_GPU
  // The GPU backend of this build speaks one vendor: cuda or rocm.
  const std::string vendor = CudaBackend::vendor();
  if (d.kind == "auto") d.kind = CudaBackend::device_count() > 0 ? vendor : "cpu";
  if (d.kind == vendor) {
    if (d.gpus.empty())
      for (int g = 0; g < n; ++g) d.gpus.push_back(g);
    RF_CHECK(int(d.gpus.size()) == n, "--device ", o.device, " names ", d.gpus.size(), " GPUs for ", n,
             " tensor-parallel rank", n > 1 ? "s" : "");
    std::vector<CudaBackend*> gpus;
    for (int g : d.gpus) {
      CudaOptions opt;
      opt.device = g;
      opt.host_threads = size_t(o.threads);  // (experts in host memory)
      auto b = std::make_unique<CudaBackend>(opt);
      log_info("backend: ", b->name());
      gpus.push_back(b.get());
      s.ranks.push_back(b.get());
      s.owned.push_back(std::move(b));
    }
    if (n > 1) {
      auto group = std::make_shared<NcclGroup>(gpus);
      for (int r = 0; r < n; ++r) s.comms.push_back(&group->rank(r));
      s.gpu_group = group;
    }
    return s;
  }
  if (d.kind != "cpu")
    fail("this build's GPU backend is ", vendor, ", not ", d.kind, " (build with the ",
         d.kind == "rocm" ? "hip" : "cuda", " preset)");
#else
  if (d.kind == "cuda") fail("this build has no CUDA backend (build with the cuda preset)");
  if (d.kind == "rocm") fail("this build has no ROCm backend (build with the hip preset)");
#endif
  // CPU ranks share the cores: each gets its part of them.
  const size_t cores = o.threads > 0 ? size_t(o.threads) : size_t(std::max(1u, std::thread::hardware_concurrency()));
  const size_t per_rank = n > 1 ? std::max<size_t>(1, cores / size_t(n)) : size_t(o.threads);
  for (int r = 0; r < n; ++r) {
    s.owned.push_back(std::make_unique<CpuBackend>(per_rank, CpuMatmul::Fast));
    s.ranks.push_back(s.owned.back().get());
  }
  log_info("backend: ", s.first().name());
  if (n > 1) {
    s.loopback = std::make_unique<LoopbackGroup>(n);
    for (int r = 0; r < n; ++r) s.comms.push_back(&s.loopback->rank(r));
    log_info("tensor parallel: ", n, " CPU ranks joined in-process");
  }
  return s;
}

std::string BackendSet::name() const {
  if (ranks.size() == 1) return first().name();
  // "2 ranks: cuda:0, cuda:1 (the first's details)"
  std::string out = std::to_string(ranks.size()) + " ranks: ";
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::string n = ranks[r]->name();
    out += (r ? ", " : "") + n.substr(0, n.find(" ("));
  }
  const std::string first_name = first().name();
  if (const size_t details = first_name.find(" ("); details != std::string::npos) out += first_name.substr(details);
  return out;
}

void set_kv_options(const Backend& backend, const BackendOptions& o, EngineConfig& cfg) {
  if (backend.device() != DeviceKind::CPU) cfg.memory_utilization = o.gpu_memory_utilization;
  cfg.kv_cache_dtype = kv_cache_dtype(o);
}

KVCacheDType kv_cache_dtype(const BackendOptions& o) { return parse_kv_cache_dtype(o.kv_cache_dtype); }

std::string model_source(const std::string& given, const BackendOptions& o) {
  if (o.load_format != "dummy") return resolve_model_path(given);
  RF_CHECK(!given.empty(), "--load-format dummy needs -m PRESET[:TYPE] (a mkmodel preset, e.g. llama3-70b:f16)");
  return "dummy:" + given;
}

WeightPlacement weight_placement(const BackendOptions& o) {
  WeightPlacement p;
  p.host_expert_layers = o.cpu_moe ? std::numeric_limits<int32_t>::max() : o.n_cpu_moe;
  return p;
}

std::unique_ptr<Model> load_model(const std::string& source, const BackendSet& backends, bool progress,
                                  WeightPlacement placement) {
  if (source.rfind("dummy:", 0) == 0) return Model::load_dummy(source.substr(6), backends.ranks, progress, placement);
  return Model::load(source, backends.ranks, progress, placement);
}

std::string resolve_model_path(const std::string& given, const char* argv0) {
  if (!given.empty()) return given;
  if (!env().model.empty()) return env().model;
  std::vector<std::filesystem::path> dirs;
  if (!env().testdata.empty()) dirs.emplace_back(env().testdata);
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
