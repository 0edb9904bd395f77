// The native reward-model engine: one ONNX Runtime session over a sequence-classification graph.
//
// Plain C++17, no Python: the pybind11 module (python_module.cc) and the standalone benchmark
// (bench_main.cc) link the same code, so the benchmark times exactly what Python calls.
//
// The graph must take `input_ids` and `attention_mask` (int64, shape (batch, seq)), optionally
// `token_type_ids` (fed zeros), and its first output must be float32 of shape (batch, 1) or
// (batch,): one reward per sequence.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ort_runtime.h"

namespace rlsim {

struct EngineOptions {
  int intra_op_threads = 0;                   // 0: ONNX Runtime's default (one per physical core)
  int inter_op_threads = 1;                   // only used by execution_mode "parallel"
  bool spinning = true;                       // let idle pool threads spin: lower latency, busy cores
  std::string optimization = "all";           // graph optimisation: disable | basic | extended | all
  std::string execution_mode = "sequential";  // sequential | parallel
  std::string device = "cpu";                 // cpu | cuda | cuda:N
};

// A borrowed view of a caller's tensor: row-major, C-contiguous. `dtype` uses NumPy's names
// ("int64", "int32", ...) so a wrong type can be named in the error message.
struct TensorView {
  const void* data = nullptr;
  std::string dtype;
  std::vector<int64_t> shape;
};

class Engine {
 public:
  // Loads ONNX Runtime from `ort_library` (see ort_runtime.h) and the model at `model_path`.
  // Throws FileError (missing file), InputError (bad option), EngineError (bad model, ORT failure).
  Engine(const std::string& model_path, const std::string& ort_library, const EngineOptions& options);
  // The session holds pointers into the name strings below: an Engine never moves.
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Checks ids/mask (dtype int64, rank 2, equal shapes, seq > 0 unless the batch is empty, the
  // model's fixed dimensions) and returns the batch size. Throws InputError.
  int64_t check_inputs(const TensorView& input_ids, const TensorView& attention_mask) const;

  // One forward pass; writes batch rewards (float32) into `out`, which must hold `batch` floats.
  // An empty batch writes nothing. Safe to call from several threads at once: ONNX Runtime
  // sessions allow concurrent Run, and the engine's shared state is read-only or locked.
  void run(const TensorView& input_ids, const TensorView& attention_mask, float* out) const;
  std::vector<float> run(const TensorView& input_ids, const TensorView& attention_mask) const;

  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<std::string>& output_names() const { return output_names_; }  // [0] is used
  const std::string& ort_version() const { return runtime_->version; }
  const std::string& ort_library() const { return runtime_->library_path; }
  const std::string& model_path() const { return model_path_; }
  const EngineOptions& options() const { return options_; }
  // Calls now inside ONNX Runtime's Run, over all threads: lets a caller see that runs overlap.
  int active_runs() const { return active_runs_.load(); }

 private:
  enum class Feed { kInputIds, kAttentionMask, kTokenTypeIds };

  Ort::SessionOptions make_session_options() const;
  void inspect_inputs();
  void inspect_output();  // the first output must be one float reward per row
  std::shared_ptr<const std::vector<int64_t>> zeros(size_t count) const;

  std::string model_path_;
  EngineOptions options_;
  const OrtRuntime* runtime_;
  // Held by pointer: an Ort:: object's destructor calls through the API table, which does not
  // exist yet if the constructor throws before ONNX Runtime is loaded.
  std::unique_ptr<Ort::Session> session_;
  std::unique_ptr<Ort::MemoryInfo> cpu_memory_;

  std::vector<std::string> input_names_;
  std::vector<std::string> output_names_;
  std::vector<const char*> input_name_ptrs_;  // point into input_names_, built once
  const char* output_name_ptr_ = nullptr;     // points into output_names_[0]
  std::vector<Feed> feeds_;                   // what to feed each model input, in model order
  std::vector<int64_t> fixed_dims_{-1, -1};   // the model's (batch, seq) if fixed, else -1
  size_t output_rank_ = 2;

  // Zeros for token_type_ids, grown on demand and shared: a run keeps its own reference, so a
  // concurrent run that grows the buffer never frees memory another run is reading.
  mutable std::atomic<int> active_runs_{0};
  mutable std::mutex zeros_mutex_;
  mutable std::shared_ptr<const std::vector<int64_t>> zeros_;
};

}  // namespace rlsim
