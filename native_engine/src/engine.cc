#include "engine.h"

#include <array>
#include <filesystem>
#include <sstream>

#include "errors.h"

namespace rlsim {
namespace {

const char* kInputIds = "input_ids";
const char* kAttentionMask = "attention_mask";
const char* kTokenTypeIds = "token_type_ids";

std::string shape_str(const std::vector<int64_t>& shape) {
  std::ostringstream s;
  s << "(";
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << (shape.size() == 1 ? ",)" : ")");
  return s.str();
}

std::string type_name(ONNXTensorElementDataType t) {
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return "float32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return "float16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return "float64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return "int32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return "int64";
    default: return "ONNX element type " + std::to_string(static_cast<int>(t));
  }
}

GraphOptimizationLevel parse_optimization(const std::string& name) {
  if (name == "disable") return ORT_DISABLE_ALL;
  if (name == "basic") return ORT_ENABLE_BASIC;
  if (name == "extended") return ORT_ENABLE_EXTENDED;
  if (name == "all") return ORT_ENABLE_ALL;
  throw InputError("unknown optimization '" + name + "'; use one of: disable, basic, extended, all");
}

ExecutionMode parse_execution_mode(const std::string& name) {
  if (name == "sequential") return ORT_SEQUENTIAL;
  if (name == "parallel") return ORT_PARALLEL;
  throw InputError("unknown execution_mode '" + name + "'; use sequential or parallel");
}

// "cpu" -> -1, "cuda" -> 0, "cuda:N" -> N.
int parse_cuda_device(const std::string& device) {
  if (device == "cpu") return -1;
  if (device == "cuda") return 0;
  if (device.rfind("cuda:", 0) == 0 && device.size() > 5 &&
      device.find_first_not_of("0123456789", 5) == std::string::npos) {
    return std::stoi(device.substr(5));
  }
  throw InputError("unknown device '" + device + "'; use cpu, cuda or cuda:N");
}

void add_cuda(Ort::SessionOptions& so, int device_id, const std::string& library) {
  const std::vector<std::string> providers = Ort::GetAvailableProviders();
  bool has_cuda = false;
  std::string names;
  for (const auto& p : providers) {
    has_cuda = has_cuda || p == "CUDAExecutionProvider";
    names += (names.empty() ? "" : ", ") + p;
  }
  if (!has_cuda) {
    throw EngineError("device 'cuda' needs ONNX Runtime's CUDA provider, but " + library +
                      " has only: " + names +
                      "; install onnxruntime-gpu and pass its libonnxruntime.so, or use device='cpu'");
  }
  OrtCUDAProviderOptions cuda{};
  cuda.device_id = device_id;
  so.AppendExecutionProvider_CUDA(cuda);
}

void validate_options(const EngineOptions& o) {
  if (o.intra_op_threads < 0 || o.inter_op_threads < 0) {
    throw InputError("thread counts must be >= 0 (0: ONNX Runtime's default); got intra_op_threads=" +
                     std::to_string(o.intra_op_threads) +
                     ", inter_op_threads=" + std::to_string(o.inter_op_threads));
  }
  parse_optimization(o.optimization);
  parse_execution_mode(o.execution_mode);
  parse_cuda_device(o.device);
}

// Counts a run as in flight for its scope, exceptions included.
class ActiveRun {
 public:
  explicit ActiveRun(std::atomic<int>& count) : count_(count) { ++count_; }
  ~ActiveRun() { --count_; }
  ActiveRun(const ActiveRun&) = delete;
  ActiveRun& operator=(const ActiveRun&) = delete;

 private:
  std::atomic<int>& count_;
};

void check_tensor(const TensorView& t, const char* name) {
  if (t.dtype != "int64") {
    throw InputError(std::string(name) + " has dtype " + t.dtype +
                     "; the engine takes int64 token ids (np.asarray(x, dtype=np.int64))");
  }
  if (t.shape.size() != 2) {
    throw InputError(std::string(name) + " has rank " + std::to_string(t.shape.size()) + " (shape " +
                     shape_str(t.shape) + "); pass a 2-D (batch, seq) array");
  }
  if (t.data == nullptr && t.shape[0] * t.shape[1] > 0) {
    throw InputError(std::string(name) + " has no data");
  }
}

}  // namespace

