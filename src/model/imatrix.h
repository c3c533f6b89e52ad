// ImportanceMatrix: llama.cpp's importance matrix file (`llama-imatrix`,
// GGUF form): for each weight tensor, the sum of squared activations its
// columns met (`<tensor>.in_sum2`, [n_cols] or [n_cols, n_expert]) and how
// many tokens were summed (`<tensor>.counts`, [1] or [n_expert]). The
// importance of a column is their quotient: the mean squared activation that
// multiplies that column, which the quantizers weight their errors by.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace rf {

class ImportanceMatrix {
 public:
  // Reads and validates a file; throws rf::Error naming the bad tensor.
  static ImportanceMatrix load(const std::string& path);

  // The per-column importances of tensor `name` (expert `expert` of a 3-D
  // expert tensor; 0 otherwise), n_cols of them; null when the file has no
  // entry for it. Throws when the entry's width is not n_cols.
  const float* columns(const std::string& name, int64_t n_cols, int expert = 0) const;
  size_t size() const { return entries_.size(); }
  const std::string& path() const { return path_; }

 private:
  struct Entry {
    int64_t n_cols = 0;
    int n_expert = 1;
    std::vector<float> importance;  // [n_expert][n_cols]
  };
  std::string path_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace rf
