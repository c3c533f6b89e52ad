// `rocmforge perplexity -m MODEL -f TEXT [-c N] [-b N] [--chunks N]
// [--kl-divergence-base FILE [--kl-divergence]]`: the perplexity of a text,
// with llama.cpp's perplexity tool's conventions — the text tokenized once
// (BOS added when the vocabulary adds it), cut into chunks of N tokens whose
// first token becomes BOS, and in each chunk the tokens of its second half
// scored (each with at least N/2 tokens of context); "Final estimate: PPL =
// X +/- E". --kl-divergence-base FILE alone writes every scored position's
// log-probabilities (f32, the whole vocabulary) to FILE; with
// --kl-divergence it reads them back and reports KL(base || this run) and
// how often the most likely token agrees — e.g. a quantized model, another
// device or another KV cache type against a reference run.
//
// The base file: "RFLOGPR1", then int32 n_vocab, n_ctx, first, n_chunks, the
// chunks' n_chunks * n_ctx token ids (int32), then per chunk and scored
// position (n_ctx - 1 - first of them) n_vocab float log-probabilities.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli/backend_factory.h"
#include "cli/commands.h"
#include "core/log.h"
#include "model/evaluator.h"
#include "model/model.h"
#include "model/perplexity.h"
#include "tokenizer/tokenizer.h"

