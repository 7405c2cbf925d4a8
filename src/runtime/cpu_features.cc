// CPU features by cpuid, with the same names and rules as LLVM's host detection
// (llvm/lib/TargetParser/Host.cpp, getHostCPUFeatures for x86), so that every feature a
// model's code records can be checked here without LLVM. A codegen test compares the two on
// the machine that runs it.
#include "ember/runtime/cpu_features.h"

#include <map>
#include <sstream>

#include "ember/support/error.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define EMBER_X86_CPUID 1
#endif

namespace ember::runtime {

namespace {

#ifdef EMBER_X86_CPUID
struct Regs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

// cpuid(leaf, subleaf), or all zero for a leaf past the maximum.
Regs cpuid(unsigned leaf, unsigned subleaf = 0) {
  Regs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) r = Regs();
  return r;
}

bool bit(unsigned reg, int b) { return (reg >> b) & 1u; }

using Features = std::map<std::string, bool>;

// The register state the OS saves on a context switch (XCR0): AVX needs YMM, AVX-512
// the opmask and ZMM state, AMX the tile state, APX the extended GPRs.
struct SavedState {
  bool avx = false, avx512 = false, amx = false, apx = false;
};

SavedState saved_state(const Regs& l1) {
  unsigned xcr0 = 0, xcr0_high = 0;
  const bool osxsave = bit(l1.ecx, 27);
  if (osxsave) __asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(xcr0_high) : "c"(0));
  SavedState s;
  s.avx = osxsave && bit(l1.ecx, 28) && (xcr0 & 0x6) == 0x6;
  s.avx512 = s.avx && (xcr0 & 0xe0) == 0xe0;
  s.amx = osxsave && (xcr0 & 0x60000) == 0x60000;
  s.apx = osxsave && bit(xcr0, 19);
  return s;
}

// Leaf 1.
void detect_leaf1(Features& f, const Regs& l1, bool avx_save) {
  f["cx8"] = bit(l1.edx, 8);
  f["cmov"] = bit(l1.edx, 15);
  f["mmx"] = bit(l1.edx, 23);
  f["fxsr"] = bit(l1.edx, 24);
  f["sse"] = bit(l1.edx, 25);
  f["sse2"] = bit(l1.edx, 26);
  f["sse3"] = bit(l1.ecx, 0);
  f["pclmul"] = bit(l1.ecx, 1);
  f["ssse3"] = bit(l1.ecx, 9);
  f["cx16"] = bit(l1.ecx, 13);
  f["sse4.1"] = bit(l1.ecx, 19);
  f["sse4.2"] = bit(l1.ecx, 20);
  f["crc32"] = f["sse4.2"];
  f["movbe"] = bit(l1.ecx, 22);
  f["popcnt"] = bit(l1.ecx, 23);
  f["aes"] = bit(l1.ecx, 25);
  f["rdrnd"] = bit(l1.ecx, 30);
  f["avx"] = avx_save;
  f["fma"] = bit(l1.ecx, 12) && avx_save;
  f["xsave"] = bit(l1.ecx, 26) && avx_save;
  f["f16c"] = bit(l1.ecx, 29) && avx_save;
}

// The extended leaves 0x80000001 and 0x80000008.
void detect_extended(Features& f, bool avx_save) {
  const unsigned max_ext = cpuid(0x80000000).eax;
  const Regs e1 = max_ext >= 0x80000001 ? cpuid(0x80000001) : Regs();
  f["sahf"] = bit(e1.ecx, 0);
  f["lzcnt"] = bit(e1.ecx, 5);
  f["sse4a"] = bit(e1.ecx, 6);
  f["prfchw"] = bit(e1.ecx, 8);
  f["xop"] = bit(e1.ecx, 11) && avx_save;
  f["lwp"] = bit(e1.ecx, 15);
  f["fma4"] = bit(e1.ecx, 16) && avx_save;
  f["tbm"] = bit(e1.ecx, 21);
  f["mwaitx"] = bit(e1.ecx, 29);
  f["64bit"] = bit(e1.edx, 29);
  const Regs e8 = max_ext >= 0x80000008 ? cpuid(0x80000008) : Regs();
  f["clzero"] = bit(e8.ebx, 0);
  f["rdpru"] = bit(e8.ebx, 4);
  f["wbnoinvd"] = bit(e8.ebx, 9);
}

