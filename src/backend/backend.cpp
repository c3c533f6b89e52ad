// Default implementations of the Backend's fused ops: the plain ops in
// sequence (what the CPU reference runs); the family ops' defaults throw an
// error naming the op and the backend.
#include "backend/backend.h"

#include "core/error.h"

namespace rf {

void Backend::check_handoff(const Tensor& x, const Handoff& x_in, const char* op, bool norm_ok) {
  RF_CHECK(!x_in.data || x_in.data == x.data, op, ": handed over with another tensor than the one it reads");
  RF_CHECK(norm_ok || !x_in.norm_pending, op,
           ": reads rows whose RMSNorm was left to the matmul after matmul_add_rms_norm");
}

Handoff Backend::matmul_multi(const Tensor& x, std::span<const Tensor> ws, std::span<Tensor> outs,
                              std::span<const Tensor> biases, const Handoff& x_in) {
  RF_CHECK(ws.size() == outs.size(), "matmul_multi: ", ws.size(), " weights for ", outs.size(), " outputs");
  RF_CHECK(biases.empty() || biases.size() == ws.size(), "matmul_multi: ", biases.size(), " biases for ", ws.size(),
           " weights");
  check_handoff(x, x_in, "matmul_multi");
  Handoff h = x_in;  // each matmul hands x on to the next
  for (size_t i = 0; i < ws.size(); ++i) {
    h = matmul(x, ws[i], outs[i], h);
    if (!biases.empty() && biases[i].data) add_bias(outs[i], biases[i]);
  }
  return h;
}

void Backend::matmul_gate_up_glu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, Tensor& gate, Tensor& up,
                                 Tensor& out, Activation act, const Handoff& x_in) {
  check_handoff(x, x_in, "matmul_gate_up_glu");
  const Handoff h = matmul(x, w_gate, gate, x_in);
  matmul(x, w_up, up, h);
  if (act == Activation::GeluTanh) geglu(gate, up, out);
  else if (act == Activation::SiLUClampedOai) swiglu_oai(gate, up, out);
  else swiglu(gate, up, out);
}

Handoff Backend::add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, Tensor& out) {
  add(x, y, x);
  rms_norm(x, w, eps, out);
  return {};
}

Handoff Backend::matmul_add_rms_norm(const Tensor& x, const Tensor& w, Tensor& out, Tensor& residual,
                                     const Tensor& norm_w, float eps, Tensor& next, std::span<const Tensor>,
                                     const Handoff& x_in) {
  matmul(x, w, out, x_in);
  return add_rms_norm(residual, out, norm_w, eps, next);
}

bool Backend::fold_norm_gain(Tensor&, std::span<const Tensor>) { return false; }

Handoff Backend::add_post_norm_rms_norm(Tensor& x, const Tensor& y, const Tensor& w_y, const Tensor& w, float eps,
                                        Tensor& out) {
  rms_norm(y, w_y, eps, out);
  add(x, out, x);
  rms_norm(x, w, eps, out);
  return {};
}

void Backend::rms_norm_pair(const Tensor& a, const Tensor& wa, Tensor& a_out, const Tensor& b, const Tensor& wb,
                            Tensor& b_out, float eps) {
  rms_norm(a, wa, eps, a_out);
  rms_norm(b, wb, eps, b_out);
}

void Backend::qk_norm_rope_store_kv(const Tensor& q_raw, const Tensor& wq, const Tensor& k_raw, const Tensor& wk,
                                    float eps, Tensor& q, Tensor& k, const Tensor& v, const StepMeta& m,
                                    const RopeParams& rope, const KVLayer& cache) {
  // The same memory seen as one row per head.
  const int64_t hd = cache.head_dim;
  Tensor qo = q.view2d(hd, q.numel() / hd), ko = k.view2d(hd, k.numel() / hd);
  rms_norm_pair(q_raw.view2d(hd, q_raw.numel() / hd), wq, qo, k_raw.view2d(hd, k_raw.numel() / hd), wk, ko, eps);
  rope_store_kv(q, k, v, m, rope, cache);
}

Handoff Backend::moe_router_route(const Tensor& x, const Tensor& w_router, const MoeParams& p, Tensor& logits,
                                  Tensor& ids, Tensor& weights) {
  matmul(x, w_router, logits);
  if (p.router_bias.data) add_bias(logits, p.router_bias);
  return moe_route(logits, p, ids, weights);
}

void Backend::unsupported(const char* op) const {
  fail("backend '", name(), "' does not implement op '", op, "' (needed by this model's architecture)");
}

void Backend::add_bias(Tensor&, const Tensor&) { unsupported("add_bias"); }
void Backend::embed_range(const Tensor&, int64_t, const StepMeta&, Tensor&) { unsupported("embed_range"); }
void Backend::sample_vocab_parallel(const Tensor&, int64_t, int64_t, std::span<const SampleRow>,
                                    std::span<const PenaltyToken>, Communicator&, std::vector<SampleResult>&) {
  unsupported("sample_vocab_parallel");
}
void Backend::geglu(const Tensor&, const Tensor&, Tensor&) { unsupported("geglu"); }
void Backend::rope_q(Tensor&, int32_t, const StepMeta&, const RopeParams&) { unsupported("rope_q"); }
void Backend::moe_scale_weights(const Tensor&, const Tensor&, Tensor&) { unsupported("moe_scale_weights"); }
void Backend::swiglu_oai(const Tensor&, const Tensor&, Tensor&) { unsupported("swiglu_oai"); }
void Backend::scale(Tensor&, float) { unsupported("scale"); }
void Backend::convert(const Tensor&, Tensor&) { unsupported("convert"); }
Handoff Backend::moe_route(const Tensor&, const MoeParams&, Tensor&, Tensor&) { unsupported("moe_route"); }
void Backend::mla_rope_store_kv(Tensor&, Tensor&, const Tensor&, float, const StepMeta&, const RopeParams&,
                                const MlaParams&, const KVLayer&) {
  unsupported("mla_rope_store_kv");
}
void Backend::attention_mla(const Tensor&, const KVLayer&, const StepMeta&, const MlaParams&, Tensor&, Tensor&,
                            Tensor&) {
  unsupported("attention_mla");
}
void Backend::moe_ffn(const Tensor&, const Tensor&, const Tensor&, const ExpertWeights&, const MoeParams&, Tensor&,
                      const Handoff&, const Handoff&) {
  unsupported("moe_ffn");
}
void Backend::softcap(Tensor&, float) { unsupported("softcap"); }
void Backend::sigmoid_mul(const Tensor&, const Tensor&, Tensor&) { unsupported("sigmoid_mul"); }
void Backend::conv1d_silu_state(const Tensor&, const Tensor&, const StepMeta&, const RecurrentLayer&, Tensor&) {
  unsupported("conv1d_silu_state");
}
void Backend::gated_delta_net(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const StepMeta&, const RecurrentLayer&, float, Tensor&) {
  unsupported("gated_delta_net");
}
void Backend::gated_rms_norm(const Tensor&, const Tensor&, const Tensor&, float, Tensor&) {
  unsupported("gated_rms_norm");
}
void Backend::copy_on_device(void*, const void*, size_t) { unsupported("copy_on_device"); }
Handoff Backend::attention_ext(const Tensor&, const KVLayer&, const StepMeta&, const AttentionParams&, Tensor&) {
  unsupported("attention_ext (sliding window / logit soft-cap / sinks)");
}

}  // namespace rf
