#include "ember/runtime/version.h"

// EMBER_VERSION is defined for this file alone (CMakeLists.txt), so a new version rebuilds
// one file.
#ifndef EMBER_VERSION
#error "EMBER_VERSION must be defined by the build (CMakeLists.txt: project VERSION)"
#endif

namespace ember::runtime {

const char* ember_version() { return EMBER_VERSION; }

}  // namespace ember::runtime
