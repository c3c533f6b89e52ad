// GGUF parsing and validation. The Cursor never reads past the end: every
// length is compared with the bytes left before anything is allocated.
#include "gguf/reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "core/error.h"

namespace rf::gguf {
namespace {

class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  [[noreturn]] void bad(const std::string& field, const std::string& why, uint64_t at) const {
    fail("gguf: invalid ", field, " at byte ", at, ": ", why);
  }
  [[noreturn]] void bad(const std::string& field, const std::string& why) const {
    bad(field, why, pos_);
  }

  void need(uint64_t n, const std::string& field) const {
    if (n > left())
      bad(field, str("needs ", n, " bytes but the file has ", left(), " left (truncated?)"));
  }

  template <typename T>
  T read(const std::string& field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  const uint8_t* take(uint64_t n, const std::string& field) {
    need(n, field);
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }

  std::string read_string(const std::string& field) {
    const uint64_t at = pos_;
    const uint64_t len = read<uint64_t>(field + " length");
    if (len > left())
      bad(field, str("string length ", len, " exceeds the ", left(), " bytes left in the file"), at);
    const uint8_t* p = take(len, field);
    return std::string(reinterpret_cast<const char*>(p), len);
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// Smallest encoded size of one element of type t (for bounding counts).
uint64_t min_encoded_size(ValueType t) {
  if (t == ValueType::STRING) return 8;
  if (t == ValueType::ARRAY) return 12;
  return scalar_size(t);
}

ValueType read_type(Cursor& c, const std::string& field) {
  const uint64_t at = c.pos();
  const uint32_t t = c.read<uint32_t>(field);
  if (!value_type_valid(t)) c.bad(field, str("unknown value type ", t), at);
  return ValueType(t);
}

Array read_array(Cursor& c, const std::string& field, int depth);

Value read_value(Cursor& c, ValueType t, const std::string& field, int depth) {
  Value out;
  out.type = t;
  if (t == ValueType::STRING) {
    out.v = c.read_string(field);
  } else if (t == ValueType::ARRAY) {
    out.v = read_array(c, field, depth + 1);
  } else {
    const uint64_t at = c.pos();
    const uint8_t* p = c.take(scalar_size(t), field);
    if (t == ValueType::BOOL && *p > 1) c.bad(field, str("bool value ", int(*p), " is not 0 or 1"), at);
    out = scalar_from_bytes(t, p);
  }
  return out;
}

Array read_array(Cursor& c, const std::string& field, int depth) {
  if (depth > kMaxArrayDepth) c.bad(field, str("arrays nested deeper than ", kMaxArrayDepth));
  Array a;
  a.elem_type = read_type(c, field + " element type");
  const uint64_t at = c.pos();
  const uint64_t n = c.read<uint64_t>(field + " array length");
  uint64_t min_bytes;
  if (mul_overflows(n, min_encoded_size(a.elem_type), &min_bytes) || min_bytes > c.left())
    c.bad(field, str("array length ", n, " of ", value_type_name(a.elem_type),
                     " exceeds the ", c.left(), " bytes left in the file"), at);
  if (a.elem_type == ValueType::STRING) {
    a.strings.reserve(n);
    for (uint64_t i = 0; i < n; ++i) a.strings.push_back(c.read_string(str(field, "[", i, "]")));
  } else if (a.elem_type == ValueType::ARRAY) {
    for (uint64_t i = 0; i < n; ++i) a.arrays.push_back(read_array(c, str(field, "[", i, "]"), depth + 1));
  } else {
    const uint8_t* p = c.take(min_bytes, field);
    if (a.elem_type == ValueType::BOOL)
      for (uint64_t i = 0; i < n; ++i)
        if (p[i] > 1) c.bad(str(field, "[", i, "]"), str("bool value ", int(p[i]), " is not 0 or 1"), at + 8 + i);
    a.raw.assign(p, p + min_bytes);
  }
  return a;
}

}  // namespace

std::string TensorInfo::shape_string() const {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < dims.size(); ++i) os << (i ? ", " : "") << dims[i];
  os << "]";
  return os.str();
}

std::unique_ptr<File> File::open(const std::string& path) {
  std::unique_ptr<File> f(new File());
  f->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open model file '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    fail("cannot stat '", path, "': ", std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("'", path, "' is not a regular file");
  }
  f->size_ = uint64_t(st.st_size);
  if (f->size_ == 0) {
    ::close(fd);
    fail("gguf: '", path, "' is empty");
  }
  // Shared, read-only: the same pages as a private mapping that is never
  // written, and ones a GPU backend can page-lock (Backend::pin_host_memory;
  // registering a private file mapping's pages never returns on CUDA 13).
  void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_SHARED, fd, 0);
  const int e = errno;
  ::close(fd);
  if (m == MAP_FAILED) fail("cannot mmap '", path, "': ", std::strerror(e));
  f->mapping_ = m;
  f->base_ = static_cast<const uint8_t*>(m);
  try {
    f->parse();
  } catch (const Error& err) {
    fail(err.what(), " (in '", path, "')");
  }
  return f;
}

