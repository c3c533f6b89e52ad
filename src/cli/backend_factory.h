// Choosing and creating the backends from command-line options — one, or one
// per tensor-parallel rank with their communicators — and finding the model
// (a file, the demo model, or a preset for dummy weights). "auto" picks the
// build's GPU backend (CUDA, or ROCm in a HIP build) when a GPU is present,
// else the CPU — and says which; naming a GPU vendor this build lacks, or
// one without a device, is an error.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/loopback_comm.h"
#include "engine/engine.h"
#include "model/model.h"

namespace rf::cli {

struct BackendOptions {
  std::string device = "auto";  // auto | cpu | cuda[:i[,j...]] | rocm[:i...] (alias hip)
  int tensor_parallel = 1;      // ranks (backends) the model is split over
  std::string load_format = "auto";  // auto: read the file; dummy: random weights in a preset's shape
  int threads = 0;              // CPU threads (0: all cores)
  float gpu_memory_utilization = 0.9f;
  std::string kv_cache_dtype = "auto";  // auto | fp8 (model/kv_cache.h)
  bool cpu_moe = false;  // every layer's experts in host memory
  int n_cpu_moe = 0;     // the first N layers' experts in host memory
};

// Where --cpu-moe / --n-cpu-moe put the experts.
WeightPlacement weight_placement(const BackendOptions& o);

// The backends a command runs on: one, or one per tensor-parallel rank with
// the communicators that join them (CPU ranks: in-process collectives).
struct BackendSet {
  std::vector<std::unique_ptr<Backend>> owned;
  std::unique_ptr<LoopbackGroup> loopback;  // CPU ranks
  std::shared_ptr<void> gpu_group;          // GPU ranks: their NCCL communicators
  std::vector<Backend*> ranks;
  std::vector<Communicator*> comms;  // empty for one rank
  Backend& first() const { return *ranks[0]; }
  // "cpu" or, tensor parallel, "2 x cpu".
  std::string name() const;
};

// --device's value: the kind (auto, cpu, cuda, rocm; "hip" read as rocm)
// and the GPUs it names, if any ("cuda:0,1"). Throws naming what is wrong.
struct DeviceSpec {
  std::string kind;
  std::vector<int> gpus;
};
DeviceSpec parse_device(const std::string& text);

void add_backend_options(CLI::App& cmd, BackendOptions& o);
BackendSet make_backends(const BackendOptions& o);

// The KV cache of an engine on this backend: its element type
// (--kv-cache-dtype) and budget: on GPUs the --gpu-memory-utilization share
// of device memory; elsewhere the engine's host default (kv/memory_plan.h
// has the rule).
void set_kv_options(const Backend& backend, const BackendOptions& o, EngineConfig& cfg);
KVCacheDType kv_cache_dtype(const BackendOptions& o);

// -m MODEL, else $ROCMFORGE_MODEL, else stories260K.gguf from the test data
// (ROCMFORGE_TESTDATA, ../shared/testdata); otherwise an error saying where
// to put a model.
std::string resolve_model_path(const std::string& given, const char* argv0 = nullptr);

// What a command loads: the model file (resolve_model_path), or with
// --load-format dummy "dummy:PRESET[:TYPE]" from -m PRESET[:TYPE].
std::string model_source(const std::string& given, const BackendOptions& o);
// Loads model_source()'s answer onto the backends (progress bar if asked).
std::unique_ptr<Model> load_model(const std::string& source, const BackendSet& backends, bool progress,
                                  WeightPlacement placement = {});

}  // namespace rf::cli
