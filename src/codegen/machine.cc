#include "ember/codegen/machine.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "ember/support/error.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/MC/MCInstrInfo.h"
#include "llvm/MC/MCSchedule.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Host.h"

namespace ember::codegen {

namespace {

// One instruction's facts in a CPU's scheduling model.
struct InstrFacts {
  bool found = false;
  double latency = 0, per_cycle = 0;  // cycles to the result; issued per cycle
};

// Looked up by the instruction's name: LLVM's X86 opcode numbers are not public.
InstrFacts instr_facts(const llvm::MCSubtargetInfo& sti, const llvm::MCInstrInfo& mii,
                       llvm::StringRef name) {
  const llvm::MCSchedModel& sm = sti.getSchedModel();
  for (unsigned op = 0; op < mii.getNumOpcodes(); ++op) {
    if (mii.getName(op) != name) continue;
    const llvm::MCSchedClassDesc* desc = sm.getSchedClassDesc(mii.get(op).getSchedClass());
    if (!desc || !desc->isValid() || desc->isVariant()) return {};
    InstrFacts f;
    f.latency = llvm::MCSchedModel::computeInstrLatency(sti, *desc);
    const double reciprocal = llvm::MCSchedModel::getReciprocalThroughput(sti, *desc);
    f.per_cycle = reciprocal > 0 ? 1.0 / reciprocal : 0;
    f.found = f.latency > 0 && f.per_cycle > 0;
    return f;
  }
  return {};
}

int64_t parse_size(const std::string& text) {  // sysfs writes "32K", "1024K", "32768K"
  char* end = nullptr;
  int64_t n = std::strtoll(text.c_str(), &end, 10);
  if (end && (*end == 'K' || *end == 'k')) n <<= 10;
  if (end && (*end == 'M' || *end == 'm')) n <<= 20;
  return n;
}

// The host's data caches from sysfs (cpu0's: L1 data, L2, L3); false where there is none.
bool host_caches(passes::MachineModel& m) {
  bool any = false;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_in(dir + "level"), type_in(dir + "type"), size_in(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(level_in >> level) || !(type_in >> type) || !(size_in >> size)) continue;
    if (type == "Instruction") continue;
    const int64_t bytes = parse_size(size);
    if (bytes <= 0) continue;
    if (level == 1) m.l1_bytes = bytes;
    if (level == 2) m.l2_bytes = bytes;
    if (level == 3) m.l3_bytes = bytes;
    any = true;
  }
  return any;
}

// Per-core L1 data and L2, and the L3 of one die or complex, of CPUs LLVM names (typical
// parts: a server's L3 varies with its model).
struct Caches {
  const char* cpu;
  int64_t l1, l2, l3;
};
constexpr int64_t K = 1 << 10, M = 1 << 20;
constexpr Caches kKnownCaches[] = {
    {"znver1", 32 * K, 512 * K, 8 * M},
    {"znver2", 32 * K, 512 * K, 16 * M},
    {"znver3", 32 * K, 512 * K, 32 * M},
    {"znver4", 32 * K, 1 * M, 32 * M},
    {"znver5", 48 * K, 1 * M, 32 * M},
    {"haswell", 32 * K, 256 * K, 8 * M},
    {"broadwell", 32 * K, 256 * K, 8 * M},
    {"skylake", 32 * K, 256 * K, 8 * M},
    {"skylake-avx512", 32 * K, 1 * M, 22 * M},
    {"cascadelake", 32 * K, 1 * M, 22 * M},
    {"icelake-server", 48 * K, 1280 * K, 48 * M},
    {"sapphirerapids", 48 * K, 2 * M, 105 * M},
    {"emeraldrapids", 48 * K, 2 * M, 160 * M},
    {"graniterapids", 48 * K, 2 * M, 128 * M},
};

bool known_caches(const std::string& cpu, passes::MachineModel& m) {
  for (const Caches& c : kKnownCaches)
    if (cpu == c.cpu) {
      m.l1_bytes = c.l1;
      m.l2_bytes = c.l2;
      m.l3_bytes = c.l3;
      return true;
    }
  return false;
}

// The FMA and vector-load facts of `cpu` for vectors of `bits`, from LLVM's scheduling model.
// A vector wider than the CPU's widest runs as several of those (LLVM splits it).
std::string scheduling_facts(const std::string& cpu, bool native, int bits,
                             passes::MachineModel& m) {
  llvm::InitializeNativeTarget();
  const std::string triple = llvm::sys::getDefaultTargetTriple();
  std::string error;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!t) return "no LLVM target for " + triple + ": fixed facts";
  std::unique_ptr<llvm::MCSubtargetInfo> sti(t->createMCSubtargetInfo(triple, cpu, ""));
  std::unique_ptr<llvm::MCInstrInfo> mii(t->createMCInstrInfo());
  if (!sti || !mii) return "no LLVM subtarget for " + cpu + ": fixed facts";
  auto has = [&](const char* feature) {
    if (native) return llvm::sys::getHostCPUFeatures().lookup(feature);
    return sti->checkFeatures(std::string("+") + feature);
  };
  const bool avx512 = has("avx512f"), avx = has("avx");
  const int widest = widest_vector_bits(avx512, avx), width = std::min(bits, widest);
  // As the code generator emits DotU8S8: vpdpbusd on 16 lanes with AVX-512 VNNI, on 8 or 4
  // with AVX512VL too or AVX-VNNI. Elsewhere it is two vpmaddwd per vector and the bytes
  // widened to int16 around them (exact): no faster than the float32 FMAs it replaces where
  // vpmaddwd issues once a cycle or less (Zen 1, Zen 2, Haswell) or shares two ports with
  // the widening (Skylake-X at 512 bits): llvm-mca of the GEMM and blocked 3x3 conv kernels
  // says 0.65-1x; 1.1-1.2x on Zen 3's four pipes (znver3 code timed on Zen 4: 1.35-1.4x;
  // issue 45). So VNNI only.
  m.int8_dot =
      bits >= 512 ? has("avx512vnni") : has("avxvnni") || (has("avx512vnni") && has("avx512vl"));
  // As the code generator emits DotBF16: vdpbf16ps with AVX512_BF16 (and AVX512VL below 512).
  m.bf16_dot = has("avx512bf16") && (bits >= 512 || has("avx512vl"));
  const char* fma = width == 512   ? "VFMADD231PSZr"
                    : width == 256 ? "VFMADD231PSYr"
                                   : "VFMADD231PSr";
  const char* load = width == 512 ? "VMOVUPSZrm" : width == 256 ? "VMOVUPSYrm" : "VMOVUPSrm";
  const InstrFacts f = instr_facts(*sti, *mii, fma), l = instr_facts(*sti, *mii, load);
  const InstrFacts narrow = instr_facts(*sti, *mii, "VFMADD231PSr");  // one 128-bit FMA
  if (!f.found || !l.found || !narrow.found)
    return "LLVM has no scheduling model of " + std::string(fma) + " on " + cpu + ": fixed facts";
  // DotU7S8 (activations below 128) without VNNI: vpmaddubsw and vpmaddwd by ones, which
  // share the integer multiply ports (llvm-mca of a 6x2 tile), so a vector of 4 * lanes
  // products costs 1/ubsw + 1/wd cycles against lanes products per FMA issue. Twice the
  // float32 rate on Skylake, Zen 3 and later (two of each a cycle); level on Haswell, Zen 1
  // and Zen 2 (one a cycle), where the int8 kernels would buy nothing.
  const std::string suffix = width == 512 ? "Zrr" : width == 256 ? "Yrr" : "rr";
  const InstrFacts ubsw = instr_facts(*sti, *mii, "VPMADDUBSW" + suffix);
  const InstrFacts wd = instr_facts(*sti, *mii, "VPMADDWD" + suffix);
  m.int8_dot_7bit =
      m.int8_dot || (ubsw.found && wd.found && has("ssse3") && (width < 512 || has("avx512bw")) &&
                     4.0 / ((1.0 / ubsw.per_cycle + 1.0 / wd.per_cycle) * f.per_cycle) >= 1.5);
  const double pieces = static_cast<double>(bits) / width;  // vectors of `width` per vector
  m.fma_latency = std::max(1, static_cast<int>(std::lround(f.latency)));
  m.fma_ports = std::max(1, static_cast<int>(std::lround(f.per_cycle / pieces)));
  // A 128-bit FMA takes one unit: `narrow.per_cycle` units, which together issue `width`
  // bits times f.per_cycle a cycle (Zen 1: 2 units, one 256-bit FMA a cycle: 128 bits each).
  const double unit_bits = width * f.per_cycle / narrow.per_cycle;
  m.fma_datapath_bits = std::min(width, std::max(128, static_cast<int>(std::lround(unit_bits))));
  // The load paths are as wide as the FMA units: a vector wider than the datapath loads in
  // pieces too (Zen 4: two 256-bit loads a cycle, one 512-bit; LLVM's model says two). With
  // two, a 197-row dense at 512 bits took one-row register tiles (4 accumulators cover the
  // FMA latency) that ran far below the peak, where six-row tiles run at it (calibration:
  // load ports).
  const double load_pieces = static_cast<double>(width) / m.fma_datapath_bits;
  m.load_ports = std::max(1, static_cast<int>(std::lround(l.per_cycle / pieces / load_pieces)));
  return "LLVM's scheduling model of " + cpu;
}

