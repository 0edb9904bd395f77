#include "ort_runtime.h"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>

#include "errors.h"

namespace rlsim {
namespace {

std::mutex g_mutex;
// Leaked on purpose: ONNX Runtime's own static destructors run at exit, and releasing the Env
// after (or during) them is a known source of crashes at shutdown.
OrtRuntime* g_runtime = nullptr;

using GetApiBaseFn = const OrtApiBase* (*)();

GetApiBaseFn open_library(const std::string& path) {
  dlerror();
  // RTLD_LOCAL keeps this copy's symbols out of the global namespace, so it cannot clash with the
  // copy inside the Python onnxruntime module when both live in one process.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw EngineError("cannot load the ONNX Runtime library " + path + ": " +
                      (why ? why : "unknown dlopen error") +
                      "; pass the path of a libonnxruntime.so for this machine (the onnxruntime "
                      "pip package ships one in onnxruntime/capi/)");
  }
  auto fn = reinterpret_cast<GetApiBaseFn>(dlsym(handle, "OrtGetApiBase"));
  if (fn == nullptr) {
    dlclose(handle);
    throw EngineError(path + " has no OrtGetApiBase symbol, so it is not an ONNX Runtime library; "
                      "pass the path of libonnxruntime.so");
  }
  return fn;  // the handle stays open for the life of the process
}

}  // namespace

const OrtRuntime& load_ort_runtime(const std::string& library_path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::error_code ec;
  if (library_path.empty() || !std::filesystem::is_regular_file(library_path, ec)) {
    throw FileError("ONNX Runtime library '" + library_path +
                    "' does not exist; pass the path of libonnxruntime.so (rlsim finds it with "
                    "rlsim.scoring.ort_library.find_ort_library(), or set ORT_ROOT)");
  }
  const std::string canonical = std::filesystem::canonical(library_path).string();
  if (g_runtime != nullptr) {
    if (g_runtime->library_path == canonical) return *g_runtime;
    throw EngineError("ONNX Runtime is already loaded from " + g_runtime->library_path +
                      " in this process and the C++ API allows one library per process; pass that "
                      "same path, or use a separate process for " + canonical);
  }
  const OrtApiBase* base = open_library(canonical)();
  const std::string version = base->GetVersionString();
  const OrtApi* api = base->GetApi(ORT_API_VERSION);
  if (api == nullptr) {
    throw EngineError("ONNX Runtime " + version + " at " + canonical +
                      " is older than the headers the engine was built with (API version " +
                      std::to_string(ORT_API_VERSION) + "); use a newer onnxruntime");
  }
  Ort::InitApi(api);
  Ort::Env* env = nullptr;
  try {
    env = new Ort::Env(ORT_LOGGING_LEVEL_WARNING, "rlsim");
  } catch (const Ort::Exception& e) {
    throw EngineError(std::string("ONNX Runtime could not create its environment: ") + e.what());
  }
  g_runtime = new OrtRuntime{canonical, version, env};
  return *g_runtime;
}

}  // namespace rlsim
