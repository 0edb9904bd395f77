// Error types of the native engine.
//
// The engine reports every problem as a C++ exception carrying a message that says what is wrong
// and how to fix it; the pybind11 layer maps each type to one Python exception class, so a caller
// never sees an abort. The mapping lives in python_module.cc:
//   InputError -> ValueError          (bad tensors or bad settings handed to the engine)
//   FileError  -> FileNotFoundError   (a model or library path that does not exist)
//   EngineError -> RuntimeError       (ONNX Runtime failed, or the model does not fit the engine)
#pragma once

#include <stdexcept>
#include <string>

namespace rlsim {

class InputError : public std::invalid_argument {
 public:
  explicit InputError(const std::string& msg) : std::invalid_argument(msg) {}
};

class FileError : public std::runtime_error {
 public:
  explicit FileError(const std::string& msg) : std::runtime_error(msg) {}
};

class EngineError : public std::runtime_error {
 public:
  explicit EngineError(const std::string& msg) : std::runtime_error(msg) {}
};

}  // namespace rlsim
