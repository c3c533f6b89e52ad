// `rocmforge info MODEL`: metadata, tensors (dtype, shape, size), parameter
// count and file type of a GGUF file; for a supported model, its experts
// (mixture-of-experts models), its KV cache groups (model/kv_cache.h) and
// what a full-context sequence holds (hybrid models: and its recurrent
// state); for mixture-of-experts models what lives where (with --cpu-moe
// or --n-cpu-moe N, as the loader places it); with --tp N, whether and how
// it splits over N tensor-parallel ranks (model/shard.h).
#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>

#include "cli/commands.h"
#include "gguf/reader.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/shard.h"

namespace rf::cli {
namespace {

const char* file_type_name(int64_t ft) {
  // llama.cpp's LLAMA_FTYPE_* numbering, and the FP8 plan's (model/quant_plan.h).
  static const std::map<int64_t, const char*> names = {
      {0, "all F32"}, {1, "mostly F16"}, {2, "mostly Q4_0"}, {3, "mostly Q4_1"},
      {7, "mostly Q8_0"}, {8, "mostly Q5_0"}, {9, "mostly Q5_1"}, {10, "mostly Q2_K"},
      {11, "mostly Q3_K - Small"}, {12, "mostly Q3_K - Medium"}, {13, "mostly Q3_K - Large"},
      {14, "mostly Q4_K - Small"}, {15, "mostly Q4_K - Medium"}, {16, "mostly Q5_K - Small"},
      {17, "mostly Q5_K - Medium"}, {18, "mostly Q6_K"}, {19, "mostly IQ2_XXS - 2.0625 bpw"},
      {20, "mostly IQ2_XS - 2.3125 bpw"}, {21, "mostly Q2_K - Small"}, {22, "mostly IQ3_XS - 3.3 bpw"},
      {23, "mostly IQ3_XXS - 3.0625 bpw"}, {24, "mostly IQ1_S - 1.5625 bpw"}, {25, "mostly IQ4_NL - 4.5 bpw"},
      {26, "mostly IQ3_S - 3.4375 bpw"}, {27, "mostly IQ3_S mix - 3.66 bpw"}, {28, "mostly IQ2_S - 2.5 bpw"},
      {29, "mostly IQ2_M - 2.7 bpw"}, {30, "mostly IQ4_XS - 4.25 bpw"}, {31, "mostly IQ1_M - 1.75 bpw"},
      {32, "mostly BF16"}, {38, "MXFP4 MoE"},
      {int64_t(DType::F8_E4M3_ROW), "mostly FP8 E4M3, a scale per row (ROCmForge's own)"}};
  auto it = names.find(ft);
  return it == names.end() ? "unknown" : it->second;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) { b /= 1024; ++u; }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", b, units[u]);
  return buf;
}

// The experts of a mixture-of-experts model: how many, how many run per
// token, each one's FFN width and how their weights are combined.
void print_experts(const ModelConfig& c) {
  if (!c.has_experts()) return;
  std::printf("experts:     %d per layer, %d used per token, expert FFN %d, weights %s\n", c.n_expert,
              c.n_expert_used, c.n_ff_expert,
              c.expert_weights_norm ? "renormalised over the chosen experts" : "their softmax probabilities");
}

// One token's KV values and bytes in a layer (MLA: the compressed row);
// the KV group layout and the f16 K/V one sequence of the training context
// holds (16-token blocks, 2048-token prompt chunks) with it and with every
// layer keeping every token; decoding, also in the 8-bit cache (e4m3 rows
// and their scales, --kv-cache-dtype fp8).
void print_kv(const ModelConfig& c) {
  const int32_t bs = 16, n = c.n_ctx_train;
  const KVGeometry geo = kv_geometry(c, DType::F16, bs);
  const double block = double(geo.bytes_per_block());
  const double prefill = double(geo.groups.max_blocks_per_sequence(n, bs, 2048)) * block;
  const double decode_blocks = double(geo.groups.max_blocks_per_sequence(n, bs, 1));
  const double decode = decode_blocks * block;
  const double decode_fp8 = decode_blocks * double(kv_geometry(c, DType::F8_E4M3, bs).bytes_per_block());
  const std::string fp8 = c.is_mla() ? std::string("no 8-bit cache for MLA")
                                     : human_bytes(decode_fp8) + " with --kv-cache-dtype fp8";
  const double every = double(geo.groups.n_kv_layers()) * double(n) * double(geo.token_bytes());
  if (c.is_mla())
    std::printf("kv per token: %d values a layer (latent %d + RoPE key %d; K only, V is the latent), %zu bytes at f16\n",
                c.kv_dim(), c.mla_kv_lora, c.rope.n_rot, geo.token_bytes());
  else
    std::printf("kv per token: %zu values a layer (K and V; the widest KV layer's), %zu bytes at f16\n",
                geo.token_bytes() / 2, geo.token_bytes());
  std::printf("kv cache:    %s; a %d-token sequence holds %s of f16 K/V decoding (%s), %s "
              "at most with 2048-token prompt chunks (%s if every layer kept every token)\n",
              geo.groups.summary().c_str(), n, human_bytes(decode).c_str(), fp8.c_str(),
              human_bytes(prefill).c_str(), human_bytes(every).c_str());
}

// Hybrid models: the recurrent state a sequence holds whatever its length
// (f32: each Gated DeltaNet layer's conv inputs and delta-rule matrices),
// one such row per sequence slot and per prefix checkpoint.
void print_state(const ModelConfig& c) {
  if (!c.has_recurrent()) return;
  const StateRowLayout rows = state_row_layout(c);
  const double conv = 4.0 * double(c.ssm_conv_kernel - 1) * double(c.ssm_conv_channels());
  const double ssm = 4.0 * double(c.ssm_v_heads) * double(c.ssm_head_dim) * double(c.ssm_head_dim);
  std::printf("state:       %d Gated DeltaNet layers: %s per sequence (f32; per layer %s of conv inputs and %s of "
              "delta-rule state), one row per sequence slot and per prefix checkpoint\n",
              c.n_recurrent(), human_bytes(double(rows.row_bytes())).c_str(), human_bytes(conv).c_str(),
              human_bytes(ssm).c_str());
}

// What each of n tensor-parallel ranks would hold, or why the model does not
// split (the loader's own checks: shard_config and whole-block columns).
void print_tensor_parallel(const gguf::File& f, const ModelConfig& c, int32_t n) {
  try {
    const ModelConfig r = shard_config(c, ShardSpec{0, n});
    uint64_t bytes = 0;  // rank 0's: split tensors by n, replicated ones whole
    for (const auto& t : f.tensors()) {
      const bool replicated = t.dims.size() == 1 || t.name.find("ffn_gate_inp") != std::string::npos;
      bytes += replicated ? t.n_bytes : t.n_bytes / uint64_t(n);
      const bool by_heads = t.name.find("attn_output.weight") != std::string::npos;
      const bool by_ff = t.name.find("ffn_down.weight") != std::string::npos;
      const bool by_expert_ff = t.name.find("ffn_down_exps.weight") != std::string::npos;
      if (!by_heads && !by_ff && !by_expert_ff) continue;
      const int64_t width = by_heads ? c.n_head : by_ff ? c.n_ff : c.n_ff_expert;
      const int64_t unit = by_heads ? c.head_dim : 1;
      for (int32_t k = 0; k < n; ++k) {
        const IndexRange part = shard_range(width, ShardSpec{k, n});
        check_column_split(t.type, part.first * unit, part.count * unit, int64_t(t.ne(0)), t.name);
      }
    }
    std::printf("tensor parallel: %d ranks: each %d query head%s, %d KV head%s%s, FFN %d, about %d vocabulary rows, "
                "~%s of weights\n",
                n, r.n_head, r.n_head == 1 ? "" : "s", r.n_head_kv, r.n_head_kv == 1 ? "" : "s",
                c.n_head_kv < n ? " (replicated)" : "", c.has_experts() ? r.n_ff_expert : r.n_ff,
                int32_t(shard_range(c.n_vocab, ShardSpec{0, n}).count), human_bytes(double(bytes)).c_str());
  } catch (const std::exception& e) {
    std::printf("tensor parallel: %d ranks: no: %s\n", n, e.what());
  }
}

// Mixture-of-experts models: what --cpu-moe / --n-cpu-moe N (host_layers)
// leaves where. The routed experts (ffn_*_exps) of layers below host_layers
// stay in host memory; everything else goes to the device, with one layer's
// experts more for the copy that large batches run on.
void print_placement(const gguf::File& f, const ModelConfig& c, int32_t host_layers) {
  if (!c.has_experts()) return;
  uint64_t device = 0, host = 0, experts = 0;
  std::map<int32_t, uint64_t> layer_host;  // a layer's host-resident bytes
  for (const auto& t : f.tensors()) {
    int32_t layer = -1;
    const bool routed = t.name.find("_exps.") != std::string::npos && std::sscanf(t.name.c_str(), "blk.%d.", &layer) == 1;
    if (routed) experts += t.n_bytes;
    if (routed && layer < host_layers) {
      host += t.n_bytes;
      layer_host[layer] += t.n_bytes;
    } else {
      device += t.n_bytes;
    }
  }
  uint64_t copy = 0;
  for (const auto& [layer, bytes] : layer_host) copy = std::max(copy, bytes);
  if (host_layers <= 0) {
    std::printf("placement:   all %s of weights on the device (experts %s; --cpu-moe or --n-cpu-moe N keeps "
                "some layers' in host memory)\n",
                human_bytes(double(device)).c_str(), human_bytes(double(experts)).c_str());
    return;
  }
  std::printf("placement:   experts of %zu layer%s in host memory (%s, page-locked); on the device %s of weights "
              "and %s for one layer's experts, copied over for large batches\n",
              layer_host.size(), layer_host.size() == 1 ? "" : "s", human_bytes(double(host)).c_str(),
              human_bytes(double(device)).c_str(),
              human_bytes(double(copy)).c_str());
}

void run_info(const std::string& path, bool all_tensors, int32_t tp, int32_t host_layers) {
  auto f = gguf::File::open(path);
  std::printf("file:        %s\n", path.c_str());
  std::printf("gguf:        version %u, alignment %u, data at byte %llu, %s\n", f->version(), f->alignment(),
              (unsigned long long)f->data_offset(), human_bytes(double(f->file_size())).c_str());
  std::printf("arch:        %s\n", f->get_string("general.architecture", "?").c_str());
  if (const auto* ft = f->find("general.file_type"))
    std::printf("file type:   %lld (%s)\n", (long long)ft->as_int("general.file_type"),
                file_type_name(ft->as_int("general.file_type")));
  // The model's own lines; nothing for files the engine would refuse.
  std::optional<ModelConfig> config;
  try {
    config = ModelConfig::from_gguf(*f);
  } catch (const std::exception&) {
  }
  if (config) {
    std::printf("model:       %s\n", config->summary().c_str());
    print_experts(*config);
    print_kv(*config);
    print_state(*config);
    print_placement(*f, *config, host_layers);
    if (tp > 1) print_tensor_parallel(*f, *config, tp);
  }
  uint64_t params = 0, bytes = 0;
  std::map<std::string, int> by_type;
  for (const auto& t : f->tensors()) {
    params += t.n_elements;
    bytes += t.n_bytes;
    by_type[dtype_name(t.type)]++;
  }
  std::printf("parameters:  %llu (%.2f M)\n", (unsigned long long)params, double(params) / 1e6);
  std::printf("tensor data: %s, bits per weight %.2f\n", human_bytes(double(bytes)).c_str(),
              params ? 8.0 * double(bytes) / double(params) : 0.0);
  std::printf("types:      ");
  for (const auto& [n, c] : by_type) std::printf(" %s x%d", n.c_str(), c);
  std::printf("\n\nmetadata (%zu keys):\n", f->metadata().size());
  for (const auto& [k, v] : f->metadata())
    std::printf("  %-40s %-6s %s\n", k.c_str(),
                v.type == gguf::ValueType::ARRAY ? "array" : gguf::value_type_name(v.type), v.to_display().c_str());
  std::printf("\ntensors (%zu):\n", f->tensors().size());
  size_t shown = 0;
  for (const auto& t : f->tensors()) {
    if (!all_tensors && shown++ >= 40) {
      std::printf("  ... %zu more (use --all)\n", f->tensors().size() - 40);
      break;
    }
    std::printf("  %-36s %-6s %-24s %s\n", t.name.c_str(), dtype_name(t.type), t.shape_string().c_str(),
                human_bytes(double(t.n_bytes)).c_str());
  }
}

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show a GGUF model's metadata and tensors");
  auto path = std::make_shared<std::string>();
  auto all = std::make_shared<bool>(false);
  auto tp = std::make_shared<int32_t>(1);
  cmd->add_option("model", *path, "GGUF file")->required();
  cmd->add_flag("--all", *all, "List every tensor");
  cmd->add_option("--tensor-parallel-size,--tp", *tp, "Also say how the model splits over this many ranks")
      ->check(CLI::Range(1, 64));
  auto cpu_moe = std::make_shared<bool>(false);
  auto n_cpu_moe = std::make_shared<int32_t>(0);
  cmd->add_flag("--cpu-moe", *cpu_moe, "Say what lives where with every layer's experts in host memory");
  cmd->add_option("--n-cpu-moe", *n_cpu_moe, "As --cpu-moe, the first N layers' experts")->check(CLI::NonNegativeNumber);
  cmd->callback([path, all, tp, cpu_moe, n_cpu_moe] {
    run_info(*path, *all, *tp, *cpu_moe ? std::numeric_limits<int32_t>::max() : *n_cpu_moe);
  });
}

RF_REGISTER_COMMAND(20, add_info_command);

}  // namespace

}  // namespace rf::cli
