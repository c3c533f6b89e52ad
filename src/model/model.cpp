// Model loading with progress, whole or one shard per rank.
#include "model/model.h"

#include "core/log.h"
#include "model/shard.h"

namespace rf {

std::unique_ptr<Model> Model::load(const std::string& path, Backend& backend, bool progress) {
  Backend* ranks[] = {&backend};
  return load(path, ranks, progress);
}

std::unique_ptr<Model> Model::load(const std::string& path, std::span<Backend* const> ranks, bool progress) {
  RF_CHECK(!ranks.empty(), "model: no backend to load onto");
  auto m = std::make_unique<Model>();
  m->file_ = gguf::File::open(path);
  m->config_ = ModelConfig::from_gguf(*m->file_);
  const int32_t n = int32_t(ranks.size());
  for (int32_t r = 0; r < n; ++r) shard_config(m->config_, ShardSpec{r, n});  // fails early, naming what does not divide
  uint64_t total = 0;
  for (const auto& t : m->file_->tensors()) total += t.n_bytes;
  std::unique_ptr<Progress> bar;
  if (progress)
    bar = std::make_unique<Progress>(n > 1 ? "loading weights (" + std::to_string(n) + " shards)" : "loading weights",
                                     double(total) * n / 1e6, "MB");
  for (int32_t r = 0; r < n; ++r) {
    const ShardSpec spec{r, n};
    ranks[size_t(r)]->bind_thread();
    Shard s;
    s.config = shard_config(m->config_, spec);
    s.weights = ModelWeights::load(
        *m->file_, m->config_, *ranks[size_t(r)],
        [&](uint64_t done, uint64_t) {
          if (bar) bar->update(double(total * uint64_t(r) + done) / 1e6);
        },
        spec);
    if (s.weights.rope_freqs.data) {
      s.config.rope.freq_factors = s.weights.rope_freqs.ptr<float>();
      s.config.rope_swa.freq_factors = s.config.rope.freq_factors;
    }
    m->shards_.push_back(std::move(s));
  }
  if (bar) bar->finish();
  // The whole config points at rank 0's factors (what single-rank users read).
  m->config_.rope.freq_factors = m->shards_[0].config.rope.freq_factors;
  m->config_.rope_swa.freq_factors = m->shards_[0].config.rope_swa.freq_factors;
  return m;
}

}  // namespace rf
