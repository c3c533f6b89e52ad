// `rocmforge serve`: the OpenAI-compatible HTTP server. Starts listening
// first (so /health answers 503 while the model loads), loads the model,
// starts the engine thread, then serves until SIGINT/SIGTERM: new requests
// get 503, in-flight ones may finish within --shutdown-timeout, what is left
// is cancelled, and the process exits with code 0. A second signal exits at
// once. Signals are taken by a dedicated thread with sigwait (no handler,
// no global flag): every other thread has them blocked.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include "cli/backend_factory.h"
#include "cli/chat_template_choice.h"
#include "cli/commands.h"
#include "cli/spec_options.h"
#include "core/env.h"
#include "core/log.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/chat_prompt.h"
#include "server/http_server.h"
#include "server/model_service.h"
#include "tokenizer/tokenizer.h"

namespace rf::cli {
namespace {

struct ServeOptions {
  std::string model, host = "127.0.0.1", api_key, chat_template_file, served_model_name;
  int port = 8080;
  int ctx_size = 0;
  int max_num_seqs = 64;
  int max_queue = 4096;
  int max_num_batched_tokens = 2048;
  double shutdown_timeout = 30;
  double max_body_mb = 8;
  size_t max_header_bytes = 16384, max_headers = 100, max_url_bytes = 8192;
  double header_timeout = 10, body_timeout = 60, keep_alive_timeout = 65, write_timeout = 30;
  size_t max_connections = 10000;
  int http_threads = 4;
  bool allow_special_in_content = false;
  bool verbose = false;
  std::string reasoning_format = "auto";
  int reasoning_budget = -1;
  bool embeddings = false;
  std::string pooling;  // "": the model's
  double responses_store_mb = 0;
  BackendOptions backend;
  SpecOptions spec;
};

// Waits for SIGINT/SIGTERM on a thread of its own. Construct it before any
// other thread starts: it blocks the signals in the constructing thread, and
// threads created later inherit that mask.
class ShutdownSignals {
 public:
  ShutdownSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGUSR1);  // our own wake-up, to end the thread
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    thread_ = std::thread([this] { run(); });
  }
  ~ShutdownSignals() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quitting_ = true;
    }
    pthread_kill(thread_.native_handle(), SIGUSR1);
    thread_.join();
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  // True once a shutdown signal came; waits at most `timeout` for one.
  bool wait_for(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return signals_ > 0; });
  }
  bool requested() {
    std::lock_guard<std::mutex> lock(mu_);
    return signals_ > 0;
  }

 private:
  void run() {
    for (;;) {
      int sig = 0;
      if (sigwait(&set_, &sig) != 0) continue;
      std::lock_guard<std::mutex> lock(mu_);
      if (quitting_) return;
      if (sig == SIGUSR1) continue;
      if (++signals_ >= 2) {
        std::fprintf(stderr, "rocmforge serve: second signal, exiting now\n");
        std::_Exit(130);
      }
      std::fprintf(stderr, "rocmforge serve: %s received, shutting down (send it again to exit at once)\n",
                   sig == SIGINT ? "SIGINT" : "SIGTERM");
      cv_.notify_all();
    }
  }

  sigset_t set_, old_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  int signals_ = 0;
  bool quitting_ = false;
};

