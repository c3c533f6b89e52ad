// Model loading with progress, whole or one shard per rank.
#include "model/model.h"

#include "core/log.h"
#include "model/shard.h"
#include "model/synthetic.h"

namespace rf {

std::unique_ptr<Model> Model::load(const std::string& path, Backend& backend, bool progress) {
  Backend* ranks[] = {&backend};
  return load(path, ranks, progress);
}

std::unique_ptr<Model> Model::load(const std::string& path, std::span<Backend* const> ranks, bool progress,
                                   WeightPlacement placement) {
  return load_file(gguf::File::open(path), ranks, progress, placement);
}

std::unique_ptr<Model> Model::load_dummy(const std::string& spec, std::span<Backend* const> ranks, bool progress,
                                         WeightPlacement placement) {
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon), type = colon == std::string::npos ? "f16" : spec.substr(colon + 1);
  const auto preset = synthetic_preset(name);
  RF_CHECK(preset, "--load-format dummy: no preset '", name, "' (presets: ", synthetic_preset_names(), ")");
  const auto plan = quant_plan(type);
  RF_CHECK(plan, "--load-format dummy: unknown weight type '", type, "'");
  log_info("model: dummy weights in the shape of ", name, " (", type, ")");
  return load_file(gguf::File::from_header(synthetic_header(*preset, *plan)), ranks, progress, placement);
}

std::unique_ptr<Model> Model::load_file(std::unique_ptr<gguf::File> file, std::span<Backend* const> ranks,
                                        bool progress, WeightPlacement placement) {
  RF_CHECK(!ranks.empty(), "model: no backend to load onto");
  auto m = std::make_unique<Model>();
  m->file_ = std::move(file);
  m->config_ = ModelConfig::from_gguf(*m->file_);
  const int32_t n = int32_t(ranks.size());
  // Fails early, naming what does not divide.
  for (int32_t r = 0; r < n; ++r) shard_config(m->config_, ShardSpec{r, n});
  uint64_t total = 0;
  for (const auto& t : m->file_->tensors()) total += t.n_bytes;
  std::unique_ptr<Progress> bar;
  const std::string what = m->file_->header_only() ? "making dummy weights" : "loading weights";
  if (progress)
    bar = std::make_unique<Progress>(n > 1 ? what + " (" + std::to_string(n) + " shards)" : what,
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
        spec, placement);
    if (s.weights.host_expert_layers > 0)
      log_info("experts of layers 0-", s.weights.host_expert_layers - 1, " in host memory (",
               s.weights.host_expert_bytes >> 20, " MiB); their FFNs run on the CPU");
    if (s.weights.rope_freqs.data) {
      s.config.rope.freq_factors = s.weights.rope_freqs.ptr<float>();
      // (Gemma 4: the factors are the full-attention layers'; window layers turn every pair.)
      if (!s.config.freq_factors_full_only) s.config.rope_swa.freq_factors = s.config.rope.freq_factors;
    }
    m->shards_.push_back(std::move(s));
  }
  if (bar) bar->finish();
  // Host-resident experts page-locked (copies at the bus's rate; their
  // pages read in now, not at the first steps).
  for (int32_t r = 0; r < n; ++r) {
    ModelWeights& w = m->shards_[size_t(r)].weights;
    if (w.host_expert_layers == 0) continue;
    std::unique_ptr<Progress> pin_bar;
    if (progress) pin_bar = std::make_unique<Progress>("page-locking host experts", double(w.host_expert_bytes) / 1e6, "MB");
    const uint64_t locked = w.pin_host_experts(*ranks[size_t(r)], [&](uint64_t done, uint64_t total) {
      if (pin_bar) pin_bar->update(double(done) * double(w.host_expert_bytes) / double(total) / 1e6);
    });
    if (pin_bar) pin_bar->finish();
    log_info("host experts: ", locked >> 20, " MiB page-locked");
  }
  // The whole config points at rank 0's factors (what single-rank users read).
  m->config_.rope.freq_factors = m->shards_[0].config.rope.freq_factors;
  m->config_.rope_swa.freq_factors = m->shards_[0].config.rope_swa.freq_factors;
  return m;
}

}  // namespace rf
