#pragma once
/// The saved-model file: one self-contained artifact holding the executor graph, the
/// parameters and the compiled code, loadable with no compiler (no LLVM, no Python).
///
/// Format (version 1; all integers little-endian):
///
///   offset 0   char[8]  magic "EMBERLIB"
///          8   u32      format version (kArtifactVersion)
///         12   u32      number of sections N
///         16   N x 32-byte section entries:
///                char[8] kind, zero padded: "graph"   executor graph + report, JSON
///                                           "params"  parameter bytes, each 64-byte aligned
///                                           "cpu.so"  ELF shared library of the kernels
///                                           "ptx"     PTX text of the kernels (GPU targets)
///                u64 offset (from the file start, a multiple of 64), u64 size,
///                u64 checksum (FNV-1a 64 of the section bytes)
///   16 + 32N   u64      FNV-1a 64 of the bytes before it (header and entries)
///   then the sections, each at its 64-byte aligned offset; the file ends with the last.
///
/// The graph JSON holds "values" [{shape, dtype}], "inputs" [{name, value}], "params"
/// [{name, value, offset, nbytes}] (offset into "params"), "kernels" [{func, name, args,
/// num_inputs, ops, anchor, patterns}, and for a build with a tuning log workload, tuned,
/// tuning_note, knobs {name: value}], "views" [{dst, src}], "outputs" [ids], "fusion"
/// [{producer, consumer, fused, reason}] (the fusion report), "tuning" {log, cpu,
/// vector_bits, threads} (only for a build with a tuning log), and "target",
/// "cpu", "features" (what the code needs from the CPU), "imports" (runtime functions the
/// code calls, see LibraryModule) and "ember_version".
/// A graph with run-time shapes (ExecGraph::symbols) also holds "symbols" [{name, min,
/// max}], "dims" [{coef, offset, symbols}] on each value with run-time dimensions, and
/// "symbols" [ids] on each kernel that takes them; a file without them is a static graph.
/// What a "ptx" section needs to run (cuda::CudaModule): "arch" (the GPU architecture the
/// PTX was built for, "sm_80") and "launch" [{func, grid [x, y, z], block [x, y, z],
/// num_params, symbol}], one entry per kernel function (symbol: its PTX entry's name).
/// Both are required with a "ptx" section; CPU artifacts write "" and [] (and files from
/// before these fields may lack them).
///
/// The code section also records what each kernel was compiled for (the kernel manifest,
/// manifest.h), checked against the graph on loading.
///
/// The pieces: the container (header, section table, checksums, atomic write) is
/// src/runtime/container.cc, the graph JSON (nlohmann/json) src/runtime/graph_json.cc, the
/// manifest manifest.cc, the CPU check cpu_features.cc; this file's functions put them
/// together.
///
/// A model file holds native code, which runs when the file is loaded: load files only from
/// sources you trust, and pin one with its SHA-256 digest (LoadOptions::sha256).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ember/runtime/cuda.h"
#include "ember/runtime/graph_executor.h"
#include "ember/runtime/module.h"
#include "ember/runtime/ndarray.h"
#include "ember/runtime/report.h"

namespace ember::runtime {

inline constexpr uint32_t kArtifactVersion = 1;

/// A saved model's description: everything but the graph and the code.
struct ArtifactInfo {
  std::string ember_version;
  std::string target;    // "llvm", "cuda -arch=sm_90"
  std::string cpu;       // CPU the code was compiled for ("skylake-avx512"), "" for GPU code
  std::string features;  // its LLVM feature string ("+avx2,+fma,...")
  std::vector<std::string> imports;
  std::string arch;                                // GPU code: "sm_80"; "" for CPU code
  std::map<std::string, cuda::LaunchDims> launch;  // GPU code: per kernel func
  std::vector<KernelReport> kernels;               // one per graph kernel, same order
  std::vector<FusionEdge> fusion;
  TuningInfo tuning;  // the tuning log the build applied ("tuning"; log "" when none)
  /// Filled by reading: (kind, bytes) of each section, and the file size.
  std::vector<std::pair<std::string, uint64_t>> sections;
  uint64_t file_bytes = 0;
};

/// A whole artifact in memory. `code` maps a code section kind ("cpu.so", "ptx") to bytes.
struct Artifact {
  std::shared_ptr<const ExecGraph> graph;  // params hold their data
  ArtifactInfo info;
  std::vector<std::pair<std::string, std::string>> code;
};

/// Writes `a` to `path` (ember::Error naming the path when it cannot): to a new, uniquely
/// named file in the same directory first (never following a link there), renamed over
/// `path` once complete, so a failed or concurrent export never leaves half a file.
void save_artifact(const Artifact& a, const std::string& path);
/// Reads and checks an artifact: magic, version, sizes, checksums and the graph's
/// consistency. Every defect is an ember::Error naming the file and what is wrong
/// ("not an Ember artifact", "truncated", "corrupted", "format version 7"), never a crash.
/// The header is checked before the rest is read. With `sha256` (64 hex digits), a file
/// whose digest differs is refused before anything else in it is used. Parameters view
/// one 64-byte aligned buffer holding the file (no copy).
Artifact read_artifact(const std::string& path, const std::string& sha256 = "");

/// The lowercase hex SHA-256 digest of n bytes.
std::string sha256_hex(const void* data, size_t n);

/// A model loaded for running: what GraphExecutor takes, and the report. Any number of
/// executors may run on one LoadedLibrary at once, from different threads: each has its own
/// buffers, and they share the read-only parameters and code.
struct LoadedLibrary {
  std::shared_ptr<const ExecGraph> graph;
  std::shared_ptr<Module> module;
  ArtifactInfo info;
};

struct LoadOptions {
  /// When not empty: the file's SHA-256 digest (64 hex digits). A file with another digest
  /// is refused before any of it is used.
  std::string sha256;
  /// false: read and check the file without loading its code, so nothing in it runs (what
  /// `ember inspect` does). Such a library reports but cannot run (module is null for CPU
  /// code).
  bool load_code = true;
};

/// read_artifact, then checks the code against the graph (the kernel manifest), then loads
/// it: a "cpu.so" section as a LibraryModule after checking that this CPU has every
/// feature the code was compiled for; a "ptx" section as a cuda::CudaModule (no GPU needed
/// to load: the executor loads the PTX on the GPU, and fails there with the no-driver /
/// no-GPU error).
std::shared_ptr<LoadedLibrary> load_library(const std::string& path,
                                            const LoadOptions& options = {});

}  // namespace ember::runtime
