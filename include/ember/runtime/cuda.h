#pragma once
/// The CUDA device as the runtime's users see it: whether a GPU is present, device tensors,
/// copies between host and device, streams, event timing, CUDA graphs, and the module of PTX
/// kernels that a target="cuda" build produces. The driver API is loaded with
/// dlopen("libcuda.so.1") at first use, so neither the build nor a CPU-only machine needs CUDA;
/// every call that needs a GPU throws a clear ember::Error when there is none.
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ember/runtime/module.h"
#include "ember/runtime/ndarray.h"

namespace ember::runtime::cuda {

/// True when libcuda.so.1 loads and reports at least one GPU (never throws).
bool available();
/// Number of GPUs (0 without a driver; never throws).
int device_count();
/// "NVIDIA H100 80GB HBM3 (sm_90)"; throws the no-driver error.
std::string device_name(int device = 0);
/// Compute capability as "sm_XY".
std::string device_arch(int device = 0);

/// An uninitialised (or zeroed) tensor in the memory of GPU `device`.
NDArray empty(const Shape& shape, DType dtype, int device = 0);
NDArray zeros(const Shape& shape, DType dtype, int device = 0);
/// Copies between tensors of the same shape and dtype on any devices (CPU or CUDA).
void copy(NDArray& dst, const NDArray& src);
/// A CPU copy of a tensor that may live on a GPU (the tensor itself when on the CPU).
NDArray to_host(const NDArray& t);
/// Waits for every kernel and copy queued on `device`; errors of kernels surface here.
void synchronize(int device = 0);

/// A stream of GPU `device`: kernels, events and graph replays queued on it run in order. It
/// is a blocking stream (CU_STREAM_DEFAULT), so it stays ordered with the copies that
/// cuda::copy makes on the default stream (set_input before a run, get_output after it).
class Stream {
 public:
  explicit Stream(int device = 0);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  /// Waits for everything queued on the stream; errors of kernels that ran surface here.
  void synchronize();
  void* handle() const { return stream_; }  // the CUstream
  int device() const { return device_; }

 private:
  void* stream_ = nullptr;
  int device_;
};

/// An executable CUDA graph: the launches that one piece of work queues on a stream, recorded
/// once and replayed as one launch. The driver functions it needs are looked up at first use,
/// so an older driver fails only here, with an ember::Error naming the function.
class Graph {
 public:
  Graph() = default;
  /// Records what `work` queues on `stream` (nothing runs while recording; the capture is
  /// local to the calling thread) and instantiates it. "CUDA graph capture failed: ..." (or
  /// "... instantiation failed") ember::Error when the driver lacks graphs, `work` throws an
  /// ember::Error, or the driver refuses; the stream is usable again after a failure.
  static Graph capture(Stream& stream, const std::function<void()>& work);
  ~Graph();
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  bool defined() const { return exec_ != nullptr; }
  /// Queues one replay of the recorded launches on `stream`.
  void launch(Stream& stream);

 private:
  void reset() noexcept;
  void* exec_ = nullptr;  // the CUgraphExec
  int device_ = 0;
};

/// Timing with driver events (milliseconds between two records).
class Event {
 public:
  explicit Event(int device = 0);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  /// Records on the default stream.
  void record();
  /// Records on `stream` (after what is queued there).
  void record(const Stream& stream);
  /// Milliseconds from `start` to this event (waits for this event to complete).
  float elapsed_since(const Event& start);

 private:
  void* event_ = nullptr;
  int device_;
};

/// Launch configuration of one kernel: the extents of its GPU-bound loops.
struct LaunchDims {
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  int num_params = 0;
  std::string symbol;  // the PTX entry's name (the kernel name made a valid identifier)
};

/// A module of PTX kernels. Construction needs no GPU (it only keeps the text); load()
/// (called by the executor, or by launch) loads the PTX into the current GPU.
class CudaModule final : public Module {
 public:
  CudaModule(std::string ptx, std::string ll, std::string arch,
             std::map<std::string, LaunchDims> kernels);
  ~CudaModule() override;

  /// GPU kernels have no host entry point: always an ember::Error pointing at launch().
  KernelFn get_function(const std::string& name) const override;
  std::string type_key() const override { return "ptx"; }
  std::string get_source(const std::string& format) const override;

  const std::map<std::string, LaunchDims>& kernels() const { return kernels_; }
  const std::string& arch() const { return arch_; }
  /// Loads the PTX on `device` (once); the no-driver / wrong-architecture errors come here.
  void load(int device = 0);
  /// Launches kernel `name` on `stream` (the default stream when null); `args` are device
  /// pointers, one per kernel buffer. ember::Error naming the kernel when the launch fails.
  void launch(const std::string& name, const std::vector<void*>& args,
              const Stream* stream = nullptr);

 private:
  std::string ptx_, ll_, arch_;
  std::map<std::string, LaunchDims> kernels_;
  std::mutex mutex_;
  void* module_ = nullptr;  // CUmodule once loaded
  int device_ = 0;
  std::map<std::string, void*> functions_;  // CUfunction per kernel
};

}  // namespace ember::runtime::cuda