Engine::Engine(const std::string& model_path, const std::string& ort_library,
               const EngineOptions& options)
    : model_path_(model_path), options_(options), runtime_(nullptr) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(model_path, ec)) {
    throw FileError("ONNX model '" + model_path +
                    "' does not exist; export it first (`rlsim export --model NAME`)");
  }
  validate_options(options);  // a bad setting fails before anything big is loaded
  runtime_ = &load_ort_runtime(ort_library);
  try {
    Ort::SessionOptions so = make_session_options();
    session_ = std::make_unique<Ort::Session>(*runtime_->env, model_path.c_str(), so);
    cpu_memory_ = std::make_unique<Ort::MemoryInfo>(
        Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault));
  } catch (const Ort::Exception& e) {
    throw EngineError("ONNX Runtime could not load " + model_path + ": " + e.what() +
                      "; re-export the model (`rlsim export --model NAME`)");
  }
  inspect_inputs();
  inspect_output();
}

Ort::SessionOptions Engine::make_session_options() const {
  try {
    Ort::SessionOptions so;
    so.SetIntraOpNumThreads(options_.intra_op_threads);
    so.SetInterOpNumThreads(options_.inter_op_threads);
    const char* spin = options_.spinning ? "1" : "0";
    so.AddConfigEntry("session.intra_op.allow_spinning", spin);
    so.AddConfigEntry("session.inter_op.allow_spinning", spin);
    so.SetGraphOptimizationLevel(parse_optimization(options_.optimization));
    so.SetExecutionMode(parse_execution_mode(options_.execution_mode));
    const int cuda_device = parse_cuda_device(options_.device);
    if (cuda_device >= 0) add_cuda(so, cuda_device, runtime_->library_path);
    return so;
  } catch (const Ort::Exception& e) {
    throw EngineError(std::string("ONNX Runtime rejected the session settings: ") + e.what());
  }
}

// Reads the model's inputs and checks they fit a reward model, so a mismatched graph fails here,
// at load, with a message instead of inside Run.
void Engine::inspect_inputs() {
  Ort::AllocatorWithDefaultOptions alloc;
  bool has_ids = false, has_mask = false;
  for (size_t i = 0; i < session_->GetInputCount(); ++i) {
    std::string name = session_->GetInputNameAllocated(i, alloc).get();
    // The shape info is a view into the TypeInfo: keep the TypeInfo alive while it is read.
    const Ort::TypeInfo type = session_->GetInputTypeInfo(i);
    const auto info = type.GetTensorTypeAndShapeInfo();
    const std::vector<int64_t> dims = info.GetShape();
    if (info.GetElementType() != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 || dims.size() != 2) {
      throw EngineError("model " + model_path_ + ": input '" + name + "' is " +
                        type_name(info.GetElementType()) + " of shape " + shape_str(dims) +
                        ", but the engine feeds int64 (batch, seq); export the reward model with "
                        "int64 input_ids/attention_mask (`rlsim export`)");
    }
    if (name == kInputIds) {
      feeds_.push_back(Feed::kInputIds);
      has_ids = true;
      fixed_dims_ = dims;
    } else if (name == kAttentionMask) {
      feeds_.push_back(Feed::kAttentionMask);
      has_mask = true;
    } else if (name == kTokenTypeIds) {
      feeds_.push_back(Feed::kTokenTypeIds);
    } else {
      throw EngineError("model " + model_path_ + " has input '" + name +
                        "', but the engine feeds only input_ids, attention_mask and token_type_ids; "
                        "export a sequence-classification reward model (`rlsim export`)");
    }
    input_names_.push_back(std::move(name));
  }
  if (!has_ids || !has_mask) {
    throw EngineError("model " + model_path_ +
                      " must take both input_ids and attention_mask; export it with `rlsim export`");
  }
  for (const auto& n : input_names_) input_name_ptrs_.push_back(n.c_str());
}