// Leaf 7, subleaf 0.
void detect_leaf7(Features& f, const Regs& l7, const SavedState& saved) {
  const bool avx_save = saved.avx, avx512_save = saved.avx512, amx_save = saved.amx;
  f["fsgsbase"] = bit(l7.ebx, 0);
  f["sgx"] = bit(l7.ebx, 2);
  f["bmi"] = bit(l7.ebx, 3);
  f["avx2"] = bit(l7.ebx, 5) && avx_save;
  f["bmi2"] = bit(l7.ebx, 8);
  f["invpcid"] = bit(l7.ebx, 10);
  f["rtm"] = bit(l7.ebx, 11);
  f["avx512f"] = bit(l7.ebx, 16) && avx512_save;
  // LLVM 19 records the 512-bit EVEX encodings as a feature of their own, present (and only
  // then listed) with avx512f: a model exported on an AVX-512 host needs it.
  if (f["avx512f"]) f["evex512"] = true;
  f["avx512dq"] = bit(l7.ebx, 17) && avx512_save;
  f["rdseed"] = bit(l7.ebx, 18);
  f["adx"] = bit(l7.ebx, 19);
  f["avx512ifma"] = bit(l7.ebx, 21) && avx512_save;
  f["clflushopt"] = bit(l7.ebx, 23);
  f["clwb"] = bit(l7.ebx, 24);
  f["avx512pf"] = bit(l7.ebx, 26) && avx512_save;
  f["avx512er"] = bit(l7.ebx, 27) && avx512_save;
  f["avx512cd"] = bit(l7.ebx, 28) && avx512_save;
  f["sha"] = bit(l7.ebx, 29);
  f["avx512bw"] = bit(l7.ebx, 30) && avx512_save;
  f["avx512vl"] = bit(l7.ebx, 31) && avx512_save;
  f["prefetchwt1"] = bit(l7.ecx, 0);
  f["avx512vbmi"] = bit(l7.ecx, 1) && avx512_save;
  f["pku"] = bit(l7.ecx, 4);
  f["waitpkg"] = bit(l7.ecx, 5);
  f["avx512vbmi2"] = bit(l7.ecx, 6) && avx512_save;
  f["shstk"] = bit(l7.ecx, 7);
  f["gfni"] = bit(l7.ecx, 8);
  f["vaes"] = bit(l7.ecx, 9) && avx_save;
  f["vpclmulqdq"] = bit(l7.ecx, 10) && avx_save;
  f["avx512vnni"] = bit(l7.ecx, 11) && avx512_save;
  f["avx512bitalg"] = bit(l7.ecx, 12) && avx512_save;
  f["avx512vpopcntdq"] = bit(l7.ecx, 14) && avx512_save;
  f["rdpid"] = bit(l7.ecx, 22);
  f["kl"] = bit(l7.ecx, 23);
  f["cldemote"] = bit(l7.ecx, 25);
  f["movdiri"] = bit(l7.ecx, 27);
  f["movdir64b"] = bit(l7.ecx, 28);
  f["enqcmd"] = bit(l7.ecx, 29);
  f["uintr"] = bit(l7.edx, 5);
  f["avx512vp2intersect"] = bit(l7.edx, 8) && avx512_save;
  f["serialize"] = bit(l7.edx, 14);
  f["tsxldtrk"] = bit(l7.edx, 16);
  f["pconfig"] = bit(l7.edx, 18);
  f["amx-bf16"] = bit(l7.edx, 22) && amx_save;
  f["avx512fp16"] = bit(l7.edx, 23) && avx512_save;
  f["amx-tile"] = bit(l7.edx, 24) && amx_save;
  f["amx-int8"] = bit(l7.edx, 25) && amx_save;
}

