// rlsim._native: a thin pybind11 layer over rlsim::Engine.
//
// Inputs are converted while holding the GIL, the GIL is released only around the engine's Run
// (so several Python threads can score at once), and the result array is handed back afterwards.
// Every engine error becomes a Python exception with the engine's message; nothing aborts.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <filesystem>
#include <memory>
#include <string>

#include "engine.h"
#include "errors.h"

namespace py = pybind11;

namespace {

// A C-contiguous array over `obj` (a copy only when `obj` is not already one), keeping its dtype
// so a wrong one can be reported rather than silently converted.
py::array as_c_array(const py::object& obj, const char* name) {
  py::array a = py::array::ensure(obj, py::array::c_style);
  if (!a) {
    throw rlsim::InputError(std::string(name) + " is not array-like; pass a 2-D int64 numpy array");
  }
  return a;
}

rlsim::TensorView view_of(const py::array& a) {
  rlsim::TensorView v;
  v.data = a.data();
  // The common case skips building a Python string: this runs on every call, under the GIL.
  // EquivTypes also accepts np.longlong and rejects byte-swapped int64 (which would be misread).
  const bool is_int64 = py::isinstance<py::array_t<int64_t>>(a);
  v.dtype = is_int64 ? "int64" : py::str(a.dtype()).cast<std::string>();
  for (py::ssize_t d = 0; d < a.ndim(); ++d) v.shape.push_back(static_cast<int64_t>(a.shape(d)));
  return v;
}

py::array_t<float> run(const rlsim::Engine& engine, const py::object& input_ids,
                       const py::object& attention_mask) {
  const py::array ids = as_c_array(input_ids, "input_ids");
  const py::array mask = as_c_array(attention_mask, "attention_mask");
  const rlsim::TensorView ids_view = view_of(ids), mask_view = view_of(mask);
  const int64_t batch = engine.check_inputs(ids_view, mask_view);
  py::array_t<float> out(static_cast<py::ssize_t>(batch));
  float* dst = out.mutable_data();
  {
    // `ids`, `mask` and `out` stay referenced by this frame, so their buffers outlive the run.
    py::gil_scoped_release release;
    engine.run(ids_view, mask_view, dst);
  }
  return out;
}

std::unique_ptr<rlsim::Engine> make_engine(const std::filesystem::path& model_path,
                                           const std::filesystem::path& ort_library,
                                           int intra_op_threads, int inter_op_threads,
                                           bool spinning, const std::string& optimization,
                                           const std::string& device,
                                           const std::string& execution_mode) {
  rlsim::EngineOptions o;
  o.intra_op_threads = intra_op_threads;
  o.inter_op_threads = inter_op_threads;
  o.spinning = spinning;
  o.optimization = optimization;
  o.device = device;
  o.execution_mode = execution_mode;
  // Loading a model takes long enough (graph optimisation) that other threads should run meanwhile.
  py::gil_scoped_release release;
  return std::make_unique<rlsim::Engine>(model_path.string(), ort_library.string(), o);
}

py::dict options_of(const rlsim::Engine& e) {
  const rlsim::EngineOptions& o = e.options();
  py::dict d;
  d["intra_op_threads"] = o.intra_op_threads;
  d["inter_op_threads"] = o.inter_op_threads;
  d["spinning"] = o.spinning;
  d["optimization"] = o.optimization;
  d["device"] = o.device;
  d["execution_mode"] = o.execution_mode;
  return d;
}

void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const rlsim::FileError& e) {
    PyErr_SetString(PyExc_FileNotFoundError, e.what());
  } catch (const rlsim::InputError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const rlsim::EngineError& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "rlsim's native reward-model engine: ONNX Runtime's C++ API, loaded with dlopen.";
  py::register_exception_translator(&translate);

  py::class_<rlsim::Engine>(m, "Engine",
                            "One ONNX Runtime session over a reward model (input_ids, attention_mask "
                            "-> one float32 reward per row).")
      .def(py::init(&make_engine), py::arg("model_path"), py::arg("ort_library"),
           py::arg("intra_op_threads") = 0, py::arg("inter_op_threads") = 1,
           py::arg("spinning") = true, py::arg("optimization") = "all", py::arg("device") = "cpu",
           py::arg("execution_mode") = "sequential")
      .def("run", &run, py::arg("input_ids"), py::arg("attention_mask"),
           "Score one batch: int64 arrays of shape (batch, seq) -> float32 rewards (batch,). "
           "Releases the GIL while ONNX Runtime runs.")
      .def_property_readonly("input_names", &rlsim::Engine::input_names)
      .def_property_readonly("output_names", &rlsim::Engine::output_names)
      .def_property_readonly("ort_version", &rlsim::Engine::ort_version)
      .def_property_readonly("ort_library", &rlsim::Engine::ort_library)
      .def_property_readonly("model_path", &rlsim::Engine::model_path)
      .def_property_readonly("options", &options_of)
      .def_property_readonly("active_runs", &rlsim::Engine::active_runs,
                             "Calls now inside ONNX Runtime's Run, over all threads.")
      .def("__repr__", [](const rlsim::Engine& e) {
        return "<rlsim._native.Engine model='" + e.model_path() + "' ort=" + e.ort_version() + ">";
      });
}
