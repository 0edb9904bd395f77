// rlsim_native_bench: times rlsim::Engine::run on synthetic token ids, with no Python anywhere in
// the process. Comparing it with the Python `native` runtime separates the cost of ONNX Runtime
// itself from the cost of calling it from Python.
//
//   rlsim_native_bench --model M.onnx --ort-library libonnxruntime.so [--batch 32] [--seq 128]
//                      [--warmup 3] [--iterations 20] [--threads 0] [--spinning 1] ...
//
// Prints one JSON line (seq/s, mean/p50 latency in ms); exit status 2 with a message on stderr
// when something is wrong.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine.h"

namespace {

const char* kUsage =
    "usage: rlsim_native_bench --model PATH --ort-library PATH [--batch 32] [--seq 128]\n"
    "       [--warmup 3] [--iterations 20] [--threads 0] [--inter-op-threads 1] [--spinning 1]\n"
    "       [--optimization all] [--device cpu] [--vocab 100] [--seed 0]\n";

struct Args {
  std::string model, library, optimization = "all", device = "cpu";
  long batch = 32, seq = 128, warmup = 3, iterations = 20, threads = 0, inter_op = 1;
  long spinning = 1, vocab = 100, seed = 0;  // ids in [1, vocab): any real vocabulary has 100
};

long to_long(const std::string& flag, const std::string& value, long min) {
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || v < min) {
    throw std::invalid_argument(flag + " needs an integer >= " + std::to_string(min) + ", got '" +
                                value + "'");
  }
  return v;
}

Args parse(int argc, char** argv) {
  std::map<std::string, std::string> kv;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag.rfind("--", 0) != 0 || i + 1 >= argc) throw std::invalid_argument("bad argument " + flag);
    kv[flag] = argv[++i];
  }
  Args a;
  std::map<std::string, long*> ints{{"--batch", &a.batch},       {"--seq", &a.seq},
                                    {"--warmup", &a.warmup},     {"--iterations", &a.iterations},
                                    {"--threads", &a.threads},   {"--inter-op-threads", &a.inter_op},
                                    {"--spinning", &a.spinning}, {"--vocab", &a.vocab},
                                    {"--seed", &a.seed}};
  std::map<std::string, std::string*> strs{{"--model", &a.model}, {"--ort-library", &a.library},
                                           {"--optimization", &a.optimization},
                                           {"--device", &a.device}};
  for (const auto& [flag, value] : kv) {
    const bool positive = flag == "--batch" || flag == "--seq" || flag == "--iterations" ||
                          flag == "--vocab";
    if (ints.count(flag)) *ints[flag] = to_long(flag, value, positive ? 1 : 0);
    else if (strs.count(flag)) *strs[flag] = value;
    else throw std::invalid_argument("unknown flag " + flag);
  }
  if (a.model.empty() || a.library.empty()) throw std::invalid_argument("--model and --ort-library are required");
  return a;
}

std::string json_string(const std::string& s) {
  std::ostringstream o;
  o << '"';
  for (char c : s) {
    if (c == '"' || c == '\\') o << '\\' << c;
    else if (static_cast<unsigned char>(c) < 0x20) o << "\\u00" << "0123456789abcdef"[c >> 4] << "0123456789abcdef"[c & 15];
    else o << c;
  }
  return o.str() + '"';
}

// JSON has no NaN or infinity: a model that produces one reports null.
std::string json_number(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

int bench(const Args& a) {
  using clock = std::chrono::steady_clock;
  rlsim::EngineOptions o;
  o.intra_op_threads = static_cast<int>(a.threads);
  o.inter_op_threads = static_cast<int>(a.inter_op);
  o.spinning = a.spinning != 0;
  o.optimization = a.optimization;
  o.device = a.device;
  const auto t_load = clock::now();
  rlsim::Engine engine(a.model, a.library, o);
  const double load_s = std::chrono::duration<double>(clock::now() - t_load).count();

  const size_t n = static_cast<size_t>(a.batch * a.seq);
  std::vector<int64_t> ids(n), mask(n, 1);
  std::mt19937_64 rng(static_cast<uint64_t>(a.seed));
  std::uniform_int_distribution<int64_t> token(1, a.vocab - 1 > 1 ? a.vocab - 1 : 1);
  for (auto& t : ids) t = token(rng);
  const rlsim::TensorView ids_v{ids.data(), "int64", {a.batch, a.seq}};
  const rlsim::TensorView mask_v{mask.data(), "int64", {a.batch, a.seq}};
  std::vector<float> out(static_cast<size_t>(a.batch));

  for (long i = 0; i < a.warmup; ++i) engine.run(ids_v, mask_v, out.data());
  std::vector<double> lat_ms;
  for (long i = 0; i < a.iterations; ++i) {
    const auto t0 = clock::now();
    engine.run(ids_v, mask_v, out.data());
    lat_ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
  }
  const double mean_ms = std::accumulate(lat_ms.begin(), lat_ms.end(), 0.0) / lat_ms.size();
  std::printf(
      "{\"tool\": \"rlsim_native_bench\", \"model\": %s, \"ort_version\": %s, \"batch\": %ld, "
      "\"seq\": %ld, \"threads\": %ld, \"inter_op_threads\": %ld, \"spinning\": %s, "
      "\"optimization\": %s, \"device\": %s, \"warmup\": %ld, \"iterations\": %ld, "
      "\"load_s\": %.6f, \"seq_per_s\": %.6f, \"mean_latency_ms\": %.6f, "
      "\"p50_latency_ms\": %.6f, \"min_latency_ms\": %.6f, \"max_latency_ms\": %.6f, "
      "\"first_reward\": %s}\n",
      json_string(a.model).c_str(), json_string(engine.ort_version()).c_str(), a.batch, a.seq,
      a.threads, a.inter_op, a.spinning ? "true" : "false", json_string(a.optimization).c_str(),
      json_string(a.device).c_str(), a.warmup, a.iterations, load_s, a.batch * 1000.0 / mean_ms,
      mean_ms, percentile(lat_ms, 0.5), *std::min_element(lat_ms.begin(), lat_ms.end()),
      *std::max_element(lat_ms.begin(), lat_ms.end()), json_number(out[0]).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "-h" || std::string(argv[i]) == "--help") {
      std::cout << kUsage;
      return 0;
    }
  }
  Args args;
  try {
    args = parse(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::cerr << "rlsim_native_bench: " << e.what() << "\n" << kUsage;
    return 2;
  }
  try {
    return bench(args);
  } catch (const std::exception& e) {
    std::cerr << "rlsim_native_bench: " << e.what() << "\n";
    return 2;
  }
}
