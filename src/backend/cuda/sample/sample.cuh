// The sampling family's launchers: one block per row over f32 logits
// (sample.cu, sample_common.cuh), and the per-rank primitives of
// vocabulary-parallel sampling (sample_shard.cu) with their buffers' layout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/gpu.h"

namespace rf::gpu {

// Sampling: one block per row over f32 logits [rows, vocab].
struct SampleRowDevice {
  float temperature, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty;
  int32_t top_k, top_logprobs, penalty_offset, penalty_count;
  int32_t mask_offset;  // into the step's mask words, -1: no mask
  uint64_t seed, counter;
};
struct SampleOutDevice {
  int32_t token;
  float logprob;
  int32_t top_ids[kMaxTopLogprobs];
  float top_logprobs[kMaxTopLogprobs];
};
// `masks`: the rows' allowed-token bitmasks (SampleRow::allowed), at
// params[row].mask_offset words.
void sample(const float* logits, int rows, int vocab, const SampleRowDevice* params, const PenaltyToken* penalties,
            const uint32_t* masks, float* work, SampleOutDevice* out, const LaunchCtx& ctx);
// Plain greedy rows (sample_common.cuh): each row's ChunkStats of its n
// logits (token ids first..first+n) into the start of its slice of work.
void greedy_chunks(const float* logits, int rows, int n, int first, const SampleRowDevice* params,
                   const uint32_t* masks, float* work, const LaunchCtx& ctx);

// ---- sample_shard.cu
// The per-rank primitives of vocabulary-parallel sampling
// (backend/vocab_parallel_sample.h) over a rank's logits [rows, local] of
// ids [first, first + local): one block per row. Masses are 32.32 fixed
// point summed as integers (results do not depend on thread timing),
// reported as doubles in units of exp(x - top).
struct ShardRowDevice {  // a row's inputs to the later primitives
  uint32_t floor, prefix;
  float top;
  double before, u;
  int32_t want, owner;
};
struct ShardPickDevice {
  float raw;   // the raw logit of id
  int32_t id;  // global id; -1: none
};
struct ShardPrepDevice {
  double raw_sum;  // sum of exp(raw - raw_max)
  float raw_max, top, best_v, best_raw;
  int32_t best_i;  // global id
  float top_v[kMaxTopLogprobs];
  int32_t top_i[kMaxTopLogprobs];  // global ids; -1: none
};
// The buffers of one step for up to `rows` rows, carved from one allocation
// (device, and pinned host with the same layout): byte offsets.
struct ShardLayout {
  size_t rows_in = 0, prep = 0, hist = 0, vals = 0, picks = 0, bytes = 0;
  explicit ShardLayout(size_t rows) {
    auto take = [&](size_t n) {
      const size_t at = bytes;
      bytes += (n + 255) / 256 * 256;
      return at;
    };
    rows_in = take(rows * sizeof(ShardRowDevice));
    prep = take(rows * sizeof(ShardPrepDevice));
    hist = take(rows * 256 * sizeof(double));
    vals = take(rows * sizeof(double));
    picks = take(rows * 2 * sizeof(ShardPickDevice));
  }
};
// Adjusts each row into work (biases, penalties, bans, mask, temperature)
// and summarizes it (ShardPrepDevice: maxima, the raw sum of exponentials,
// the best token and its raw logit, the top raw logits).
void shard_prepare(const float* logits, int rows, int local, int first, const SampleRowDevice* params,
                   const PenaltyToken* penalties, const uint32_t* masks, float* work, ShardPrepDevice* out,
                   const LaunchCtx& ctx);
// hist[r, 256] for rows with in[r].want: the weight (count, or by_mass the
// mass) of work values with key >= floor and (key & mask) == prefix, by
// (key >> shift) & 255.
void shard_histogram(const float* work, int rows, int local, const ShardRowDevice* in, uint32_t mask, int shift,
                     bool by_mass, double* hist, const LaunchCtx& ctx);
// out[r] = the kept mass (key >= floor) of rows with in[r].want.
void shard_kept_mass(const float* work, int rows, int local, const ShardRowDevice* in, double* out,
                     const LaunchCtx& ctx);
// picks[2r] = where in[r].owner, the first kept id at which before + the
// kept mass so far exceeds u (else the last kept; -1 when not the owner);
// picks[2r + 1] = the last kept id (-1: none). Global ids, with their raw
// logits.
void shard_pick(const float* logits, const float* work, int rows, int local, int first, const ShardRowDevice* in,
                ShardPickDevice* picks, const LaunchCtx& ctx);

}  // namespace rf::gpu
