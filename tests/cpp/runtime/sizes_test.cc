// Sizes never wrap around: element and byte counts are checked (support/checked_math.h), a
// shape too large for 64 bits is an ember::Error naming what has it, and memory that cannot
// be had is a clear error, not a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>

#include "../expect_error.h"
#include "ember/ir/graph.h"
#include "ember/ir/op.h"
#include "ember/runtime/artifact.h"
#include "ember/runtime/ndarray.h"
#include "ember/runtime/npy.h"
#include "ember/support/checked_math.h"

namespace ember {
namespace {

constexpr int64_t kBig = int64_t{1} << 62;

TEST(CheckedMath, CountsAndBytes) {
  EXPECT_EQ(checked_numel({}, "x"), 1);
  EXPECT_EQ(checked_numel({2, 3, 4}, "x"), 24);
  EXPECT_EQ(checked_numel({kBig, kBig, 0}, "x"), 0);  // a zero dimension: no elements at all
  EXPECT_EQ(checked_nbytes({2, 3}, 8, "x"), 48);
  EXPECT_ERROR_WITH(checked_numel({int64_t{1} << 31, int64_t{1} << 31, 4}, "input 'x'"),
                    "input 'x'", "(2147483648, 2147483648, 4)", "64 bits");
  EXPECT_ERROR_WITH(checked_nbytes({kBig}, 4, "input 'x'"), "input 'x'", "64 bits");
  EXPECT_ERROR_WITH(checked_numel({3, -1}, "v"), "negative");
  EXPECT_ERROR_WITH(checked_add(std::numeric_limits<int64_t>::max(), 1, "the pool"), "the pool");
  EXPECT_ERROR_WITH(checked_mul(kBig, 4, "the pool"), "the pool");
  int64_t out;
  EXPECT_TRUE(mul_overflows(kBig, 2, &out));
  EXPECT_FALSE(add_overflows(kBig, kBig - 1, &out));
  EXPECT_EQ(out, std::numeric_limits<int64_t>::max());
}

TEST(Sizes, TensorsCheckTheirByteCount) {
  using runtime::NDArray;
  // (2^62,) float32 is 2^64 bytes: it used to wrap to 0 and "succeed".
  EXPECT_ERROR_WITH(NDArray::empty({kBig}, DType::Float32), "64 bits");
  EXPECT_ERROR_WITH(NDArray::empty({int64_t{1} << 31, int64_t{1} << 31, 4}, DType::Bool),
                    "64 bits");
  // Representable but more than any machine has: a clear out-of-memory error.
  EXPECT_ERROR_WITH(NDArray::empty({int64_t{1} << 60}, DType::Float32), "out of memory",
                    "cannot allocate");
}

TEST(Sizes, GraphShapesAreChecked) {
  EXPECT_ERROR_WITH(ir::var("x", ir::TensorType{{kBig}, DType::Float32}), "input 'x'", "64 bits");
  EXPECT_ERROR_WITH(
      ir::var("y", ir::TensorType{{int64_t{1} << 31, int64_t{1} << 31, 4}, DType::Float32}),
      "input 'y'", "64 bits");
  // A conv whose padding overflows the padded height: named, and no negative height.
  ir::Expr x = ir::var("x", ir::TensorType{{1, 1, 8, 8}, DType::Float32});
  ir::Expr w = ir::var("w", ir::TensorType{{1, 1, 3, 3}, DType::Float32});
  try {
    ir::call("nn.conv2d", {x, w}, ir::Attrs({{"padding", std::vector<int64_t>{kBig, kBig}}}),
             "conv1");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("conv1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("padding"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("-9"), std::string::npos) << msg;
  }
}

// A .npy file with `shape` ("(2, 3)") and a few bytes of data.
void write_npy_header(const std::string& path, const std::string& shape) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out << "\x93NUMPY" << '\x01' << '\x00' << static_cast<char>(header.size() & 0xff)
      << static_cast<char>(header.size() >> 8) << header << "data";
}

TEST(Sizes, NpyShapeProductIsChecked) {
  const std::string path =
      ::testing::TempDir() + "ember_sizes_test_" + std::to_string(::getpid()) + ".npy";
  // Each dimension is allowed (<= 2^40), their product overflows 64 bits.
  write_npy_header(path, "(1099511627776, 1099511627776)");
  EXPECT_ERROR_WITH(runtime::load_npy(path), "64 bits");
  // 4 TiB that the file does not hold: truncated, found before allocating anything.
  write_npy_header(path, "(1048576, 1048576)");
  EXPECT_ERROR_WITH(runtime::load_npy(path), "truncated", "4398046511104 bytes");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ember
