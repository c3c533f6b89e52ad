// Tensor view helpers.
#include "backend/tensor.h"

#include "core/error.h"

namespace rf {

Tensor make_tensor(void* data, DType type, int64_t cols, int64_t rows, DeviceKind dev) {
  Tensor t;
  t.data = data;
  t.type = type;
  t.ne[0] = cols;
  t.ne[1] = rows;
  t.device = dev;
  return t;
}

Tensor Tensor::slice_rows(int64_t first, int64_t count) const {
  RF_CHECK(first >= 0 && count >= 0 && first + count <= rows(), "slice_rows(", first, ", ", count,
           ") out of range for ", rows(), " rows");
  Tensor t = *this;
  t.data = static_cast<uint8_t*>(data) + size_t(first) * row_bytes();
  t.ne[1] = count;
  t.ne[2] = t.ne[3] = 1;
  return t;
}

Tensor Tensor::view2d(int64_t c, int64_t r) const {
  RF_CHECK(c * r == numel(), "view2d: ", c, "x", r, " does not match ", numel(), " elements");
  Tensor t = *this;
  t.ne[0] = c;
  t.ne[1] = r;
  t.ne[2] = t.ne[3] = 1;
  return t;
}

std::string Tensor::shape_string() const {
  return str("[", ne[0], ", ", ne[1], ", ", ne[2], ", ", ne[3], "] ", dtype_name(type));
}

}  // namespace rf
