// Model: an opened GGUF file with its config and weights loaded onto a
// backend. The file stays mapped for the model's lifetime (the CPU backend
// reads weights straight from the mapping).
#pragma once

#include <memory>
#include <string>

#include "gguf/reader.h"
#include "model/config.h"
#include "model/weights.h"

namespace rf {

class Model {
 public:
  // Loads `path`, showing a progress bar when `progress` is set.
  static std::unique_ptr<Model> load(const std::string& path, Backend& backend, bool progress = true);

  const gguf::File& file() const { return *file_; }
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }

 private:
  std::unique_ptr<gguf::File> file_;
  ModelConfig config_;
  ModelWeights weights_;
};

}  // namespace rf
