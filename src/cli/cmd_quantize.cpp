// `rocmforge quantize IN OUT TYPE [--pure] [--imatrix FILE]`: re-encode a
// model's weights (the types and mixtures of model/quant_plan.h), keeping
// its metadata; rows are converted on every core. With an importance matrix
// (llama.cpp's imatrix GGUF) the quantizers weight each column's error by
// its importance (model/imatrix.h); the i-quants below 4 bits that need
// one (model/quant_plan.h, needs_importance) are refused without it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cli/commands.h"
#include "core/log.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/imatrix.h"
#include "model/quant_plan.h"

namespace rf::cli {
namespace {

struct QuantOptions {
  std::string in, out, type, imatrix;
  bool pure = false;
  int threads = 0;
};

// An integer key that may give one value per layer (Gemma 4's
// head_count_kv): the scalar, or the smallest of the layers' values.
int64_t int_or_least(const gguf::File& f, const std::string& key, int64_t fallback) {
  const gguf::Value* v = f.find(key);
  if (!v || v->type != gguf::ValueType::ARRAY) return f.get_int(key, fallback);
  const std::vector<int64_t> vals = v->as_array(key).to_i64(key);
  return vals.empty() ? fallback : *std::min_element(vals.begin(), vals.end());
}

void quantize(const QuantOptions& o) {
  auto plan = quant_plan(o.type);
  RF_CHECK(plan, "unknown type '", o.type, "' (known: ", quant_plan_names(), ")");
  if (o.pure) plan->mixture = false;
  std::unique_ptr<ImportanceMatrix> imatrix;
  if (!o.imatrix.empty()) imatrix = std::make_unique<ImportanceMatrix>(ImportanceMatrix::load(o.imatrix));
  auto f = gguf::File::open(o.in);
  const std::string arch = f->get_string("general.architecture", "llama");
  const int n_layer = int(f->get_int(arch + ".block_count", 0));
  const int n_expert = int(f->get_int(arch + ".expert_count", 0));
  // (n_gqa: the largest of the layers', where head counts are per layer.)
  const int64_t n_head = f->get_int(arch + ".attention.head_count", 1);
  const int64_t n_head_kv = int_or_least(*f, arch + ".attention.head_count_kv", n_head);
  const int n_gqa = n_head_kv > 0 ? int(n_head / n_head_kv) : 1;
  const bool tied_output = f->find_tensor("output.weight") == nullptr;
  // The types llama.cpp will not make without importances: refuse before any work.
  std::string needing;
  for (const auto& t : f->tensors()) {
    if (t.name == "output.weight" || t.name == "token_embd.weight") continue;
    const DType target = plan_tensor_type(*plan, t.name, int64_t(t.ne(0)), int(t.dims.size()), n_layer, tied_output,
                                          n_expert, n_gqa, imatrix != nullptr);
    if (!needs_importance(target) || target == t.type) continue;
    if (imatrix) {
      RF_CHECK(imatrix->columns(t.name, int64_t(t.ne(0))), "tensor '", t.name,
               "' has no entry in the importance matrix ", o.imatrix, ", which its type ", dtype_name(target), " needs");
    } else if (needing.find(dtype_name(target)) == std::string::npos) {
      needing += (needing.empty() ? "" : " and ") + std::string(dtype_name(target));
    }
  }
  RF_CHECK(needing.empty(), o.type, " needs an importance matrix for its ", needing,
           " tensors: pass --imatrix FILE (the output of llama-imatrix for this model)");
  ThreadPool pool(size_t(o.threads));
  gguf::Writer w;
  for (const auto& [k, v] : f->metadata())
    if (k != "general.alignment") w.set(k, v);
  w.set_u32("general.file_type", uint32_t(plan->file_type));
  uint64_t in_bytes = 0, out_bytes = 0;
  for (const auto& t : f->tensors()) {
    const DType target = plan_tensor_type(*plan, t.name, int64_t(t.ne(0)), int(t.dims.size()), n_layer, tied_output,
                                          n_expert, n_gqa, imatrix != nullptr);
    RF_CHECK(can_dequantize(t.type), "tensor '", t.name, "' has type ", dtype_name(t.type), " which cannot be read");
    RF_CHECK(can_quantize(target), "tensor '", t.name, "': cannot quantize to ", dtype_name(target));
    const gguf::TensorInfo* info = &t;
    const gguf::File* file = f.get();
    const ImportanceMatrix* imp = imatrix.get();
    in_bytes += t.n_bytes;
    out_bytes += row_bytes(target, t.ne(0)) * t.rows();
    w.add_tensor(t.name, target, t.dims, [info, file, target, imp, &pool](uint8_t* dst) {
      const uint8_t* src = file->tensor_data(*info);
      if (target == info->type) {
        std::memcpy(dst, src, info->n_bytes);
        return;
      }
      const size_t cols = info->ne(0), in_rb = row_bytes(info->type, cols), out_rb = row_bytes(target, cols);
      // Rows of a 3-D expert tensor: expert r / ne(1) owns row r.
      const size_t rows_per_expert = info->dims.size() >= 3 ? info->ne(1) : info->rows();
      pool.parallel_for(info->rows(), 16, [&](size_t r0, size_t r1) {
        std::vector<float> row(cols);
        for (size_t r = r0; r < r1; ++r) {
          const float* importance =
              imp ? imp->columns(info->name, int64_t(cols), int(r / rows_per_expert)) : nullptr;
          dequantize_row(info->type, src + r * in_rb, row.data(), cols);
          quantize_row(target, row.data(), dst + r * out_rb, cols, importance);
        }
      });
    });
  }
  const auto t0 = std::chrono::steady_clock::now();
  Progress bar("quantizing to " + o.type, double(f->tensors().size()), "tensors");
  w.write(o.out, [&](size_t done, size_t) { bar.update(double(done)); });
  bar.finish();
  std::fprintf(stderr, "%s: %.2f GB -> %.2f GB (%s) in %.1f s\n", o.out.c_str(), double(in_bytes) / 1e9,
               double(out_bytes) / 1e9, o.type.c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

void add_quantize_command(CLI::App& app) {
  auto o = std::make_shared<QuantOptions>();
  auto* cmd = app.add_subcommand("quantize", "Re-encode a model's weights: IN OUT TYPE");
  cmd->add_option("input", o->in, "Input GGUF")->required();
  cmd->add_option("output", o->out, "Output GGUF")->required();
  cmd->add_option("type", o->type, "Target: " + quant_plan_names())->required();
  cmd->add_option("-t,--threads", o->threads, "Threads (0: all cores)");
  cmd->add_flag("--pure", o->pure, "Every matrix in TYPE (no mixture: output, attn_v, ffn_down rules off)");
  cmd->add_option("--imatrix", o->imatrix,
                  "Importance matrix (llama-imatrix GGUF): quantization errors weighted by column importance");
  cmd->callback([o] { quantize(*o); });
}

RF_REGISTER_COMMAND(80, add_quantize_command);

}  // namespace
}  // namespace rf::cli