std::unique_ptr<File> File::from_bytes(const uint8_t* data, size_t size) {
  std::unique_ptr<File> f(new File());
  f->path_ = "<memory>";
  f->owned_.assign(data, data + size);
  f->base_ = f->owned_.data();
  f->size_ = size;
  f->parse();
  return f;
}

std::unique_ptr<File> File::from_header(const std::vector<uint8_t>& header) {
  std::unique_ptr<File> f(new File());
  f->path_ = "<header>";
  f->owned_ = header;
  f->base_ = f->owned_.data();
  f->size_ = header.size();
  f->header_only_ = true;
  f->parse();
  return f;
}

File::~File() {
  if (mapping_) ::munmap(mapping_, size_);
}

void File::parse() {
  Cursor c(base_, size_);
  const uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kMagic) c.bad("magic", str("expected 'GGUF', found 0x", std::hex, magic), 0);
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    c.bad("version", str("unsupported GGUF version ", version_, " (supported: 2, 3)"), 4);

  uint64_t at = c.pos();
  const uint64_t n_tensors = c.read<uint64_t>("tensor_count");
  // Each tensor info takes at least 8 (name len) + 4 (n_dims) + 8 (dim) + 4 (type) + 8 (offset).
  uint64_t min_bytes;
  if (mul_overflows(n_tensors, 32, &min_bytes) || min_bytes > c.left())
    c.bad("tensor_count", str(n_tensors, " tensors cannot fit in the ", c.left(), " bytes left"), at);
  at = c.pos();
  const uint64_t n_kv = c.read<uint64_t>("metadata_kv_count");
  // Each key/value takes at least 8 (key len) + 4 (type) + 1 (value).
  if (mul_overflows(n_kv, 13, &min_bytes) || min_bytes > c.left())
    c.bad("metadata_kv_count", str(n_kv, " key/value pairs cannot fit in the ", c.left(), " bytes left"), at);

  kv_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    const uint64_t key_at = c.pos();
    std::string key = c.read_string(str("metadata key #", i));
    if (key.empty()) c.bad(str("metadata key #", i), "empty key", key_at);
    if (kv_index_.count(key)) c.bad(str("metadata key '", key, "'"), "duplicate key", key_at);
    const ValueType t = read_type(c, str("type of '", key, "'"));
    Value v = read_value(c, t, key, 0);
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const Value* a = find("general.alignment")) {
    if (a->type != ValueType::U32) fail("gguf: invalid general.alignment: expected u32, found ", value_type_name(a->type));
    const uint64_t al = a->as_uint("general.alignment");
    if (al == 0 || (al & (al - 1)) != 0 || al > (1u << 20))
      fail("gguf: invalid general.alignment: ", al, " is not a power of two in [1, 2^20]");
    alignment_ = uint32_t(al);
  }

  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    t.info_pos = c.pos();
    const std::string field = str("tensor #", i);
    t.name = c.read_string(field + " name");
    if (t.name.empty()) c.bad(field + " name", "empty name", t.info_pos);
    if (t.name.size() > kMaxNameLength)
      c.bad(field + " name", str("name of ", t.name.size(), " bytes exceeds ", kMaxNameLength), t.info_pos);
    if (tensor_index_.count(t.name)) c.bad(str("tensor '", t.name, "'"), "duplicate tensor name", t.info_pos);
    const std::string tf = str("tensor '", t.name, "'");
    at = c.pos();
    const uint32_t n_dims = c.read<uint32_t>(tf + " n_dims");
    if (n_dims < 1 || n_dims > kMaxDims) c.bad(tf + " n_dims", str(n_dims, " is not in 1..4"), at);
    t.n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      at = c.pos();
      const uint64_t ne = c.read<uint64_t>(str(tf, " dim ", d));
      if (ne == 0) c.bad(str(tf, " dim ", d), "dimension is zero", at);
      if (ne > (uint64_t(1) << 62) || mul_overflows(t.n_elements, ne, &t.n_elements) ||
          t.n_elements > (uint64_t(1) << 62))
        c.bad(str(tf, " dim ", d), str("element count overflows at dimension ", ne), at);
      t.dims.push_back(ne);
    }
    at = c.pos();
    const uint32_t type_id = c.read<uint32_t>(tf + " type");
    const auto ti = dtype_info(type_id);
    if (!ti) c.bad(tf + " type", str("unknown tensor type ", type_id), at);
    t.type = DType(type_id);
    if (t.dims[0] % ti->block_size != 0)
      c.bad(tf + " dim 0", str(t.dims[0], " is not a multiple of the ", ti->name, " block size ", ti->block_size), at);
    uint64_t header_bytes = 0;  // row-scaled types: a header per row
    if (mul_overflows(t.n_elements / ti->block_size, ti->type_size, &t.n_bytes) ||
        mul_overflows(t.n_elements / t.dims[0], ti->row_header, &header_bytes) ||
        add_overflows(t.n_bytes, header_bytes, &t.n_bytes))
      c.bad(tf + " size", "byte size overflows", at);
    at = c.pos();
    t.offset = c.read<uint64_t>(tf + " offset");
    if (t.offset % alignment_ != 0)
      c.bad(tf + " offset", str(t.offset, " is not a multiple of the alignment ", alignment_), at);
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t header_end = c.pos();
  data_offset_ = (header_end + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors > 0 && data_offset_ > size_ && !header_only_)
    fail("gguf: invalid data section at byte ", header_end, ": aligned start ", data_offset_,
         " is past the end of the file (", size_, " bytes)");
  // A header alone (from_header) describes tensors whose data is not here.
  const uint64_t data_size = header_only_ ? UINT64_MAX : data_offset_ <= size_ ? size_ - data_offset_ : 0;

  for (const TensorInfo& t : tensors_) {
    uint64_t end;
    if (add_overflows(t.offset, t.n_bytes, &end) || end > data_size)
      fail("gguf: invalid tensor '", t.name, "' offset at byte ", t.info_pos, ": data [", t.offset, ", ",
           t.offset + t.n_bytes, ") lies outside the ", data_size, "-byte data section");
  }
  // No two tensors may share bytes.
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo* prev = by_offset[i - 1];
    const TensorInfo* cur = by_offset[i];
    if (cur->offset < prev->offset + prev->n_bytes)
      fail("gguf: invalid tensor '", cur->name, "' offset at byte ", cur->info_pos, ": data overlaps tensor '",
           prev->name, "'");
  }
}

const Value* File::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

std::string File::get_string(const std::string& key, const std::string& fallback) const {
  const Value* v = find(key);
  return v ? v->as_string(key) : fallback;
}

int64_t File::get_int(const std::string& key, int64_t fallback) const {
  const Value* v = find(key);
  return v ? v->as_int(key) : fallback;
}

int64_t File::require_int(const std::string& key) const {
  const Value* v = find(key);
  RF_CHECK(v, "model metadata is missing required key '", key, "'");
  return v->as_int(key);
}

double File::get_float(const std::string& key, double fallback) const {
  const Value* v = find(key);
  return v ? v->as_double(key) : fallback;
}

bool File::get_bool(const std::string& key, bool fallback) const {
  const Value* v = find(key);
  return v ? v->as_bool(key) : fallback;
}

const Array* File::get_array(const std::string& key) const {
  const Value* v = find(key);
  return v ? &v->as_array(key) : nullptr;
}

const TensorInfo* File::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace rf::gguf
