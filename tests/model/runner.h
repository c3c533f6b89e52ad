// Test helper: runs a model through the engine's own pieces (Transformer,
// KVCache, BlockPool, Batch) without the scheduler, for one or several
// sequences at once — the model tier of the tests. A sequence holds every
// block of its context in each KV group (nothing is released as sliding
// windows move): `num_blocks` per group. Hybrid models: each sequence
// takes a free recurrent-state row (max_seqs of them, plus `checkpoints`
// rows a test may save states into and restore them from). `layers` > 0
// runs only the model's first `layers` layers, the output norm and head
// after them (to find the depth where two backends part).
// `placement`: where the weights live (WeightPlacement: experts in host memory).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "kv/block_pool.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/transformer.h"

namespace rf::test {

class ModelRunner {
 public:
  // `path`: a GGUF file, or "dummy:PRESET[:TYPE]" for dummy weights in a
  // synthetic preset's shape (Model::load_dummy).
  ModelRunner(const std::string& path, Backend& backend, int32_t max_tokens = 256, int32_t max_seqs = 8,
              int32_t num_blocks = 256, int32_t block_size = 16, KVCacheDType kv_dtype = KVCacheDType::Auto,
              int32_t checkpoints = 0, int32_t layers = 0, WeightPlacement placement = {})
      : backend_(backend),
        model_(load_model(path, backend, placement)),
        config_(truncated(model_->config(), layers)),
        groups_(kv_group_layout(config_)),
        pool_(num_blocks * groups_.n_groups(), block_size) {
    BackendLimits lim;
    lim.max_tokens = max_tokens;
    lim.max_seqs = max_seqs;
    lim.max_logits = max_seqs;
    lim.max_blocks_per_seq = max_blocks_ = num_blocks;
    tf_ = std::make_unique<Transformer>(config_, model_->weights(), backend, lim);
    KVBudget budget;
    budget.num_blocks = pool_.num_blocks();
    if (config_.has_recurrent()) {
      budget.state_rows = max_seqs + checkpoints;
      for (int32_t r = max_seqs - 1; r >= 0; --r) free_rows_.push_back(r);
    }
    const DType kv_type = kv_element_type(backend, kv_dtype);
    kv_ = std::make_unique<KVCache>(backend, config_, KVMemoryPlan(kv_geometry(config_, kv_type, block_size), budget),
                                    kv_type);
  }
  static ModelConfig truncated(const ModelConfig& c, int32_t layers) {
    ModelConfig out = c;
    if (layers > 0 && layers < c.n_layer) out.n_layer = layers;
    return out;
  }
  int32_t n_layer() const { return config_.n_layer; }
  const ModelConfig& config() const { return config_; }

  const Model& model() const { return *model_; }
  static std::unique_ptr<Model> load_model(const std::string& path, Backend& backend, WeightPlacement placement = {}) {
    Backend* ranks[] = {&backend};
    if (path.rfind("dummy:", 0) != 0) return Model::load(path, ranks, false, placement);
    return Model::load_dummy(path.substr(6), ranks, false, placement);
  }
  // Captures decode graphs up front (GPU backends), as the engine does.
  void warmup() { tf_->warmup(*kv_); }
  int32_t vocab() const { return model_->config().n_vocab; }

  struct Seq {
    std::vector<int32_t> tokens;  // all tokens fed so far
    std::vector<std::vector<int32_t>> blocks;  // per KV group
    int32_t n_done = 0;
    int32_t state_row = -1;  // hybrid models: taken at the first step
  };

  // Feeds each sequence's pending tokens (tokens[n_done:]) in one batch and
  // returns the logits after each sequence's last token, [n_seqs][vocab].
  // `loads` and `saves`: whole state rows copied before and after the step.
  std::vector<std::vector<float>> step(std::vector<Seq*> seqs, std::vector<Batch::StateCopy> loads = {},
                                       std::vector<Batch::StateCopy> saves = {}) {
    Batch b;
    b.reset(pool_.block_size(), max_blocks_, groups_.n_groups());
    b.state_loads = std::move(loads);
    b.state_saves = std::move(saves);
    for (Seq* s : seqs) {
      if (config_.has_recurrent() && s->state_row < 0) take_state_row(*s);
      const int32_t end = int32_t(s->tokens.size());
      s->blocks.resize(size_t(groups_.n_groups()));
      std::vector<std::span<const int32_t>> tables;
      for (auto& blocks : s->blocks) {
        while (int32_t(blocks.size()) * pool_.block_size() < end) blocks.push_back(pool_.allocate());
        tables.emplace_back(blocks);
      }
      b.add_sequence(std::span<const int32_t>(s->tokens.data() + s->n_done, size_t(end - s->n_done)), s->n_done,
                     tables, true, s->state_row);
      s->n_done = end;
    }
    Tensor logits = tf_->forward(b, *kv_);
    std::vector<std::vector<float>> out(seqs.size(), std::vector<float>(size_t(vocab())));
    for (size_t i = 0; i < seqs.size(); ++i)
      backend_.copy_to_host(out[i].data(), static_cast<const uint8_t*>(logits.data) + i * logits.row_bytes(),
                            size_t(vocab()) * 4);
    return out;
  }

  void release(Seq& s) {
    for (auto& blocks : s.blocks)
      for (int32_t b : blocks) pool_.release(b);
    s.blocks.clear();
    if (s.state_row >= 0) free_rows_.push_back(s.state_row);
    s.state_row = -1;
  }
  // State rows not held by a sequence (hybrid models).
  size_t free_state_rows() const { return free_rows_.size(); }
  // Gives s a free state row now (before its first step: a test that
  // restores a checkpoint into it needs the row).
  void take_state_row(Seq& s) {
    RF_CHECK(!free_rows_.empty() && s.state_row < 0, "runner: no free state row");
    s.state_row = free_rows_.back();
    free_rows_.pop_back();
  }

  static int32_t argmax(const std::vector<float>& v) {
    int32_t best = 0;
    for (int32_t i = 1; i < int32_t(v.size()); ++i)
      if (v[size_t(i)] > v[size_t(best)]) best = i;
    return best;
  }

  // Greedy decoding of up to n tokens, stopping after `eos`.
  std::vector<int32_t> greedy(const std::vector<int32_t>& prompt, int n, int32_t eos,
                              std::vector<float>* first_logits = nullptr) {
    Seq s;
    s.tokens = prompt;
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
      auto logits = step({&s})[0];
      if (i == 0 && first_logits) *first_logits = logits;
      const int32_t t = argmax(logits);
      out.push_back(t);
      s.tokens.push_back(t);
      if (t == eos) break;
    }
    release(s);
    return out;
  }

  const BlockPool& pool() const { return pool_; }

 private:
  Backend& backend_;
  std::unique_ptr<Model> model_;
  ModelConfig config_;  // the model's, possibly truncated to fewer layers
  KVGroupLayout groups_;
  BlockPool pool_;
  int32_t max_blocks_ = 0;
  std::unique_ptr<Transformer> tf_;
  std::unique_ptr<KVCache> kv_;
  std::vector<int32_t> free_rows_;  // sequence state rows (hybrid models)
};

// The error loading `path` on a CPU backend gives ("" if it loads).
inline std::string load_error(const std::string& path) {
  CpuBackend backend(1);
  try {
    Model::load(path, backend, false);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace rf::test