// EMBER_MODEL_CPU=NAME: the host's model is NAME's (its facts and typical caches, at the
// host's width), the code still the host's. It runs the test suite as another CPU would
// size its schedules, to check that every verdict holds there too.
std::string model_cpu_override() {
  const char* env = std::getenv("EMBER_MODEL_CPU");
  if (!env || !*env) return "";
  const std::string cpu = env;
  try {
    parse_target("llvm -vector-bits=256 -mcpu=" + cpu);  // checks the name
  } catch (const Error&) {
    fail("EMBER_MODEL_CPU=", cpu, " in the environment is not a CPU LLVM knows; use a name such ",
         "as znver1 or skylake-avx512, or unset it");
  }
  return cpu;
}

passes::MachineModel build_model(const Target& target) {
  const std::string as_cpu = target.cpu == "native" ? model_cpu_override() : "";
  const bool native = target.cpu == "native" && as_cpu.empty();
  const std::string cpu = !as_cpu.empty() ? as_cpu
                          : native        ? llvm::sys::getHostCPUName().str()
                                          : target.cpu;
  passes::MachineModel m = passes::MachineModel::for_vector_bits(target.resolved_vector_bits());
  m.cpu = cpu;
  m.source = scheduling_facts(cpu, native, m.vector_bits, m);
  if (!as_cpu.empty()) m.source += " (EMBER_MODEL_CPU)";
  if (native && host_caches(m))
    m.source += "; caches from sysfs";
  else if (known_caches(cpu, m))
    m.source += "; caches typical of " + cpu;
  else
    m.source += "; caches unknown for " + cpu + ": fixed sizes";
  return m;
}

}  // namespace

