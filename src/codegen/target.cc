#include "ember/codegen/target.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <vector>

#include "ember/codegen/codegen.h"
#include "ember/codegen/machine.h"
#include "ember/support/error.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Host.h"

namespace ember::codegen {

namespace {

constexpr const char* kKnown =
    "targets are \"llvm [-mcpu=NAME] [-vector-bits=128|256|512]\" (the CPU) and "
    "\"cuda [-arch=sm_NN]\" (NVIDIA GPU)";

// Widest float vector of the host, or of the named CPU with its default features. For the
// host, EMBER_VECTOR_BITS=256|512 in the environment overrides it, so that a whole test run
// takes the other code path (AVX-512 code on an AVX2 host, split by LLVM, or the reverse).
int cpu_vector_bits(const std::string& cpu) {
  if (cpu == "native") {
    if (const char* env = std::getenv("EMBER_VECTOR_BITS"); env && *env) {
      std::string v = env;
      if (v != "128" && v != "256" && v != "512")
        fail("EMBER_VECTOR_BITS=", v, " in the environment: use 128, 256 or 512, or unset it");
      return std::stoi(v);
    }
    llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
    return widest_vector_bits(features.lookup("avx512f"), features.lookup("avx"));
  }
  llvm::InitializeNativeTarget();
  std::string triple = llvm::sys::getDefaultTargetTriple(), error;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!t) return 128;
  std::unique_ptr<llvm::MCSubtargetInfo> info(t->createMCSubtargetInfo(triple, cpu, ""));
  if (!info || !info->isCPUStringValid(cpu))
    fail("unknown CPU '", cpu, "' in the target's -mcpu; use an LLVM CPU name such as ",
         "\"skylake-avx512\" or \"znver3\", or leave -mcpu out for the host CPU");
  return widest_vector_bits(info->checkFeatures("+avx512f"), info->checkFeatures("+avx"));
}

}  // namespace

Target parse_target(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.empty()) fail("the target is empty; ", kKnown);
  Target t;
  if (words[0] == "cuda")
    t.kind = Target::Kind::Cuda;
  else if (words[0] != "llvm")
    fail("unknown target '", text, "'; ", kKnown);
  for (size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    auto eq = w.find('=');
    std::string key = w.substr(0, eq), value = eq == std::string::npos ? "" : w.substr(eq + 1);
    if (eq == std::string::npos || value.empty())
      fail("target option '", w, "' in '", text, "' needs a value (", key, "=...); ", kKnown);
    if (!t.is_cuda() && key == "-mcpu") {
      t.cpu = value;
    } else if (!t.is_cuda() && key == "-vector-bits") {
      if (value != "128" && value != "256" && value != "512")
        fail("target option -vector-bits=", value, " in '", text,
             "': use 128 (SSE), 256 (AVX2) or 512 (AVX-512)");
      t.vector_bits = std::stoi(value);
    } else if (t.is_cuda() && key == "-arch") {
      if (value.rfind("sm_", 0) != 0 || value.size() < 5 ||
          value.find_first_not_of("0123456789a", 3) != std::string::npos)
        fail("target option -arch=", value, " in '", text, "': use sm_NN, e.g. sm_80 or sm_90");
      t.arch = value;
    } else {
      fail("unknown option '", key, "' in target '", text, "'; ", kKnown);
    }
  }
  if (!t.is_cuda() && t.cpu != "native") cpu_vector_bits(t.cpu);  // checks the name now
  return t;
}

std::string Target::str() const {
  if (is_cuda()) return arch == "sm_80" ? "cuda" : "cuda -arch=" + arch;
  std::string s = "llvm";
  if (cpu != "native") s += " -mcpu=" + cpu;
  if (vector_bits) s += " -vector-bits=" + std::to_string(vector_bits);
  return s;
}

int Target::resolved_vector_bits() const {
  if (vector_bits) return vector_bits;
  // A GPU build's host-side schedules (run on the CPU in tests) use the host's width.
  return cpu_vector_bits(is_cuda() ? "native" : cpu);
}

int native_vector_lanes(DType dtype) {
  return register_lanes(dtype, Target{}.resolved_vector_bits());
}

}  // namespace ember::codegen
