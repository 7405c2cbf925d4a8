// Lesson 04: running a saved model from C++, with the runtime alone.
//
// Lessons 01-03 compiled models in Python. A compiled model can be saved as one file:
//
//     lib = ember.build(mod, target="llvm", params=params)
//     lib.export("model.ember")            # or: ember compile model.pt2 -o model.ember
//
// The file holds the executor graph, the parameters and the kernels as a shared library.
// This program loads it and runs it with nothing but Ember's runtime: it links only the
// ember_runtime library — no LLVM, no Python, no PyTorch — so it is what you ship to a
// server or a device. (Configure with -DEMBER_RUNTIME_ONLY=ON to build the runtime alone.)
//
// Usage: tutorial_04_deploy_cpp model.ember input.npy[,input2.npy...] [expected.npy[,...]]
//
// The input is a NumPy .npy file (np.save("x.npy", x)). With a third argument the lesson
// checks its output against that file, bit for bit; that is how it runs as a test (`ctest
// -R tutorial_04`, which first writes the three files with tests/python/test_deploy.py).

#include <algorithm>
#include <cstring>
#include <iostream>
#include <string>

#include "ember/runtime/artifact.h"
#include "ember/runtime/graph_executor.h"
#include "ember/runtime/npy.h"
#include "ember/support/error.h"

using namespace ember;
using namespace ember::runtime;

// Element i of a tensor, whatever its dtype, for printing.
double element(const NDArray& t, int64_t i) {
  switch (t.dtype()) {
    case DType::Float32:
      return t.data_as<float>()[i];
    case DType::Float64:
      return t.data_as<double>()[i];
    case DType::Int32:
      return t.data_as<int32_t>()[i];
    case DType::Int64:
      return static_cast<double>(t.data_as<int64_t>()[i]);
    case DType::Bool:
      return t.data_as<bool>()[i];
  }
  return 0;
}

// "a.npy,b.npy" -> {"a.npy", "b.npy"}: one file per model input (or output).
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t comma; (comma = text.find(',', start)) != std::string::npos; start = comma + 1)
    out.push_back(text.substr(start, comma - start));
  out.push_back(text.substr(start));
  return out;
}

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::cerr << "usage: " << argv[0] << " model.ember input.npy[,input2.npy...] "
              << "[expected.npy[,expected2.npy...]]\n";
    return 2;
  }
  // Every mistake (a missing or damaged file, a wrong input shape) is an ember::Error with
  // a message saying what to do; a deployed program reports it and exits cleanly.
  try {
    // 1. Load the model. load_library reads the file, checks its format version and
    //    checksums, checks that this CPU has the instruction set the code was compiled for,
    //    and loads the kernels. The parameters stay in the file's buffer (no copy).
    std::shared_ptr<LoadedLibrary> lib = load_library(argv[1]);
    const ExecGraph& g = *lib->graph;
    std::cout << "model " << argv[1] << ": target " << lib->info.target << ", compiled for "
              << lib->info.cpu << ", " << g.kernels.size() << " kernels, " << g.params.size()
              << " parameters\n";
    for (const auto& k : lib->info.kernels) std::cout << "  kernel  " << k.name << "\n";

    // 2. An executor: its own input, output and scratch buffers over the shared graph, code
    //    and parameters. Make one per thread to run a model from several threads at once.
    //    A third argument, ExecutorOptions, switches a GPU model's CUDA graph replay off
    //    (cuda_graph = false); a CPU model like this one ignores it.
    GraphExecutor exec(lib->graph, lib->module);

    // 3. The inputs, from .npy files. set_input checks the shape and dtype against the
    //    model's input and copies the data into the executor's buffer.
    std::vector<std::string> inputs = split_list(argv[2]);
    for (size_t i = 0; i < inputs.size(); ++i) {
      NDArray x = load_npy(inputs[i]);
      std::cout << "input   " << exec.input_names().at(i) << " " << dtype_name(x.dtype())
                << shape_str(x.shape()) << "\n";
      exec.set_input(static_cast<int>(i), x);
    }

    // 4. Run, and read the output: a tensor over the executor's output buffer (the next run
    //    overwrites it; clone() keeps a copy).
    exec.run();
    NDArray y = exec.get_output(0);
    std::cout << "output  " << dtype_name(y.dtype()) << shape_str(y.shape()) << ":";
    for (int64_t i = 0; i < std::min<int64_t>(y.numel(), 6); ++i) std::cout << " " << element(y, i);
    std::cout << (y.numel() > 6 ? " ...\n" : "\n");

    // 5. Check against the expected outputs, if given. The saved code is the very code the
    //    compiler ran in memory, so the results are identical, not merely close.
    if (argc == 4) {
      std::vector<std::string> files = split_list(argv[3]);
      for (size_t i = 0; i < files.size(); ++i) {
        NDArray expected = load_npy(files[i]);
        NDArray out = exec.get_output(static_cast<int>(i));
        if (expected.shape() != out.shape() || expected.dtype() != out.dtype() ||
            std::memcmp(expected.data(), out.data(), out.nbytes()) != 0) {
          std::cerr << "FAILED: output " << i << " differs from " << files[i] << "\n";
          return 1;
        }
      }
      std::cout << "output matches " << argv[3] << " bit for bit\n";
    }

    // 6. Time it: the same "Execution time summary" table as GraphModule.benchmark in Python.
    std::cout << exec.benchmark(/*number=*/1, /*repeat=*/20).str() << "\n";
  } catch (const Error& e) {  // the user's mistake: a bad file, a wrong input
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const InternalError& e) {  // a bug in Ember: the message asks for a report
    std::cerr << e.what() << "\n";
    return 3;
  }
  return 0;
}
