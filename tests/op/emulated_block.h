// EmulatedBlock: a GPU thread block emulated on the CPU for the tests of
// code written against a lane interface (wave.h's collectives, mfma_tile.h's
// matrix-core tile): one thread per lane, in warps of `hw` lanes, run in
// lockstep — shuffles and the matrix instructions (AMD's MFMA, NVIDIA's
// mma.m16n8k16) exchange values through a barrier. It checks the code's
// logic, not a compiler's code for it.
#pragma once

#include <array>
#include <barrier>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "core/fp16.h"

namespace rf::gpu {

// A block of `threads` threads in warps of `hw` lanes, run in lockstep.
class EmulatedBlock {
 public:
  EmulatedBlock(int threads, int hw)
      : threads_(threads),
        hw_(hw),
        bar_(threads),
        f_(threads),
        i_(threads),
        a_(threads),
        b_(threads),
        a16_(threads),
        b16_(threads),
        rows_(threads) {}

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

    // c += A . B over this lane's 32-lane warp, as PTX's
    // mma.m16n8k16.row.col.f32.f16.f16.f32 distributes it (prefill_mma_tile.h
    // lists the fragments): A 16 x 16 and B 16 x 8 of f16 pairs, C 16 x 8.
    void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
      b->a16_[size_t(tid)] = {a[0], a[1], a[2], a[3]};
      b->b16_[size_t(tid)] = {b0, b1};
      b->bar_.arrive_and_wait();
      const int base = warp() * b->hw_, l = lane();
      auto half = [](uint32_t pair, int hi) { return f16_to_f32(uint16_t(hi ? pair >> 16 : pair & 0xffffu)); };
      auto a_at = [&](int row, int col) {
        const int src = base + (row % 8) * 4 + (col % 8) / 2;
        return half(b->a16_[size_t(src)][size_t((row >= 8) + 2 * (col >= 8))], col % 2);
      };
      auto b_at = [&](int k, int n) {
        const int src = base + n * 4 + (k % 8) / 2;
        return half(b->b16_[size_t(src)][size_t(k >= 8)], k % 2);
      };
      for (int e = 0; e < 4; ++e) {
        const int row = l / 4 + 8 * (e / 2), col = 2 * (l % 4) + e % 2;
        float sum = c[e];
        for (int kk = 0; kk < 16; ++kk) sum += a_at(row, kk) * b_at(kk, col);
        c[e] = sum;
      }
      b->bar_.arrive_and_wait();
    }
    // PTX ldmatrix .x4 (b16): lanes 8 j .. 8 j + 7 of the warp give the
    // rows of 8 x 8 matrix j; lane i gets r[j] = its row i / 4 at columns
    // 2 (i % 4) + {0, 1}, or transposed (its rows 2 (i % 4) + {0, 1} at
    // column i / 4).
    void ldsm_x4(uint32_t (&r)[4], const uint16_t* row) { ldsm(r, row, false); }
    void ldsm_x4_trans(uint32_t (&r)[4], const uint16_t* row) { ldsm(r, row, true); }
    void ldsm(uint32_t (&r)[4], const uint16_t* row, bool trans) {
      b->rows_[size_t(tid)] = row;
      b->bar_.arrive_and_wait();
      const int base = warp() * b->hw_, l = lane();
      for (int j = 0; j < 4; ++j) {
        const uint16_t* const* m = b->rows_.data() + base + 8 * j;
        r[j] = trans ? uint32_t(m[2 * (l % 4)][l / 4]) | (uint32_t(m[2 * (l % 4) + 1][l / 4]) << 16)
                     : uint32_t(m[l / 4][2 * (l % 4)]) | (uint32_t(m[l / 4][2 * (l % 4) + 1]) << 16);
      }
      b->bar_.arrive_and_wait();
    }
    // Two floats as f16x2 bits, round to nearest even (lo in the low half).
    uint32_t pack2(float lo, float hi) const { return uint32_t(f32_to_f16(lo)) | (uint32_t(f32_to_f16(hi)) << 16); }
    // Staging copies are synchronous here: nothing is ever in flight.
    void copy_commit() {}
    void copy_wait(int) {}

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
  std::vector<std::array<uint32_t, 4>> a16_;  // mma16816's operands, per thread
  std::vector<std::array<uint32_t, 2>> b16_;
  std::vector<const uint16_t*> rows_;  // ldmatrix's row addresses, per thread
};

}  // namespace rf::gpu


