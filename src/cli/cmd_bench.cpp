// `rocmforge bench -m MODEL -p 512 -n 128 -r 5 [--parallel 1,8,32,64] [--json]`:
// through the engine (its scheduler, batching, graphs and GPU sampling),
// P sequences each prefill p random tokens and then decode n tokens
// (greedy, end-of-generation ignored). Reports prompt and generation
// tokens/s (mean and standard deviation over r runs after one warm-up),
// the weight bandwidth of decode and its share of the device's copy
// bandwidth measured in the same run.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/backend_factory.h"
#include "cli/commands.h"
#include "core/log.h"
#include "engine/engine.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace rf::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::string model;
  int n_prompt = 512, n_gen = 128, reps = 5;
  std::vector<int> parallel = {1};
  int max_batch_tokens = 8192;
  bool json = false;
  BackendOptions backend;
};

struct Phase {
  double prompt_s = 0, gen_s = 0;
};

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}
double stdev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size() - 1));
}

// One run: P requests with distinct random prompts (no prefix-cache hits).
Phase run_once(Engine& engine, int P, const BenchOptions& o, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int vocab = engine.model_config().n_vocab;
  std::vector<RequestHandle> handles;
  const auto t0 = Clock::now();
  for (int i = 0; i < P; ++i) {
    Request r;
    r.prompt.resize(size_t(o.n_prompt));
    for (auto& t : r.prompt) t = int32_t(3 + rng() % uint64_t(vocab - 3));
    r.max_tokens = o.n_gen;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    handles.push_back(engine.submit(r));
  }
  std::vector<char> first(size_t(P), 0), done(size_t(P), 0);
  int n_first = 0, n_done = 0;
  Clock::time_point t_prompt{};
  while (n_done < P) {
    RF_CHECK(engine.step() || n_done == P, "bench: the engine stalled");
    for (int i = 0; i < P; ++i)
      while (auto ev = handles[size_t(i)]->next(std::chrono::milliseconds(0))) {
        if (!ev->tokens.empty() && !first[size_t(i)]) {
          first[size_t(i)] = 1;
          if (++n_first == P) t_prompt = Clock::now();
        }
        if (ev->finished) {
          RF_CHECK(ev->finish_reason != FinishReason::Error, "bench: ", ev->error);
          done[size_t(i)] = 1;
          ++n_done;
        }
      }
  }
  const auto t1 = Clock::now();
  return {std::chrono::duration<double>(t_prompt - t0).count(), std::chrono::duration<double>(t1 - t_prompt).count()};
}

void bench(const BenchOptions& o) {
  set_log_level(LogLevel::Warn);
  const std::string path = resolve_model_path(o.model);
  auto backend = make_backend(o.backend);
  const double copy_bw = backend->measure_copy_bandwidth();
  auto model = Model::load(path, *backend, true);
  auto tok = Tokenizer::from_gguf(model->file());
  const double weight_bytes = double(model->weights().bytes);
  std::fprintf(stderr, "model: %s (%.2f GB of weights)\ndevice: %s, copy bandwidth %.0f GB/s (read + write)\n",
               model->config().summary().c_str(), weight_bytes / 1e9, backend->name().c_str(), copy_bw / 1e9);
  nlohmann::json results = nlohmann::json::array();
  for (int P : o.parallel) {
    RF_CHECK(P >= 1, "--parallel values must be >= 1");
    EngineConfig cfg;
    cfg.max_num_seqs = P;
    cfg.max_model_len = o.n_prompt + o.n_gen + 16;
    cfg.max_num_batched_tokens = std::max(o.max_batch_tokens, P);
    cfg.prefix_caching = false;
    cfg.num_blocks = P * ((cfg.max_model_len + cfg.block_size - 1) / cfg.block_size) + 1;
    Engine engine(*model, *tok, *backend, cfg);
    std::vector<double> pp, tg, bw;
    for (int r = 0; r <= o.reps; ++r) {
      const Phase ph = run_once(engine, P, o, 1000 * uint64_t(P) + uint64_t(r));
      if (r == 0) continue;  // warm-up
      pp.push_back(double(P) * o.n_prompt / ph.prompt_s);
      tg.push_back(double(P) * (o.n_gen - 1) / ph.gen_s);
      bw.push_back(weight_bytes * (o.n_gen - 1) / ph.gen_s);
      std::fprintf(stderr, "  parallel %d run %d/%d: prompt %.0f tok/s, generation %.1f tok/s\n", P, r, o.reps,
                   pp.back(), tg.back());
    }
    results.push_back({{"parallel", P}, {"n_prompt", o.n_prompt}, {"n_gen", o.n_gen}, {"reps", o.reps},
                       {"prompt_tok_s", mean(pp)}, {"prompt_tok_s_std", stdev(pp)},
                       {"gen_tok_s", mean(tg)}, {"gen_tok_s_std", stdev(tg)},
                       {"gen_weight_gb_s", mean(bw) / 1e9},
                       {"gen_share_of_copy_bw", copy_bw > 0 ? mean(bw) / copy_bw : 0.0}});
  }
  if (o.json) {
    nlohmann::json out = {{"model", path}, {"weights_gb", weight_bytes / 1e9}, {"device", backend->name()},
                          {"copy_bandwidth_gb_s", copy_bw / 1e9}, {"results", results}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("| parallel | test | tokens/s | std | weight GB/s | share of copy BW |\n|---|---|---|---|---|---|\n");
  for (const auto& r : results) {
    std::printf("| %d | pp%d | %.1f | %.1f | | |\n", r["parallel"].get<int>(), o.n_prompt,
                r["prompt_tok_s"].get<double>(), r["prompt_tok_s_std"].get<double>());
    std::printf("| %d | tg%d | %.1f | %.1f | %.0f | %.0f%% |\n", r["parallel"].get<int>(), o.n_gen,
                r["gen_tok_s"].get<double>(), r["gen_tok_s_std"].get<double>(), r["gen_weight_gb_s"].get<double>(),
                100 * r["gen_share_of_copy_bw"].get<double>());
  }
}

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "Measure prompt and generation speed through the engine");
  cmd->add_option("-m,--model", o->model, "GGUF model");
  cmd->add_option("-p,--n-prompt", o->n_prompt, "Prompt tokens per sequence")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("-n,--n-gen", o->n_gen, "Tokens generated per sequence")->check(CLI::Range(2, 1 << 20))->capture_default_str();
  cmd->add_option("-r,--reps", o->reps, "Measured runs (after one warm-up)")->check(CLI::Range(1, 1000))->capture_default_str();
  cmd->add_option("--parallel", o->parallel, "Sequences decoding together (comma-separated list)")->delimiter(',');
  cmd->add_option("--max-batch-tokens", o->max_batch_tokens, "Token budget per engine step")->capture_default_str();
  cmd->add_flag("--json", o->json, "JSON output");
  add_backend_options(*cmd, o->backend);
  cmd->callback([o] { bench(*o); });
}

RF_REGISTER_COMMAND(50, add_bench_command);

}  // namespace
}  // namespace rf::cli
