// GGUF reader/writer: round trips of every value type, the real stories260K
// file, and corrupt files (each must fail with an error naming the field).
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "testdata.h"

namespace rf::gguf {
namespace {

std::vector<uint8_t> f32_bytes(size_t n, float base) {
  std::vector<uint8_t> b(n * 4);
  for (size_t i = 0; i < n; ++i) {
    float v = base + float(i);
    std::memcpy(b.data() + 4 * i, &v, 4);
  }
  return b;
}

Writer sample_writer() {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_i32("test.i32", -7);
  w.set_u64("test.u64", 1ull << 40);
  w.set_f32("test.f32", 0.5f);
  w.set_bool("test.bool", true);
  w.set_strings("tokenizer.ggml.tokens", {"a", "b", "", "\xe2\x96\x81hello"});
  w.set_f32s("tokenizer.ggml.scores", {1.f, -2.5f, 3.f, 0.f});
  Array nested;
  nested.elem_type = ValueType::ARRAY;
  for (int k = 0; k < 2; ++k) {
    Array inner;
    inner.elem_type = ValueType::STRING;
    inner.strings = {"x" + std::to_string(k), "y"};
    nested.arrays.push_back(inner);
  }
  w.set("test.nested", Value{ValueType::ARRAY, nested});
  w.add_tensor_bytes("a.weight", DType::F32, {4, 2}, f32_bytes(8, 1.f));
  w.add_tensor_bytes("b.weight", DType::F32, {3}, f32_bytes(3, 100.f));
  return w;
}

std::unique_ptr<File> parse(const std::vector<uint8_t>& b) { return File::from_bytes(b.data(), b.size()); }

std::string parse_error(const std::vector<uint8_t>& b) {
  try {
    parse(b);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GgufReader, RoundTripsEveryValueType) {
  auto f = parse(sample_writer().to_bytes());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->require_int("llama.block_count"), 2);
  EXPECT_EQ(f->get_int("test.i32", 0), -7);
  EXPECT_EQ(f->find("test.u64")->as_uint("u64"), 1ull << 40);
  EXPECT_FLOAT_EQ(float(f->get_float("test.f32", 0)), 0.5f);
  EXPECT_TRUE(f->get_bool("test.bool", false));
  const auto& toks = f->get_array("tokenizer.ggml.tokens")->to_strings("tokens");
  ASSERT_EQ(toks.size(), 4u);
  EXPECT_EQ(toks[3], "\xe2\x96\x81hello");
  EXPECT_EQ(toks[2], "");
  auto scores = f->get_array("tokenizer.ggml.scores")->to_f32("scores");
  EXPECT_EQ(scores[1], -2.5f);
  const Array* nested = f->get_array("test.nested");
  ASSERT_EQ(nested->size(), 2u);
  EXPECT_EQ(nested->arrays[1].strings[0], "x1");
  ASSERT_EQ(f->tensors().size(), 2u);
  const TensorInfo* b = f->find_tensor("b.weight");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->offset % f->alignment(), 0u);
  float v;
  std::memcpy(&v, f->tensor_data(*b) + 8, 4);
  EXPECT_EQ(v, 102.f);
  EXPECT_EQ(f->find_tensor("a.weight")->shape_string(), "[4, 2]");
}

TEST(GgufReader, ReadsStories260K) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  auto f = File::open(test::testdata_path("stories260K.gguf"));
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->require_int("llama.embedding_length"), 64);
  EXPECT_EQ(f->require_int("llama.block_count"), 5);
  // Separator/padding ids of 4294967295 (none) are legal u32 values.
  EXPECT_EQ(f->find("tokenizer.ggml.seperator_token_id")->as_uint("sep"), 4294967295u);
  EXPECT_EQ(f->get_array("tokenizer.ggml.tokens")->size(), 512u);
  const TensorInfo* emb = f->find_tensor("token_embd.weight");
  ASSERT_TRUE(emb);
  EXPECT_EQ(emb->ne(0), 64u);
  EXPECT_EQ(emb->ne(1), 512u);
}

// --- corrupt files -------------------------------------------------------

