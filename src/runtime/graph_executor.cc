#include "ember/runtime/graph_executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "ember/runtime/cuda.h"
#include "ember/runtime/kernel_error.h"
#include "ember/support/checked_math.h"
#include "ember/support/error.h"

namespace ember::runtime {

namespace {
using Clock = std::chrono::steady_clock;

constexpr size_t kAlignment = 64;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string type_str(DType dtype, const Shape& shape) {
  return dtype_name(dtype) + shape_str(shape);
}

size_t value_bytes(const ExecGraph::Value& v) {
  return static_cast<size_t>(checked_nbytes(v.shape, dtype_bytes(v.dtype), "a model value"));
}

// "(x, y)": the input names, for error messages.
std::string names_str(const std::vector<std::string>& names) {
  std::string s = "(";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s + ")";
}

// Python's format(s, "^width"): extra padding goes to the right.
std::string center(const std::string& s, size_t width) {
  if (s.size() >= width) return s;
  size_t pad = width - s.size(), left = pad / 2;
  return std::string(left, ' ') + s + std::string(pad - left, ' ');
}

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, x);
  return buf;
}

// How a value gets its memory.
enum class Role { Intermediate, Input, Param, View, Output };

// Best-fit reuse of byte blocks: the executor's intermediate memory plan. Blocks are laid
// out back to back in one pool, each at a 64-byte aligned offset.
class BlockPlanner {
 public:
  int acquire(size_t bytes) {
    // bytes < 2^63 (value_bytes), so rounding up cannot wrap around.
    size_t need = std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (sizes_[*it] >= need && (best == free_.end() || sizes_[*it] < sizes_[*best])) best = it;
    if (best != free_.end()) {
      int block = *best;
      free_.erase(best);
      return block;
    }
    sizes_.push_back(need);
    return static_cast<int>(sizes_.size()) - 1;
  }
  void release(int block) { free_.push_back(block); }
  std::vector<size_t> offsets() const {
    std::vector<size_t> off(sizes_.size());
    size_t at = 0;
    for (size_t b = 0; b < sizes_.size(); ++b) off[b] = at, at += sizes_[b];
    return off;
  }
  size_t total() const {
    int64_t sum = 0;
    for (size_t s : sizes_)
      sum = checked_add(sum, static_cast<int64_t>(s), "the model's intermediate memory");
    return static_cast<size_t>(sum);
  }

 private:
  std::vector<size_t> sizes_;
  std::vector<int> free_;
};
}  // namespace

