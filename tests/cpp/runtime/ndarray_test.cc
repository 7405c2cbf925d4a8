// Runtime basics: dtypes, NDArray storage and errors, and the ember_parallel_for pool.
#include "ember/runtime/ndarray.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "../expect_error.h"
#include "ember/runtime/dtype.h"
#include "ember/runtime/parallel.h"
#include "ember/support/error.h"

namespace ember::runtime {
namespace {

TEST(DType, NamesSizesAndRoundTrip) {
  for (DType t : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool})
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
  EXPECT_STREQ(dtype_name(DType::Float32), "float32");
  EXPECT_STREQ(dtype_name(DType::Bool), "bool");
  EXPECT_EQ(dtype_bytes(DType::Float64), 8);
  EXPECT_EQ(dtype_bytes(DType::Int32), 4);
  EXPECT_EQ(dtype_bytes(DType::Bool), 1);
  EXPECT_ERROR_WITH(dtype_from_name("float16"), "'float16'", "float32", "float64", "int32", "int64",
                    "bool");
}

TEST(NDArray, ShapeHelpers) {
  EXPECT_EQ(shape_str({1, 3, 32, 32}), "(1, 3, 32, 32)");
  EXPECT_EQ(shape_str({}), "()");
  EXPECT_EQ(shape_numel({1, 3, 32, 32}), 3072);
  EXPECT_EQ(shape_numel({}), 1);
  EXPECT_EQ(shape_numel({4, 0}), 0);
  EXPECT_ERROR_WITH(shape_numel({2, -1}), "(2, -1)", "negative");
}

TEST(NDArray, AlignedStorage) {
  for (int64_t n : {1, 3, 17, 1000}) {
    for (DType t : {DType::Float32, DType::Float64, DType::Bool}) {
      NDArray x = NDArray::empty({n}, t);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(x.data()) % 64, 0u) << n;
      EXPECT_EQ(x.nbytes(), static_cast<size_t>(n) * dtype_bytes(t));
    }
  }
  NDArray z = NDArray::zeros({2, 3}, DType::Int64);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(z.data_as<int64_t>()[i], 0);
  NDArray empty = NDArray::empty({0, 5}, DType::Float32);  // zero-size is fine
  EXPECT_TRUE(empty.defined());
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.nbytes(), 0u);
  EXPECT_FALSE(NDArray().defined());
}

TEST(NDArray, CopiesShareStorageAndCloneDoesNot) {
  NDArray a = NDArray::zeros({4}, DType::Float32);
  NDArray b = a;  // shares storage
  b.data_as<float>()[2] = 5.0f;
  EXPECT_EQ(a.data_as<float>()[2], 5.0f);
  EXPECT_EQ(a.owner().use_count(), 2);

  NDArray c = a.clone();
  EXPECT_NE(c.data(), a.data());
  EXPECT_EQ(c.data_as<float>()[2], 5.0f);
  c.data_as<float>()[2] = 7.0f;
  EXPECT_EQ(a.data_as<float>()[2], 5.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c.data()) % 64, 0u);
}

TEST(NDArray, StorageOutlivesTheFirstHandle) {
  NDArray r;
  {
    NDArray a = NDArray::empty({2, 3}, DType::Int32);
    for (int i = 0; i < 6; ++i) a.data_as<int32_t>()[i] = i * 10;
    r = a.reshape({3, 2});
  }
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_EQ(r.owner().use_count(), 1);
  EXPECT_EQ(r.data_as<int32_t>()[5], 50);
}

TEST(NDArray, ViewKeepsOwnerAlive) {
  auto buffer = std::make_shared<std::vector<float>>(8, 1.5f);
  std::weak_ptr<std::vector<float>> weak = buffer;
  NDArray v = NDArray::view(buffer, buffer->data() + 4, {2, 2}, DType::Float32);
  buffer.reset();
  ASSERT_FALSE(weak.expired());
  EXPECT_EQ(v.data_as<float>()[3], 1.5f);
  v = NDArray();
  EXPECT_TRUE(weak.expired());
}

