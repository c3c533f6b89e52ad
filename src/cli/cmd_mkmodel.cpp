// `rocmforge mkmodel --preset NAME --type TYPE -o FILE`: write a synthetic
// model in a real model's shape (see model/synthetic.h: Llama, Qwen2.5,
// Qwen3, Gemma 2 and 3, Phi-3, GLM-4, the mixtures of experts Mixtral and
// Qwen3-MoE, gpt-oss, and the hybrid Qwen3.5 / Qwen3.6), using every core.
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "core/log.h"
#include "model/synthetic.h"

namespace rf::cli {
namespace {

struct MkOptions {
  std::string preset, type = "f16", out;
  uint64_t seed = 1;
  int threads = 0;
};

void mkmodel(const MkOptions& o) {
  const auto preset = synthetic_preset(o.preset);
  RF_CHECK(preset, "unknown preset '", o.preset, "' (known: ", synthetic_preset_names(), ")");
  const auto plan = quant_plan(o.type);
  RF_CHECK(plan, "unknown type '", o.type, "' (known: ", quant_plan_names(), ")");
  ThreadPool pool(size_t(o.threads));
  const auto t0 = std::chrono::steady_clock::now();
  Progress bar("writing " + o.out, double(preset->n_tensors()), "tensors");
  write_synthetic_model(*preset, *plan, o.out, o.seed, pool, [&](uint64_t done, uint64_t) { bar.update(double(done)); });
  bar.finish();
  std::fprintf(stderr, "%s: preset %s, type %s, %.1f s\n", o.out.c_str(), o.preset.c_str(), o.type.c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

void add_mkmodel_command(CLI::App& app) {
  auto o = std::make_shared<MkOptions>();
  auto* cmd = app.add_subcommand("mkmodel", "Write a synthetic GGUF model with random weights in a real shape");
  cmd->add_option("--preset", o->preset, "Shape: " + synthetic_preset_names())->required();
  cmd->add_option("--type", o->type, "Weight type: " + quant_plan_names())->capture_default_str();
  cmd->add_option("-o,--output", o->out, "Output file")->required();
  cmd->add_option("--seed", o->seed, "Random seed")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads (0: all cores)");
  cmd->callback([o] { mkmodel(*o); });
}

RF_REGISTER_COMMAND(70, add_mkmodel_command);

}  // namespace
}  // namespace rf::cli
