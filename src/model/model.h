// Model: an opened GGUF file with its config and weights loaded onto a
// backend — or, for tensor parallelism, onto one backend per rank, each
// holding its shard (model/shard.h). The file stays mapped for the model's
// lifetime (the CPU backend reads weights straight from the mapping).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/config.h"
#include "model/weights.h"

namespace rf {

class Model {
 public:
  // Loads `path`, showing a progress bar when `progress` is set.
  static std::unique_ptr<Model> load(const std::string& path, Backend& backend, bool progress = true);
  // Loads rank r's shard onto ranks[r] (one rank: the whole model), its
  // weights placed as `placement` says (model/weights.h).
  static std::unique_ptr<Model> load(const std::string& path, std::span<Backend* const> ranks, bool progress = true,
                                     WeightPlacement placement = {});
  // A model in the shape of a synthetic preset ("llama3-70b", or with its
  // type: "llama3-70b:q4_k_m"; model/synthetic.h) whose weights are made
  // on the backends with random values instead of read from a file
  // (--load-format dummy: big shapes measured without big files).
  static std::unique_ptr<Model> load_dummy(const std::string& preset, std::span<Backend* const> ranks,
                                           bool progress = true, WeightPlacement placement = {});

  const gguf::File& file() const { return *file_; }
  // The whole model's configuration.
  const ModelConfig& config() const { return config_; }
  // Rank 0's weights (the whole model's when not split).
  const ModelWeights& weights() const { return shards_[0].weights; }

  int32_t n_ranks() const { return int32_t(shards_.size()); }
  // What rank r runs: its shapes (shard_config) and its weights.
  const ModelConfig& rank_config(int32_t r) const { return shards_[size_t(r)].config; }
  const ModelWeights& rank_weights(int32_t r) const { return shards_[size_t(r)].weights; }

 private:
  static std::unique_ptr<Model> load_file(std::unique_ptr<gguf::File> file, std::span<Backend* const> ranks,
                                          bool progress, WeightPlacement placement);
  struct Shard {
    ModelConfig config;
    ModelWeights weights;
  };
  std::unique_ptr<gguf::File> file_;
  ModelConfig config_;
  std::vector<Shard> shards_;
};

}  // namespace rf
