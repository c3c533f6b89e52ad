// The vocabulary-parallel sampling protocol (see vocab_parallel_sample.h).
#include "backend/vocab_parallel_sample.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace rf {
namespace {

// Every rank's `local`, in rank order.
template <typename T>
void gather(Communicator& comm, const std::vector<T>& local, std::vector<T>& all) {
  all.resize(local.size() * size_t(comm.size()));
  comm.all_gather_host(local.data(), local.size() * sizeof(T), all.data());
}

bool before(const ShardCandidate& a, const ShardCandidate& b) {
  return a.value > b.value || (a.value == b.value && a.id < b.id);
}

// Radix selection for the rows with want[r]: the largest key K >= floor[r]
// such that the weight of the row's values with keys >= K (and >= floor)
// reaches the target — target[r] itself (counts), or by_mass target[r]
// times the row's total weight. Raises floor[r] to K.
void radix_select(VocabShardOps& ops, Communicator& comm, const std::vector<uint8_t>& want,
                  const std::vector<double>& target, bool by_mass, const std::vector<float>& top,
                  std::vector<uint32_t>& floor) {
  const size_t n_rows = want.size(), ranks = size_t(comm.size());
  std::vector<uint32_t> prefix(n_rows, 0);
  std::vector<double> remaining(target), hist, all;
  uint32_t mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    hist.assign(n_rows * 256, 0.0);
    ops.histogram(want, floor, prefix, mask, shift, by_mass, top, hist);
    gather(comm, hist, all);
    for (size_t r = 0; r < n_rows; ++r) {
      if (!want[r]) continue;
      double h[256] = {};
      for (size_t q = 0; q < ranks; ++q)
        for (size_t b = 0; b < 256; ++b) h[b] += all[(q * n_rows + r) * 256 + b];
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
    if (want[r]) floor[r] = std::max(floor[r], prefix[r]);
}

bool any(const std::vector<uint8_t>& v) { return std::find(v.begin(), v.end(), 1) != v.end(); }

}  // namespace

void sample_vocab_parallel(VocabShardOps& ops, int64_t vocab_total, std::span<const SampleRow> rows,
                           std::span<const PenaltyToken> penalties, Communicator& comm,
                           std::vector<SampleResult>& out) {
  const size_t n_rows = rows.size(), ranks = size_t(comm.size());
  out.resize(n_rows);
  for (const SampleRow& row : rows)
    RF_CHECK(row.penalty_offset >= 0 && size_t(row.penalty_offset + row.penalty_count) <= penalties.size(),
             "sample: penalty range out of bounds");

  // 1. Adjust and summarize; greedy rows are decided here.
  std::vector<ShardSummary> sums(n_rows), all_sums;
  ops.prepare(rows, penalties, sums);
  gather(comm, sums, all_sums);
  std::vector<float> top(n_rows, -INFINITY);
  std::vector<double> log_z(n_rows);
  std::vector<ShardCandidate> best(n_rows);
  std::vector<float> best_raw(n_rows);
  for (size_t r = 0; r < n_rows; ++r) {
    float raw_max = -INFINITY;
    best[r] = all_sums[r].best;
    best_raw[r] = all_sums[r].best_raw;
    for (size_t q = 0; q < ranks; ++q) {
      const ShardSummary& sm = all_sums[q * n_rows + r];
      raw_max = std::max(raw_max, sm.raw_max);
      top[r] = std::max(top[r], sm.top);
      if (sm.best.value > best[r].value) best[r] = sm.best, best_raw[r] = sm.best_raw;  // ties keep the lower id
    }
    double z = 0;
    for (size_t q = 0; q < ranks; ++q) {
      const ShardSummary& sm = all_sums[q * n_rows + r];
      if (sm.raw_max > -INFINITY) z += sm.raw_sum * std::exp(double(sm.raw_max) - double(raw_max));
    }
    log_z[r] = double(raw_max) + std::log(z);
  }

  // 2. Thresholds: top-k (counts), then top-p (masses above the top-k floor), then min-p.
  std::vector<uint32_t> floor(n_rows, 0);
  std::vector<uint8_t> want(n_rows), sampled(n_rows);
  std::vector<double> target(n_rows);
  for (size_t r = 0; r < n_rows; ++r) {
    const SamplingParams& p = rows[r].params;
    sampled[r] = !p.greedy();
    want[r] = sampled[r] && p.top_k > 0 && p.top_k < vocab_total;
    target[r] = double(p.top_k);
  }
  if (any(want)) radix_select(ops, comm, want, target, false, top, floor);
  for (size_t r = 0; r < n_rows; ++r) {
    want[r] = sampled[r] && rows[r].params.top_p < 1.0f;
    target[r] = double(rows[r].params.top_p);
  }
  if (any(want)) radix_select(ops, comm, want, target, true, top, floor);
  for (size_t r = 0; r < n_rows; ++r) {
    const SamplingParams& p = rows[r].params;
    if (sampled[r] && p.min_p > 0.0f)
      floor[r] = std::max(floor[r], order_key(float(double(top[r]) + std::log(double(p.min_p)))));
  }

  // 3. The draw: each rank's kept mass; the rank whose share holds u picks.
  std::vector<ShardCandidate> chosen(n_rows);
  for (size_t r = 0; r < n_rows; ++r)
    if (!sampled[r]) chosen[r] = ShardCandidate{best_raw[r], best[r].id};
  if (any(sampled)) {
    std::vector<double> local, all_d;
    ops.kept_mass(sampled, floor, top, local);
    gather(comm, local, all_d);
    std::vector<double> before_me(n_rows, 0.0), u(n_rows, 0.0);
    std::vector<uint8_t> owner(n_rows, 0);
    for (size_t r = 0; r < n_rows; ++r) {
      if (!sampled[r]) continue;
      double total = 0;
      for (size_t q = 0; q < ranks; ++q) {
        if (int32_t(q) < comm.rank()) before_me[r] += all_d[q * n_rows + r];
        total += all_d[q * n_rows + r];
      }
      u[r] = double(uniform01(rows[r].params.seed, rows[r].rng_counter)) * total;
      const double mine = all_d[size_t(comm.rank()) * n_rows + r];
      owner[r] = u[r] >= before_me[r] && u[r] < before_me[r] + mine;
    }
    std::vector<ShardCandidate> picks(n_rows * 2), all_picks;
    ops.pick(sampled, floor, top, before_me, u, owner, picks);
    gather(comm, picks, all_picks);
    for (size_t r = 0; r < n_rows; ++r) {
      if (!sampled[r]) continue;
      ShardCandidate last;
      for (size_t q = 0; q < ranks; ++q) {
        const ShardCandidate* c = &all_picks[(q * n_rows + r) * 2];
        if (chosen[r].id < 0 && c[0].id >= 0) chosen[r] = c[0];
        if (c[1].id >= 0) last = c[1];
      }
      if (chosen[r].id < 0) chosen[r] = last;  // u at the very end of the mass (rounding): the last kept token
      RF_CHECK(chosen[r].id >= 0, "sampling: no token left to draw (all logits were -inf?)");
    }
  }

  // The results, with the top alternatives.
  for (size_t r = 0; r < n_rows; ++r) {
    SampleResult& o = out[r];
    o.token = chosen[r].id;
    o.logprob = float(double(chosen[r].value) - log_z[r]);
    o.top.clear();
    const int32_t n_top =
        int32_t(std::min<int64_t>(std::min(rows[r].params.top_logprobs, kMaxTopLogprobs), vocab_total));
    if (n_top <= 0) continue;
    std::vector<ShardCandidate> merged;
    for (size_t q = 0; q < ranks; ++q)
      for (const ShardCandidate& c : all_sums[q * n_rows + r].tops)
        if (c.id >= 0) merged.push_back(c);
    std::sort(merged.begin(), merged.end(), before);
    for (int32_t j = 0; j < n_top && j < int32_t(merged.size()); ++j)
      o.top.emplace_back(merged[size_t(j)].id, float(double(merged[size_t(j)].value) - log_z[r]));
  }
}

}  // namespace rf
