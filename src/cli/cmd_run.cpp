// `rocmforge run`: generate text from a prompt, streaming it to stdout as it
// is produced, with llama.cpp's sampling defaults; speeds go to stderr.
#include <chrono>
#include <cstdio>
#include <random>

#include "cli/backend_factory.h"
#include "cli/commands.h"
#include "cli/spec_options.h"
#include "core/log.h"
#include "engine/engine.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace rf::cli {
namespace {

struct RunOptions {
  std::string model, prompt = "Once upon a time";
  int n_predict = -1;
  int ctx_size = 0;
  float temp = 0.8f, top_p = 0.95f, min_p = 0.05f;
  int top_k = 40;
  float repeat_penalty = 1.0f, presence_penalty = 0.0f, frequency_penalty = 0.0f;
  int64_t seed = -1;
  bool no_display_prompt = false, ignore_eos = false, verbose = false;
  BackendOptions backend;
  SpecOptions spec;
};

void run(const RunOptions& o) {
  if (!o.verbose) set_log_level(LogLevel::Warn);
  const std::string path = model_source(o.model, o.backend);
  BackendSet backends = make_backends(o.backend);
  auto model = load_model(path, backends, o.verbose, weight_placement(o.backend));
  auto tok = Tokenizer::from_gguf(model->file());
  EngineConfig cfg;
  cfg.max_num_seqs = 1;
  cfg.max_model_len = o.ctx_size > 0 ? o.ctx_size : model->config().n_ctx_train;
  cfg.max_num_batched_tokens = std::min(cfg.max_model_len, 2048);
  set_kv_options(backends.first(), o.backend, cfg);
  const DraftModel draft = load_draft_model(o.spec, o.backend);
  cfg.speculative = spec_config(o.spec, &draft);
  Engine engine(*model, *tok, backends.ranks, backends.comms, cfg);

  Request req;
  req.prompt = tok->encode(o.prompt, true, true);
  RF_CHECK(int(req.prompt.size()) < cfg.max_model_len, "the prompt (", req.prompt.size(),
           " tokens) does not fit the context of ", cfg.max_model_len);
  const int room = engine.max_model_len() - int(req.prompt.size());
  req.max_tokens = o.n_predict < 0 ? room : std::min(o.n_predict, room);
  req.ignore_eos = o.ignore_eos;
  SamplingParams& sp = req.sampling;
  sp.temperature = o.temp;
  sp.top_k = o.top_k;
  sp.top_p = o.top_p;
  sp.min_p = o.min_p;
  sp.repetition_penalty = o.repeat_penalty;
  sp.presence_penalty = o.presence_penalty;
  sp.frequency_penalty = o.frequency_penalty;
  sp.seed = o.seed >= 0 ? uint64_t(o.seed) : std::random_device{}();

  if (!o.no_display_prompt) {
    std::fputs(o.prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  RequestHandle h = engine.submit(req);
  Clock::time_point t_first{};
  int n_gen = 0;
  StreamEvent last;
  for (;;) {
    engine.step();
    while (auto ev = h->next(std::chrono::milliseconds(0))) {
      if (!ev->tokens.empty() && n_gen == 0) t_first = Clock::now();
      n_gen += int(ev->tokens.size());
      if (!ev->text.empty()) {
        std::fwrite(ev->text.data(), 1, ev->text.size(), stdout);
        std::fflush(stdout);
      }
      if (ev->finished) last = *ev;
    }
    if (last.finished) break;
  }
  const auto t_end = Clock::now();
  std::fputc('\n', stdout);
  if (last.finish_reason == FinishReason::Error) fail("generation failed: ", last.error);
  const double prompt_s = std::chrono::duration<double>(t_first - t0).count();
  const double gen_s = std::chrono::duration<double>(t_end - t_first).count();
  std::fprintf(stderr, "\nprompt: %d tokens in %.3f s (%.1f tokens/s)\n", last.prompt_tokens, prompt_s,
               prompt_s > 0 ? last.prompt_tokens / prompt_s : 0.0);
  std::fprintf(stderr, "generation: %d tokens in %.3f s (%.1f tokens/s), finish: %s\n", n_gen, gen_s,
               n_gen > 1 && gen_s > 0 ? (n_gen - 1) / gen_s : 0.0, finish_reason_name(last.finish_reason));
  const EngineMetrics& m = engine.metrics();
  if (cfg.speculative.enabled())
    std::fprintf(stderr, "speculative %s\n", spec_summary(cfg.speculative, m).c_str());
}

void add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt (streams to stdout)");
  cmd->add_option("-m,--model", o->model, "GGUF model (default: $ROCMFORGE_MODEL or the demo stories260K.gguf)");
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text")->capture_default_str();
  cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate (-1: until end of generation or context)")
      ->capture_default_str();
  cmd->add_option("-c,--ctx-size", o->ctx_size, "Context size (0: the model's)")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--temp", o->temp, "Temperature (0: greedy)")->check(CLI::Range(0.0, 100.0))->capture_default_str();
  cmd->add_option("--top-k", o->top_k, "Top-k (0: off)")->check(CLI::Range(0, 1 << 30))->capture_default_str();
  cmd->add_option("--top-p", o->top_p, "Top-p (1: off)")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  cmd->add_option("--min-p", o->min_p, "Min-p (0: off)")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  cmd->add_option("--repeat-penalty", o->repeat_penalty, "Repetition penalty (1: off)")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  cmd->add_option("--presence-penalty", o->presence_penalty, "Presence penalty")->check(CLI::Range(-2.0, 2.0));
  cmd->add_option("--frequency-penalty", o->frequency_penalty, "Frequency penalty")->check(CLI::Range(-2.0, 2.0));
  cmd->add_option("-s,--seed", o->seed, "RNG seed (-1: random)")->capture_default_str();
  cmd->add_flag("--no-display-prompt", o->no_display_prompt, "Print only the generated text");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Keep generating after end-of-generation tokens");
  cmd->add_flag("-v,--verbose", o->verbose, "Log loading and engine details");
  add_backend_options(*cmd, o->backend);
  add_spec_options(*cmd, o->spec);
  cmd->callback([o] { run(*o); });
}

RF_REGISTER_COMMAND(10, add_run_command);

}  // namespace
}  // namespace rf::cli