namespace rf::cli {
namespace {

struct PerplexityCmdOptions {
  std::string model, text_file, kl_base;
  int n_ctx = 512;
  int n_batch = 512;
  int max_chunks = 0;  // 0: all
  bool kl = false;
  bool verbose = false;
  BackendOptions backend;
};

constexpr char kMagic[8] = {'R', 'F', 'L', 'O', 'G', 'P', 'R', '1'};

struct BaseHeader {
  int32_t n_vocab = 0, n_ctx = 0, first = 0, n_chunks = 0;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  RF_CHECK(in, "cannot read the text file ", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_base_header(std::ofstream& out, const BaseHeader& h, const std::vector<int32_t>& chunk_tokens) {
  out.write(kMagic, sizeof kMagic);
  out.write(reinterpret_cast<const char*>(&h), sizeof h);
  out.write(reinterpret_cast<const char*>(chunk_tokens.data()), std::streamsize(chunk_tokens.size() * 4));
}

// Checks that the base file was made from the same text, chunking and vocabulary.
void read_base_header(std::ifstream& in, const std::string& path, const BaseHeader& want,
                      const std::vector<int32_t>& chunk_tokens) {
  char magic[sizeof kMagic];
  BaseHeader h;
  in.read(magic, sizeof magic);
  in.read(reinterpret_cast<char*>(&h), sizeof h);
  RF_CHECK(in && std::memcmp(magic, kMagic, sizeof kMagic) == 0, path,
           " is not a log-probability file of rocmforge perplexity --kl-divergence-base");
  RF_CHECK(h.n_vocab == want.n_vocab, path, ": made with a vocabulary of ", h.n_vocab, ", this model has ",
           want.n_vocab);
  RF_CHECK(h.n_ctx == want.n_ctx && h.first == want.first, path, ": made with chunks of ", h.n_ctx,
           " tokens, this run uses ", want.n_ctx, " (-c)");
  RF_CHECK(h.n_chunks >= want.n_chunks, path, ": holds ", h.n_chunks, " chunks, this run scores ", want.n_chunks);
  std::vector<int32_t> tokens(size_t(h.n_chunks) * size_t(h.n_ctx));
  in.read(reinterpret_cast<char*>(tokens.data()), std::streamsize(tokens.size() * 4));
  RF_CHECK(in, path, ": truncated token list");
  RF_CHECK(std::equal(chunk_tokens.begin(), chunk_tokens.end(), tokens.begin()), path,
           ": made from another text or tokenization (the token ids differ)");
}

void perplexity(const PerplexityCmdOptions& o) {
  if (!o.verbose) set_log_level(LogLevel::Warn);
  RF_CHECK(!o.kl || !o.kl_base.empty(), "--kl-divergence needs --kl-divergence-base FILE (the base run's output)");
  const std::string text = read_text(o.text_file);
  BackendSet backends = make_backends(o.backend);
  auto model = load_model(model_source(o.model, o.backend), backends, o.verbose, weight_placement(o.backend));
  const ModelConfig& c = model->config();
  auto tok = Tokenizer::from_gguf(model->file());
  RF_CHECK(o.n_ctx >= 4 && o.n_ctx <= c.n_ctx_train, "-c ", o.n_ctx, " must be between 4 and the model's context (",
           c.n_ctx_train, ")");
  const std::vector<int32_t> tokens = tok->encode(text, /*add_special=*/true, /*parse_special=*/false);
  int32_t n_chunks = int32_t(tokens.size()) / o.n_ctx;
  RF_CHECK(n_chunks > 0, o.text_file, " has ", tokens.size(), " tokens: fewer than one chunk of ", o.n_ctx,
           " (-c)");
  if (o.max_chunks > 0) n_chunks = std::min(n_chunks, o.max_chunks);
  const int32_t first = o.n_ctx / 2;
  std::vector<int32_t> chunk_tokens(tokens.begin(), tokens.begin() + ptrdiff_t(n_chunks) * o.n_ctx);
  if (tok->add_bos() && tok->bos() >= 0)
    for (int32_t k = 0; k < n_chunks; ++k) chunk_tokens[size_t(k) * size_t(o.n_ctx)] = tok->bos();
  std::fprintf(stderr, "perplexity: %zu tokens, %d chunks of %d (the last %d of each scored)\n", tokens.size(),
               n_chunks, o.n_ctx, o.n_ctx - 1 - first);

  const BaseHeader header{c.n_vocab, o.n_ctx, first, n_chunks};
  std::ofstream base_out;
  std::ifstream base_in;
  if (!o.kl_base.empty() && !o.kl) {
    base_out.open(o.kl_base, std::ios::binary | std::ios::trunc);
    RF_CHECK(base_out, "cannot write ", o.kl_base);
    write_base_header(base_out, header, chunk_tokens);
  } else if (o.kl) {
    base_in.open(o.kl_base, std::ios::binary);
    RF_CHECK(base_in, "cannot read ", o.kl_base);
    read_base_header(base_in, o.kl_base, header, chunk_tokens);
  }

  // Scored positions are fed as one sequence: n_ctx - 1 tokens (the last
  // token is only a target).
  EvalOptions eo;
  eo.max_prompt = eo.max_context = o.n_ctx - 1;
  eo.prefill_chunk = std::min(o.n_batch, o.n_ctx - 1);
  eo.max_logits = eo.prefill_chunk;
  eo.kv_cache_dtype = kv_cache_dtype(o.backend);
  Evaluator ev(*model, backends.ranks, backends.comms, eo);

  PerplexityStats ppl, base_ppl;
  KlStats kl;
  std::vector<double> logprobs;
  std::vector<float> base_row(size_t(c.n_vocab)), out_row(size_t(c.n_vocab));
  const auto t0 = std::chrono::steady_clock::now();
  for (int32_t k = 0; k < n_chunks; ++k) {
    const std::span<const int32_t> chunk(chunk_tokens.data() + size_t(k) * size_t(o.n_ctx), size_t(o.n_ctx));
    ev.score(chunk.first(size_t(o.n_ctx) - 1), first, [&](int32_t j, std::span<const float> logits) {
      log_softmax(logits, logprobs);
      const int32_t next = chunk[size_t(j) + 1];
      ppl.add(-logprobs[size_t(next)]);
      if (base_out.is_open()) {
        for (size_t i = 0; i < out_row.size(); ++i) out_row[i] = float(logprobs[i]);
        base_out.write(reinterpret_cast<const char*>(out_row.data()), std::streamsize(out_row.size() * 4));
      } else if (base_in.is_open()) {
        base_in.read(reinterpret_cast<char*>(base_row.data()), std::streamsize(base_row.size() * 4));
        RF_CHECK(base_in, o.kl_base, ": truncated at chunk ", k + 1);
        base_ppl.add(-double(base_row[size_t(next)]));
        kl.add(base_row, logprobs);
      }
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[%d]%.4f,", k + 1, ppl.ppl());
    std::fflush(stdout);
    if (o.verbose || k + 1 == n_chunks) std::fprintf(stderr, "perplexity: %d/%d chunks, %.1f s\n", k + 1, n_chunks, s);
  }
  RF_CHECK(!base_out.is_open() || base_out.flush(), "writing ", o.kl_base, " failed");
  std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl.ppl(), ppl.ppl_error());
  if (o.kl) {
    const double ln_ratio = ppl.mean_nll() - base_ppl.mean_nll();
    std::printf("Base PPL: %.4f; ln(PPL / base PPL) = %.6f\n", base_ppl.ppl(),
                std::abs(ln_ratio) < 5e-7 ? 0.0 : ln_ratio);  // no "-0.000000"
    std::printf("Mean KLD: %.6f +/- %.6f; median %.6f, 99%% %.6f, maximum %.6f\n", kl.mean(), kl.mean_error(),
                kl.quantile(0.5), kl.quantile(0.99), kl.max());
    std::printf("Same top token: %.2f%% of %lld positions\n", 100.0 * kl.same_top(), static_cast<long long>(kl.count()));
  }
}

void add_perplexity_command(CLI::App& app) {
  auto o = std::make_shared<PerplexityCmdOptions>();
  auto* cmd = app.add_subcommand("perplexity", "Perplexity of a text; KL divergence against a base run");
  cmd->add_option("-m,--model", o->model, "GGUF model (default: $ROCMFORGE_MODEL or the demo stories260K.gguf)");
  cmd->add_option("-f,--file", o->text_file, "The text")->required();
  cmd->add_option("-c,--ctx-size", o->n_ctx, "Tokens per chunk; the second half of each is scored")
      ->check(CLI::Range(4, 1 << 20))
      ->capture_default_str();
  cmd->add_option("-b,--batch-size", o->n_batch, "Tokens per step")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--chunks", o->max_chunks, "Score at most this many chunks (0: all)")->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--kl-divergence-base", o->kl_base,
                  "Write the scored log-probabilities here (or, with --kl-divergence, read them)");
  cmd->add_flag("--kl-divergence", o->kl, "Compare with the base run's log-probabilities (KL divergence)");
  cmd->add_flag("-v,--verbose", o->verbose, "Log loading details and every chunk's time");
  add_backend_options(*cmd, o->backend);
  cmd->callback([o] { perplexity(*o); });
}

RF_REGISTER_COMMAND(57, add_perplexity_command);

}  // namespace
}  // namespace rf::cli
