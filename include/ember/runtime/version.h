#pragma once
/// Ember's version: CMake's project version (CMakeLists.txt, the one place it is written;
/// pyproject.toml reads it from there too). Model files record it ("ember_version").
namespace ember::runtime {

const char* ember_version();

}  // namespace ember::runtime
