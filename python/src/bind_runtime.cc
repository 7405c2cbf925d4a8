// Runtime bindings: NDArray (Python's ember.Tensor) with the buffer protocol and DLPack, the graph
// executor, and the thread pool. Depends only on ember_runtime, so the runtime-only module can use
// it too.
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <vector>

#include "bindings.h"
#include "ember/runtime/cuda.h"
#include "ember/runtime/graph_executor.h"
#include "ember/runtime/parallel.h"
#include "ember/runtime/version.h"
#include "ember/support/error.h"

namespace py = pybind11;
using namespace py::literals;

namespace ember::python {

using runtime::BenchmarkResult;
using runtime::GraphExecutor;
using runtime::NDArray;
using runtime::Shape;

// ------------------------------------------------------------------------------ helpers

std::string describe(py::handle value) {
  std::string type = py::str(py::type::handle_of(value).attr("__name__"));
  std::string text = py::repr(value);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return type + " " + text;
}

std::string str_arg(py::handle value, const std::string& what) {
  if (!py::isinstance<py::str>(value)) fail(what, " must be a string, got ", describe(value));
  return value.cast<std::string>();
}

int64_t int_arg(py::handle value, const std::string& what) {
  // bool is an int in Python, but passing True where a count or index belongs is a mistake.
  if (py::isinstance<py::bool_>(value) || !PyIndex_Check(value.ptr()))
    fail(what, " must be an integer, got ", describe(value));
  int overflow = 0;
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  long long v = index ? PyLong_AsLongLongAndOverflow(index.ptr(), &overflow) : 0;
  if (!index || overflow || (v == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    fail(what, " must fit in 64 bits, got ", describe(value));
  }
  return v;
}

namespace {

// NumPy's dtype for an ember dtype, and back. Byte order must be native (x86 is little-endian).
DType dtype_of_numpy(const py::dtype& dt, const std::string& what) {
  char kind = dt.kind();
  auto size = dt.itemsize();
  char order = dt.byteorder();
  bool native = order == '=' || order == '|' || order == '<';
  if (native && kind == 'f' && size == 4) return DType::Float32;
  if (native && kind == 'f' && size == 8) return DType::Float64;
  if (native && kind == 'i' && size == 4) return DType::Int32;
  if (native && kind == 'i' && size == 8) return DType::Int64;
  if (kind == 'b' && size == 1) return DType::Bool;
  if (kind == 'i' && size == 1) return DType::Int8;
  if (kind == 'u' && size == 1) return DType::UInt8;
  fail(what, " has dtype ", std::string(py::str(dt)),
       ", which Ember does not support; use float32, float64, int32, int64, bool, int8 or "
       "uint8");
}

constexpr const char* kNoNumpyBF16 =
    "a bfloat16 tensor has no NumPy dtype (NumPy has no bfloat16): share it with "
    "torch.from_dlpack(t), or cast the model's output to float32";

const char* buffer_format(DType t) {
  switch (t) {
    case DType::Float32:
      return "f";
    case DType::Float64:
      return "d";
    case DType::Int32:
      return "i";
    case DType::Int64:
      return "q";
    case DType::Bool:
      return "?";
    case DType::Int8:
      return "b";
    case DType::UInt8:
      return "B";
    case DType::BFloat16:
      fail(kNoNumpyBF16);
  }
  EMBER_CHECK(false, "unknown dtype");
}

std::vector<py::ssize_t> byte_strides(const NDArray& t) {
  std::vector<py::ssize_t> strides(t.shape().size());
  py::ssize_t stride = dtype_bytes(t.dtype());
  for (size_t i = strides.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= t.shape()[i];
  }
  return strides;
}

py::tuple shape_tuple(const Shape& shape) {
  py::tuple out(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) out[i] = py::int_(shape[i]);
  return out;
}

// ------------------------------------------------------------------------------ DLPack
// The DLPack ABI (dlpack.h, unversioned "dltensor" capsules), written out here so that the
// build needs no extra header. Layouts must match dlpack.h exactly.
struct DLDevice {
  int32_t device_type;  // 1 = kDLCPU, 2 = kDLCUDA
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 6 bool
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // NULL: compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// Owns what the DLTensor points at. It holds the storage by a C++ shared_ptr, not a Python
// reference, because consumers may call the deleter on any thread without the GIL.
struct DLPackContext {
  NDArray tensor;
  Shape shape;
  DLManagedTensor managed{};
};

void dlpack_deleter(DLManagedTensor* self) {
  delete static_cast<DLPackContext*>(self->manager_ctx);
}

// A consumer renames the capsule to "used_dltensor" and takes over the deleter; only an
// unconsumed capsule frees the tensor here.
void dlpack_capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (managed && managed->deleter) managed->deleter(managed);
}

DLDataType dl_dtype(DType t) {
  switch (t) {
    case DType::Float32:
      return {2, 32, 1};
    case DType::Float64:
      return {2, 64, 1};
    case DType::Int32:
      return {0, 32, 1};
    case DType::Int64:
      return {0, 64, 1};
    case DType::Bool:
      return {6, 8, 1};
    case DType::Int8:
      return {0, 8, 1};
    case DType::UInt8:
      return {1, 8, 1};
    case DType::BFloat16:
      return {4, 16, 1};  // kDLBfloat
  }
  EMBER_CHECK(false, "unknown dtype");
}

bool on_gpu(const NDArray& t) { return t.device().type == runtime::DeviceType::CUDA; }

std::string device_str(const NDArray& t) {
  return on_gpu(t) ? "cuda:" + std::to_string(t.device().id) : "cpu";
}

// A deep copy on the tensor's own device.
NDArray copy_on_device(const NDArray& t) {
  if (!on_gpu(t)) return t.clone();
  NDArray c = runtime::cuda::empty(t.shape(), t.dtype(), t.device().id);
  runtime::cuda::copy(c, t);
  return c;
}

py::object to_dlpack(const NDArray& t, py::object dl_device, py::object copy) {
  int type = static_cast<int>(t.device().type), id = t.device().id;
  if (!dl_device.is_none()) {
    auto dev = dl_device.cast<std::pair<int, int>>();
    if (dev.first != type || dev.second != id)
      throw py::buffer_error("ember Tensor lives on " + device_str(t) + " (DLPack device (" +
                             std::to_string(type) + ", " + std::to_string(id) +
                             ")); it cannot be exported to another device");
  }
  auto ctx = std::make_unique<DLPackContext>();
  ctx->tensor = !copy.is_none() && copy.cast<bool>() ? copy_on_device(t) : t;
  ctx->shape = t.shape();
  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = ctx->tensor.data();
  dl.device = {type, id};
  dl.ndim = static_cast<int32_t>(ctx->shape.size());
  dl.dtype = dl_dtype(t.dtype());
  dl.shape = ctx->shape.data();
  dl.strides = nullptr;
  dl.byte_offset = 0;
  ctx->managed.manager_ctx = ctx.get();
  ctx->managed.deleter = dlpack_deleter;
  PyObject* capsule = PyCapsule_New(&ctx->managed, "dltensor", dlpack_capsule_destructor);
  if (!capsule) throw py::error_already_set();
  ctx.release();  // now owned by the capsule (or by its consumer)
  return py::reinterpret_steal<py::object>(capsule);
}

// Ember's dtype for a DLPack dtype; ember::Error for the others.
DType dtype_of_dl(DLDataType t) {
  if (t.lanes == 1) {
    if (t.code == 2 && t.bits == 32) return DType::Float32;
    if (t.code == 2 && t.bits == 64) return DType::Float64;
    if (t.code == 0 && t.bits == 32) return DType::Int32;
    if (t.code == 0 && t.bits == 64) return DType::Int64;
    if (t.code == 6 && t.bits == 8) return DType::Bool;
    if (t.code == 0 && t.bits == 8) return DType::Int8;
    if (t.code == 1 && t.bits == 8) return DType::UInt8;
    if (t.code == 4 && t.bits == 16) return DType::BFloat16;
  }
  fail("a DLPack tensor of type code ", int(t.code), " with ", int(t.bits), " bits and ", t.lanes,
       " lanes is not an Ember dtype; use float32, float64, int32, int64, bool, int8, uint8 or "
       "bfloat16");
}

// Imports a DLPack capsule (CPU or CUDA) without copying: the NDArray owns the producer's
// memory through its deleter.
NDArray from_dlpack(py::handle obj) {
  py::object capsule = py::hasattr(obj, "__dlpack__") ? obj.attr("__dlpack__")()
                                                      : py::reinterpret_borrow<py::object>(obj);
  if (!PyCapsule_IsValid(capsule.ptr(), "dltensor"))
    fail(
        "from_dlpack needs an object with __dlpack__ (a torch tensor) or a DLPack capsule, "
        "got ",
        describe(obj));
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  const DLTensor& dl = managed->dl_tensor;
  DType dtype = dtype_of_dl(dl.dtype);
  Shape shape(dl.shape, dl.shape + dl.ndim);
  if (dl.strides) {  // must be compact row-major
    int64_t expect = 1;
    for (int d = dl.ndim - 1; d >= 0; --d) {
      if (shape[d] != 1 && dl.strides[d] != expect)
        fail("from_dlpack: the tensor is not contiguous; call .contiguous() first");
      expect *= shape[d];
    }
  }
  runtime::Device device;
  if (dl.device.device_type == 2)
    device = {runtime::DeviceType::CUDA, dl.device.device_id};
  else if (dl.device.device_type != 1)
    fail("from_dlpack: DLPack device type ", dl.device.device_type,
         " is not supported; Ember takes CPU (1) and CUDA (2) tensors");
  // Consumed: the capsule no longer frees the tensor; the NDArray's owner does.
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  std::shared_ptr<void> owner(managed, [](void* m) {
    auto* t = static_cast<DLManagedTensor*>(m);
    if (t->deleter) t->deleter(t);
  });
  void* data = static_cast<char*>(dl.data) + dl.byte_offset;
  return NDArray::view(std::move(owner), data, shape, dtype, device);
}

}  // namespace

ArrayView array_view(py::handle value, const std::string& what) {
  if (!py::isinstance<py::array>(value))
    fail(what, " must be a NumPy array or a CPU torch tensor, got ", describe(value));
  // ensure() keeps the dtype and copies only when the memory is not C-contiguous.
  py::array array = py::array::ensure(value, py::array::c_style);
  if (!array) throw py::error_already_set();
  DType dtype = dtype_of_numpy(array.dtype(), what);
  Shape shape(array.shape(), array.shape() + array.ndim());
  NDArray view = NDArray::view(nullptr, const_cast<void*>(array.data()), shape, dtype);
  return {std::move(array), std::move(view)};
}

runtime::NDArray tensor_copy(py::handle value, const std::string& what) {
  if (py::isinstance<NDArray>(value)) {
    const NDArray& t = value.cast<const NDArray&>();
    return on_gpu(t) ? runtime::cuda::to_host(t) : t.clone();
  }
  return array_view(value, what).tensor.clone();
}

runtime::ExecutorOptions executor_options(py::handle cuda_graph) {
  if (!py::isinstance<py::bool_>(cuda_graph) &&
      !py::isinstance(cuda_graph, py::module_::import("numpy").attr("bool_")))
    fail("GraphModule: cuda_graph must be True or False, got ", describe(cuda_graph));
  runtime::ExecutorOptions options;
  options.cuda_graph = PyObject_IsTrue(cuda_graph.ptr()) == 1;
  return options;
}

void register_errors(py::module_& m) {
  // Local: each extension module translates its own errors into its own classes. Two
  // unrelated classes, as in C++: `except ember.EmberError` never swallows a compiler bug.
  py::register_local_exception<ember::Error>(m, "EmberError", PyExc_RuntimeError);
  py::register_local_exception<ember::InternalError>(m, "InternalError", PyExc_RuntimeError);
  // For the tests of this translation: raises the C++ error of `kind` ("user", "internal").
  m.def("_raise_for_testing", [](const std::string& kind) {
    if (kind == "internal") EMBER_CHECK(false, "raised for testing");
    fail("raised for testing");
  });
}

namespace {

int input_index(const GraphExecutor& ex, py::handle key) {
  if (py::isinstance<py::str>(key)) return ex.input_index(key.cast<std::string>());
  if (py::isinstance<py::bool_>(key) || !PyIndex_Check(key.ptr()))
    fail("set_input: the input must be named by its name (str) or its index (int), got ",
         describe(key));
  int64_t index = int_arg(key, "set_input: the input index");
  if (index < 0 || index >= ex.num_inputs())
    fail("set_input: input index ", index, " is out of range; the model has ", ex.num_inputs(),
         " input(s)");
  return static_cast<int>(index);
}

void check_output_index(const GraphExecutor& ex, int64_t index) {
  if (index < 0 || index >= ex.num_outputs())
    fail("get_output: output index ", index, " is out of range; the model has ", ex.num_outputs(),
         " output(s)");
}

}  // namespace

// ember.Tensor: the data tensor, its buffer protocol, DLPack and numpy views.
static void bind_tensor(py::module_& m) {
  py::class_<NDArray>(m, "Tensor", py::buffer_protocol(),
                      "A dense CPU tensor. np.asarray(t) and torch.from_dlpack(t) share its "
                      "memory; t.numpy() copies.")
      .def_buffer([](NDArray& t) {
        if (on_gpu(t))
          throw py::buffer_error("this ember Tensor is on " + device_str(t) +
                                 ": copy it to the host with .numpy(), or share it with "
                                 "torch.from_dlpack(t)");
        if (t.dtype() == DType::BFloat16) throw py::buffer_error(kNoNumpyBF16);
        return py::buffer_info(t.data(), dtype_bytes(t.dtype()), buffer_format(t.dtype()), t.ndim(),
                               std::vector<py::ssize_t>(t.shape().begin(), t.shape().end()),
                               byte_strides(t), /*readonly=*/false);
      })
      .def_property_readonly("shape", [](const NDArray& t) { return shape_tuple(t.shape()); })
      .def_property_readonly("dtype", [](const NDArray& t) { return dtype_name(t.dtype()); })
      .def_property_readonly("ndim", &NDArray::ndim)
      .def(
          "numpy",
          [](const NDArray& t) {
            NDArray host = runtime::cuda::to_host(t);  // itself when on the CPU
            // No base object: NumPy copies the data into an array it owns.
            return py::array(py::dtype(buffer_format(t.dtype())),
                             std::vector<py::ssize_t>(t.shape().begin(), t.shape().end()),
                             host.data());
          },
          "A NumPy copy of the tensor (copied from the GPU for a CUDA tensor).")
      .def_property_readonly("device", [](const NDArray& t) { return device_str(t); })
      .def(
          "__dlpack__",
          [](const NDArray& t, py::object /*stream*/, py::object /*max_version*/,
             py::object dl_device, py::object copy) {
            // A CPU tensor needs no stream; unversioned capsules suit any max_version.
            return to_dlpack(t, dl_device, copy);
          },
          py::kw_only(), "stream"_a = py::none(), "max_version"_a = py::none(),
          "dl_device"_a = py::none(), "copy"_a = py::none(),
          "A DLPack capsule sharing this tensor's memory (the array API protocol).")
      // NumPy tries the buffer protocol first and, when it refuses, makes a 0-d object array
      // of the tensor; __array__ comes next and turns that into the same clear error.
      .def(
          "__array__",
          [](const NDArray& t, py::object /*dtype*/, py::object /*copy*/) -> py::object {
            if (on_gpu(t))
              throw py::buffer_error("this ember Tensor is on " + device_str(t) +
                                     ": copy it to the host with .numpy(), or share it with "
                                     "torch.from_dlpack(t)");
            if (t.dtype() == DType::BFloat16) fail(kNoNumpyBF16);
            return py::module_::import("numpy").attr("asarray")(py::memoryview(py::cast(t)));
          },
          "dtype"_a = py::none(), py::kw_only(), "copy"_a = py::none())
      .def("__dlpack_device__",
           [](const NDArray& t) {
             return py::make_tuple(static_cast<int>(t.device().type), t.device().id);
           })
      .def("__repr__",
           [](const NDArray& t) {
             return "ember.Tensor(shape=" + runtime::shape_str(t.shape()) +
                    ", dtype=" + dtype_name(t.dtype()) +
                    (on_gpu(t) ? ", device=" + device_str(t) : std::string()) + ")";
           })
      .def_static(
          "from_numpy", [](py::handle a) { return tensor_copy(a, "Tensor.from_numpy: the array"); },
          "array"_a, "A tensor holding a copy of a NumPy array.")
      .def_static("from_dlpack", &from_dlpack, "value"_a,
                  "A tensor sharing the memory of a DLPack producer (a CPU or CUDA torch "
                  "tensor): no copy.");
}

// GraphExecutor: inputs and outputs by name or index, run, benchmark. Over 80 lines: it is
// one py::class_ statement, a list of methods.
static void bind_graph_executor(py::module_& m) {
  py::class_<GraphExecutor, std::shared_ptr<GraphExecutor>>(m, "GraphExecutor")
      .def("num_inputs", &GraphExecutor::num_inputs)
      .def("num_outputs", &GraphExecutor::num_outputs)
      .def("input_names", &GraphExecutor::input_names)
      .def("input_index",
           [](const GraphExecutor& ex, py::handle name) {
             return ex.input_index(str_arg(name, "input_index: the input name"));
           })
      .def(
          "set_input",
          [](GraphExecutor& ex, py::handle key, py::handle value) {
            int index = input_index(ex, key);
            if (py::isinstance<NDArray>(value)) {
              ex.set_input(index, value.cast<const NDArray&>());
              return;
            }
            std::string what = "set_input: the value for input '" + ex.input_names()[index] + "'";
            ArrayView view = array_view(value, what);
            ex.set_input(index, view.tensor);  // copies, while `view.array` is alive
          },
          "key"_a, "value"_a)
      .def("run", py::overload_cast<>(&GraphExecutor::run),
           py::call_guard<py::gil_scoped_release>())
      // Sets every input, runs and returns copies of the outputs as one step (thread-safe).
      .def(
          "run_with",
          [](GraphExecutor& ex, const py::list& values) {
            std::vector<ArrayView> arrays;  // keeps NumPy inputs alive while they are copied
            std::vector<NDArray> inputs;
            std::vector<std::string> names = ex.input_names();
            for (size_t i = 0; i < values.size(); ++i) {
              py::handle value = values[i];
              if (py::isinstance<NDArray>(value)) {
                inputs.push_back(value.cast<const NDArray&>());
                continue;
              }
              std::string what =
                  "the value for input '" + (i < names.size() ? names[i] : std::to_string(i)) + "'";
              arrays.push_back(array_view(value, what));
              inputs.push_back(arrays.back().tensor);
            }
            std::vector<NDArray> outputs;
            {
              py::gil_scoped_release release;
              outputs = ex.run(inputs);
            }
            return outputs;
          },
          "inputs"_a)
      // Runs on the callers' tensors (ember Tensors, e.g. Tensor.from_dlpack of torch
      // tensors): no input copy, and fresh outputs that no later run overwrites.
      .def(
          "run_bound",
          [](GraphExecutor& ex, const std::vector<NDArray>& inputs) {
            py::gil_scoped_release release;
            return ex.run_bound(inputs);
          },
          "inputs"_a)
      // The output aliases the executor's buffer: keep the executor alive with it.
      .def(
          "get_output",
          [](const GraphExecutor& ex, py::handle index) {
            int64_t i = int_arg(index, "get_output: the output index");
            check_output_index(ex, i);
            return ex.get_output(static_cast<int>(i));
          },
          py::keep_alive<0, 1>())
      .def(
          "get_input",
          [](const GraphExecutor& ex, py::handle key) {
            return ex.get_input(input_index(ex, key));
          },
          py::keep_alive<0, 1>())
      .def(
          "benchmark",
          [](GraphExecutor& ex, int64_t number, int64_t repeat, int64_t warmup) {
            if (number < 1 || repeat < 1 || warmup < 0)
              fail(
                  "benchmark: number and repeat must be at least 1 and warmup at least 0, "
                  "got number=",
                  number, ", repeat=", repeat, ", warmup=", warmup);
            py::gil_scoped_release release;
            return ex.benchmark(static_cast<int>(number), static_cast<int>(repeat),
                                static_cast<int>(warmup));
          },
          "number"_a = 1, "repeat"_a = 10, "warmup"_a = 1)
      .def(
          "profile",
          [](GraphExecutor& ex, int64_t repeat) {
            if (repeat < 1) fail("profile: repeat must be at least 1, got ", repeat);
            std::vector<runtime::KernelProfile> p;
            {
              py::gil_scoped_release release;
              p = ex.profile(static_cast<int>(repeat));
            }
            return GraphExecutor::profile_table(p);
          },
          "repeat"_a = 10, "Per-kernel mean times as a table.")
      // Run-time shapes: the symbols as (name, min, max), and the last run's values.
      .def_property_readonly("symbols",
                             [](const GraphExecutor& ex) {
                               py::list out;
                               for (const runtime::ExecGraph::Symbol& s : ex.symbols())
                                 out.append(py::make_tuple(s.name, s.min, s.max));
                               return out;
                             })
      .def("symbol_values",
           [](const GraphExecutor& ex) {
             py::dict out;
             for (const auto& [name, value] : ex.symbol_values()) out[py::str(name)] = value;
             return out;
           })
      .def_property_readonly("pool_bytes", &GraphExecutor::pool_bytes)
      .def_property_readonly("cuda_graph", &GraphExecutor::cuda_graph)
      .def_property_readonly("device", [](const GraphExecutor& ex) {
        return ex.device().type == runtime::DeviceType::CUDA
                   ? "cuda:" + std::to_string(ex.device().id)
                   : std::string("cpu");
      });
}

void bind_runtime(py::module_& m) {
  m.attr("__version__") = runtime::ember_version();  // ember.__version__
  bind_tensor(m);
  m.def("cuda_available", &runtime::cuda::available,
        "True when a CUDA driver and GPU are present (never raises).");

  py::class_<BenchmarkResult>(m, "BenchmarkResult", "Timings in milliseconds.")
      .def_readonly("mean", &BenchmarkResult::mean)
      .def_readonly("median", &BenchmarkResult::median)
      .def_readonly("max", &BenchmarkResult::max)
      .def_readonly("min", &BenchmarkResult::min)
      .def_readonly("std", &BenchmarkResult::std)
      .def_readonly("results", &BenchmarkResult::results_ms)
      .def("__str__", &BenchmarkResult::str)
      .def("__repr__", [](const BenchmarkResult& r) {
        return "BenchmarkResult(mean=" + std::to_string(r.mean) +
               " ms, median=" + std::to_string(r.median) + " ms)";
      });
  bind_graph_executor(m);
  m.def(
      "set_num_threads",
      [](py::handle n) {
        int64_t threads = int_arg(n, "set_num_threads: the thread count");
        if (threads < 1 || threads > 4096)
          fail("set_num_threads: the thread count must be between 1 and 4096, got ", threads);
        runtime::set_num_threads(static_cast<int>(threads));
      },
      "n"_a, "Threads used by parallel loops (default: OMP_NUM_THREADS or the core count).");
  m.def("get_num_threads", &runtime::get_num_threads);
}

}  // namespace ember::python