GraphExecutor::GraphExecutor(std::shared_ptr<const ExecGraph> graph, std::shared_ptr<Module> module)
    : graph_(std::move(graph)), module_(std::move(module)) {
  EMBER_CHECK(graph_ != nullptr, "GraphExecutor needs a graph");
  // A CUDA module: load it first, so a machine without a GPU fails here, clearly.
  cuda_ = std::dynamic_pointer_cast<cuda::CudaModule>(module_);
  if (cuda_) cuda_->load(0);
  auto zeros = [&](const Shape& shape, DType dtype) {
    return cuda_ ? cuda::zeros(shape, dtype) : Tensor::zeros(shape, dtype);
  };
  const ExecGraph& g = *graph_;
  const int n = static_cast<int>(g.values.size());
  auto check_id = [&](int v, const std::string& where) {
    EMBER_CHECK(v >= 0 && v < n, where, " refers to value ", v, " but the graph has ", n,
                " values");
  };

  // 1. Roles: who owns each value's memory.
  std::vector<Role> role(n, Role::Intermediate);
  for (const auto& in : g.inputs) {
    check_id(in.value, "input '" + in.name + "'");
    role[in.value] = Role::Input;
  }
  for (const auto& p : g.params) {
    check_id(p.value, "param '" + p.name + "'");
    const ExecGraph::Value& v = g.values[p.value];
    if (!p.data.defined() || p.data.shape() != v.shape || p.data.dtype() != v.dtype)
      fail("parameter '", p.name, "' holds ",
           p.data.defined() ? type_str(p.data.dtype(), p.data.shape()) : "no data",
           " but the graph expects ", type_str(v.dtype, v.shape),
           ": the parameters do not belong to this graph; rebuild or reload the model");
    EMBER_CHECK(role[p.value] == Role::Intermediate, "value ", p.value, " is a param twice");
    role[p.value] = Role::Param;
  }
  std::vector<int> view_src(n, -1);
  for (const auto& vw : g.views) {
    check_id(vw.dst, "view dst");
    check_id(vw.src, "view src");
    EMBER_CHECK(role[vw.dst] == Role::Intermediate, "view dst ", vw.dst,
                " is already an input, param or view");
    const auto &d = g.values[vw.dst], &s = g.values[vw.src];
    EMBER_CHECK(d.dtype == s.dtype && shape_numel(d.shape) == shape_numel(s.shape), "view ", vw.dst,
                " ", type_str(d.dtype, d.shape), " of value ", vw.src, " ",
                type_str(s.dtype, s.shape), " changes the byte size");
    role[vw.dst] = Role::View;
    view_src[vw.dst] = vw.src;
  }
  // A chain of views shares the memory of its first non-view value (its root).
  std::vector<int> root(n);
  for (int v = 0; v < n; ++v) {
    int r = v, steps = 0;
    while (view_src[r] >= 0) {
      r = view_src[r];
      EMBER_CHECK(++steps <= n, "views form a cycle through value ", v);
    }
    root[v] = r;
  }
  // An output (or the root of an output view) keeps its own buffer: later kernels must not
  // overwrite it, and the caller reads it after run().
  for (int o : g.outputs) {
    check_id(o, "output");
    if (role[root[o]] == Role::Intermediate) role[root[o]] = Role::Output;
    output_is_param_.push_back(role[root[o]] == Role::Param);
  }

  // 2. Lifetimes of intermediate roots, in kernel steps.
  std::vector<int> first(n, -1), last(n, -1);
  for (size_t k = 0; k < g.kernels.size(); ++k) {
    const auto& kern = g.kernels[k];
    EMBER_CHECK(kern.num_inputs >= 0 && kern.num_inputs <= static_cast<int>(kern.args.size()),
                "kernel '", kern.name, "' has num_inputs ", kern.num_inputs, " of ",
                kern.args.size(), " args");
    for (int a : kern.args) {
      check_id(a, "kernel '" + kern.name + "'");
      int r = root[a];
      if (first[r] < 0) first[r] = static_cast<int>(k);
      last[r] = static_cast<int>(k);
    }
  }

  // 3. Plan: at each kernel, first take blocks for values it touches for the first time
  // (its outputs), then free the values it was the last to touch. Allocating before
  // releasing means no kernel's output shares memory with its input.
  BlockPlanner planner;
  std::vector<int> block(n, -1);
  for (size_t k = 0; k < g.kernels.size(); ++k) {
    const auto& args = g.kernels[k].args;
    for (int a : args) {
      int r = root[a];
      if (role[r] == Role::Intermediate && first[r] == static_cast<int>(k) && block[r] < 0)
        block[r] = planner.acquire(value_bytes(g.values[r]));
    }
    for (int a : args) {
      int r = root[a];
      if (role[r] == Role::Intermediate && last[r] == static_cast<int>(k) && block[r] >= 0) {
        planner.release(block[r]);
        last[r] = -1;  // released once even when the value is several args of this kernel
      }
    }
  }
  pool_bytes_ = planner.total();
  std::vector<size_t> offsets = planner.offsets();
  Shape pool_shape{static_cast<int64_t>(pool_bytes_)};
  Tensor pool =
      cuda_ ? cuda::empty(pool_shape, DType::Bool) : Tensor::empty(pool_shape, DType::Bool);
  auto* pool_data = static_cast<char*>(pool.data());

  // 4. Tensors: roots first, then views over their roots' memory.
  tensors_.resize(n);
  for (const auto& in : g.inputs)
    tensors_[in.value] = zeros(g.values[in.value].shape, g.values[in.value].dtype);
  for (const auto& p : g.params) {
    if (cuda_) {
      tensors_[p.value] = cuda::empty(p.data.shape(), p.data.dtype());
      cuda::copy(tensors_[p.value], p.data);
    } else {
      tensors_[p.value] = p.data;
    }
  }
  for (int v = 0; v < n; ++v) {
    const ExecGraph::Value& val = g.values[v];
    if (role[v] == Role::Output) {
      tensors_[v] = zeros(val.shape, val.dtype);
    } else if (role[v] == Role::Intermediate) {
      // A value no kernel touches gets a small buffer of its own rather than pool space.
      tensors_[v] = block[v] >= 0 ? Tensor::view(pool.owner(), pool_data + offsets[block[v]],
                                                 val.shape, val.dtype, pool.device())
                                  : zeros(val.shape, val.dtype);
    }
  }
  for (int v = 0; v < n; ++v) {
    if (role[v] != Role::View) continue;
    const Tensor& base = tensors_[root[v]];
    tensors_[v] = Tensor::view(base.owner(), base.data(), g.values[v].shape, g.values[v].dtype,
                               base.device());
  }

  // 5. Kernels and their argument pointers, resolved once; run_bound re-points the slots
  // of input and output roots.
  EMBER_CHECK(module_ != nullptr || g.kernels.empty(), "GraphExecutor needs a module");
  root_ = root;
  slots_.resize(n);
  for (int v = 0; v < n; ++v) root_is_output_.push_back(role[v] == Role::Output);
  for (const auto& kern : g.kernels) {
    std::vector<void*> ptrs;
    for (int a : kern.args) {
      if (role[root[a]] == Role::Input || role[root[a]] == Role::Output)
        slots_[root[a]].push_back({static_cast<int>(args_.size()), static_cast<int>(ptrs.size())});
      ptrs.push_back(tensors_[a].data());
    }
    args_.push_back(std::move(ptrs));
    if (cuda_) {
      if (!cuda_->kernels().count(kern.func))
        fail("kernel '", kern.name, "': the CUDA module has no function '", kern.func,
             "'; the module does not match the graph, rebuild the model");
      continue;
    }
    KernelFn fn = module_->get_function(kern.func);
    if (!fn)
      fail("kernel '", kern.name, "': the module has no function '", kern.func,
           "'; the module does not match the graph, rebuild the model");
    fns_.push_back(fn);
  }
}