void Engine::inspect_output() {
  Ort::AllocatorWithDefaultOptions alloc;
  for (size_t i = 0; i < session_->GetOutputCount(); ++i) {
    output_names_.push_back(session_->GetOutputNameAllocated(i, alloc).get());
  }
  if (output_names_.empty()) throw EngineError("model " + model_path_ + " has no outputs");
  const Ort::TypeInfo type = session_->GetOutputTypeInfo(0);
  const auto out = type.GetTensorTypeAndShapeInfo();
  const std::vector<int64_t> dims = out.GetShape();
  const bool one_label = dims.size() == 1 || (dims.size() == 2 && (dims[1] == 1 || dims[1] < 0));
  if (out.GetElementType() != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || !one_label) {
    throw EngineError("model " + model_path_ + ": output '" + output_names_[0] + "' is " +
                      type_name(out.GetElementType()) + " of shape " + shape_str(dims) +
                      "; a reward model must output float32 (batch, 1) or (batch,): one label "
                      "(num_labels=1)");
  }
  output_rank_ = dims.size();
  output_name_ptr_ = output_names_[0].c_str();
}

std::shared_ptr<const std::vector<int64_t>> Engine::zeros(size_t count) const {
  std::lock_guard<std::mutex> lock(zeros_mutex_);
  if (!zeros_ || zeros_->size() < count) {
    zeros_ = std::make_shared<const std::vector<int64_t>>(count, 0);
  }
  return zeros_;
}

int64_t Engine::check_inputs(const TensorView& ids, const TensorView& mask) const {
  check_tensor(ids, kInputIds);
  check_tensor(mask, kAttentionMask);
  if (ids.shape != mask.shape) {
    throw InputError("input_ids has shape " + shape_str(ids.shape) + " but attention_mask has " +
                     shape_str(mask.shape) + "; they must match");
  }
  const int64_t batch = ids.shape[0], seq = ids.shape[1];
  if (batch == 0) return 0;
  if (seq <= 0) {
    throw InputError("sequence length is 0 (shape " + shape_str(ids.shape) +
                     "); every row needs at least one token");
  }
  for (size_t d = 0; d < 2; ++d) {
    if (fixed_dims_[d] > 0 && fixed_dims_[d] != ids.shape[d]) {
      throw InputError("model " + model_path_ + " was exported with a fixed " +
                       (d == 0 ? "batch size " : "sequence length ") + std::to_string(fixed_dims_[d]) +
                       " but got shape " + shape_str(ids.shape) +
                       "; pass that size or re-export with dynamic axes (`rlsim export`)");
    }
  }
  return batch;
}

void Engine::run(const TensorView& ids, const TensorView& mask, float* out) const {
  const int64_t batch = check_inputs(ids, mask);
  if (batch == 0) return;
  const std::array<int64_t, 2> shape{batch, ids.shape[1]};
  const size_t count = static_cast<size_t>(batch * ids.shape[1]);
  std::shared_ptr<const std::vector<int64_t>> type_ids;  // held until Run returns
  try {
    std::vector<Ort::Value> inputs;
    inputs.reserve(feeds_.size());
    for (Feed feed : feeds_) {
      const void* data = ids.data;
      if (feed == Feed::kAttentionMask) data = mask.data;
      if (feed == Feed::kTokenTypeIds) data = (type_ids = zeros(count))->data();
      // ORT reads but never writes inputs; CreateTensor just wants a non-const pointer.
      auto* p = const_cast<int64_t*>(static_cast<const int64_t*>(data));
      inputs.push_back(Ort::Value::CreateTensor<int64_t>(*cpu_memory_, p, count, shape.data(), 2));
    }
    // The output is bound to the caller's buffer, so ORT writes rewards in place: no copy.
    const std::array<int64_t, 2> out_shape{batch, 1};
    Ort::Value output = Ort::Value::CreateTensor<float>(*cpu_memory_, out, static_cast<size_t>(batch),
                                                        out_shape.data(), output_rank_);
    ActiveRun active(active_runs_);
    session_->Run(Ort::RunOptions{nullptr}, input_name_ptrs_.data(), inputs.data(), inputs.size(),
                  &output_name_ptr_, &output, 1);
  } catch (const Ort::Exception& e) {
    throw EngineError("ONNX Runtime failed to run " + model_path_ + " on a batch of shape " +
                      shape_str(ids.shape) + ": " + e.what());
  }
}

std::vector<float> Engine::run(const TensorView& ids, const TensorView& mask) const {
  std::vector<float> out(static_cast<size_t>(check_inputs(ids, mask)));
  run(ids, mask, out.data());
  return out;
}

}  // namespace rlsim
