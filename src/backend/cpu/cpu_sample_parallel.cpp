// Sampling over a vocabulary split across tensor-parallel CPU ranks: the
// rules of the reference (cpu_sample.cpp) computed from per-rank summaries,
// so that no rank ever sees another's logits. Per step, for all rows at once:
//   1. each rank adjusts its logits (biases, penalties, bans, mask — global
//      ids translated to its range) and shares per-row maxima, its best
//      token (greedy rows) and its top raw logits (top_logprobs);
//   2. sums of exp(raw - max) give the raw log-normalizer;
//   3. top-k and top-p thresholds by radix selection over the float bits:
//      four rounds of 256-bin histograms (counts, or masses exp(x - top))
//      summed over ranks, each round fixing one byte of the threshold key;
//   4. each rank's kept mass; the draw u falls in one rank's share (ranks
//      hold consecutive ids, so id order is rank order), which picks it;
//   5. the chosen token's raw logit from its owner.
// Every rank computes the same results (sums in rank order).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace rf {
namespace {

uint32_t order_key(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Every rank's `local` (n per rank), in rank order.
template <typename T>
void gather(Communicator& comm, const std::vector<T>& local, std::vector<T>& all) {
  all.resize(local.size() * size_t(comm.size()));
  comm.all_gather_host(local.data(), local.size() * sizeof(T), all.data());
}

struct Candidate {
  float value;
  int32_t id;
};
bool before(const Candidate& a, const Candidate& b) { return a.value > b.value || (a.value == b.value && a.id < b.id); }

struct Summary {  // phase 1, one per row and rank
  float raw_max;
  float top;           // the largest adjusted (and scaled) logit
  Candidate best;      // greedy rows: the best adjusted logit, lowest id on ties
};

// One row's local state.
struct Row {
  std::vector<float> work;  // adjusted logits, divided by the temperature for sampled rows
  uint32_t floor = 0;       // threshold key: tokens with smaller keys are not kept
  float top = 0;            // global largest of work
  double log_z = 0;
};

// Radix selection for the rows with want[r]: the largest key K >= floor
// such that the weight of the rows' elements with keys in [K, inf) (and >=
// floor) reaches the target: target[r] itself (by_mass false: counts), or
// target[r] times the total weight (by_mass: masses exp(x - top)). Sets
// floor to K.
void radix_select(Communicator& comm, std::vector<Row>& rows, const std::vector<uint8_t>& want,
                  const std::vector<double>& target, bool by_mass) {
  const size_t n_rows = rows.size(), ranks = size_t(comm.size());
  std::vector<uint32_t> prefix(n_rows, 0);
  std::vector<double> remaining(target), hist, all;
  uint32_t mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    hist.assign(n_rows * 256, 0.0);
    for (size_t r = 0; r < n_rows; ++r) {
      if (!want[r]) continue;
      const Row& row = rows[r];
      for (float x : row.work) {
        const uint32_t key = order_key(x);
        if (key < row.floor || (key & mask) != prefix[r]) continue;
        hist[r * 256 + ((key >> shift) & 255u)] += by_mass ? std::exp(double(x) - double(row.top)) : 1.0;
      }
    }
    gather(comm, hist, all);
    for (size_t r = 0; r < n_rows; ++r) {
      if (!want[r]) continue;
      double h[256] = {};
      for (size_t q = 0; q < ranks; ++q)
        for (size_t b = 0; b < 256; ++b) h[b] += all[q * n_rows * 256 + r * 256 + b];
      if (by_mass && shift == 24) {
        double total = 0;
        for (double v : h) total += v;
        remaining[r] = target[r] * total;
      }
      int digit = -1;
      double acc = 0;
      for (int b = 255; b >= 0; --b) {
        acc += h[b];
        if (h[b] > 0 && acc >= remaining[r]) {
          digit = b;
          remaining[r] -= acc - h[b];
          break;
        }
      }
      if (digit < 0) {  // rounding left the target just out of reach: keep all there is
        for (int b = 0; b < 256 && digit < 0; ++b)
          if (h[b] > 0) digit = b;
        if (digit < 0) digit = 0;
        remaining[r] = 0;
      }
      prefix[r] |= uint32_t(digit) << shift;
    }
    mask |= 255u << shift;
  }
  for (size_t r = 0; r < n_rows; ++r)
    if (want[r]) rows[r].floor = std::max(rows[r].floor, prefix[r]);
}

}  // namespace

