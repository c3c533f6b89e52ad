// The hybrid Qwen3.5 / Qwen3.6 models beyond llama.cpp's goldens
// (arch_golden_test.cpp has those): the full-size presets' shapes as the
// loader reads them (layers, MTP block, recurrent layers, state bytes per
// sequence); an MTP block loads without changing the forward pass (the
// same model with the block removed gives the same logits); the recurrent
// layers read from attention.recurrent_layers equal those from
// full_attention_interval; bad hybrid metadata is an error naming the key;
// the memory plan counts the state rows in the KV budget; and a state
// checkpoint saved at a block boundary and restored into another sequence's
// row continues exactly as the sequence that computed it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "gguf/writer.h"
#include "kv/memory_plan.h"
#include "model/kv_cache.h"
#include "model/runner.h"
#include "model/synthetic.h"
#include "model/temp_model.h"
#include "testdata.h"

namespace rf {
namespace {

std::string temp_path(const std::string& tag) {
  return (std::filesystem::temp_directory_path() / ("rf_hybrid_" + tag + "_" + std::to_string(getpid()) + ".gguf"))
      .string();
}

// `src` rewritten: metadata through `meta` (return false to drop a key, or
// change the value), tensors whose name `keep` accepts.
std::string rewrite(const std::string& src, const std::string& tag,
                    const std::function<bool(const std::string&, gguf::Value&)>& meta,
                    const std::function<bool(const std::string&)>& keep,
                    const std::function<void(gguf::Writer&)>& extra = nullptr) {
  auto f = gguf::File::open(src);
  gguf::Writer w;
  for (const auto& [k, v] : f->metadata()) {
    if (k == "general.alignment") continue;
    gguf::Value copy = v;
    if (meta(k, copy)) w.set(k, copy);
  }
  if (extra) extra(w);
  std::shared_ptr<gguf::File> file = std::move(f);
  for (const auto& t : file->tensors()) {
    if (!keep(t.name)) continue;
    const gguf::TensorInfo* info = &t;
    w.add_tensor(t.name, t.type, t.dims, [info, file](uint8_t* dst) {
      std::memcpy(dst, file->tensor_data(*info), info->n_bytes);
    });
  }
  const std::string path = temp_path(tag);
  w.write(path);
  return path;
}

gguf::Value u32v(uint32_t x) { return gguf::Value{gguf::ValueType::U32, uint64_t(x)}; }

ModelConfig header_config(const std::string& preset) {
  const auto p = synthetic_preset(preset);
  RF_CHECK(p, "no preset ", preset);
  return ModelConfig::from_gguf(*gguf::File::from_header(synthetic_header(*p, *quant_plan("q4_k_m"))));
}

TEST(HybridModel, FullSizePresetsAsTheLoaderReadsThem) {
  struct Shape {
    const char* name;
    int32_t layers, recurrent, v_heads, n_expert, ff_expert, ff_shared;
  };
  for (const Shape& s : {Shape{"qwen3.5-27b", 64, 48, 48, 0, 0, 0}, Shape{"qwen3.6-35b-a3b", 40, 30, 32, 256, 512, 512},
                         Shape{"qwen3.5-122b-a10b", 48, 36, 64, 256, 1024, 1024}}) {
    const ModelConfig c = header_config(s.name);
    EXPECT_EQ(c.n_layer, s.layers) << s.name;  // block_count less the MTP block
    EXPECT_EQ(c.n_layer_nextn, 1) << s.name;
    EXPECT_EQ(c.n_recurrent(), s.recurrent) << s.name;
    for (int32_t il = 0; il < c.n_layer; ++il) EXPECT_EQ(c.is_recurrent(il), (il + 1) % 4 != 0) << s.name << " " << il;
    EXPECT_EQ(c.ssm_k_heads, 16) << s.name;
    EXPECT_EQ(c.ssm_v_heads, s.v_heads) << s.name;
    EXPECT_EQ(c.ssm_head_dim, 128) << s.name;
    EXPECT_EQ(c.head_dim, 256) << s.name;
    EXPECT_EQ(c.rope.n_rot, 64) << s.name;
    EXPECT_EQ(c.rope_sections, (std::vector<int32_t>{11, 11, 10, 0})) << s.name;
    EXPECT_EQ(c.n_expert, s.n_expert) << s.name;
    EXPECT_EQ(c.n_ff_expert, s.ff_expert) << s.name;
    EXPECT_EQ(c.n_ff_shexp, s.ff_shared) << s.name;
    // The state a sequence holds: per DeltaNet layer 3 positions of the
    // conv's q|k|v and a 128 x 128 matrix per value head, f32.
    const size_t per_layer = 4 * (3 * size_t(2 * 16 * 128 + s.v_heads * 128) + size_t(s.v_heads) * 128 * 128);
    EXPECT_EQ(state_row_layout(c).row_bytes(), size_t(s.recurrent) * per_layer) << s.name;
    EXPECT_EQ(kv_group_layout(c).n_kv_layers(), s.layers - s.recurrent) << s.name;
  }
  // The 35B-A3B's state: 30 layers of 96 KiB + 2 MiB, ~63 MiB a sequence.
  EXPECT_EQ(state_row_layout(header_config("qwen3.6-35b-a3b")).row_bytes(), size_t(30) * (98304 + 2097152));
}

TEST(HybridModel, AnMtpBlockLoadsAndLeavesTheForwardAlone) {
  test::TempModel tm("tiny-qwen35", "f16", 5);
  const std::string without = rewrite(
      tm.path(), "no_mtp",
      [](const std::string& k, gguf::Value& v) {
        if (k == "qwen35.nextn_predict_layers") return false;
        if (k == "qwen35.block_count") v = u32v(4);
        return true;
      },
      [](const std::string& n) { return n.rfind("blk.4.", 0) != 0; });
  CpuBackend backend(2);
  test::ModelRunner with(tm.path(), backend), plain(without, backend);
  std::filesystem::remove(without);
  EXPECT_EQ(with.model().weights().mtp.size(), 1u);
  EXPECT_EQ(plain.model().weights().mtp.size(), 0u);
  EXPECT_EQ(with.model().config().n_layer, 4);
  test::ModelRunner::Seq a, b;
  a.tokens = b.tokens = {1, 40, 300, 77, 5, 9, 600, 2, 33};
  EXPECT_EQ(with.step({&a})[0], plain.step({&b})[0]);
  with.release(a);
  plain.release(b);
}

TEST(HybridModel, RecurrentLayersFromTheirArrayEqualTheInterval) {
  RF_REQUIRE_TESTDATA("arch/tiny-qwen35.gguf");
  const std::string src = test::testdata_path("arch/tiny-qwen35.gguf");
  const std::string arr = rewrite(
      src, "recurrent_array", [](const std::string& k, gguf::Value&) { return k != "qwen35.full_attention_interval"; },
      [](const std::string&) { return true; },
      [](gguf::Writer& w) { w.set_i32s("qwen35.attention.recurrent_layers", {1, 1, 1, 0, 1, 1, 1, 0}); });
  CpuBackend backend(2);
  test::ModelRunner a(src, backend), b(arr, backend);
  std::filesystem::remove(arr);
  test::ModelRunner::Seq x, y;
  x.tokens = y.tokens = {1, 403, 407, 261, 378};
  EXPECT_EQ(a.step({&x})[0], b.step({&y})[0]);
  a.release(x);
  b.release(y);
}

TEST(HybridModel, BadHybridMetadataIsNamed) {
  RF_REQUIRE_TESTDATA("arch/tiny-qwen35.gguf");
  const std::string src = test::testdata_path("arch/tiny-qwen35.gguf");
  struct Case {
    std::function<bool(const std::string&, gguf::Value&)> meta;
    std::function<void(gguf::Writer&)> extra;
    std::string want;
  };
  const std::vector<Case> cases = {
      {[](const std::string& k, gguf::Value&) { return k != "qwen35.ssm.conv_kernel"; }, nullptr,
       "'qwen35.ssm.conv_kernel'"},
      {[](const std::string& k, gguf::Value&) { return k != "qwen35.rope.dimension_sections"; }, nullptr,
       "'qwen35.rope.dimension_sections'"},
      {[](const std::string& k, gguf::Value& v) {
         if (k == "qwen35.ssm.inner_size") v = u32v(100);
         return true;
       },
       nullptr, "ssm.inner_size 100"},
      {[](const std::string& k, gguf::Value& v) {
         if (k == "qwen35.ssm.group_count") v = u32v(4);
         return true;
       },
       nullptr, "ssm.group_count 4"},
      {[](const std::string&, gguf::Value&) { return true; },
       [](gguf::Writer& w) { w.set_u32("qwen35.nextn_predict_layers", 8); }, "'qwen35.nextn_predict_layers' = 8"},
      {[](const std::string&, gguf::Value&) { return true; },
       [](gguf::Writer& w) { w.set_i32s("qwen35.attention.recurrent_layers", {1, 1, 1, 1, 1, 1, 1, 1}); },
       "no full-attention layer"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = rewrite(src, "bad" + std::to_string(i), cases[i].meta,
                                     [](const std::string&) { return true; }, cases[i].extra);
    const std::string msg = test::load_error(path);
    std::filesystem::remove(path);
    EXPECT_NE(msg.find(cases[i].want), std::string::npos) << "case " << i << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(HybridModel, TheMemoryPlanCountsTheStateRows) {
  const ModelConfig c = header_config("qwen3.6-35b-a3b");
  const KVGeometry g = kv_geometry(c, DType::F16, 16);
  ASSERT_GT(g.state_row_bytes, 0u);
  KVBudget b;
  b.state_rows = 64 + 64;
  b.kv_bytes = size_t(16) << 30;
  const KVMemoryPlan plan(g, b);
  EXPECT_EQ(plan.state_rows(), 128);
  EXPECT_EQ(plan.state_bytes(), 128 * g.state_row_bytes);
  EXPECT_EQ(size_t(plan.num_blocks()), (b.kv_bytes - plan.state_bytes()) / g.bytes_per_block());
  // A device share: what is left after the state rows.
  KVBudget d;
  d.state_rows = 128;
  d.memory_utilization = 0.9f;
  d.device_total = size_t(140) << 30;
  d.device_used = size_t(20) << 30;
  const KVMemoryPlan dp(g, d);
  const double left = 0.9 * double(d.device_total) - double(d.device_used) - double(kDeviceReserveBytes) -
                      double(dp.state_bytes());
  EXPECT_EQ(dp.num_blocks(), int32_t(size_t(left) / g.bytes_per_block()));
  // A budget the state rows alone exceed is refused, naming them.
  KVBudget tiny = b;
  tiny.kv_bytes = size_t(1) << 30;
  try {
    KVMemoryPlan bad(g, tiny);
    ADD_FAILURE() << "a 1 GiB budget held 128 state rows of " << g.state_row_bytes << " bytes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("recurrent-state rows"), std::string::npos) << e.what();
  }
  // A model with recurrent layers needs state rows.
  KVBudget none;
  none.num_blocks = 8;
  EXPECT_THROW(KVMemoryPlan(g, none), Error);
}

// A state saved at a block boundary (the row copied after a step) and
// restored into another sequence's row, with the first sequence's KV
// blocks shared, continues exactly as the sequence that saved it.
TEST(HybridModel, ARestoredCheckpointContinuesExactly) {
  RF_REQUIRE_TESTDATA("arch/tiny-qwen35.gguf");
  CpuBackend backend(2);
  test::ModelRunner r(test::testdata_path("arch/tiny-qwen35.gguf"), backend, 64, 2, 32, 4, KVCacheDType::Auto, 1);
  const std::vector<int32_t> prompt = {1, 75, 49, 278, 417, 458, 358, 327, 24, 307, 505, 205, 496};
  test::ModelRunner::Seq a;
  a.tokens.assign(prompt.begin(), prompt.begin() + 8);  // two blocks of 4
  r.step({&a}, {}, {{0, 2}});                             // a holds row 0; row 2 is the checkpoint
  a.tokens = prompt;
  const auto want = r.step({&a})[0];
  // b starts at position 8 on a's first two blocks, from the checkpoint.
  test::ModelRunner::Seq b;
  b.blocks.resize(1);
  b.blocks[0] = {a.blocks[0][0], a.blocks[0][1]};
  b.tokens = prompt;
  b.n_done = 8;
  r.take_state_row(b);
  const auto got = r.step({&b}, {{2, b.state_row}}, {})[0];
  EXPECT_EQ(got, want);
  b.blocks[0].erase(b.blocks[0].begin(), b.blocks[0].begin() + 2);  // a's blocks are a's to release
  r.release(b);
  r.release(a);
}

}  // namespace
}  // namespace rf