TEST(GgufCorrupt, TruncatedAtEveryByteOfTheHeaderFails) {
  const auto good = sample_writer().to_bytes();
  auto f = parse(good);
  const size_t header_end = f->data_offset();
  for (size_t n = 0; n < header_end; ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + n);
    const std::string err = parse_error(cut);
    EXPECT_FALSE(err.empty()) << "truncated at " << n << " parsed";
    EXPECT_NE(err.find("gguf: invalid"), std::string::npos) << err;
  }
}

TEST(GgufCorrupt, TruncatedTensorDataFailsNamingTheTensor) {
  const auto good = sample_writer().to_bytes();
  std::vector<uint8_t> cut(good.begin(), good.end() - 24);
  const std::string err = parse_error(cut);
  EXPECT_NE(err.find("tensor 'b.weight' offset"), std::string::npos) << err;
}

// Offsets of fields in the sample file, found by re-encoding.
size_t find_bytes(const std::vector<uint8_t>& hay, const std::string& needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end());
  return size_t(it - hay.begin());
}

template <typename T>
void poke(std::vector<uint8_t>& b, size_t at, T v) { std::memcpy(b.data() + at, &v, sizeof v); }

TEST(GgufCorrupt, BadMagicAndVersion) {
  auto b = sample_writer().to_bytes();
  b[0] = 'X';
  EXPECT_NE(parse_error(b).find("magic"), std::string::npos);
  b = sample_writer().to_bytes();
  poke<uint32_t>(b, 4, 7);
  EXPECT_NE(parse_error(b).find("version"), std::string::npos);
  poke<uint32_t>(b, 4, 1);
  EXPECT_NE(parse_error(b).find("version"), std::string::npos);
}

TEST(GgufCorrupt, HugeCountsFailWithoutAllocating) {
  auto b = sample_writer().to_bytes();
  poke<uint64_t>(b, 8, ~0ull);
  EXPECT_NE(parse_error(b).find("tensor_count"), std::string::npos);
  b = sample_writer().to_bytes();
  poke<uint64_t>(b, 16, 1ull << 60);
  EXPECT_NE(parse_error(b).find("metadata_kv_count"), std::string::npos);
}

TEST(GgufCorrupt, HugeStringAndArrayLengths) {
  auto b = sample_writer().to_bytes();
  // The first key's length prefix sits at byte 24.
  poke<uint64_t>(b, 24, 1ull << 62);
  EXPECT_NE(parse_error(b).find("metadata key #0"), std::string::npos);
  b = sample_writer().to_bytes();
  const size_t at = find_bytes(b, "tokenizer.ggml.tokens") + std::strlen("tokenizer.ggml.tokens") + 4 + 4;
  poke<uint64_t>(b, at, 1ull << 61);
  const std::string err = parse_error(b);
  EXPECT_NE(err.find("tokenizer.ggml.tokens"), std::string::npos) << err;
  EXPECT_NE(err.find("array length"), std::string::npos) << err;
}

TEST(GgufCorrupt, UnknownValueTypeAndBadBool) {
  auto b = sample_writer().to_bytes();
  const size_t type_at = find_bytes(b, "test.i32") + std::strlen("test.i32");
  poke<uint32_t>(b, type_at, 13);
  std::string err = parse_error(b);
  EXPECT_NE(err.find("type of 'test.i32'"), std::string::npos) << err;
  b = sample_writer().to_bytes();
  const size_t bool_at = find_bytes(b, "test.bool") + std::strlen("test.bool") + 4;
  b[bool_at] = 2;
  err = parse_error(b);
  EXPECT_NE(err.find("test.bool"), std::string::npos) << err;
}

TEST(GgufCorrupt, DuplicateKeyAndDuplicateTensor) {
  Writer w = sample_writer();
  auto b = w.to_bytes();
  // Rename key "test.f32" to "test.i32" (same length) to duplicate it.
  const size_t at = find_bytes(b, "test.f32");
  std::memcpy(b.data() + at, "test.i32", 8);
  EXPECT_NE(parse_error(b).find("duplicate key"), std::string::npos);
  b = w.to_bytes();
  const size_t t = find_bytes(b, "b.weight");
  b[t] = 'a';
  EXPECT_NE(parse_error(b).find("duplicate tensor"), std::string::npos);
}

