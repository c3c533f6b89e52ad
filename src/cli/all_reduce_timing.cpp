// All-reduce timing on tensor-parallel ranks (see all_reduce_timing.h).
#include "cli/all_reduce_timing.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "core/error.h"

namespace rf::cli {

AllReduceTiming time_all_reduce(const BackendSet& backends, int64_t n_embd, int rows, int n_layer) {
  RF_CHECK(!backends.comms.empty(), "all-reduce timing needs tensor-parallel ranks");
  constexpr int kRounds = 7, kCalls = 20;
  constexpr uint64_t kGraphKey = uint64_t(1) << 40;
  const size_t n = backends.ranks.size();
  std::vector<double> rank0;  // seconds per call, per round
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        Backend& b = *backends.ranks[r];
        Communicator& c = *backends.comms[r];
        b.bind_thread();
        const DType type = b.activation_type();
        const size_t bytes = row_bytes(type, uint64_t(n_embd)) * size_t(rows);
        void* p = b.alloc(bytes, "all-reduce timing");
        const std::vector<uint8_t> zeros(bytes, 0);
        b.copy_to_device(p, zeros.data(), bytes);
        Tensor t = make_tensor(p, type, n_embd, rows, b.device());
        // As decode steps run them: replayed from a graph where the backend
        // has graphs (its key is far from the decode buckets'), else eager.
        auto calls = [&] {
          for (int i = 0; i < kCalls; ++i) c.all_reduce_sum(t);
        };
        for (int round = 0; round <= kRounds; ++round) {  // round 0 warms up (and records)
          const auto t0 = std::chrono::steady_clock::now();
          if (b.supports_graphs()) b.run_graph(kGraphKey, calls);
          else calls();
          b.synchronize();
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kCalls;
          if (r == 0 && round > 0) rank0.push_back(s);
        }
        if (b.supports_graphs()) b.clear_graphs();
        b.free(p);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        backends.comms[r]->abort();
      }
    });
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) RF_CHECK(e.empty(), "all-reduce timing: ", e);
  std::sort(rank0.begin(), rank0.end());
  AllReduceTiming out;
  out.rows = rows;
  out.us_per_call = rank0[rank0.size() / 2] * 1e6;
  out.ms_per_step = out.us_per_call * (2 * n_layer + 1) / 1e3;
  return out;
}

}  // namespace rf::cli
