// `rocmforge eval -m MODEL --prompts FILE [-n N] [--device cpu|cuda|rocm]`: for
// each prompt (one per line, space-separated token ids) prints one JSON line
// with prompt_tokens, greedy_tokens (up to N; an end-of-generation token ends
// them and is included) and first_step_logits — the fields of llama.cpp's
// golden files, so the output diffs against them (model/evaluator.h).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/backend_factory.h"
#include "cli/commands.h"
#include "core/log.h"
#include "model/evaluator.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace rf::cli {
namespace {

struct EvalCmdOptions {
  std::string model, prompts;
  int n_predict = 24;
  int prefill_chunk = 0;
  bool verbose = false;
  BackendOptions backend;
};

std::vector<std::vector<int32_t>> read_prompts(const std::string& path) {
  std::ifstream in(path);
  RF_CHECK(in, "cannot read the prompts file ", path);
  std::vector<std::vector<int32_t>> out;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    std::istringstream ss(line);
    std::vector<int32_t> ids;
    std::string word;
    while (ss >> word) {
      size_t used = 0;
      long long v = -1;
      try {
        v = std::stoll(word, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      RF_CHECK(used == word.size() && v >= 0 && v <= INT32_MAX, path, ":", line_no, ": '", word,
               "' is not a token id");
      ids.push_back(int32_t(v));
    }
    if (!ids.empty()) out.push_back(std::move(ids));
  }
  RF_CHECK(!out.empty(), "the prompts file ", path, " has no prompt");
  return out;
}

void append_ids(std::string& s, const std::vector<int32_t>& ids) {
  s += '[';
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  s += ']';
}

// Floats with 9 significant digits: they read back as the same float.
void append_floats(std::string& s, const std::vector<float>& v) {
  s += '[';
  char buf[32];
  for (size_t i = 0; i < v.size(); ++i) {
    RF_CHECK(std::isfinite(v[i]), "eval: logit ", i, " is not finite (", v[i], ")");
    std::snprintf(buf, sizeof buf, "%s%.9g", i ? ", " : "", double(v[i]));
    s += buf;
  }
  s += ']';
}

void eval(const EvalCmdOptions& o) {
  if (!o.verbose) set_log_level(LogLevel::Warn);
  const auto prompts = read_prompts(o.prompts);
  BackendSet backends = make_backends(o.backend);
  auto model = load_model(model_source(o.model, o.backend), backends, o.verbose, weight_placement(o.backend));
  log_info("model: ", model->config().summary());
  auto tok = Tokenizer::from_gguf(model->file());
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < tok->n_vocab(); ++id)
    if (tok->is_eog(id)) eog.push_back(id);
  EvalOptions eo;
  for (const auto& p : prompts) {
    eo.max_prompt = std::max(eo.max_prompt, int32_t(p.size()));
    eo.max_context = std::max(eo.max_context, int32_t(p.size()) + o.n_predict);
  }
  eo.prefill_chunk = o.prefill_chunk;
  eo.kv_cache_dtype = kv_cache_dtype(o.backend);
  Evaluator ev(*model, backends.ranks, backends.comms, eo);
  for (const auto& p : prompts) {
    const EvalResult r = ev.run(p, o.n_predict, eog);
    std::string line = "{\"prompt_tokens\": ";
    append_ids(line, r.prompt_tokens);
    line += ", \"greedy_tokens\": ";
    append_ids(line, r.greedy_tokens);
    line += ", \"first_step_logits\": ";
    append_floats(line, r.first_step_logits);
    line += "}\n";
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
  }
}

void add_eval_command(CLI::App& app) {
  auto o = std::make_shared<EvalCmdOptions>();
  auto* cmd = app.add_subcommand("eval", "Greedy tokens and first-step logits per prompt, as JSON lines");
  cmd->add_option("-m,--model", o->model, "GGUF model (default: $ROCMFORGE_MODEL or the demo stories260K.gguf)");
  cmd->add_option("--prompts", o->prompts, "File of prompts: one per line, space-separated token ids")->required();
  cmd->add_option("-n,--n-predict", o->n_predict, "Greedy tokens per prompt")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--prefill-chunk", o->prefill_chunk, "Prompt tokens per step (0: the whole prompt at once)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("-v,--verbose", o->verbose, "Log loading details");
  add_backend_options(*cmd, o->backend);
  cmd->callback([o] { eval(*o); });
}

RF_REGISTER_COMMAND(55, add_eval_command);

}  // namespace
}  // namespace rf::cli