void CpuBackend::sample_vocab_parallel(const Tensor& logits, int64_t first, int64_t vocab_total,
                                       std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties,
                                       Communicator& comm, std::vector<SampleResult>& out) {
  const size_t n_rows = rows.size(), ranks = size_t(comm.size());
  const int64_t local = logits.cols();
  RF_CHECK(logits.type == DType::F32 && logits.rows() >= int64_t(n_rows) && first >= 0 && first + local <= vocab_total,
           "cpu sample_vocab_parallel: bad shapes");
  out.resize(n_rows);
  auto raw = [&](size_t r) { return logits.ptr<float>() + r * size_t(local); };

  // 1. Adjust; share maxima, best tokens and top raw logits.
  std::vector<Row> state(n_rows);
  std::vector<Summary> sums(n_rows), all_sums;
  std::vector<Candidate> tops(n_rows * kMaxTopLogprobs, Candidate{-INFINITY, -1}), all_tops;
  std::vector<PenaltyToken> mine;
  for (size_t r = 0; r < n_rows; ++r) {
    const SampleRow& row = rows[r];
    const SamplingParams& p = row.params;
    RF_CHECK(row.penalty_offset >= 0 && size_t(row.penalty_offset + row.penalty_count) <= penalties.size(),
             "cpu sample: penalty range out of bounds");
    Row& s = state[r];
    s.work.assign(raw(r), raw(r) + local);
    mine.clear();
    for (int32_t e = 0; e < row.penalty_count; ++e) {
      PenaltyToken t = penalties[size_t(row.penalty_offset + e)];
      if (t.token < first || t.token >= first + local) continue;
      t.token -= int32_t(first);
      mine.push_back(t);
    }
    apply_penalties(s.work.data(), p, mine.data(), int32_t(mine.size()));
    if (row.allowed)
      for (int64_t i = 0; i < local; ++i) {
        const int64_t id = first + i;
        if (!((row.allowed[id >> 5] >> (id & 31)) & 1u)) s.work[size_t(i)] = -INFINITY;
      }
    Summary& sm = sums[r];
    sm.raw_max = *std::max_element(raw(r), raw(r) + local);
    sm.best = Candidate{s.work[0], int32_t(first)};
    for (int64_t i = 1; i < local; ++i)
      if (s.work[size_t(i)] > sm.best.value) sm.best = Candidate{s.work[size_t(i)], int32_t(first + i)};
    if (!p.greedy()) {
      const float inv_t = 1.0f / p.temperature;
      for (float& x : s.work) x *= inv_t;
    }
    sm.top = *std::max_element(s.work.begin(), s.work.end());
    const int32_t n_top = std::min<int32_t>(std::min(p.top_logprobs, kMaxTopLogprobs), int32_t(local));
    if (n_top > 0) {
      std::vector<Candidate> c(static_cast<size_t>(local));
      for (int64_t i = 0; i < local; ++i) c[size_t(i)] = Candidate{raw(r)[i], int32_t(first + i)};
      std::partial_sort(c.begin(), c.begin() + n_top, c.end(), before);
      std::copy(c.begin(), c.begin() + n_top, tops.begin() + ptrdiff_t(r * kMaxTopLogprobs));
    }
  }
  gather(comm, sums, all_sums);
  gather(comm, tops, all_tops);
  std::vector<float> raw_max(n_rows, -INFINITY);
  std::vector<Candidate> best(n_rows);
  for (size_t r = 0; r < n_rows; ++r) {
    best[r] = all_sums[r].best;
    state[r].top = -INFINITY;
    for (size_t q = 0; q < ranks; ++q) {
      const Summary& sm = all_sums[q * n_rows + r];
      raw_max[r] = std::max(raw_max[r], sm.raw_max);
      state[r].top = std::max(state[r].top, sm.top);
      if (sm.best.value > best[r].value) best[r] = sm.best;  // ranks in id order: ties keep the lower id
    }
  }

  // 2. The raw log-normalizer.
  std::vector<double> sumexp(n_rows, 0.0), all_d;
  for (size_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < local; ++i) sumexp[r] += std::exp(double(raw(r)[i]) - double(raw_max[r]));
  gather(comm, sumexp, all_d);
  for (size_t r = 0; r < n_rows; ++r) {
    double z = 0;
    for (size_t q = 0; q < ranks; ++q) z += all_d[q * n_rows + r];
    state[r].log_z = double(raw_max[r]) + std::log(z);
  }

  // 3. Thresholds: top-k (counts), then top-p (masses above the top-k floor), then min-p.
  std::vector<uint8_t> want(n_rows);
  std::vector<double> target(n_rows);
  for (size_t r = 0; r < n_rows; ++r) {
    const SamplingParams& p = rows[r].params;
    want[r] = !p.greedy() && p.top_k > 0 && p.top_k < vocab_total;
    target[r] = double(p.top_k);
  }
  if (std::find(want.begin(), want.end(), 1) != want.end())
    radix_select(comm, state, want, target, false);
  for (size_t r = 0; r < n_rows; ++r) {
    const SamplingParams& p = rows[r].params;
    want[r] = !p.greedy() && p.top_p < 1.0f;
    target[r] = double(p.top_p);
  }
  if (std::find(want.begin(), want.end(), 1) != want.end())
    radix_select(comm, state, want, target, true);
  for (size_t r = 0; r < n_rows; ++r) {
    const SamplingParams& p = rows[r].params;
    if (!p.greedy() && p.min_p > 0.0f)
      state[r].floor =
          std::max(state[r].floor, order_key(float(double(state[r].top) + std::log(double(p.min_p)))));
  }

  // 4. The draw: each rank's kept mass, in id order.
  std::vector<double> mass(n_rows, 0.0);
  for (size_t r = 0; r < n_rows; ++r) {
    if (rows[r].params.greedy()) continue;
    for (float x : state[r].work)
      if (order_key(x) >= state[r].floor) mass[r] += std::exp(double(x) - double(state[r].top));
  }
  gather(comm, mass, all_d);
  std::vector<Candidate> picks(n_rows * 2, Candidate{0, -1}), all_picks;  // [row]: (the pick, the last kept)
  for (size_t r = 0; r < n_rows; ++r) {
    const SamplingParams& p = rows[r].params;
    if (p.greedy()) continue;
    double total = 0, before_me = 0;
    for (size_t q = 0; q < ranks; ++q) {
      if (int32_t(q) < comm.rank()) before_me += all_d[q * n_rows + r];
      total += all_d[q * n_rows + r];
    }
    const double u = double(uniform01(p.seed, rows[r].rng_counter)) * total;
    const Row& s = state[r];
    const bool owner = u >= before_me && u < before_me + mass[r];
    double cum = before_me;
    for (int64_t i = 0; i < local; ++i) {
      const float x = s.work[size_t(i)];
      if (order_key(x) < s.floor) continue;
      cum += std::exp(double(x) - double(s.top));
      picks[2 * r + 1].id = int32_t(first + i);
      if (owner && picks[2 * r].id < 0 && u < cum) picks[2 * r].id = int32_t(first + i);
    }
    if (owner && picks[2 * r].id < 0) picks[2 * r].id = picks[2 * r + 1].id;
  }
  gather(comm, picks, all_picks);
  std::vector<int32_t> chosen(n_rows, -1);
  for (size_t r = 0; r < n_rows; ++r) {
    if (rows[r].params.greedy()) {
      chosen[r] = best[r].id;
      continue;
    }
    int32_t last = -1;
    for (size_t q = 0; q < ranks; ++q) {
      const Candidate* c = &all_picks[(q * n_rows + r) * 2];
      if (chosen[r] < 0 && c[0].id >= 0) chosen[r] = c[0].id;
      if (c[1].id >= 0) last = c[1].id;
    }
    if (chosen[r] < 0) chosen[r] = last;
    RF_CHECK(chosen[r] >= 0, "sampling: no token left to draw (all logits were -inf?)");
  }

  // 5. The chosen tokens' raw logits, from their owners.
  std::vector<float> mine_raw(n_rows, -INFINITY), all_raw;
  for (size_t r = 0; r < n_rows; ++r)
    if (chosen[r] >= first && chosen[r] < first + local) mine_raw[r] = raw(r)[chosen[r] - first];
  gather(comm, mine_raw, all_raw);
  for (size_t r = 0; r < n_rows; ++r) {
    float v = -INFINITY;
    for (size_t q = 0; q < ranks; ++q) v = std::max(v, all_raw[q * n_rows + r]);
    SampleResult& o = out[r];
    o.token = chosen[r];
    o.logprob = float(double(v) - state[r].log_z);
    o.top.clear();
    const int32_t n_top = std::min<int32_t>(std::min(rows[r].params.top_logprobs, kMaxTopLogprobs), int32_t(vocab_total));
    if (n_top <= 0) continue;
    std::vector<Candidate> merged;
    for (size_t q = 0; q < ranks; ++q)
      for (int32_t j = 0; j < kMaxTopLogprobs; ++j) {
        const Candidate& c = all_tops[(q * n_rows + r) * kMaxTopLogprobs + size_t(j)];
        if (c.id >= 0) merged.push_back(c);
      }
    std::sort(merged.begin(), merged.end(), before);
    for (int32_t j = 0; j < n_top && j < int32_t(merged.size()); ++j)
      o.top.emplace_back(merged[size_t(j)].id, float(double(merged[size_t(j)].value) - state[r].log_z));
  }
}

}  // namespace rf
