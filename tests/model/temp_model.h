// TempModel: a synthetic model (model/synthetic.h preset + quantization
// type) written to a file in the temporary directory for a test's lifetime.
// The file name carries the process id, so tests running in parallel do
// not share it.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/synthetic.h"

namespace rf::test {

class TempModel {
 public:
  TempModel(const std::string& preset, const std::string& type, uint64_t seed = 7) {
    path_ = (std::filesystem::temp_directory_path() /
             ("rf_test_" + preset + "_" + type + "_" + std::to_string(getpid()) + ".gguf"))
                .string();
    const auto p = synthetic_preset(preset);
    const auto plan = quant_plan(type);
    RF_CHECK(p && plan, "no preset ", preset, " or type ", type);
    ThreadPool pool(2);
    write_synthetic_model(*p, *plan, path_, seed, pool, nullptr);
  }
  ~TempModel() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TempModel(const TempModel&) = delete;
  TempModel& operator=(const TempModel&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace rf::test
