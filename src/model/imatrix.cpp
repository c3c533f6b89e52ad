// Reading llama.cpp's GGUF importance matrices (model/imatrix.h).
#include "model/imatrix.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "gguf/reader.h"

namespace rf {
namespace {

const char kSums[] = ".in_sum2";
const char kCounts[] = ".counts";

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

std::vector<float> f32_values(const gguf::File& f, const gguf::TensorInfo& t) {
  RF_CHECK(t.type == DType::F32, f.path(), ": importance tensor '", t.name, "' is ", dtype_name(t.type),
           ", not f32");
  std::vector<float> v(t.n_elements);
  std::memcpy(v.data(), f.tensor_data(t), v.size() * sizeof(float));
  return v;
}

}  // namespace

ImportanceMatrix ImportanceMatrix::load(const std::string& path) {
  auto f = gguf::File::open(path);
  ImportanceMatrix m;
  m.path_ = path;
  RF_CHECK(f->get_string("general.type", "") == "imatrix", path,
           ": not an importance matrix (general.type is not \"imatrix\")");
  for (const auto& t : f->tensors()) {
    if (!ends_with(t.name, kSums)) continue;
    const std::string weight = t.name.substr(0, t.name.size() - (sizeof(kSums) - 1));
    const gguf::TensorInfo* counts = f->find_tensor(weight + kCounts);
    RF_CHECK(counts, path, ": '", t.name, "' has no '", weight, kCounts, "'");
    const std::vector<float> sums = f32_values(*f, t), n = f32_values(*f, *counts);
    Entry e;
    e.n_cols = int64_t(t.ne(0));
    e.n_expert = int(t.rows());
    RF_CHECK(e.n_cols > 0 && int64_t(n.size()) == e.n_expert, path, ": '", weight, kCounts, "' has ", n.size(),
             " entries for ", e.n_expert, " rows of '", t.name, "'");
    e.importance.resize(sums.size());
    for (int x = 0; x < e.n_expert; ++x) {
      const float c = n[size_t(x)];
      RF_CHECK(std::isfinite(c) && c >= 0, path, ": '", weight, kCounts, "' holds ", c);
      for (int64_t j = 0; j < e.n_cols; ++j) {
        const float s = sums[size_t(x * e.n_cols + j)];
        RF_CHECK(std::isfinite(s) && s >= 0, path, ": '", t.name, "' holds ", s);
        // A column no token reached (an unused expert) counts as equal to the others.
        e.importance[size_t(x * e.n_cols + j)] = c > 0 ? s / c : 1.0f;
      }
    }
    m.entries_.emplace(weight, std::move(e));
  }
  RF_CHECK(!m.entries_.empty(), path, ": no '*", kSums, "' tensors");
  return m;
}

const float* ImportanceMatrix::columns(const std::string& name, int64_t n_cols, int expert) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) return nullptr;
  const Entry& e = it->second;
  RF_CHECK(e.n_cols == n_cols, path_, ": '", name, "' has importances for ", e.n_cols, " columns, the tensor ",
           n_cols);
  RF_CHECK(expert >= 0 && expert < e.n_expert, path_, ": '", name, "' has importances for ", e.n_expert,
           " experts, not expert ", expert);
  return e.importance.data() + size_t(expert) * size_t(n_cols);
}

}  // namespace rf
