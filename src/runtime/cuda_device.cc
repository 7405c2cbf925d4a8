// The CUDA driver API through dlopen. The few driver types and functions Ember needs are
// declared here (their ABI is stable: the *_v2 names are what cuda.h maps the plain names
// to), so the build never needs CUDA headers and a CPU-only machine never needs libcuda.
// Streams and graphs are looked up too but are optional at load: a driver without them
// fails only when a stream or a graph is made, naming the missing function.
#include "cuda_device.h"

#include <dlfcn.h>

#include <cstring>

#include "ember/support/error.h"

namespace ember::runtime::cuda {

namespace {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void*;
using CUevent = void*;
using CUstream = void*;
using CUgraph = void*;
using CUgraphExec = void*;

constexpr int kAttrMajor = 75;           // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrMinor = 76;           // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
constexpr unsigned kStreamBlocking = 0;  // CU_STREAM_DEFAULT: ordered with the default stream
constexpr int kCaptureThreadLocal = 1;   // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL

const char* const kNoDriver =
    "no CUDA driver found (libcuda.so.1): target=\"cuda\" needs an NVIDIA GPU; build with "
    "target=\"llvm\"";

// The driver's entry points, resolved once.
struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuMemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuModuleLoadDataEx)(void**, const void*, unsigned, int*, void**);
  CUresult (*cuModuleUnload)(void*);
  CUresult (*cuModuleGetFunction)(void**, void*, const char*);
  CUresult (*cuLaunchKernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  // Optional (null when the driver lacks them); `need` checks them where they are used.
  CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuStreamBeginCapture)(CUstream, int /*CUstreamCaptureMode*/) = nullptr;
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*) = nullptr;
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*cuGraphExecDestroy)(CUgraphExec) = nullptr;
  CUresult (*cuGraphDestroy)(CUgraph) = nullptr;

  std::string error;  // why the driver is unusable ("" when it is fine)
  int count = 0;
  std::vector<CUcontext> contexts;  // primary context per device, retained on first use
  std::mutex mutex;
};

std::string error_text(const Driver& d, CUresult r) {
  const char *name = nullptr, *text = nullptr;
  if (d.cuGetErrorName) d.cuGetErrorName(r, &name);
  if (d.cuGetErrorString) d.cuGetErrorString(r, &text);
  std::string s = name ? name : "CUDA error " + std::to_string(r);
  if (text) s += std::string(" (") + text + ")";
  return s;
}

