// EmulatedBlock: a GPU thread block emulated on the CPU for the tests of
// code written against a lane interface (wave.h's collectives, mfma_tile.h's
// matrix-core tile): one thread per lane, in warps of `hw` lanes, run in
// lockstep — shuffles and the matrix instruction exchange values through a
// barrier. It checks the code's logic, not a compiler's code for it.
#pragma once

#include <array>
#include <barrier>
#include <functional>
#include <thread>
#include <vector>

namespace rf::gpu {

// A block of `threads` threads in warps of `hw` lanes, run in lockstep.
class EmulatedBlock {
 public:
  EmulatedBlock(int threads, int hw)
      : threads_(threads), hw_(hw), bar_(threads), f_(threads), i_(threads), a_(threads), b_(threads) {}

  // The lane exchange wave.h expects, for thread `tid`.
  struct Lanes {
    EmulatedBlock* b;
    int tid;
    int lane() const { return tid % b->hw_; }
    int warp() const { return tid / b->hw_; }
    int n_warps() const { return b->threads_ / b->hw_; }
    void sync_block() { b->bar_.arrive_and_wait(); }
    float shfl_xor(float v, int mask) { return exchange(b->f_, v, mask); }
    int shfl_xor(int v, int mask) { return exchange(b->i_, v, mask); }
    // d += A . B over this lane's 64-lane wavefront, as
    // V_MFMA_F32_16X16X16F16 distributes it (mfma_tile.h): lane l holds
    // A[l % 16][4 (l / 16) + e] and B[4 (l / 16) + e][l % 16], and gets
    // D[4 (l / 16) + e][l % 16]. (Inputs are not rounded to f16 here.)
    void mma16(float (&d)[4], const float (&av)[4], const float (&bv)[4]) {
      b->a_[size_t(tid)] = {av[0], av[1], av[2], av[3]};
      b->b_[size_t(tid)] = {bv[0], bv[1], bv[2], bv[3]};
      b->bar_.arrive_and_wait();
      const int base = warp() * b->hw_, l = lane();
      for (int e = 0; e < 4; ++e) {
        const int i = 4 * (l / 16) + e, j = l % 16;
        float sum = d[e];
        for (int kk = 0; kk < 16; ++kk)
          sum += b->a_[size_t(base + i + 16 * (kk / 4))][size_t(kk % 4)] *
                 b->b_[size_t(base + j + 16 * (kk / 4))][size_t(kk % 4)];
        d[e] = sum;
      }
      b->bar_.arrive_and_wait();
    }

   private:
    template <typename T>
    T exchange(std::vector<T>& slots, T v, int mask) {
      slots[size_t(tid)] = v;
      b->bar_.arrive_and_wait();
      const int src = warp() * b->hw_ + (lane() ^ mask);
      const T r = src < b->threads_ ? slots[size_t(src)] : v;
      b->bar_.arrive_and_wait();
      return r;
    }
  };

  // Runs body(lanes) on every thread of the block.
  void run(const std::function<void(Lanes&)>& body) {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads_; ++t)
      ts.emplace_back([this, t, &body] {
        Lanes l{this, t};
        body(l);
      });
    for (auto& t : ts) t.join();
  }

 private:
  int threads_, hw_;
  std::barrier<> bar_;
  std::vector<float> f_;
  std::vector<int> i_;
  std::vector<std::array<float, 4>> a_, b_;  // mma16's operands, per thread
};

}  // namespace rf::gpu


