// Tensor: a non-owning view of a contiguous, row-major block of memory on
// some device. ne[0] is the contiguous dimension (GGUF order); a matrix of
// `rows` rows of `cols` elements has ne = {cols, rows}. Quantized types keep
// their GGUF block layout, so a row is row_bytes(type, ne[0]) bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace rf {

enum class DeviceKind { CPU, CUDA };

struct Tensor {
  void* data = nullptr;
  DType type = DType::F32;
  int64_t ne[4] = {1, 1, 1, 1};
  DeviceKind device = DeviceKind::CPU;

  int64_t cols() const { return ne[0]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  int64_t numel() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  size_t row_bytes() const { return rf::row_bytes(type, uint64_t(ne[0])); }
  size_t bytes() const { return row_bytes() * size_t(rows()); }
  template <typename T> T* ptr() const { return static_cast<T*>(data); }
  // Rows [first, first + count) as a tensor of the same width.
  Tensor slice_rows(int64_t first, int64_t count) const;
  // Same memory seen as a [cols, rows] matrix (cols * rows == numel()).
  Tensor view2d(int64_t cols, int64_t rows) const;
  std::string shape_string() const;
};

Tensor make_tensor(void* data, DType type, int64_t cols, int64_t rows = 1, DeviceKind dev = DeviceKind::CPU);

}  // namespace rf
