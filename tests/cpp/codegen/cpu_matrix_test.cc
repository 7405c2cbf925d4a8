// Every x86-64 CPU the project supports, whatever this host is: each CPU's machine model
// comes from LLVM's scheduling model of that CPU, and a dense, a conv and a softmax compile
// for it (LLVM targets any of them from any host) to the vector width its model says, with
// the CPU named in the code. Compile only: the code of another CPU is never run here.
#include <gtest/gtest.h>

#include <string>

#include "ember/codegen/build.h"
#include "ember/codegen/machine.h"
#include "ember/codegen/target.h"
#include "ember/ir/op.h"
#include "ember/runtime/ndarray.h"

namespace ember::codegen {
namespace {

using namespace ir;

struct Cpu {
  const char* name;
  int vector_bits;  // the widest float vector
};

const Cpu kCpus[] = {{"znver1", 256},         {"znver2", 256},         {"znver3", 256},
                     {"znver4", 512},         {"znver5", 512},         {"haswell", 256},
                     {"skylake-avx512", 512}, {"icelake-server", 512}, {"sapphirerapids", 512}};

class CpuMatrix : public ::testing::TestWithParam<Cpu> {
 protected:
  std::string target() const { return std::string("llvm -mcpu=") + GetParam().name; }
};

TEST_P(CpuMatrix, MachineModelComesFromTheCpu) {
  const passes::MachineModel m = machine_model(parse_target(target()));
  EXPECT_EQ(m.cpu, GetParam().name);
  EXPECT_NE(m.source.find(std::string("LLVM's scheduling model of ") + GetParam().name),
            std::string::npos)
      << m.source;
  EXPECT_NE(m.source.find("caches typical of"), std::string::npos) << m.source;
  EXPECT_EQ(m.vector_bits, GetParam().vector_bits);
  EXPECT_GE(m.fma_latency, 3);
  EXPECT_LE(m.fma_latency, 6);
  EXPECT_GE(m.fma_ports, 1);
  EXPECT_LE(m.fma_ports, 2);
  EXPECT_GE(m.load_ports, 1);
  EXPECT_TRUE(m.fma_datapath_bits == 128 || m.fma_datapath_bits == 256 ||
              m.fma_datapath_bits == 512)
      << m.fma_datapath_bits;
  EXPECT_LE(m.fma_datapath_bits, m.vector_bits);
  EXPECT_LT(m.l1_bytes, m.l2_bytes);
  EXPECT_LT(m.l2_bytes, m.l3_bytes);
}

Expr f32(const std::string& name, std::vector<int64_t> shape) {
  return var(name, TensorType{std::move(shape), DType::Float32});
}

Expr weights(std::vector<int64_t> shape, const std::string& name) {
  runtime::NDArray w = runtime::NDArray::empty(shape, DType::Float32);
  for (int64_t i = 0; i < w.numel(); ++i) w.data_as<float>()[i] = 0.01f * static_cast<float>(i % 7);
  return constant(w, name);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_P(CpuMatrix, KernelsCompileForTheCpuAtItsWidth) {
  Expr x = f32("x", {4, 64}), img = f32("img", {1, 16, 12, 12}), logits = f32("logits", {8, 100});
  Expr dense = call("nn.relu", {call("nn.dense", {x, weights({48, 64}, "fc.weight")}, {}, "fc")});
  Attrs conv_attrs({{"padding", std::vector<int64_t>{1}}});
  Expr conv =
      call("nn.relu",
           {call("nn.conv2d", {img, weights({32, 16, 3, 3}, "conv.weight")}, conv_attrs, "conv")});
  Expr softmax = call("nn.softmax", {logits}, Attrs({{"axis", int64_t{-1}}}), "softmax");
  Function f = function({x, img, logits}, tuple({dense, conv, softmax}));
  auto lib = build(f, target());
  const std::string ll = lib->get_source("ll"), asm_text = lib->get_source("asm");
  EXPECT_GE(count(ll, "\"target-cpu\"=\"" + std::string(GetParam().name) + "\""), 1u);
  // The tiles' FMAs in the CPU's own registers: zmm where it has AVX-512, else ymm and no
  // zmm (the IR may hold wider vectors; the backend splits them to the CPU's).
  const bool avx512 = GetParam().vector_bits == 512;
  const std::string reg = avx512 ? "%zmm" : "%ymm";
  size_t fmas = 0;
  for (size_t at = asm_text.find("vfmadd"); at != std::string::npos;
       at = asm_text.find("vfmadd", at + 1)) {
    const std::string line = asm_text.substr(at, asm_text.find('\n', at) - at);
    fmas += line.find(reg) != std::string::npos;
  }
  EXPECT_GE(fmas, 4u) << GetParam().name;
  if (!avx512) EXPECT_EQ(count(asm_text, "%zmm"), 0u) << GetParam().name;
}

// The widest register, one rule for the target's width, the machine model and the code
// generator's masked loads: AVX-512F 512 bits, AVX 256, SSE alone 128; a feature string
// counts whole names, the last mention winning (a host's string lists its missing features
// with "-").
TEST(WidestVectorBits, FromFeaturesOrTheirNames) {
  EXPECT_EQ(widest_vector_bits(true, true), 512);
  EXPECT_EQ(widest_vector_bits(false, true), 256);
  EXPECT_EQ(widest_vector_bits(false, false), 128);
  EXPECT_EQ(widest_vector_bits("+sse2,+sse4.2,+avx,+avx2,+fma,+avx512f,+avx512bw"), 512);
  EXPECT_EQ(widest_vector_bits("+sse2,+avx,+avx2,+fma,-avx512f,-avx512bw"), 256);
  EXPECT_EQ(widest_vector_bits("+sse2,+sse3,+ssse3,+sse4.1,+sse4.2,-avx,-avx2"), 128);
  EXPECT_EQ(widest_vector_bits(""), 128);
  EXPECT_EQ(widest_vector_bits("+sse2,+avxvnni,+avx512fp16"), 128);  // names, not prefixes
  EXPECT_EQ(widest_vector_bits("+avx,+avx512f,-avx512f"), 256);
}

INSTANTIATE_TEST_SUITE_P(Cpus, CpuMatrix, ::testing::ValuesIn(kCpus),
                         [](const ::testing::TestParamInfo<Cpu>& info) {
                           std::string n = info.param.name;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace ember::codegen
