// CudaBackend::sample: the rows' parameters, penalties and allowed-token
// masks uploaded in one go (upload_sample_rows, shared with
// vocabulary-parallel sampling), one block per row on the device, and the
// chosen tokens (with their logprobs) copied back.
#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_backend.h"

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/sample/sample.cuh"

namespace rf {

void CudaBackend::upload_sample_rows(std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties) {
  Impl& I = *impl_;
  const int n = int(rows.size());
  RF_CHECK(n <= limits_.max_logits, "cuda sample: too many rows");
  RF_CHECK(penalties.size() <= I.pen_capacity, "cuda sample: ", penalties.size(), " penalty tokens exceed capacity ",
           I.pen_capacity);
  size_t n_masked = 0;
  for (int i = 0; i < n; ++i) {
    const SampleRow& r = rows[size_t(i)];
    gpu::SampleRowDevice& d = I.rows_host[i];
    d.temperature = r.params.temperature;
    d.top_p = r.params.top_p;
    d.min_p = r.params.min_p;
    d.repetition_penalty = r.params.repetition_penalty;
    d.presence_penalty = r.params.presence_penalty;
    d.frequency_penalty = r.params.frequency_penalty;
    d.top_k = r.params.top_k;
    d.top_logprobs = std::clamp(r.params.top_logprobs, 0, kMaxTopLogprobs);
    d.penalty_offset = r.penalty_offset;
    d.penalty_count = r.penalty_count;
    d.mask_offset = -1;
    if (r.allowed) {  // packed after the previous masked rows
      d.mask_offset = int32_t(n_masked * I.mask_words);
      std::memcpy(I.mask_host + n_masked * I.mask_words, r.allowed, I.mask_words * 4);
      ++n_masked;
    }
    d.seed = r.params.seed;
    d.counter = r.rng_counter;
  }
  RF_GPU_CHECK(gpuMemcpyAsync(I.rows_dev, I.rows_host, size_t(n) * sizeof(gpu::SampleRowDevice),
                              gpuMemcpyHostToDevice, as_stream(stream_)));
  if (n_masked > 0)  // one small upload for the step's masks
    RF_GPU_CHECK(gpuMemcpyAsync(I.mask_dev, I.mask_host, n_masked * I.mask_words * 4, gpuMemcpyHostToDevice,
                                as_stream(stream_)));
  if (!penalties.empty()) {
    std::memcpy(I.pen_host, penalties.data(), penalties.size() * sizeof(PenaltyToken));
    RF_GPU_CHECK(gpuMemcpyAsync(I.pen_dev, I.pen_host, penalties.size() * sizeof(PenaltyToken), gpuMemcpyHostToDevice,
                                as_stream(stream_)));
  }
}

void CudaBackend::sample(const Tensor& logits, std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties,
                         std::vector<SampleResult>& out) {
  Impl& I = *impl_;
  const int n = int(rows.size());
  RF_CHECK(logits.type == DType::F32 && logits.cols() <= limits_.vocab, "cuda sample: bad logits");
  upload_sample_rows(rows, penalties);
  {
    OpTimer timer(profiler(), "sample");
    gpu::sample(logits.ptr<float>(), n, int(logits.cols()), I.rows_dev, I.pen_dev, I.mask_dev, I.sample_work, I.out_dev,
                ctx());
  }
  RF_GPU_CHECK(gpuMemcpyAsync(I.out_host, I.out_dev, size_t(n) * sizeof(gpu::SampleOutDevice), gpuMemcpyDeviceToHost,
                              as_stream(stream_)));
  RF_GPU_CHECK(gpuStreamSynchronize(as_stream(stream_)));
  if (profiler()) profiler()->collect();
  out.resize(size_t(n));
  for (int i = 0; i < n; ++i) {
    const gpu::SampleOutDevice& o = I.out_host[i];
    out[size_t(i)].token = o.token;
    out[size_t(i)].logprob = o.logprob;
    out[size_t(i)].top.clear();
    for (int j = 0; j < I.rows_host[i].top_logprobs; ++j) out[size_t(i)].top.emplace_back(o.top_ids[j], o.top_logprobs[j]);
  }
}

}  // namespace rf