size_t tensor_info_pos(const std::vector<uint8_t>& b, const std::string& name) {
  return find_bytes(b, name) - 8;  // the name's length prefix
}

TEST(GgufCorrupt, TensorRankDimsTypeOffset) {
  const auto good = sample_writer().to_bytes();
  const size_t info = tensor_info_pos(good, "a.weight");
  const size_t ndims_at = info + 8 + 8;
  auto b = good;
  poke<uint32_t>(b, ndims_at, 5);
  EXPECT_NE(parse_error(b).find("'a.weight' n_dims"), std::string::npos);
  b = good;
  poke<uint32_t>(b, ndims_at, 0);
  EXPECT_NE(parse_error(b).find("'a.weight' n_dims"), std::string::npos);
  b = good;
  poke<uint64_t>(b, ndims_at + 4, 0);
  EXPECT_NE(parse_error(b).find("'a.weight' dim 0"), std::string::npos);
  b = good;
  poke<uint64_t>(b, ndims_at + 4, 1ull << 40);
  poke<uint64_t>(b, ndims_at + 12, 1ull << 40);
  EXPECT_NE(parse_error(b).find("'a.weight' dim 1"), std::string::npos);
  const size_t type_at = ndims_at + 4 + 16;
  b = good;
  poke<uint32_t>(b, type_at, 99);
  EXPECT_NE(parse_error(b).find("'a.weight' type"), std::string::npos);
  b = good;
  poke<uint32_t>(b, type_at, uint32_t(DType::Q4_0));  // 4 elements: not a multiple of 32
  EXPECT_NE(parse_error(b).find("block size"), std::string::npos);
  b = good;
  poke<uint64_t>(b, type_at + 4, 3);  // misaligned
  EXPECT_NE(parse_error(b).find("'a.weight' offset"), std::string::npos);
  b = good;
  poke<uint64_t>(b, type_at + 4, 1ull << 50);  // past the end
  EXPECT_NE(parse_error(b).find("'a.weight' offset"), std::string::npos);
  b = good;
  poke<uint64_t>(b, type_at + 4, ~0ull & ~31ull);  // offset + size overflows
  EXPECT_NE(parse_error(b).find("'a.weight' offset"), std::string::npos);
}

TEST(GgufCorrupt, OverlappingTensors) {
  auto b = sample_writer().to_bytes();
  const size_t info = tensor_info_pos(b, "b.weight");
  const size_t off_at = info + 8 + 8 + 4 + 8 + 4;
  poke<uint64_t>(b, off_at, 0);
  EXPECT_NE(parse_error(b).find("overlaps"), std::string::npos);
}

TEST(GgufCorrupt, BadAlignment) {
  Writer w = sample_writer();
  w.set_u32("general.alignment", 24);
  EXPECT_NE(parse_error(w.to_bytes()).find("general.alignment"), std::string::npos);
  Writer w2 = sample_writer();
  w2.set_string("general.alignment", "32");
  EXPECT_NE(parse_error(w2.to_bytes()).find("general.alignment"), std::string::npos);
}

TEST(GgufCorrupt, DeeplyNestedArrays) {
  std::vector<uint8_t> b;
  auto put32 = [&](uint32_t v) { b.insert(b.end(), (uint8_t*)&v, (uint8_t*)&v + 4); };
  auto put64 = [&](uint64_t v) { b.insert(b.end(), (uint8_t*)&v, (uint8_t*)&v + 8); };
  put32(kMagic); put32(3); put64(0); put64(1);
  put64(1); b.push_back('k');
  put32(uint32_t(ValueType::ARRAY));
  for (int i = 0; i < 100; ++i) { put32(uint32_t(ValueType::ARRAY)); put64(1); }
  put32(uint32_t(ValueType::U8)); put64(0);
  EXPECT_NE(parse_error(b).find("nested deeper"), std::string::npos);
}

TEST(GgufCorrupt, EmptyAndMissingFiles) {
  EXPECT_THROW(File::open("/nonexistent/model.gguf"), Error);
  EXPECT_FALSE(parse_error({}).empty());
}

}  // namespace
}  // namespace rf::gguf