int GraphExecutor::num_inputs() const { return static_cast<int>(graph_->inputs.size()); }

int GraphExecutor::num_outputs() const { return static_cast<int>(graph_->outputs.size()); }

std::vector<std::string> GraphExecutor::input_names() const {
  std::vector<std::string> names;
  for (const auto& in : graph_->inputs) names.push_back(in.name);
  return names;
}

int GraphExecutor::input_index(const std::string& name) const {
  for (size_t i = 0; i < graph_->inputs.size(); ++i)
    if (graph_->inputs[i].name == name) return static_cast<int>(i);
  if (graph_->inputs.empty()) fail("unknown input '", name, "': the model has no inputs");
  fail("unknown input '", name, "': the model's inputs are ", names_str(input_names()));
}

void GraphExecutor::set_input(int index, const Tensor& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  set_input_locked(index, value);
}

void GraphExecutor::set_input_locked(int index, const Tensor& value) {
  check_input(index, value);
  cuda::copy(tensors_[graph_->inputs[index].value], value);  // host or device, either way
}

void GraphExecutor::check_input(int index, const Tensor& value) const {
  if (index < 0 || index >= num_inputs())
    fail("input index ", index, " out of range: the model has ", num_inputs(), " inputs ",
         names_str(input_names()));
  const ExecGraph::Input& in = graph_->inputs[index];
  const ExecGraph::Value& expected = graph_->values[in.value];
  if (!value.defined())
    fail("input '", in.name, "' was given an undefined tensor: pass a ",
         type_str(expected.dtype, expected.shape), " tensor");
  if (value.shape() != expected.shape || value.dtype() != expected.dtype)
    fail("input '", in.name, "' expects ", type_str(expected.dtype, expected.shape),
         " but was given ", type_str(value.dtype(), value.shape()),
         ": pass a tensor of that shape and dtype (or rebuild the model for the new shape)");
}

void GraphExecutor::set_input(const std::string& name, const Tensor& value) {
  set_input(input_index(name), value);
}

void GraphExecutor::launch_all() {
  for (size_t k = 0; k < args_.size(); ++k) cuda_->launch(graph_->kernels[k].func, args_[k]);
}

void GraphExecutor::run() {
  std::lock_guard<std::mutex> lock(mutex_);
  run_locked();
}

void GraphExecutor::run_locked() {
  if (cuda_) {
    launch_all();
    cuda::synchronize();
    return;
  }
  KernelErrors errors;
  KernelErrorScope scope(&errors);
  for (size_t k = 0; k < fns_.size(); ++k) {
    fns_[k](args_[k].data());
    check_kernel(errors, k);
  }
}

void GraphExecutor::check_kernel(KernelErrors& errors, size_t k) const {
  if (errors.failed()) fail(errors.take_message(graph_->kernels[k].name));
}

std::vector<Tensor> GraphExecutor::run(const std::vector<Tensor>& inputs) {
  if (static_cast<int>(inputs.size()) != num_inputs())
    fail("run was given ", inputs.size(), " input(s) but the model has ", num_inputs(), ": ",
         names_str(input_names()), "; pass one tensor per input, in this order");
  std::lock_guard<std::mutex> lock(mutex_);
  for (int i = 0; i < num_inputs(); ++i) set_input_locked(i, inputs[i]);
  run_locked();
  std::vector<Tensor> outputs;
  for (int o : graph_->outputs) outputs.push_back(tensors_[o].clone());
  return outputs;
}

