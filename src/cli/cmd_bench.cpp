// `rocmforge bench`, two modes, both through the engine (its scheduler,
// batching, graphs and GPU sampling), on random-token prompts with
// end-of-generation ignored:
// - Phases (default): `-m MODEL -p 512 -n 128 -r 5 [--parallel 1,8,32,64]`:
//   P sequences each prefill p tokens, then decode n (greedy). Reports
//   prompt and generation tokens/s (mean and standard deviation over r runs
//   after one warm-up), the weight bandwidth of decode and its share of the
//   device's copy bandwidth measured in the same run, and the K/V bandwidth
//   of decode's attention and the share of weights and K/V together; with
//   --tensor-parallel-size, per rank, and the all-reduce time per step.
// - Serving throughput: `-m MODEL --requests N --concurrency C
//   --input-len I[:J] --output-len O[:P] [--shared-prefix S] [--temp T]`:
//   the engine runs on its
//   own thread; C client threads each submit requests back to back (closed
//   loop) until N are done, reading each stream as a client would. Lengths
//   given as ranges are drawn uniformly (seeded). Reports output tokens/s,
//   requests/s, time to first token and time per output token (per request:
//   (t_last - t_first) / (tokens - 1)) at p50/p90/p99.
// Both take --json.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cli/all_reduce_timing.h"
#include "cli/backend_factory.h"
#include "cli/commands.h"
#include "cli/spec_options.h"
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
  SpecOptions spec;
  // Serving throughput mode (when requests > 0).
  int requests = 0, concurrency = 1;
  std::string input_len = "512", output_len = "128";
  int shared_prefix = 0;  // tokens every prompt starts with (before its own input-len tokens)
  float temp = 0.0f;
  uint64_t seed = 1;
};

struct Phase {
  double prompt_s = 0, gen_s = 0;
  // The generation's engine steps and their wall time by phase (seconds).
  uint64_t gen_steps = 0;
  std::array<double, EngineMetrics::kStepPhases> gen_step_s{};
};

struct StepTimes {
  uint64_t steps = 0;
  std::array<uint64_t, EngineMetrics::kStepPhases> micros{};
};

StepTimes step_times(const Engine& engine) {
  StepTimes t;
  t.steps = engine.metrics().steps.load();
  for (size_t i = 0; i < t.micros.size(); ++i) t.micros[i] = engine.metrics().step_micros[i].load();
  return t;
}

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
  StepTimes at_prompt;
  while (n_done < P) {
    RF_CHECK(engine.step() || n_done == P, "bench: the engine stalled");
    for (int i = 0; i < P; ++i)
      while (auto ev = handles[size_t(i)]->next(std::chrono::milliseconds(0))) {
        if (!ev->tokens.empty() && !first[size_t(i)]) {
          first[size_t(i)] = 1;
          if (++n_first == P) {
            t_prompt = Clock::now();
            at_prompt = step_times(engine);
          }
        }
        if (ev->finished) {
          RF_CHECK(ev->finish_reason != FinishReason::Error, "bench: ", ev->error);
          done[size_t(i)] = 1;
          ++n_done;
        }
      }
  }
  const auto t1 = Clock::now();
  const StepTimes at_end = step_times(engine);
  Phase ph{std::chrono::duration<double>(t_prompt - t0).count(), std::chrono::duration<double>(t1 - t_prompt).count()};
  ph.gen_steps = at_end.steps - at_prompt.steps;
  for (size_t i = 0; i < ph.gen_step_s.size(); ++i) ph.gen_step_s[i] = double(at_end.micros[i] - at_prompt.micros[i]) / 1e6;
  return ph;
}

// ---- serving throughput ----------------------------------------------------

struct Range {
  int lo = 0, hi = 0;
};

// "512" or "100:1000" (inclusive), both at least 1.
Range parse_range(const std::string& s, const char* what) {
  Range r;
  const size_t colon = s.find(':');
  try {
    size_t used = 0;
    r.lo = std::stoi(s.substr(0, colon), &used);
    RF_CHECK(used == (colon == std::string::npos ? s.size() : colon), "");
    r.hi = r.lo;
    if (colon != std::string::npos) {
      r.hi = std::stoi(s.substr(colon + 1), &used);
      RF_CHECK(used == s.size() - colon - 1, "");
    }
  } catch (const std::exception&) {
    fail(what, " must be a number or a range LO:HI, got '", s, "'");
  }
  RF_CHECK(r.lo >= 1 && r.lo <= r.hi, what, " must satisfy 1 <= LO <= HI, got '", s, "'");
  return r;
}

