// The tensor loader of ModelWeights::load (model/weights.cpp), shared with
// the per-family loading steps (model/weights_blocks.cpp): each tensor
// looked up by name, shape-checked, marked used and made usable by the
// backend (or made up, for --load-format dummy). Internal to model/.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/error.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "model/shard.h"
#include "model/synthetic.h"
#include "model/weights.h"

namespace rf::weights_detail {

struct Loader {
  const gguf::File& f;
  Backend& backend;
  ShardSpec shard;
  std::vector<std::vector<uint8_t>>& parts;  // host copies of non-contiguous parts
  const std::function<void(uint64_t, uint64_t)>& progress;
  uint64_t done = 0, total = 0;  // file bytes read, of all
  uint64_t loaded = 0;           // bytes on the backend
  std::unordered_set<std::string> used;
  std::unique_ptr<ThreadPool> fill_pool;  // dummy weights' quantization, made on first use

  const gguf::TensorInfo& info(const std::string& name, std::vector<uint64_t> shape) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    RF_CHECK(t, "model is missing tensor '", name, "'");
    used.insert(name);
    bool ok = true;
    for (size_t i = 0; i < 4; ++i) ok = ok && t->ne(i) == (i < shape.size() ? shape[i] : 1);
    if (!ok) {
      gguf::TensorInfo expect;
      expect.dims = shape;
      fail("tensor '", name, "' has shape ", t->shape_string(), ", expected ", expect.shape_string());
    }
    return *t;
  }

  Tensor host_view(const gguf::TensorInfo& t) const {
    return make_tensor(const_cast<uint8_t*>(f.tensor_data(t)), t.type, int64_t(t.ne(0)), int64_t(t.rows()));
  }

  void advance(uint64_t n) {
    done += n;
    if (progress) progress(done, total);
  }

  Tensor upload(const Tensor& host, const std::string& name) {
    Tensor out = backend.load_weight(host, name);
    loaded += out.bytes();
    return out;
  }

  // A header without data (--load-format dummy): a weight of `cols` x `rows`
  // made on the backend, random values (uniform, standard deviation
  // 1/sqrt(cols), as synthetic models have) quantized to the tensor's type
  // on the host for a few rows and repeated over the rest. How many rows
  // repeat depends on the shape alone, so every type holds the same values
  // (what comparisons between types, such as KL divergences, need).
  Tensor dummy(const gguf::TensorInfo& t, int64_t cols, int64_t n_rows, const std::string& name) {
    void* p = backend.alloc(row_bytes(t.type, uint64_t(cols)) * size_t(n_rows), name);
    fill_dummy(t, cols, n_rows, name, static_cast<uint8_t*>(p));
    const Tensor w = make_tensor(p, t.type, cols, n_rows, backend.device());
    backend.adopt_weight(w);
    return w;
  }

  // dummy()'s values written to backend memory at `dst`.
  void fill_dummy(const gguf::TensorInfo& t, int64_t cols, int64_t n_rows, const std::string& name, uint8_t* dst) {
    const size_t rb = row_bytes(t.type, uint64_t(cols)), bytes = rb * size_t(n_rows);
    const int64_t pattern_rows = std::clamp<int64_t>(int64_t((size_t(2) << 20) / size_t(cols)), 1, n_rows);
    const int64_t chunk_rows = std::max<int64_t>(1, int64_t((size_t(64) << 20) / rb)) / pattern_rows * pattern_rows;
    std::vector<uint8_t> chunk(rb * size_t(std::min(chunk_rows, n_rows)));
    const uint64_t seed = std::hash<std::string>{}(name);
    // The pattern's rows on every host thread (a 9B model's ~300 tensors of
    // 2M values each take ~30 s of quantization on one).
    if (!fill_pool) fill_pool = std::make_unique<ThreadPool>();
    synthetic_rows(*fill_pool, t.type, seed, cols, pattern_rows, std::sqrt(3.0f / float(cols)), chunk.data());
    for (size_t at = size_t(pattern_rows) * rb; at < chunk.size(); at += size_t(pattern_rows) * rb)
      std::memcpy(chunk.data() + at, chunk.data(), std::min(size_t(pattern_rows) * rb, chunk.size() - at));
    for (size_t done = 0; done < bytes; done += chunk.size())
      backend.copy_to_device(dst + done, chunk.data(), std::min(chunk.size(), bytes - done));
    loaded += bytes;
  }