Driver& driver_state() {
  static Driver* d = [] {
    auto* drv = new Driver();  // never freed: kernels may run during static destruction
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      drv->error = kNoDriver;
      return drv;
    }
    bool ok = true;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      ok = ok && fn != nullptr;
    };
    sym(drv->cuInit, "cuInit");
    sym(drv->cuDeviceGetCount, "cuDeviceGetCount");
    sym(drv->cuDeviceGet, "cuDeviceGet");
    sym(drv->cuDeviceGetName, "cuDeviceGetName");
    sym(drv->cuDeviceGetAttribute, "cuDeviceGetAttribute");
    sym(drv->cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    sym(drv->cuCtxSetCurrent, "cuCtxSetCurrent");
    sym(drv->cuCtxSynchronize, "cuCtxSynchronize");
    sym(drv->cuMemAlloc, "cuMemAlloc_v2");
    sym(drv->cuMemFree, "cuMemFree_v2");
    sym(drv->cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    sym(drv->cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    sym(drv->cuMemcpyDtoD, "cuMemcpyDtoD_v2");
    sym(drv->cuMemsetD8, "cuMemsetD8_v2");
    sym(drv->cuModuleLoadDataEx, "cuModuleLoadDataEx");
    sym(drv->cuModuleUnload, "cuModuleUnload");
    sym(drv->cuModuleGetFunction, "cuModuleGetFunction");
    sym(drv->cuLaunchKernel, "cuLaunchKernel");
    sym(drv->cuEventCreate, "cuEventCreate");
    sym(drv->cuEventRecord, "cuEventRecord");
    sym(drv->cuEventSynchronize, "cuEventSynchronize");
    sym(drv->cuEventElapsedTime, "cuEventElapsedTime");
    sym(drv->cuEventDestroy, "cuEventDestroy_v2");
    sym(drv->cuGetErrorName, "cuGetErrorName");
    sym(drv->cuGetErrorString, "cuGetErrorString");
    // Optional entry points: a miss leaves the pointer null.
    auto opt = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    };
    opt(drv->cuStreamCreate, "cuStreamCreate");
    opt(drv->cuStreamDestroy, "cuStreamDestroy_v2");
    opt(drv->cuStreamSynchronize, "cuStreamSynchronize");
    opt(drv->cuStreamBeginCapture, "cuStreamBeginCapture_v2");
    opt(drv->cuStreamEndCapture, "cuStreamEndCapture");
    opt(drv->cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
    opt(drv->cuGraphLaunch, "cuGraphLaunch");
    opt(drv->cuGraphExecDestroy, "cuGraphExecDestroy");
    opt(drv->cuGraphDestroy, "cuGraphDestroy");
    if (!ok) {
      drv->error =
          "the CUDA driver (libcuda.so.1) is too old: it lacks functions Ember needs; "
          "update the NVIDIA driver or build with target=\"llvm\"";
      return drv;
    }
    CUresult r = drv->cuInit(0);
    if (r == 0) r = drv->cuDeviceGetCount(&drv->count);
    if (r != 0 || drv->count == 0) {
      drv->error = "no CUDA GPU found (" + (r ? error_text(*drv, r) : "0 devices") +
                   "): target=\"cuda\" needs an NVIDIA GPU; build with target=\"llvm\"";
      drv->count = 0;
      return drv;
    }
    drv->contexts.assign(drv->count, nullptr);
    return drv;
  }();
  return *d;
}

// The driver, with `device`'s primary context current on this thread.
Driver& driver(int device) {
  Driver& d = driver_state();
  if (!d.error.empty()) fail(d.error);
  if (device < 0 || device >= d.count)
    fail("CUDA device ", device, " does not exist: this machine has ", d.count, " GPU(s)");
  CUcontext ctx;
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    if (!d.contexts[device]) {
      CUdevice dev;
      CUresult r = d.cuDeviceGet(&dev, device);
      if (r == 0) r = d.cuDevicePrimaryCtxRetain(&d.contexts[device], dev);
      if (r != 0) fail("cannot open CUDA device ", device, ": ", error_text(d, r));
    }
    ctx = d.contexts[device];
  }
  CUresult r = d.cuCtxSetCurrent(ctx);
  if (r != 0) fail("cannot use CUDA device ", device, ": ", error_text(d, r));
  return d;
}

void check(const Driver& d, CUresult r, const char* what) {
  if (r != 0) fail("CUDA ", what, " failed: ", error_text(d, r));
}

CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// What a failed graph call tells the user to do.
const char* const kGraphsOff =
    "; run without CUDA graphs (ember.GraphModule(lib, cuda_graph=False), `ember run/bench "
    "--no-cuda-graph`, ExecutorOptions::cuda_graph = false in C++)";

// Fails unless the driver has the optional entry point `fn`.
template <typename Fn>
void need(Fn fn, const char* name, const char* what) {
  if (!fn)
    fail(what, ": the CUDA driver (libcuda.so.1) lacks ", name,
         "; update the NVIDIA driver (CUDA 11.4 or newer)");
}

// `device`'s primary context made current, for releasing a handle in a destructor; false
// when the driver or the context is gone (then there is nothing to release).
bool release_context(Driver& d, int device) {
  if (!d.error.empty() || device < 0 || device >= d.count || !d.contexts[device]) return false;
  return d.cuCtxSetCurrent(d.contexts[device]) == 0;
}

}  // namespace

bool available() { return device_count() > 0; }

int device_count() {
  Driver& d = driver_state();
  return d.error.empty() ? d.count : 0;
}