// One request as its client saw it.
struct Sample {
  int input = 0, output = 0;
  double ttft = 0, tpot = -1, e2e = 0;  // seconds; tpot < 0: fewer than 2 tokens
};

// Linear interpolation between closest ranks (numpy's default); v sorted.
double percentile(const std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const double x = p / 100.0 * double(v.size() - 1);
  const size_t i = size_t(x);
  return i + 1 < v.size() ? v[i] + (v[i + 1] - v[i]) * (x - double(i)) : v.back();
}

nlohmann::json stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {{"mean", mean(v)}, {"p50", percentile(v, 50)}, {"p90", percentile(v, 90)}, {"p99", percentile(v, 99)}};
}

// The i-th request: lengths and prompt drawn from (seed, i) only, so the
// workload does not depend on which client thread sends it.
// With --shared-prefix, every prompt starts with the same tokens (drawn
// from the seed alone): a system prompt or a conversation's history, which
// the prefix cache holds after the first request, so that a request's own
// tokens are prefilled deep in their context (a chat turn).
Request make_request(const BenchOptions& o, Range in, Range out, int vocab, int i) {
  std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + uint64_t(i));
  Request r;
  std::mt19937_64 shared(o.seed * 0xD1B54A32D192ED03ull);
  for (int j = 0; j < o.shared_prefix; ++j) r.prompt.push_back(int32_t(3 + shared() % uint64_t(vocab - 3)));
  r.prompt.resize(size_t(o.shared_prefix + std::uniform_int_distribution<int>(in.lo, in.hi)(rng)));
  for (size_t j = size_t(o.shared_prefix); j < r.prompt.size(); ++j)
    r.prompt[j] = int32_t(3 + rng() % uint64_t(vocab - 3));
  r.max_tokens = std::uniform_int_distribution<int>(out.lo, out.hi)(rng);
  r.ignore_eos = true;
  r.sampling.temperature = o.temp;
  r.sampling.seed = o.seed + uint64_t(i);
  return r;
}

