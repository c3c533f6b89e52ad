// The Gated DeltaNet family's launchers (hybrid models' recurrent layers,
// backend.h "Gated DeltaNet"): the causal depthwise conv1d with its state
// and SiLU (conv1d.cu), the gated delta rule over each sequence's state row
// (delta_rule.cu), the gated RMSNorm and sigmoid gating (gating.cu).
// Activations are f16, state rows and weights f32. Each launcher takes
// device pointers, the step's metadata arrays, sizes and the LaunchCtx,
// allocates nothing and checks its launch, so decode steps can be captured.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/gpu.h"

namespace rf::gpu {

// The step's sequences as the recurrent kernels read them (StepMeta's
// device arrays): sequence s owns tokens [seq_starts[s], seq_starts[s + 1]),
// starts at positions[seq_starts[s]] (-1: padding, skipped; 0: from the
// zero state) and keeps its state in row state_slots[s].
struct RecurrentSeqs {
  const int32_t* seq_starts = nullptr;
  const int32_t* positions = nullptr;
  const int32_t* state_slots = nullptr;
  int32_t n_seqs = 0;
  int32_t max_new_tokens = 0;  // the longest sequence's tokens in the step
};

// out[t, c] = silu(sum_k w[c, k] * in(t - (K-1) + k, c)) over x [n_tokens,
// conv_channels] (f16) and the state's conv rows, which then hold each
// sequence's last K - 1 inputs. w f32 [conv_channels, K]; K <= kMaxConvKernel.
constexpr int kMaxConvKernel = 8;
void conv1d_silu_state(const void* x, const float* w, const RecurrentSeqs& seqs, const RecurrentLayer& st,
                       void* out, const LaunchCtx& ctx);

// The gated delta rule (backend.h gated_delta_net) of every sequence's
// tokens, in order, on its state row's S; qkv f16 [n_tokens,
// conv_channels], alpha and beta f32 [n_tokens, n_v_heads], dt_bias and a
// f32 [n_v_heads], out f32 [n_tokens, n_v_heads * head_v_dim].
// head_k_dim <= 8 * the warp size.
void gated_delta_net(const void* qkv, const void* alpha, const void* beta, const float* dt_bias, const float* a,
                     const RecurrentSeqs& seqs, const RecurrentLayer& st, float l2_eps, void* out,
                     const LaunchCtx& ctx);

// out = rms_norm(x_seg) * w * silu(z_seg) per segment of `seg` elements
// (rows * cols / seg of them); x f32, z and out f16, w f32 [seg].
void gated_rms_norm(const void* x, const float* w, const void* z, void* out, int64_t rows, int cols, int seg,
                    float eps, const LaunchCtx& ctx);

// out = x * sigmoid(gate) over rows x cols f16; gate f16 [rows, cols], or
// [rows, 1] with per_row (one scalar a row). out may alias x.
void sigmoid_mul(const void* x, const void* gate, bool per_row, void* out, int64_t rows, int cols,
                 const LaunchCtx& ctx);

}  // namespace rf::gpu