// Leaf 7, subleaf 1.
void detect_leaf7_1(Features& f, const Regs& l71, const SavedState& saved) {
  const bool avx_save = saved.avx, avx512_save = saved.avx512, amx_save = saved.amx;
  f["sha512"] = bit(l71.eax, 0);
  f["sm3"] = bit(l71.eax, 1);
  f["sm4"] = bit(l71.eax, 2);
  f["raoint"] = bit(l71.eax, 3);
  f["avxvnni"] = bit(l71.eax, 4) && avx_save;
  f["avx512bf16"] = bit(l71.eax, 5) && avx512_save;
  f["cmpccxadd"] = bit(l71.eax, 7);
  f["amx-fp16"] = bit(l71.eax, 21) && amx_save;
  f["hreset"] = bit(l71.eax, 22);
  f["avxifma"] = bit(l71.eax, 23) && avx_save;
  f["avxvnniint8"] = bit(l71.edx, 4) && avx_save;
  f["avxneconvert"] = bit(l71.edx, 5) && avx_save;
  f["amx-complex"] = bit(l71.edx, 8) && amx_save;
  f["avxvnniint16"] = bit(l71.edx, 10) && avx_save;
  f["prefetchi"] = bit(l71.edx, 14);
  f["usermsr"] = bit(l71.edx, 15);
  f["avx10.1-256"] = bit(l71.edx, 19);
  // APX: extended GPRs and the instructions that use them, one CPUID bit and one XCR0 bit.
  const bool apx = bit(l71.edx, 21) && saved.apx;
  for (const char* name : {"egpr", "push2pop2", "ppx", "ndd", "ccmp", "nf", "cf", "zu"})
    f[name] = apx;
}

std::map<std::string, bool> detect() {
  Features f;
  const unsigned max_leaf = cpuid(0).eax;
  if (max_leaf < 1) return f;
  const Regs l1 = cpuid(1);
  const SavedState saved = saved_state(l1);
  const bool avx_save = saved.avx;
  detect_leaf1(f, l1, avx_save);
  detect_extended(f, avx_save);
  const Regs l7 = max_leaf >= 7 ? cpuid(7, 0) : Regs();
  detect_leaf7(f, l7, saved);
  // Leaf 7, subleaf 1 exists when subleaf 0 says so (EAX is the highest subleaf).
  detect_leaf7_1(f, max_leaf >= 7 && l7.eax >= 1 ? cpuid(7, 1) : Regs(), saved);

  const Regs ld = max_leaf >= 0xd ? cpuid(0xd, 1) : Regs();
  f["xsaveopt"] = bit(ld.eax, 0) && avx_save;
  f["xsavec"] = bit(ld.eax, 1) && avx_save;
  f["xsaves"] = bit(ld.eax, 3) && avx_save;
  const Regs l14 = max_leaf >= 0x14 ? cpuid(0x14, 0) : Regs();
  f["ptwrite"] = bit(l14.ebx, 4);
  const Regs l19 = max_leaf >= 0x19 ? cpuid(0x19) : Regs();
  f["widekl"] = max_leaf >= 7 && bit(l19.ebx, 2);
  const Regs l24 = max_leaf >= 0x24 ? cpuid(0x24) : Regs();
  f["avx10.1-512"] = f["avx10.1-256"] && bit(l24.ebx, 18);
  return f;
}
#else
std::map<std::string, bool> detect() { return {}; }
#endif

const std::map<std::string, bool>& features() {
  static const std::map<std::string, bool> f = detect();
  return f;
}

}  // namespace

std::optional<bool> host_has_cpu_feature(const std::string& name) {
  auto it = features().find(name);
  if (it == features().end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> checkable_cpu_features() {
  std::vector<std::string> names;
  for (const auto& [name, present] : features()) names.push_back(name);
  return names;
}

void check_cpu_features(const std::string& features, const std::string& cpu,
                        const std::string& where) {
  std::string missing, unknown;
  std::stringstream list(features);
  for (std::string f; std::getline(list, f, ',');) {
    if (f.size() < 2 || f[0] != '+') continue;
    std::string name = f.substr(1);
    std::optional<bool> present = host_has_cpu_feature(name);
    if (!present)
      unknown += (unknown.empty() ? "" : ", ") + name;
    else if (!*present)
      missing += (missing.empty() ? "" : ", ") + name;
  }
  if (!missing.empty())
    fail(where, ": the model was compiled for CPU '", cpu, "', and this CPU lacks ", missing,
         "; export the model again on (or for) this machine");
  if (!unknown.empty())
    fail(where, ": the model's code needs the CPU feature(s) ", unknown,
         ", which this Ember runtime cannot check on this machine; export the model again "
         "with this Ember version on (or for) this machine");
}

}  // namespace ember::runtime
