// Engine: the step loop (DESIGN.md, "One engine step"). Server threads call
// submit() and read the returned handle; one engine thread schedules,
// flattens the batch, runs the forward pass, samples, appends tokens,
// detokenizes, checks stop conditions and streams text back. Cancellation
// is a flag on the handle, honoured within one step.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "grammar/compiled.h"
#include "grammar/token_mask.h"
#include "engine/metrics.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/proposer_draft.h"
#include "engine/proposer_ngram.h"
#include "engine/serving.h"
#include "engine/speculative.h"
#include "engine/stop_matcher.h"
#include "engine/thinking.h"
#include "model/model.h"
#include "model/step_runner.h"
#include "tokenizer/tokenizer.h"

namespace rf {

struct EngineConfig {
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 2048;
  int32_t block_size = 16;
  // The KV cache size, decided by kv/memory_plan: an explicit block count,
  // else a byte budget, else a share of device memory (GPUs), else enough
  // for max_num_seqs full contexts (at most 4 GiB, the host default).
  int32_t num_blocks = 0;
  size_t kv_memory_bytes = 0;
  float memory_utilization = 0;  // GPUs: share of device memory for weights, workspace and KV
  int32_t max_model_len = 0;     // 0: the model's training context
  int32_t max_queue = 4096;      // requests waiting for a sequence slot beyond this are refused (EngineBusy)
  bool prefix_caching = true;
  KVCacheDType kv_cache_dtype = KVCacheDType::Auto;  // --kv-cache-dtype
  Pooling pooling = Pooling::None;  // embedding requests' pooling (--pooling); None: the model's (ModelConfig::pooling)
  // Hybrid models (recurrent layers): prefix-checkpoint state rows beside
  // the max_num_seqs sequence slots (-1: max_num_seqs with prefix caching,
  // else 0). Planned with the KV cache (kv/memory_plan).
  int32_t state_checkpoints = -1;
  // Speculative decoding (engine/speculative.h; off by default). Each
  // sequence slot then takes up to 1 + draft_max logit rows a step.
  SpeculativeConfig speculative;
};


class Engine final : public ServingEngine {
 public:
  Engine(const Model& model, const Tokenizer& tokenizer, Backend& backend, EngineConfig config);
  // Tensor parallel: the model loaded onto `backends` (one per rank, in
  // order), joined by `comms` (one per rank; none for one backend).
  Engine(const Model& model, const Tokenizer& tokenizer, std::span<Backend* const> backends,
         std::span<Communicator* const> comms, EngineConfig config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts / stops the engine thread. stop() cancels what is still running.
  void start();
  void stop();

  // Validates and queues a request (thread-safe). Throws rf::Error for an
  // invalid request (message suitable for a 400) and EngineBusy when full.
  RequestHandle submit(Request request) override;

  // Runs one step on the calling thread (when not started); false if idle.
  bool step();
  // Steps until no work is left (when not started).
  void run_until_idle();

  const EngineMetrics& metrics() const { return metrics_; }
  const EngineConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const override { return tokenizer_; }
  ServingLimits limits() const override;
  std::string metrics_text() const override { return metrics_.prometheus_text(); }
  const ModelConfig& model_config() const { return model_.config(); }
  int32_t max_model_len() const { return config_.max_model_len; }
  int32_t num_blocks() const { return config_.num_blocks; }
  // The longest sequence the KV cache holds alone (KVGroupLayout::max_tokens_for_blocks).
  int32_t max_sequence_tokens() const;
  const KVGroupLayout& kv_groups() const { return runner_->kv_groups(); }
  int32_t tensor_parallel_size() const { return runner_->n_ranks(); }
  int32_t free_blocks() const { return int32_t(metrics_.kv_blocks_free.load()); }
  // Hybrid models: the recurrent-state rows' bookkeeping (null otherwise;
  // engine thread, or while the engine is not started).
  const StatePool* state_pool() const { return scheduler_->state_pool(); }
  // Speculative decoding with a draft model: its proposer (null otherwise).
  const DraftProposer* draft_proposer() const { return draft_model_.get(); }
  size_t active_requests() const override;

 private:
  struct Active;
  void loop();
  void admit_new();
  void handle_cancellations();
  // Hands out one sampled token; false when it ended the request (`a` is gone).
  bool process_token(Active& a, const SampleResult& r);
  // Speculative decoding, before scheduling: proposals for the sequences
  // that decode and may speculate (engine_sampling.cpp).
  void propose_drafts();
  // The sample rows of scheduled entry `entry` (batch sequence `si`): one,
  // or one per proposed token and one more, with their logit rows.
  void add_sample_rows(Active& a, const ScheduledSeq& e, size_t entry, int32_t si);
  // After sampling: proposals verified and rolled back, the step completed
  // in the scheduler, the tokens handed out.
  void take_tokens(std::vector<ScheduledSeq>& sched);
  // Embedding requests of this step: their rows' hidden states pooled
  // (after the forward pass), and those whose prompt is done finished.
  void pool_embeddings();
  void finish_embedding(Active& a);
  void finish(Active& a, FinishReason reason, const std::string& error = "");
  void fail_step(const std::vector<ScheduledSeq>& step, const std::string& error);
  void update_gauges();
  // A stream's event, its listener (the server's wake-up: a system call)
  // called later by wake_listeners: around the next step's launch (step()),
  // or before the engine goes idle.
  void emit(RequestStream& stream, StreamEvent ev);
  void wake_listeners();

  const Model& model_;
  const Tokenizer& tokenizer_;
  EngineConfig config_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<StepRunner> runner_;
  EngineMetrics metrics_;

  // Engine-thread state.
  std::unordered_map<uint64_t, std::unique_ptr<Active>> active_;
  std::unordered_map<const Sequence*, Active*> by_seq_;
  Batch batch_;
  std::vector<std::span<const int32_t>> group_blocks_;  // a sequence's block tables, per KV group
  std::vector<SampleRow> rows_;
  std::vector<PenaltyToken> penalties_;
  std::vector<SampleResult> results_;
  std::vector<Active*> sampled_;  // per sample row
  struct SampledSeq {
    Active* a;
    size_t entry;       // in the step's schedule
    int32_t first_row;  // its first sample row (n_draft + 1 of them)
    int32_t accepted;   // of its proposed tokens (take_tokens)
  };
  std::vector<SampledSeq> sampled_seqs_;
  // Speculative decoding's proposer (both null: off).
  std::unique_ptr<NgramProposer> proposer_;
  std::unique_ptr<DraftProposer> draft_model_;
  std::vector<int32_t> draft_;               // propose_drafts' scratch
  // Draft model: the round's jobs, and the sequences whose draft KV may
  // hold proposals until settle_drafts() bounds it by the target's.
  std::vector<DraftProposer::Job> draft_jobs_;
  std::vector<std::vector<int32_t>> draft_outs_;
  std::vector<uint64_t> draft_unsettled_;
  void settle_drafts();
  std::unordered_map<int32_t, PenaltyToken> draft_penalties_;  // add_sample_rows' scratch
  struct EmbeddingRows {
    Active* a;
    int32_t first_row;  // in the batch
    int32_t start;      // position of that row in the sequence
    int32_t n;          // rows
    bool last;          // the prompt's last chunk
  };
  std::vector<EmbeddingRows> embedding_rows_;
  std::vector<float> hidden_;  // pool_embeddings' host copy
  std::vector<RequestStream::Listener> listeners_to_wake_;  // emit()'s, in order
  std::vector<int32_t> eog_tokens_;
  // Structured output (requests with a grammar): each token's bytes, their
  // trie and the compiled grammars, built at the first such request; the
  // step's masks. What the live grammars learned is forgotten past
  // kGrammarMemoryBytes together (GrammarCache::trim).
  static constexpr size_t kGrammarMemoryBytes = size_t(256) << 20;
  std::vector<std::string> token_bytes_;
  std::unique_ptr<grammar::TokenTrie> trie_;
  std::unique_ptr<grammar::GrammarCache> grammars_;
  std::vector<std::vector<uint32_t>> masks_;
  // After the forward pass is queued, before sampling: each row's token
  // mask — the one token a thinking budget forces, or the grammar's.
  void token_masks();

  // Shared with submitters.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::list<std::unique_ptr<Active>> inbox_;
  // Requests submitted and not yet finished (inbox, waiting and running).
  // Admission compares it with max_num_seqs + max_queue under mu_, so the
  // decision is exact and atomic: at most max_queue of them lack a slot.
  int64_t outstanding_ = 0;
  uint64_t next_id_ = 1;
  bool stopping_ = false;
  bool threaded_ = false;  // start() ran and stop() has not finished joining (thread_ itself is not read under mu_)
  std::thread thread_;
};

}  // namespace rf