  // Rows `ranges` of a weight of `shape` (ne[0] first) seen as a matrix of
  // its rows (a 3-D tensor's matrices stacked along rows, each whole, as
  // blocks run along ne[0] in every format), one after another; empty
  // ranges: every row.
  Tensor rows(const std::string& name, std::vector<uint64_t> shape, const std::vector<IndexRange>& ranges = {}) {
    const gguf::TensorInfo& t = info(name, std::move(shape));
    advance(t.n_bytes);
    if (f.header_only()) {
      int64_t n = 0;
      for (const IndexRange& r : ranges) n += r.count;
      return dummy(t, int64_t(t.ne(0)), ranges.empty() ? int64_t(t.rows()) : n, name);
    }
    const Tensor host = host_view(t);
    if (ranges.empty()) return upload(host, name);
    if (ranges.size() == 1) return upload(host.slice_rows(ranges[0].first, ranges[0].count), name);
    return upload(copy_row_ranges(host, ranges, keep()), name);
  }

  // Columns [r.first, r.first + r.count) of every row of a weight of `shape`.
  Tensor columns(const std::string& name, std::vector<uint64_t> shape, IndexRange r) {
    const gguf::TensorInfo& t = info(name, std::move(shape));
    advance(t.n_bytes);
    if (shard.split()) check_column_split(t.type, r.first, r.count, int64_t(t.ne(0)), name);
    if (f.header_only()) return dummy(t, shard.split() ? r.count : int64_t(t.ne(0)), int64_t(t.rows()), name);
    if (!shard.split()) return upload(host_view(t), name);
    return upload(copy_columns(host_view(t), r.first, r.count, name, keep()), name);
  }

  Tensor matrix(const std::string& name, int64_t cols, int64_t n_rows, const std::vector<IndexRange>& ranges = {}) {
    return rows(name, {uint64_t(cols), uint64_t(n_rows)}, ranges);
  }

  // A matrix of `cols` x `n_rows` with the rows `ranges` of it to load
  // (empty: all), for packed().
  struct Part {
    std::string name;
    int64_t n_rows;
    std::vector<IndexRange> ranges;
  };

