// Loading ONNX Runtime at run time.
//
// The engine never links libonnxruntime: the library's exported symbols carry a version tag
// (OrtGetApiBase@VERS_1.32.0), so a binary linked against one release fails to load beside
// another. Instead the library is dlopen'ed from a path given at run time, OrtGetApiBase is found
// with dlsym, and the C++ API is initialised over it (ORT_API_MANUAL_INIT, set by CMake for every
// translation unit so the header's global API pointer is defined the same way everywhere).
#pragma once

#include <onnxruntime_cxx_api.h>

#include <string>

namespace rlsim {

// The process-wide ONNX Runtime: the library it came from and the one Ort::Env over it.
struct OrtRuntime {
  std::string library_path;  // canonical path of the dlopen'ed libonnxruntime
  std::string version;       // e.g. "1.32.0"
  Ort::Env* env = nullptr;   // never destroyed: sessions may outlive any owner at process exit
};

// Loads `library_path` on the first call and returns the runtime; later calls with the same
// library return the same runtime. The C++ API keeps a single global function table, so asking
// for a different library in the same process throws EngineError. Thread-safe.
const OrtRuntime& load_ort_runtime(const std::string& library_path);

}  // namespace rlsim
