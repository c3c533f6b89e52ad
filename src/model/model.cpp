// Model loading with progress.
#include "model/model.h"

#include "core/log.h"

namespace rf {

std::unique_ptr<Model> Model::load(const std::string& path, Backend& backend, bool progress) {
  auto m = std::make_unique<Model>();
  m->file_ = gguf::File::open(path);
  m->config_ = ModelConfig::from_gguf(*m->file_);
  std::unique_ptr<Progress> bar;
  uint64_t total = 0;
  for (const auto& t : m->file_->tensors()) total += t.n_bytes;
  if (progress) bar = std::make_unique<Progress>("loading weights", double(total) / 1e6, "MB");
  m->weights_ = ModelWeights::load(*m->file_, m->config_, backend, [&](uint64_t done, uint64_t) {
    if (bar) bar->update(double(done) / 1e6);
  });
  if (bar) bar->finish();
  if (m->weights_.rope_freqs.data) {
    m->config_.rope.freq_factors = m->weights_.rope_freqs.ptr<float>();
    m->config_.rope_swa.freq_factors = m->config_.rope.freq_factors;
  }
  return m;
}

}  // namespace rf