TEST(NDArray, CopyFromChecksShapeAndDtype) {
  NDArray dst = NDArray::zeros({2, 3}, DType::Float32);
  NDArray src = NDArray::empty({2, 3}, DType::Float32);
  for (int i = 0; i < 6; ++i) src.data_as<float>()[i] = 0.5f * i;
  dst.copy_from(src);
  EXPECT_NE(dst.data(), src.data());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(dst.data_as<float>()[i], 0.5f * i);

  EXPECT_ERROR_WITH(dst.copy_from(NDArray::zeros({3, 2}, DType::Float32)), "float32(3, 2)",
                    "float32(2, 3)");
  EXPECT_ERROR_WITH(dst.copy_from(NDArray::zeros({2, 3}, DType::Int32)), "int32(2, 3)",
                    "float32(2, 3)");
  EXPECT_ERROR_WITH(dst.copy_from(NDArray()), "undefined");
}

TEST(NDArray, ReshapeChecksElementCount) {
  NDArray a = NDArray::zeros({2, 6}, DType::Float32);
  NDArray b = a.reshape({3, 4});
  EXPECT_EQ(b.data(), a.data());
  EXPECT_EQ(b.shape(), (Shape{3, 4}));
  EXPECT_ERROR_WITH(a.reshape({5, 2}), "(2, 6)", "(5, 2)", "12", "10");
}

// ---------------------------------------------------------------- ember_parallel_for

struct Coverage {
  std::vector<std::atomic<int>> hits;
  std::atomic<int> calls{0};
  explicit Coverage(int64_t n) : hits(static_cast<size_t>(n)) {}
};

void mark(int64_t begin, int64_t end, void* closure) {
  auto* c = static_cast<Coverage*>(closure);
  c->calls++;
  for (int64_t i = begin; i < end; ++i) c->hits[i]++;
}

class ParallelFor : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { saved_ = get_num_threads(); }
  void TearDown() override { set_num_threads(saved_); }
  int saved_ = 1;
};

TEST_P(ParallelFor, CoversEveryIterationOnce) {
  set_num_threads(GetParam());
  EXPECT_EQ(get_num_threads(), GetParam());
  for (int64_t n : {0, 1, 7, 1000}) {
    Coverage c(n);
    EXPECT_EQ(ember_parallel_for(n, mark, &c), 0);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(c.hits[i].load(), 1) << "n=" << n << " i=" << i;
    // A few pieces per thread at most (parallel.cc's kPiecesPerRange, 4), one per iteration
    // at most; none at all for an empty range.
    EXPECT_LE(c.calls.load(), GetParam() == 1 ? 1 : std::min<int64_t>(n, 4 * GetParam()));
    if (n == 0) {
      EXPECT_EQ(c.calls.load(), 0);
    } else {
      EXPECT_GE(c.calls.load(), 1);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, ParallelFor, ::testing::Values(1, 2, 3, 4));

void nested(int64_t begin, int64_t end, void* closure) {
  // Inside a parallel region the inner loop must run inline, still covering its range.
  for (int64_t i = begin; i < end; ++i) {
    Coverage inner(5);
    ember_parallel_for(5, mark, &inner);
    for (int j = 0; j < 5; ++j)
      if (inner.hits[j] != 1) static_cast<Coverage*>(closure)->calls = -1000;
    static_cast<Coverage*>(closure)->hits[i]++;
  }
}

TEST(ParallelForNested, InnerLoopRunsInline) {
  int saved = get_num_threads();
  set_num_threads(3);
  Coverage c(10);
  ember_parallel_for(10, nested, &c);
  set_num_threads(saved);
  EXPECT_GE(c.calls.load(), 0);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(c.hits[i].load(), 1);
}

void throws(int64_t begin, int64_t, void*) {
  if (begin == 0) throw std::runtime_error("body failed");
}

TEST(ParallelForErrors, ExceptionReachesTheCaller) {
  int saved = get_num_threads();
  set_num_threads(4);
  EXPECT_THROW(ember_parallel_for(100, throws, nullptr), std::runtime_error);
  set_num_threads(saved);
  EXPECT_ERROR_WITH(set_num_threads(0), "at least 1");
}

}  // namespace
}  // namespace ember::runtime
