#pragma once
// ptxas for the tests that check emitted PTX assembles (skipped with a note where CUDA is
// not installed).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace ember::test_util {

inline const char* kPtxas = "/usr/local/cuda/bin/ptxas";

// Assembles `ptx` for `arch`; returns ptxas's output, or "" when it assembled.
inline std::string ptxas(const std::string& ptx, const std::string& arch) {
  char path[] = "/tmp/ember_nvptx_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return "cannot create a temporary file";
  close(fd);
  std::ofstream(path) << ptx;
  std::string cmd = std::string(kPtxas) + " -arch=" + arch + " -o /dev/null " + path + " 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[512];
  while (p && fgets(buf, sizeof(buf), p)) out += buf;
  int rc = p ? pclose(p) : -1;
  std::remove(path);
  return rc == 0 ? "" : "ptxas failed (" + std::to_string(rc) + "):\n" + out;
}

inline bool have_ptxas() { return access(kPtxas, X_OK) == 0; }

}  // namespace ember::test_util