// The names a request's "model" may use: the served name, the path as
// given, the absolute path and the file name.
std::vector<std::string> model_names(const ServeOptions& o, const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  names.push_back(o.served_model_name.empty() ? fs::path(path).stem().string() : o.served_model_name);
  std::error_code ec;
  for (std::string n : {path, fs::absolute(path, ec).string(), fs::path(path).filename().string(),
                        fs::path(path).stem().string()})
    if (!n.empty() && std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  return names;
}

void serve(const ServeOptions& o) {
  set_log_level(o.verbose ? LogLevel::Debug : LogLevel::Info);
  ShutdownSignals signals;  // first: every thread below inherits the blocked signals

  server::HttpOptions http_opts;
  http_opts.host = o.host;
  http_opts.port = o.port;
  http_opts.api_key = o.api_key;
  if (http_opts.api_key.empty()) http_opts.api_key = env().api_key;
  http_opts.limits.max_body_bytes = size_t(o.max_body_mb * 1024 * 1024);
  http_opts.limits.max_header_bytes = o.max_header_bytes;
  http_opts.limits.max_headers = o.max_headers;
  http_opts.limits.max_url_bytes = o.max_url_bytes;
  auto ms = [](double seconds) { return std::chrono::milliseconds(int64_t(seconds * 1000)); };
  http_opts.header_timeout = ms(o.header_timeout);
  http_opts.body_timeout = ms(o.body_timeout);
  http_opts.keep_alive_timeout = ms(o.keep_alive_timeout);
  http_opts.write_timeout = ms(o.write_timeout);
  http_opts.max_connections = o.max_connections;
  http_opts.io_threads = o.http_threads;
  server::HttpServer http(http_opts);
  http.start();
  std::fprintf(stderr, "rocmforge serve: listening on http://%s:%d (loading the model)\n", o.host.c_str(), http.port());

  const std::string path = model_source(o.model, o.backend);
  BackendSet backends = make_backends(o.backend);
  auto model = load_model(path, backends, o.verbose, weight_placement(o.backend));
  auto tok = Tokenizer::from_gguf(model->file());
  const ChatTemplateChoice tmpl = choose_chat_template(&model->file(), o.chat_template_file);
  const server::ChatPrompt chat(*tok, tmpl.source, tmpl.origin, o.allow_special_in_content);

  EngineConfig cfg;
  cfg.max_num_seqs = o.max_num_seqs;
  cfg.max_model_len = o.ctx_size > 0 ? o.ctx_size : model->config().n_ctx_train;
  cfg.max_num_batched_tokens = o.max_num_batched_tokens;
  cfg.max_queue = o.max_queue;
  set_kv_options(backends.first(), o.backend, cfg);
  if (!o.pooling.empty()) cfg.pooling = *pooling_from_name(o.pooling);
  const DraftModel draft = load_draft_model(o.spec, o.backend);
  cfg.speculative = spec_config(o.spec, &draft);
  Engine engine(*model, *tok, backends.ranks, backends.comms, cfg);
  engine.start();
  server::ServiceOptions features;
  features.reasoning_mode = *server::reasoning_mode_from_name(o.reasoning_format);
  features.reasoning_budget = o.reasoning_budget;
  features.embeddings = o.embeddings;
  features.responses_store_bytes = size_t(o.responses_store_mb * 1024 * 1024);
  server::ModelService service(engine, chat, model_names(o, path), features);
  http.set_service(&service);
  const char* reasoning[] = {"none", "think tags", "harmony"};
  std::fprintf(stderr,
               "rocmforge serve: ready: model '%s' (%s), context %d, KV cache %d blocks of %d tokens (%s; one "
               "sequence up to %d tokens), chat template: %s; reasoning: %s; embeddings: %s\n",
               service.name().c_str(), path.c_str(), engine.max_model_len(), engine.num_blocks(),
               engine.config().block_size, engine.kv_groups().summary().c_str(), engine.max_sequence_tokens(),
               tmpl.origin.c_str(), reasoning[int(service.reasoning_format())],
               o.embeddings ? pooling_name(engine.limits().pooling) : "off");

  bool listener_failed = false;
  while (!signals.wait_for(std::chrono::milliseconds(500))) {
    if (!http.listening()) {
      listener_failed = true;
      break;
    }
  }

  http.begin_shutdown();
  const auto timeout = std::chrono::milliseconds(int64_t(o.shutdown_timeout * 1000));
  if (!http.wait_idle(timeout))
    std::fprintf(stderr, "rocmforge serve: requests still running after %.1f s: cancelling them\n", o.shutdown_timeout);
  service.mark_stopping();
  engine.stop();  // cancels whatever is left; its handles end
  http.wait_idle(std::chrono::milliseconds(300));  // their clients get the error events
  http.stop();  // every connection ends now, whatever its client does
  if (listener_failed) fail("the HTTP listener stopped unexpectedly");
  std::fprintf(stderr, "rocmforge serve: stopped\n");
}

void add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand("serve", "OpenAI- and Anthropic-compatible HTTP server (/v1/chat/completions, "
                                          "/v1/completions, /v1/messages, /v1/responses, /v1/embeddings)");
  cmd->add_option("-m,--model", o->model, "GGUF model (default: $ROCMFORGE_MODEL or the demo stories260K.gguf)");
  cmd->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o->port, "Port to listen on (0: any free port)")->check(CLI::Range(0, 65535))->capture_default_str();
  cmd->add_option("--api-key", o->api_key, "Require 'Authorization: Bearer KEY' on /v1 (default: $ROCMFORGE_API_KEY)");
  cmd->add_option("--served-model-name", o->served_model_name, "Model name in the API (default: the file name)");
  cmd->add_option("-c,--ctx-size", o->ctx_size, "Context size per sequence (0: the model's)")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Sequences generated at once")->check(CLI::Range(1, 4096))->capture_default_str();
  cmd->add_option("--max-queue", o->max_queue, "Waiting requests beyond which new ones get 503")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Tokens per engine step")
      ->check(CLI::Range(16, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--chat-template-file", o->chat_template_file, "Jinja chat template (overrides the model's)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--shutdown-timeout", o->shutdown_timeout, "Seconds in-flight requests may take to finish on shutdown")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--max-body-mb", o->max_body_mb, "Largest request body accepted (413 beyond)")
      ->check(CLI::Range(0.001, 1024.0))
      ->capture_default_str();
  cmd->add_option("--max-header-bytes", o->max_header_bytes, "Largest request header fields in all (431 beyond)")
      ->check(CLI::Range(size_t(1024), size_t(1) << 24))
      ->capture_default_str();
  cmd->add_option("--max-headers", o->max_headers, "Most header fields in a request (431 beyond)")
      ->check(CLI::Range(size_t(8), size_t(1) << 16))
      ->capture_default_str();
  cmd->add_option("--max-url-bytes", o->max_url_bytes, "Longest request URL (414 beyond)")
      ->check(CLI::Range(size_t(256), size_t(1) << 24))
      ->capture_default_str();
  cmd->add_option("--header-timeout", o->header_timeout, "Seconds a client may take to send a request's head (408)")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  cmd->add_option("--body-timeout", o->body_timeout, "Seconds a client may take to send a request's body (408)")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  cmd->add_option("--keep-alive-timeout", o->keep_alive_timeout, "Seconds an idle connection stays open between requests")
      ->check(CLI::Range(0.01, 86400.0))
      ->capture_default_str();
  cmd->add_option("--write-timeout", o->write_timeout,
                  "Seconds a response may make no progress (a client that stopped reading) before the connection is dropped")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  cmd->add_option("--max-connections", o->max_connections, "Open connections at most (503 beyond)")
      ->check(CLI::Range(size_t(1), size_t(1) << 24))
      ->capture_default_str();
  cmd->add_option("--http-threads", o->http_threads, "I/O threads serving every connection")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_flag("--allow-special-in-content", o->allow_special_in_content,
                "Tokenize special-token text in chat messages as control tokens (by default it stays text, so "
                "content cannot forge roles)");
  cmd->add_option("--reasoning-format", o->reasoning_format,
                  "Thinking in chat replies: auto (the chat template's format: <think> tags or harmony channels) "
                  "puts it in reasoning_content, deepseek parses <think> tags whatever the template, none leaves it "
                  "in the content")
      ->check(CLI::IsMember({"none", "deepseek", "auto"}))
      ->capture_default_str();
  cmd->add_option("--reasoning-budget", o->reasoning_budget,
                  "Thinking tokens a reply may take before its end is forced (-1: no limit; 0: no thinking, the "
                  "template told enable_thinking=false); a request's reasoning_budget overrides it")
      ->check(CLI::Range(-1, 1 << 30))
      ->capture_default_str();
  cmd->add_flag("--embeddings", o->embeddings, "Serve /v1/embeddings (pooled, L2-normalised final hidden states)");
  cmd->add_option("--pooling", o->pooling,
                  "Embedding pooling: last, mean or cls (default: the model's pooling_type, else its family's)")
      ->check(CLI::IsMember({"last", "mean", "cls"}));
  cmd->add_option("--responses-store-mb", o->responses_store_mb,
                  "Memory for responses of /v1/responses kept for previous_response_id, least recently used "
                  "dropped first (0: none kept; requests are stateless)")
      ->check(CLI::Range(0.0, 1048576.0))
      ->capture_default_str();
  cmd->add_flag("-v,--verbose", o->verbose, "Log every request and loading details");
  add_backend_options(*cmd, o->backend);
  add_spec_options(*cmd, o->spec);
  cmd->callback([o] { serve(*o); });
}

RF_REGISTER_COMMAND(40, add_serve_command);

}  // namespace
}  // namespace rf::cli