void GraphExecutor::point_slots(int root, void* data) {
  for (auto [kernel, arg] : slots_[root]) args_[kernel][arg] = data;
}

std::vector<Tensor> GraphExecutor::run_bound(const std::vector<Tensor>& inputs) {
  if (cuda_) fail("run_bound runs CPU models only; use run(inputs) on a CUDA model");
  if (static_cast<int>(inputs.size()) != num_inputs())
    fail("run_bound was given ", inputs.size(), " input(s) but the model has ", num_inputs(), ": ",
         names_str(input_names()), "; pass one tensor per input, in this order");
  for (int i = 0; i < num_inputs(); ++i) {
    check_input(i, inputs[i]);
    if (inputs[i].device().type != DeviceType::CPU)
      fail("run_bound: input '", graph_->inputs[i].name, "' is not on the CPU");
  }
  const ExecGraph& g = *graph_;
  // Fresh memory for every output root (several outputs may share one through views).
  std::vector<Tensor> fresh(g.values.size());
  for (int o : g.outputs) {
    int r = root_[o];
    if (root_is_output_[r] && !fresh[r].defined())
      fresh[r] = Tensor::empty(g.values[r].shape, g.values[r].dtype);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (int i = 0; i < num_inputs(); ++i) point_slots(g.inputs[i].value, inputs[i].data());
  for (size_t r = 0; r < fresh.size(); ++r)
    if (fresh[r].defined()) point_slots(static_cast<int>(r), fresh[r].data());
  run_locked();
  std::vector<Tensor> outputs;
  for (int o : g.outputs) {
    int r = root_[o];
    if (fresh[r].defined()) {
      outputs.push_back(
          Tensor::view(fresh[r].owner(), fresh[r].data(), g.values[o].shape, g.values[o].dtype));
      continue;
    }
    int input = -1;  // an output that is (a view of) an input: copy the caller's tensor
    for (int i = 0; i < num_inputs(); ++i)
      if (g.inputs[i].value == r) input = i;
    const Tensor& src = input >= 0 ? inputs[input] : tensors_[r];
    Tensor copy = src.clone();
    outputs.push_back(
        Tensor::view(copy.owner(), copy.data(), g.values[o].shape, g.values[o].dtype));
  }
  // Back to the executor's own buffers for run() and get_output().
  for (int i = 0; i < num_inputs(); ++i)
    point_slots(g.inputs[i].value, tensors_[g.inputs[i].value].data());
  for (size_t r = 0; r < fresh.size(); ++r)
    if (fresh[r].defined()) point_slots(static_cast<int>(r), tensors_[r].data());
  return outputs;
}

Device GraphExecutor::device() const { return cuda_ ? Device{DeviceType::CUDA, 0} : Device{}; }

Tensor GraphExecutor::get_output(int index) const {
  if (index < 0 || index >= num_outputs())
    fail("output index ", index, " out of range: the model has ", num_outputs(), " outputs");
  const Tensor& out = tensors_[graph_->outputs[index]];
  // A parameter is shared by every executor of the model: never hand out a writable alias.
  return output_is_param_[index] ? out.clone() : out;
}

Tensor GraphExecutor::get_input(int index) const {
  if (index < 0 || index >= num_inputs())
    fail("input index ", index, " out of range: the model has ", num_inputs(), " inputs ",
         names_str(input_names()));
  return tensors_[graph_->inputs[index].value];
}

BenchmarkResult GraphExecutor::benchmark(int number, int repeat, int warmup) {
  if (number < 1 || repeat < 1 || warmup < 0)
    fail("benchmark(number=", number, ", repeat=", repeat, ", warmup=", warmup,
         "): number and repeat must be at least 1 and warmup at least 0");
  std::lock_guard<std::mutex> lock(mutex_);
  for (int i = 0; i < warmup; ++i) run_locked();
  BenchmarkResult r;
  for (int i = 0; i < repeat; ++i) {
    if (cuda_) {  // GPU time between events, launches queued back to back
      cuda::Event start, stop;
      start.record();
      for (int j = 0; j < number; ++j) launch_all();
      stop.record();
      r.results_ms.push_back(stop.elapsed_since(start) / number);
      continue;
    }
    auto t0 = Clock::now();
    for (int j = 0; j < number; ++j) run_locked();
    r.results_ms.push_back(ms_since(t0) / number);
  }
  // Statistics as numpy computes them (population std, median of an even count averaged).
  std::vector<double> sorted = r.results_ms;
  std::sort(sorted.begin(), sorted.end());
  size_t m = sorted.size();
  r.min = sorted.front();
  r.max = sorted.back();
  r.median = m % 2 ? sorted[m / 2] : (sorted[m / 2 - 1] + sorted[m / 2]) / 2;
  double sum = 0;
  for (double x : sorted) sum += x;
  r.mean = sum / m;
  double var = 0;
  for (double x : sorted) var += (x - r.mean) * (x - r.mean);
  r.std = std::sqrt(var / m);
  return r;
}

std::string BenchmarkResult::str() const {
  // TVM's layout: every cell centred in 12 characters, cells separated by one space.
  std::string s = "Execution time summary:\n";
  const char* headers[] = {"mean (ms)", "median (ms)", "max (ms)", "min (ms)", "std (ms)"};
  double values[] = {mean, median, max, min, std};
  for (int i = 0; i < 5; ++i) s += (i ? " " : "") + center(headers[i], 12);
  s += "\n";
  for (int i = 0; i < 5; ++i) s += (i ? " " : "") + center(fixed(values[i], 4), 12);
  return s;
}

std::vector<KernelProfile> GraphExecutor::profile(int repeat) {
  if (repeat < 1) fail("profile(repeat=", repeat, "): repeat must be at least 1");
  std::lock_guard<std::mutex> lock(mutex_);
  run_locked();  // warm up: first-touch page faults and caches should not count against kernel 0
  const size_t num_kernels = graph_->kernels.size();
  std::vector<double> total(num_kernels, 0.0);
  for (int r = 0; r < repeat; ++r) {
    if (cuda_) {
      for (size_t k = 0; k < num_kernels; ++k) {
        cuda::Event start, stop;
        start.record();
        cuda_->launch(graph_->kernels[k].func, args_[k]);
        stop.record();
        total[k] += stop.elapsed_since(start);
      }
      continue;
    }
    KernelErrors errors;
    KernelErrorScope scope(&errors);
    for (size_t k = 0; k < fns_.size(); ++k) {
      auto t0 = Clock::now();
      fns_[k](args_[k].data());
      total[k] += ms_since(t0);
      check_kernel(errors, k);
    }
  }
  double all = 0;
  for (double t : total) all += t / repeat;
  std::vector<KernelProfile> rows;
  for (size_t k = 0; k < num_kernels; ++k) {
    const auto& kern = graph_->kernels[k];
    KernelProfile p;
    p.name = kern.name;
    p.func = kern.func;
    p.mean_ms = total[k] / repeat;
    p.percent = all > 0 ? 100.0 * p.mean_ms / all : 0.0;
    for (int a : kern.args) p.shapes.push_back(graph_->values[a].shape);
    rows.push_back(std::move(p));
  }
  return rows;
}

std::string GraphExecutor::profile_table(const std::vector<KernelProfile>& p) {
  // Cells as text first, then pad each column to its widest cell: text left, numbers right.
  std::vector<std::vector<std::string>> rows = {{"Name", "Func", "Time(ms)", "Percent", "Shapes"}};
  double total_ms = 0, total_pct = 0;
  for (const KernelProfile& k : p) {
    std::string shapes;
    for (size_t i = 0; i < k.shapes.size(); ++i) shapes += (i ? ", " : "") + shape_str(k.shapes[i]);
    rows.push_back({k.name, k.func, fixed(k.mean_ms, 4), fixed(k.percent, 2), shapes});
    total_ms += k.mean_ms;
    total_pct += k.percent;
  }
  rows.push_back({"Total", "", fixed(total_ms, 4), fixed(total_pct, 2), ""});
  size_t width[5] = {0, 0, 0, 0, 0};
  for (const auto& row : rows)
    for (int c = 0; c < 5; ++c) width[c] = std::max(width[c], row[c].size());
  std::ostringstream os;
  for (const auto& row : rows) {
    std::string line;
    for (int c = 0; c < 5; ++c) {
      std::string pad(width[c] - row[c].size(), ' ');
      bool numeric = c == 2 || c == 3;
      line += (c ? "  " : "") + (numeric ? pad + row[c] : row[c] + pad);
    }
    line.erase(line.find_last_not_of(' ') + 1);  // no trailing blanks from the last column
    os << line << "\n";
  }
  return os.str();
}

}  // namespace ember::runtime