  // The parts' rows one after another in one backend allocation
  // (Backend::packs_qkv: q/k/v, gate/up), each part as matrix() would load
  // it; null when the parts' formats differ (then each loads on its own).
  Tensor packed(const std::vector<Part>& parts, int64_t cols, const std::string& name) {
    std::vector<const gguf::TensorInfo*> infos;
    int64_t total = 0;
    for (const Part& part : parts) {
      infos.push_back(&info(part.name, {uint64_t(cols), uint64_t(part.n_rows)}));
      if (infos.back()->type != infos[0]->type) return Tensor{};
      int64_t n = part.ranges.empty() ? part.n_rows : 0;
      for (const IndexRange& r : part.ranges) n += r.count;
      total += n;
    }
    const DType type = infos[0]->type;
    const size_t rb = row_bytes(type, uint64_t(cols));
    auto* dst = static_cast<uint8_t*>(backend.alloc(rb * size_t(total), name));
    size_t at = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const gguf::TensorInfo& t = *infos[i];
      advance(t.n_bytes);
      std::vector<IndexRange> ranges = parts[i].ranges;
      if (ranges.empty()) ranges.push_back(IndexRange{0, parts[i].n_rows});
      if (f.header_only()) {
        int64_t n = 0;
        for (const IndexRange& r : ranges) n += r.count;
        fill_dummy(t, cols, n, parts[i].name, dst + at);
        at += rb * size_t(n);
        continue;
      }
      for (const IndexRange& r : ranges) {
        backend.copy_to_device(dst + at, host_view(t).slice_rows(r.first, r.count).data, rb * size_t(r.count));
        at += rb * size_t(r.count);
        loaded += rb * size_t(r.count);
      }
    }
    const Tensor w = make_tensor(dst, type, cols, total, backend.device());
    backend.adopt_weight(w);
    return w;
  }

  // A small 2-D f32 tensor (biases per expert): `cols` x `n_rows` on the backend.
  Tensor matrix_f32(const std::string& name, int64_t cols, int64_t n_rows) {
    const gguf::TensorInfo& t = info(name, {uint64_t(cols), uint64_t(n_rows)});
    std::vector<float> v(size_t(cols * n_rows));
    if (f.header_only()) {
      synthetic_values(std::hash<std::string>{}(name), 0, 0.1f, v.data(), v.size());
    } else {
      dequantize_row(t.type, f.tensor_data(t), v.data(), v.size());
    }
    advance(t.n_bytes);
    Tensor out = backend.load_f32(v.data(), cols, n_rows, name);
    loaded += out.bytes();
    return out;
  }

  // Columns [first, first + count) of every row of a weight of `shape`, as
  // a matrix of its own (per_layer_token_embd's columns of one layer).
  Tensor column_part(const std::string& name, std::vector<uint64_t> shape, int64_t first, int64_t count) {
    const gguf::TensorInfo& t = info(name, std::move(shape));
    check_column_split(t.type, first, count, int64_t(t.ne(0)), name);
    if (first == 0) advance(t.n_bytes);
    if (f.header_only()) return dummy(t, count, int64_t(t.rows()), name + " part");
    return upload(copy_columns(host_view(t), first, count, name, keep()), name);
  }

  // An f32 vector's values on the host.
  std::vector<float> host_f32(const std::string& name, int64_t n) {
    const gguf::TensorInfo& t = info(name, {uint64_t(n)});
    std::vector<float> v(static_cast<size_t>(n));
    if (f.header_only()) {
      synthetic_values(std::hash<std::string>{}(name), 0, 0.1f, v.data(), v.size());
      for (float& x : v) x += 1.0f;
    } else {
      dequantize_row(t.type, f.tensor_data(t), v.data(), size_t(n));
    }
    advance(t.n_bytes);
    return v;
  }

  Tensor f32_on_backend(const std::vector<float>& v, const std::string& name) {
    Tensor out = backend.load_f32(v.data(), int64_t(v.size()), 1, name);
    loaded += out.bytes();
    return out;
  }

  // A new host buffer for a rank's copied part.
  std::vector<uint8_t>& keep() { return parts.emplace_back(); }

  // Norm weights, biases and rope factors: always f32 on the backend; the
  // elements of `ranges` one after another (empty: all).
  Tensor vector_f32(const std::string& name, int64_t n, const std::vector<IndexRange>& ranges = {}) {
    const gguf::TensorInfo& t = info(name, {uint64_t(n)});
    std::vector<float> v(static_cast<size_t>(n));
    if (f.header_only()) {  // dummy weights: norms near 1, biases near 0
      synthetic_values(std::hash<std::string>{}(name), 0, 0.1f, v.data(), v.size());
      if (name.find("norm") != std::string::npos)
        for (float& x : v) x += 1.0f;
    } else {
      dequantize_row(t.type, f.tensor_data(t), v.data(), size_t(n));
    }
    advance(t.n_bytes);
    if (!ranges.empty()) {
      std::vector<float> part;
      for (const IndexRange& r : ranges) part.insert(part.end(), v.begin() + r.first, v.begin() + r.first + r.count);
      v.swap(part);
    }
    Tensor out = backend.load_f32(v.data(), int64_t(v.size()), 1, name);
    loaded += out.bytes();
    return out;
  }
};

// Family blocks' tensors of layer i (prefix p = "blk.i."), into l.
void load_recurrent_mixer(Loader& L, const ModelConfig& c, const std::string& p, LayerWeights& l);
void load_gated_attention(Loader& L, const ModelConfig& c, const std::string& p, LayerWeights& l, bool pack);
void load_mla_attention(Loader& L, const ModelConfig& c, const std::string& p, LayerWeights& l);
void load_shared_expert(Loader& L, const ModelConfig& c, const std::string& p, LayerWeights& l);
void load_shaped_attention(Loader& L, const ModelConfig& c, int32_t i, const std::string& p, LayerWeights& l);
void load_gemma4_extras(Loader& L, const ModelConfig& c, int32_t i, const std::string& p, LayerWeights& l);
void load_mtp_extras(Loader& L, const ModelConfig& c, const std::string& p, MtpWeights& m);

}  // namespace rf::weights_detail