int widest_vector_bits(bool avx512f, bool avx) { return avx512f ? 512 : avx ? 256 : 128; }

bool has_feature(const std::string& features, const std::string& name) {
  bool on = false;
  size_t begin = 0;
  while (begin < features.size()) {
    size_t end = features.find(',', begin);
    if (end == std::string::npos) end = features.size();
    const std::string f = features.substr(begin, end - begin);
    begin = end + 1;
    if (f.size() >= 2 && (f[0] == '+' || f[0] == '-') && f.compare(1, std::string::npos, name) == 0)
      on = f[0] == '+';
  }
  return on;
}

int widest_vector_bits(const std::string& features) {
  return widest_vector_bits(has_feature(features, "avx512f"), has_feature(features, "avx"));
}

passes::MachineModel machine_model(const Target& target) {
  // Memoized: the opcode search reads every name LLVM's X86 target has.
  static std::mutex mutex;
  static std::map<std::pair<std::string, int>, passes::MachineModel> models;
  // The override's raw text keys the host's model: it is checked when the model is built,
  // not on every build that finds the model made.
  const char* as_cpu = target.cpu == "native" ? std::getenv("EMBER_MODEL_CPU") : nullptr;
  const std::string cpu = as_cpu ? "native/" + std::string(as_cpu) : target.cpu;
  const std::pair<std::string, int> key{cpu, target.resolved_vector_bits()};
  std::lock_guard<std::mutex> lock(mutex);
  auto it = models.find(key);
  if (it == models.end()) it = models.emplace(key, build_model(target)).first;
  return it->second;
}

}  // namespace ember::codegen