std::string device_name(int device) {
  Driver& d = driver(device);
  char name[256] = {0};
  CUdevice dev;
  check(d, d.cuDeviceGet(&dev, device), "cuDeviceGet");
  check(d, d.cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName");
  return std::string(name) + " (" + device_arch(device) + ")";
}

std::string device_arch(int device) {
  Driver& d = driver(device);
  CUdevice dev;
  int major = 0, minor = 0;
  check(d, d.cuDeviceGet(&dev, device), "cuDeviceGet");
  check(d, d.cuDeviceGetAttribute(&major, kAttrMajor, dev), "cuDeviceGetAttribute");
  check(d, d.cuDeviceGetAttribute(&minor, kAttrMinor, dev), "cuDeviceGetAttribute");
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

void* alloc(size_t bytes, int device) {
  Driver& d = driver(device);
  CUdeviceptr p = 0;
  CUresult r = d.cuMemAlloc(&p, bytes == 0 ? 1 : bytes);
  if (r != 0) fail("out of GPU memory allocating ", bytes, " bytes: ", error_text(d, r));
  return reinterpret_cast<void*>(p);
}

void free(void* ptr, int device) noexcept {
  if (!ptr) return;
  Driver& d = driver_state();
  if (!d.error.empty() || device < 0 || device >= d.count || !d.contexts[device]) return;
  d.cuCtxSetCurrent(d.contexts[device]);
  d.cuMemFree(dptr(ptr));  // nothing useful to do on failure while freeing
}

void copy_host_to_device(void* dst, const void* src, size_t bytes, int device) {
  if (bytes == 0) return;
  Driver& d = driver(device);
  check(d, d.cuMemcpyHtoD(dptr(dst), src, bytes), "copy to the GPU (cuMemcpyHtoD)");
}

void copy_device_to_host(void* dst, const void* src, size_t bytes, int device) {
  if (bytes == 0) return;
  Driver& d = driver(device);
  check(d, d.cuMemcpyDtoH(dst, dptr(src), bytes), "copy from the GPU (cuMemcpyDtoH)");
}

void copy_device_to_device(void* dst, const void* src, size_t bytes, int device) {
  if (bytes == 0 || dst == src) return;
  Driver& d = driver(device);
  check(d, d.cuMemcpyDtoD(dptr(dst), dptr(src), bytes), "copy on the GPU (cuMemcpyDtoD)");
}

void synchronize(int device) {
  Driver& d = driver(device);
  // Errors of kernels that already ran surface here (asynchronously launched).
  check(d, d.cuCtxSynchronize(), "synchronize (a kernel failed while running)");
}

NDArray empty(const Shape& shape, DType dtype, int device) {
  size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_bytes(dtype);
  void* p = alloc(bytes, device);
  std::shared_ptr<void> owner(p, [device](void* q) { cuda::free(q, device); });
  return NDArray::view(std::move(owner), p, shape, dtype, Device{DeviceType::CUDA, device});
}

NDArray zeros(const Shape& shape, DType dtype, int device) {
  NDArray t = empty(shape, dtype, device);
  Driver& d = driver(device);
  if (t.nbytes() > 0) check(d, d.cuMemsetD8(dptr(t.data()), 0, t.nbytes()), "cuMemsetD8");
  return t;
}

void copy(NDArray& dst, const NDArray& src) {
  if (dst.shape() != src.shape() || dst.dtype() != src.dtype())
    fail("cannot copy a ", dtype_name(src.dtype()), shape_str(src.shape()), " tensor into a ",
         dtype_name(dst.dtype()), shape_str(dst.shape()), " tensor: shapes and dtypes must match");
  bool dst_gpu = dst.device().type == DeviceType::CUDA;
  bool src_gpu = src.device().type == DeviceType::CUDA;
  if (dst_gpu && src_gpu && dst.device().id != src.device().id)
    fail("cannot copy between CUDA devices ", src.device().id, " and ", dst.device().id,
         ": move the tensor to device ", dst.device().id, " first");
  size_t n = dst.nbytes();
  if (dst_gpu && src_gpu)
    copy_device_to_device(dst.data(), src.data(), n, dst.device().id);
  else if (dst_gpu)
    copy_host_to_device(dst.data(), src.data(), n, dst.device().id);
  else if (src_gpu)
    copy_device_to_host(dst.data(), src.data(), n, src.device().id);
  else
    dst.copy_from(src);
}

NDArray to_host(const NDArray& t) {
  if (t.device().type != DeviceType::CUDA) return t;
  NDArray h = NDArray::empty(t.shape(), t.dtype());
  copy(h, t);
  return h;
}

Event::Event(int device) : device_(device) {
  Driver& d = driver(device);
  check(d, d.cuEventCreate(&event_, 0), "cuEventCreate");
}

Event::~Event() {
  Driver& d = driver_state();
  if (event_ && d.error.empty()) d.cuEventDestroy(event_);
}

void Event::record() {
  Driver& d = driver(device_);
  check(d, d.cuEventRecord(event_, nullptr), "cuEventRecord");
}

void Event::record(const Stream& stream) {
  Driver& d = driver(device_);
  check(d, d.cuEventRecord(event_, stream.handle()), "cuEventRecord");
}

// ----------------------------------------------------------------------- streams, graphs

Stream::Stream(int device) : device_(device) {
  Driver& d = driver(device);
  need(d.cuStreamCreate, "cuStreamCreate", "cannot create a CUDA stream");
  need(d.cuStreamDestroy, "cuStreamDestroy_v2", "cannot create a CUDA stream");
  need(d.cuStreamSynchronize, "cuStreamSynchronize", "cannot create a CUDA stream");
  check(d, d.cuStreamCreate(&stream_, kStreamBlocking), "cuStreamCreate");
}

Stream::~Stream() {
  Driver& d = driver_state();
  // Work still queued finishes first; the driver releases the stream after it.
  if (stream_ && release_context(d, device_)) d.cuStreamDestroy(stream_);
}

void Stream::synchronize() {
  Driver& d = driver(device_);
  check(d, d.cuStreamSynchronize(stream_), "stream synchronize (a kernel failed while running)");
}

Graph Graph::capture(Stream& stream, const std::function<void()>& work) {
  Driver& d = driver(stream.device());
  const char* capture_failed = "CUDA graph capture failed";
  need(d.cuStreamBeginCapture, "cuStreamBeginCapture_v2", capture_failed);
  need(d.cuStreamEndCapture, "cuStreamEndCapture", capture_failed);
  need(d.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", capture_failed);
  need(d.cuGraphLaunch, "cuGraphLaunch", capture_failed);
  need(d.cuGraphExecDestroy, "cuGraphExecDestroy", capture_failed);
  need(d.cuGraphDestroy, "cuGraphDestroy", capture_failed);
  CUstream s = stream.handle();
  CUresult r = d.cuStreamBeginCapture(s, kCaptureThreadLocal);
  if (r != 0) fail(capture_failed, ": cuStreamBeginCapture: ", error_text(d, r), kGraphsOff);
  // Ends the capture (whatever happened, so that the stream is usable again): the graph, or
  // null with the error in `r`.
  auto end_capture = [&] {
    CUgraph graph = nullptr;
    r = d.cuStreamEndCapture(s, &graph);
    if (r != 0 && graph) d.cuGraphDestroy(graph);
    return r == 0 ? graph : nullptr;
  };
  auto abandon = [&] {
    if (CUgraph graph = end_capture()) d.cuGraphDestroy(graph);
  };
  try {
    work();
  } catch (const Error& e) {
    abandon();
    fail(capture_failed, ": ", e.what(), kGraphsOff);
  } catch (...) {
    abandon();
    throw;
  }
  CUgraph graph = end_capture();
  if (!graph)
    fail(capture_failed, ": cuStreamEndCapture: ", r ? error_text(d, r) : "no graph", kGraphsOff);
  Graph g;
  g.device_ = stream.device();
  r = d.cuGraphInstantiateWithFlags(&g.exec_, graph, 0);
  d.cuGraphDestroy(graph);  // the executable graph is a snapshot: it does not need the graph
  if (r != 0) {
    g.exec_ = nullptr;
    fail("CUDA graph instantiation failed: cuGraphInstantiateWithFlags: ", error_text(d, r),
         kGraphsOff);
  }
  return g;
}

Graph::~Graph() { reset(); }

Graph::Graph(Graph&& other) noexcept : exec_(other.exec_), device_(other.device_) {
  other.exec_ = nullptr;
}

Graph& Graph::operator=(Graph&& other) noexcept {
  if (this != &other) {
    reset();
    exec_ = other.exec_;
    device_ = other.device_;
    other.exec_ = nullptr;
  }
  return *this;
}

void Graph::reset() noexcept {
  Driver& d = driver_state();
  if (exec_ && release_context(d, device_) && d.cuGraphExecDestroy) d.cuGraphExecDestroy(exec_);
  exec_ = nullptr;
}

void Graph::launch(Stream& stream) {
  EMBER_CHECK(exec_ != nullptr, "launch of an empty CUDA graph (capture it first)");
  Driver& d = driver(device_);
  check(d, d.cuGraphLaunch(exec_, stream.handle()), "graph launch (cuGraphLaunch)");
}

float Event::elapsed_since(const Event& start) {
  Driver& d = driver(device_);
  check(d, d.cuEventSynchronize(event_), "cuEventSynchronize (a kernel failed while running)");
  float ms = 0;
  check(d, d.cuEventElapsedTime(&ms, start.event_, event_), "cuEventElapsedTime");
  return ms;
}

// ----------------------------------------------------------------- modules and launches

void* module_load(const std::string& ptx, const std::string& built_for, int device) {
  Driver& d = driver(device);
  // The JIT's error log says why PTX does not load (an architecture newer than the GPU).
  char log[4096] = {0};
  int options[] = {5 /*CU_JIT_ERROR_LOG_BUFFER*/, 6 /*CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES*/};
  void* values[] = {log, reinterpret_cast<void*>(sizeof(log) - 1)};
  void* mod = nullptr;
  CUresult r = d.cuModuleLoadDataEx(&mod, ptx.c_str(), 2, options, values);
  if (r != 0) {
    std::string gpu = device_arch(device);
    fail("cannot load the PTX (built for ", built_for, ") on CUDA device ", device, " (", gpu,
         "): ", error_text(d, r), log[0] ? std::string(": ") + log : std::string(),
         "; build with target=\"cuda -arch=", gpu, "\"");
  }
  return mod;
}

void module_unload(void* module, int device) noexcept {
  Driver& d = driver_state();
  if (!module || !d.error.empty() || device < 0 || device >= d.count || !d.contexts[device]) return;
  d.cuCtxSetCurrent(d.contexts[device]);
  d.cuModuleUnload(module);
}

void* module_function(void* module, const std::string& name, int device) {
  Driver& d = driver(device);
  void* fn = nullptr;
  CUresult r = d.cuModuleGetFunction(&fn, module, name.c_str());
  if (r != 0) fail("kernel '", name, "' is missing from its PTX module: ", error_text(d, r));
  return fn;
}

void launch_kernel(void* function, const LaunchDims& dims, const std::vector<void*>& args,
                   const std::string& name, int device, void* stream) {
  Driver& d = driver(device);
  // cuLaunchKernel takes the address of each parameter value.
  std::vector<void*> values = args;
  std::vector<void*> params;
  for (auto& v : values) params.push_back(&v);
  auto u = [](int64_t x) { return static_cast<unsigned>(x); };
  CUresult r = d.cuLaunchKernel(function, u(dims.grid[0]), u(dims.grid[1]), u(dims.grid[2]),
                                u(dims.block[0]), u(dims.block[1]), u(dims.block[2]), 0, stream,
                                params.data(), nullptr);
  if (r != 0)
    fail("launch of kernel '", name, "' (grid ", dims.grid[0], "x", dims.grid[1], "x", dims.grid[2],
         ", block ", dims.block[0], "x", dims.block[1], "x", dims.block[2],
         ") failed: ", error_text(d, r));
}

}  // namespace ember::runtime::cuda