// A streaming client: submits, then reads events until the finish.
Sample run_request(Engine& engine, Request req) {
  Sample s;
  s.input = int(req.prompt.size());
  const auto t0 = Clock::now();
  RequestHandle h;
  for (;;) {
    try {
      h = engine.submit(req);
      break;
    } catch (const EngineBusy&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  Clock::time_point t_first{}, t_last{};
  for (;;) {
    const StreamEvent ev = *h->next();
    if (!ev.tokens.empty()) {
      t_last = Clock::now();
      if (s.output == 0) t_first = t_last;
      s.output += int(ev.tokens.size());
    }
    if (ev.finished) {
      RF_CHECK(ev.finish_reason == FinishReason::Length, "bench: a request ended with '",
               finish_reason_name(ev.finish_reason), "'", ev.error.empty() ? "" : ": ", ev.error);
      break;
    }
  }
  RF_CHECK(s.output == req.max_tokens, "bench: a request produced ", s.output, " tokens, not ", req.max_tokens);
  s.ttft = std::chrono::duration<double>(t_first - t0).count();
  s.e2e = std::chrono::duration<double>(t_last - t0).count();
  if (s.output > 1) s.tpot = std::chrono::duration<double>(t_last - t_first).count() / double(s.output - 1);
  return s;
}

void report_serving(const BenchOptions& o, Range in, Range out, const Engine& engine, const std::string& device,
                    const std::string& path, const std::vector<Sample>& samples, double wall) {
  std::vector<double> ttft, tpot, e2e;
  int64_t n_in = 0, n_out = 0;
  for (const Sample& s : samples) {
    n_in += s.input;
    n_out += s.output;
    ttft.push_back(s.ttft);
    e2e.push_back(s.e2e);
    if (s.tpot >= 0) tpot.push_back(s.tpot);
  }
  const EngineMetrics& m = engine.metrics();
  const double queried = double(m.prefix_cache_queried_tokens.load());
  const nlohmann::json r = {
      {"model", path}, {"device", device}, {"requests", o.requests}, {"concurrency", o.concurrency},
      {"input_len", {in.lo, in.hi}}, {"shared_prefix", o.shared_prefix}, {"output_len", {out.lo, out.hi}},
      {"temperature", std::round(double(o.temp) * 1e6) / 1e6},
      {"max_batch_tokens", engine.config().max_num_batched_tokens}, {"kv_blocks", engine.num_blocks()},
      {"duration_s", wall}, {"input_tokens", n_in}, {"output_tokens", n_out},
      {"output_tok_s", double(n_out) / wall}, {"total_tok_s", double(n_in + n_out) / wall},
      {"requests_s", double(o.requests) / wall}, {"ttft_s", stats(ttft)}, {"tpot_s", stats(tpot)},
      {"e2e_s", stats(e2e)}, {"preemptions", m.preemptions.load()}, {"engine_steps", m.steps.load()},
      {"prefix_cache_hit_rate", queried > 0 ? double(m.prefix_cache_hit_tokens.load()) / queried : 0.0},
      {"spec_type", spec_type_name(engine.config().speculative.type)}, {"spec_draft_tokens", m.spec_draft_tokens.load()},
      {"spec_accepted_tokens", m.spec_accepted_tokens.load()},
      {"spec_mean_acceptance_length", m.spec_mean_acceptance_length()}};
  if (o.json) {
    std::printf("%s\n", r.dump(2).c_str());
    return;
  }
  auto range = [](Range x) { return x.lo == x.hi ? std::to_string(x.lo) : str(x.lo, ":", x.hi); };
  std::printf("requests: %d, concurrency %d, input %s%s tokens, output %s tokens, %s\n", o.requests, o.concurrency,
              o.shared_prefix > 0 ? str(o.shared_prefix, " shared + ").c_str() : "", range(in).c_str(),
              range(out).c_str(), o.temp > 0 ? str("temperature ", o.temp).c_str() : "greedy");
  std::printf("prefix cache: %.1f%% of prompt tokens hit\n", 100.0 * r["prefix_cache_hit_rate"].get<double>());
  if (engine.config().speculative.enabled())
    std::printf("speculative %s\n", spec_summary(engine.config().speculative, m).c_str());
  std::printf("duration: %.2f s, %lld input and %lld output tokens, %llu engine steps, %llu preemptions\n", wall,
              (long long)n_in, (long long)n_out, (unsigned long long)m.steps.load(),
              (unsigned long long)m.preemptions.load());
  std::printf("throughput: %.1f output tokens/s, %.2f requests/s (%.1f tokens/s with input)\n",
              r["output_tok_s"].get<double>(), r["requests_s"].get<double>(), r["total_tok_s"].get<double>());
  // Where an engine step's wall time went, averaged over every step.
  const double steps = std::max(1.0, double(m.steps.load()));
  std::printf("engine step: %.2f ms (", 1e3 * wall / steps);
  for (int i = 0; i < EngineMetrics::kStepPhases; ++i)
    std::printf("%s%s %.2f", i ? ", " : "", EngineMetrics::step_phase_name(EngineMetrics::StepPhase(i)),
                double(m.step_micros[size_t(i)].load()) / 1e3 / steps);
  std::printf(")\n");
  // The steps by the prompt tokens they carried: how the prompts were spread.
  std::printf("steps by prompt tokens carried:");
  for (int i = 0; i < EngineMetrics::kStepShapes; ++i) {
    const double n = double(m.shape_steps[size_t(i)].load());
    if (n == 0) continue;
    std::printf(" [%s: %.0f steps, %.1f single-token rows, %.2f ms]", EngineMetrics::step_shape_name(i), n,
                double(m.shape_decode_rows[size_t(i)].load()) / n, double(m.shape_micros[size_t(i)].load()) / 1e3 / n);
  }
  std::printf("\n\n");
  std::printf("| ms | mean | p50 | p90 | p99 |\n|---|---|---|---|---|\n");
  const std::pair<const char*, const char*> rows[] = {
      {"ttft_s", "time to first token"}, {"tpot_s", "time per output token"}, {"e2e_s", "request latency"}};
  for (const auto& [key, label] : rows) {
    const auto& x = r[key];
    std::printf("| %s | %.2f | %.2f | %.2f | %.2f |\n", label, 1e3 * x["mean"].get<double>(),
                1e3 * x["p50"].get<double>(), 1e3 * x["p90"].get<double>(), 1e3 * x["p99"].get<double>());
  }
}

void serve_bench(const BenchOptions& o) {
  RF_CHECK(o.concurrency >= 1, "--concurrency must be >= 1");
  const Range in = parse_range(o.input_len, "--input-len"), out = parse_range(o.output_len, "--output-len");
  const std::string path = model_source(o.model, o.backend);
  BackendSet backends = make_backends(o.backend);
  auto model = load_model(path, backends, true, weight_placement(o.backend));
  auto tok = Tokenizer::from_gguf(model->file());
  const ModelConfig& mc = model->config();
  const int longest = o.shared_prefix + in.hi + out.hi;
  RF_CHECK(longest <= mc.n_ctx_train, "--shared-prefix + --input-len + --output-len (up to ", longest,
           " tokens) exceed the model's context of ", mc.n_ctx_train);
  EngineConfig cfg;
  cfg.max_num_seqs = o.concurrency;
  cfg.max_model_len = longest;
  cfg.max_num_batched_tokens = std::max(o.max_batch_tokens, o.concurrency);
  cfg.prefix_caching = true;
  set_kv_options(backends.first(), o.backend, cfg);
  const DraftModel draft = load_draft_model(o.spec, o.backend);
  cfg.speculative = spec_config(o.spec, &draft);
  Engine engine(*model, *tok, backends.ranks, backends.comms, cfg);
  std::fprintf(stderr, "model: %s\ndevice: %s, %d KV blocks of %d tokens (KV %s), %d tokens per step\n",
               mc.summary().c_str(), backends.name().c_str(), engine.num_blocks(), cfg.block_size,
               engine.kv_groups().summary().c_str(), cfg.max_num_batched_tokens);

  std::vector<Sample> samples(size_t(o.requests));
  std::atomic<int> next{0}, done{0}, clients_left{std::min(o.concurrency, o.requests)};
  std::mutex err_mu;
  std::string error;
  engine.start();
  const auto t0 = Clock::now();
  std::vector<Clock::time_point> ends(size_t(clients_left.load()), t0);  // when each client finished
  std::vector<std::thread> clients;
  for (int c = clients_left.load() - 1; c >= 0; --c)
    clients.emplace_back([&, c] {
      for (int i = next++; i < o.requests; i = next++) {
        try {
          samples[size_t(i)] = run_request(engine, make_request(o, in, out, mc.n_vocab, i));
          ++done;
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(err_mu);
          if (error.empty()) error = e.what();
          next = o.requests;  // the other clients stop after their current request
        }
      }
      ends[size_t(c)] = Clock::now();
      --clients_left;
    });
  // Progress on stderr: a live line on a terminal, else a line every 10%.
  const bool tty = isatty(fileno(stderr));
  for (int shown = -1; shown < o.requests;) {
    const bool last = clients_left.load() == 0;
    const int d = done.load();
    if (d != shown && (tty || last || d * 10 / o.requests != std::max(shown, 0) * 10 / o.requests)) {
      std::fprintf(stderr, tty ? "\rrequests: %d/%d done, %.1f s" : "requests: %d/%d done, %.1f s\n", d, o.requests,
                   std::chrono::duration<double>(Clock::now() - t0).count());
      shown = d;
    }
    if (last) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (auto& t : clients) t.join();
  const double wall = std::chrono::duration<double>(*std::max_element(ends.begin(), ends.end()) - t0).count();
  if (tty) std::fputc('\n', stderr);
  engine.stop();
  if (!error.empty()) fail(error);
  report_serving(o, in, out, engine, backends.name(), path, samples, wall);
}

void bench(const BenchOptions& o) {
  set_log_level(LogLevel::Warn);
  if (o.requests > 0) {
    serve_bench(o);
    return;
  }
  const std::string path = model_source(o.model, o.backend);
  BackendSet backends = make_backends(o.backend);
  const double copy_bw = backends.first().measure_copy_bandwidth();
  auto model = load_model(path, backends, true, weight_placement(o.backend));
  auto tok = Tokenizer::from_gguf(model->file());
  const double weight_bytes = double(model->weights().bytes);
  const ModelConfig& mc = model->config();
  // Tensor parallel: weight bytes and bandwidth are one rank's (each reads its shard at once).
  const int tp = model->n_ranks();
  const DType kv_elem = kv_element_type(backends.first(), kv_cache_dtype(o.backend));
  const char* kv_type = dtype_name(kv_elem);
  // The K/V bytes one sequence's measured decode steps read (contexts
  // n_prompt + 1 .. n_prompt + n_gen - 1), one rank's share.
  const KVGeometry kv_geo = kv_geometry(mc, kv_elem, 16);
  double kv_seq_bytes = 0;
  for (int s = 1; s < o.n_gen; ++s) kv_seq_bytes += double(kv_geo.bytes_read(o.n_prompt + s));
  kv_seq_bytes /= tp;
  std::fprintf(stderr,
               "model: %s (%.2f GB of weights%s)\ndevice: %s, copy bandwidth %.0f GB/s (read + write); KV cache %s\n",
               mc.summary().c_str(), weight_bytes / 1e9, tp > 1 ? " per rank" : "", backends.name().c_str(),
               copy_bw / 1e9, kv_type);
  if (model->weights().expert_bytes > 0)
    std::fprintf(stderr,
                 "weight GB/s counts the bytes a step reads: the shared weights and the chosen experts (%.2f GB at "
                 "batch 1; more sequences: the expected share under uniform routing)\n",
                 model->weights().bytes_read_per_step(1, mc.n_expert_used, mc.n_expert) / 1e9);
  const DraftModel draft = load_draft_model(o.spec, o.backend);
  nlohmann::json results = nlohmann::json::array();
  for (int P : o.parallel) {
    RF_CHECK(P >= 1, "--parallel values must be >= 1");
    EngineConfig cfg;
    cfg.max_num_seqs = P;
    cfg.max_model_len = o.n_prompt + o.n_gen + 16;
    cfg.max_num_batched_tokens = std::max(o.max_batch_tokens, P);
    cfg.prefix_caching = false;
    cfg.kv_cache_dtype = kv_cache_dtype(o.backend);
    cfg.speculative = spec_config(o.spec, &draft);
    cfg.num_blocks = int32_t(P * kv_group_layout(model->config())
                                     .max_blocks_per_sequence(cfg.max_model_len, cfg.block_size,
                                                              cfg.max_num_batched_tokens) +
                             1);
    Engine engine(*model, *tok, backends.ranks, backends.comms, cfg);
    std::vector<double> pp, tg, bw, kv_bw;
    for (int r = 0; r <= o.reps; ++r) {
      const Phase ph = run_once(engine, P, o, 1000 * uint64_t(P) + uint64_t(r));
      if (r == 0) continue;  // warm-up
      pp.push_back(double(P) * o.n_prompt / ph.prompt_s);
      tg.push_back(double(P) * (o.n_gen - 1) / ph.gen_s);
      bw.push_back(model->weights().bytes_read_per_step(P, mc.n_expert_used, mc.n_expert) * (o.n_gen - 1) / ph.gen_s);
      kv_bw.push_back(double(P) * kv_seq_bytes / ph.gen_s);
      std::fprintf(stderr, "  parallel %d run %d/%d: prompt %.0f tok/s, generation %.1f tok/s", P, r, o.reps,
                   pp.back(), tg.back());
      if (ph.gen_steps > 0) {  // where a generation step's wall time went
        const double n = double(ph.gen_steps);
        std::fprintf(stderr, "; %.2f ms a step (", 1e3 * ph.gen_s / n);
        for (int i = 0; i < EngineMetrics::kStepPhases; ++i)
          std::fprintf(stderr, "%s%s %.2f", i ? ", " : "", EngineMetrics::step_phase_name(EngineMetrics::StepPhase(i)),
                       1e3 * ph.gen_step_s[size_t(i)] / n);
        std::fprintf(stderr, ")");
      }
      std::fprintf(stderr, "\n");
    }
    const EngineMetrics& em = engine.metrics();
    if (cfg.speculative.enabled())
      std::fprintf(stderr, "  parallel %d speculative %s\n", P, spec_summary(cfg.speculative, em).c_str());
    results.push_back({{"parallel", P}, {"n_prompt", o.n_prompt}, {"n_gen", o.n_gen}, {"reps", o.reps},
                       {"spec_type", spec_type_name(cfg.speculative.type)},
                       {"spec_draft_tokens", em.spec_draft_tokens.load()},
                       {"spec_accepted_tokens", em.spec_accepted_tokens.load()},
                       {"spec_mean_acceptance_length", em.spec_mean_acceptance_length()},
                       {"prompt_tok_s", mean(pp)}, {"prompt_tok_s_std", stdev(pp)},
                       {"gen_tok_s", mean(tg)}, {"gen_tok_s_std", stdev(tg)},
                       {"gen_weight_gb_s", mean(bw) / 1e9},
                       {"gen_share_of_copy_bw", copy_bw > 0 ? mean(bw) / copy_bw : 0.0},
                       {"gen_kv_gb_s", mean(kv_bw) / 1e9},
                       {"gen_share_of_copy_bw_with_kv", copy_bw > 0 ? (mean(bw) + mean(kv_bw)) / copy_bw : 0.0}});
  }
  // Tensor parallel: what the all-reduces of a decode step cost, at each batch size.
  nlohmann::json reduce = nlohmann::json::array();
  if (tp > 1)
    for (int P : o.parallel) {
      const AllReduceTiming t = time_all_reduce(backends, mc.n_embd, P, mc.n_layer);
      reduce.push_back({{"rows", P}, {"us_per_call", t.us_per_call}, {"ms_per_step", t.ms_per_step}});
      std::fprintf(stderr, "all-reduce of %d x %d activations: %.1f us per call, %.2f ms per step (%d calls)\n", P,
                   mc.n_embd, t.us_per_call, t.ms_per_step, 2 * mc.n_layer + 1);
    }
  if (o.json) {
    nlohmann::json out = {{"model", path}, {"weights_gb", weight_bytes / 1e9}, {"device", backends.name()},
                          {"tensor_parallel", tp}, {"copy_bandwidth_gb_s", copy_bw / 1e9}, {"kv_cache", kv_type},
                          {"results", results}};
    if (tp > 1) out["all_reduce"] = reduce;
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  // Tensor parallel: one GPU's weight bytes and bandwidth (each reads its shard at once).
  const char* per_rank = tp > 1 ? " per rank" : "";
  std::printf("| parallel | test | tokens/s | std | weight GB/s%s | share of copy BW%s | K/V GB/s%s | share with K/V%s "
              "|\n|---|---|---|---|---|---|---|---|\n",
              per_rank, per_rank, per_rank, per_rank);
  for (const auto& r : results) {
    std::printf("| %d | pp%d | %.1f | %.1f | | | | |\n", r["parallel"].get<int>(), o.n_prompt,
                r["prompt_tok_s"].get<double>(), r["prompt_tok_s_std"].get<double>());
    std::printf("| %d | tg%d | %.1f | %.1f | %.0f | %.0f%% | %.0f | %.0f%% |\n", r["parallel"].get<int>(), o.n_gen,
                r["gen_tok_s"].get<double>(), r["gen_tok_s_std"].get<double>(), r["gen_weight_gb_s"].get<double>(),
                100 * r["gen_share_of_copy_bw"].get<double>(), r["gen_kv_gb_s"].get<double>(),
                100 * r["gen_share_of_copy_bw_with_kv"].get<double>());
  }
}

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand(
      "bench", "Measure prompt and generation speed through the engine (serving throughput with --requests)");
  cmd->add_option("-m,--model", o->model, "GGUF model");
  cmd->add_option("-p,--n-prompt", o->n_prompt, "Prompt tokens per sequence")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("-n,--n-gen", o->n_gen, "Tokens generated per sequence")->check(CLI::Range(2, 1 << 20))->capture_default_str();
  cmd->add_option("-r,--reps", o->reps, "Measured runs (after one warm-up)")->check(CLI::Range(1, 1000))->capture_default_str();
  cmd->add_option("--parallel", o->parallel, "Sequences decoding together (comma-separated list)")->delimiter(',');
  cmd->add_option("--max-batch-tokens", o->max_batch_tokens, "Token budget per engine step")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  cmd->add_option("--requests", o->requests,
                  "Serving throughput mode: requests to complete (closed loop; replaces -p/-n/-r/--parallel)")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--concurrency", o->concurrency, "Serving mode: client threads, each with one request in flight")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--input-len", o->input_len, "Serving mode: prompt tokens, N or a range LO:HI drawn uniformly")
      ->capture_default_str();
  cmd->add_option("--shared-prefix", o->shared_prefix,
                  "Serving mode: tokens every prompt starts with, before its own --input-len tokens "
                  "(a system prompt or a chat history the prefix cache holds)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--output-len", o->output_len, "Serving mode: output tokens, N or a range LO:HI drawn uniformly")
      ->capture_default_str();
  cmd->add_option("--temp", o->temp, "Serving mode: temperature (0: greedy)")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Serving mode: seed for prompts, lengths and sampling")->capture_default_str();
  cmd->add_flag("--json", o->json, "JSON output");
  add_backend_options(*cmd, o->backend);
  add_spec_options(*cmd, o->spec);
  cmd->callback([o] { bench(*o); });
}

RF_REGISTER_COMMAND(50, add_bench_command);

}  // namespace
}  // namespace rf::cli
