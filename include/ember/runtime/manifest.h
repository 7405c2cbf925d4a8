#pragma once
/// The kernel manifest: what each kernel of a model's code was compiled for, buffer by
/// buffer, recorded in the code section (in "cpu.so" as a string constant, in "ptx" as
/// comment lines). On loading, every kernel of the graph must match it, so a graph changed
/// after export (with its checksums fixed) is refused instead of running code over buffers
/// of the wrong size.
#include <string>
#include <vector>

#include "ember/runtime/graph_executor.h"

namespace ember::runtime {

/// The first and last line of a kernel manifest.
inline constexpr const char* kManifestBegin = "EMBER KERNEL MANIFEST 1";
inline constexpr const char* kManifestEnd = "END EMBER KERNEL MANIFEST";

/// The buffers one compiled kernel function takes, in order (inputs, then outputs; a kernel
/// with run-time extents takes its int64 shape_args between them).
struct KernelSignature {
  std::string func;
  std::vector<ExecGraph::Value> buffers;
};
/// The kernel manifest as text: a begin line, one line per kernel ("func float32[1,8]
/// int64[] ..."), each after `prefix` ("// " in PTX), and an end line.
std::string write_kernel_manifest(const std::vector<KernelSignature>& kernels,
                                  const std::string& prefix = "");
/// The manifest found in `code`; ember::Error naming `where` when it is missing or malformed.
std::vector<KernelSignature> read_kernel_manifest(const std::string& code,
                                                  const std::string& prefix,
                                                  const std::string& where);
/// Checks that every kernel of `g` is what the manifest in `code` (prefix as for
/// read_kernel_manifest) says its function was compiled for; ember::Error naming `where`.
void check_kernels_against_manifest(const ExecGraph& g, const std::string& code,
                                    const std::string& prefix, const std::string& where);

}  // namespace ember::runtime
