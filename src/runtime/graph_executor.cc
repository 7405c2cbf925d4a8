#include "ember/runtime/graph_executor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "ember/runtime/cuda.h"
#include "ember/runtime/memory_plan.h"
#include "ember/support/error.h"
#include "launcher.h"

namespace ember::runtime {

namespace {

std::string type_str(DType dtype, const Shape& shape) {
  return dtype_name(dtype) + shape_str(shape);
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

}  // namespace

// The plan says where each value's memory is (memory_plan.h), the launcher takes it on the
// device and runs the kernels (launcher.h); the executor binds the two.
GraphExecutor::GraphExecutor(std::shared_ptr<const ExecGraph> graph, std::shared_ptr<Module> module,
                             const ExecutorOptions& options)
    : graph_(std::move(graph)) {
  EMBER_CHECK(graph_ != nullptr, "GraphExecutor needs a graph");
  launcher_ = make_launcher(graph_, module, options);
  const MemoryPlan plan = plan_memory(*graph_);
  pool_bytes_ = plan.pool_bytes;
  output_is_param_ = plan.output_is_param;
  root_ = plan.root;
  allocate(plan);
  bind_args(plan);
}

GraphExecutor::~GraphExecutor() = default;

void GraphExecutor::allocate(const MemoryPlan& plan) {
  const ExecGraph& g = *graph_;
  const int n = static_cast<int>(g.values.size());
  NDArray pool = launcher_->alloc({static_cast<int64_t>(plan.pool_bytes)}, DType::Bool, false);
  auto* pool_data = static_cast<char*>(pool.data());
  // Roots first, then views over their roots' memory.
  tensors_.resize(n);
  for (const auto& p : g.params) tensors_[p.value] = launcher_->place_param(p.data);
  for (int v = 0; v < n; ++v) {
    const ExecGraph::Value& val = g.values[v];
    const Role role = plan.role[v];
    if (role == Role::Input || role == Role::Output ||
        (role == Role::Intermediate && plan.offset[v] < 0)) {
      // (A value no kernel touches gets a small buffer of its own rather than pool space.)
      tensors_[v] = launcher_->alloc(val.shape, val.dtype, true);
    } else if (role == Role::Intermediate) {
      tensors_[v] = NDArray::view(pool.owner(), pool_data + plan.offset[v], val.shape, val.dtype,
                                  pool.device());
    }
  }
  for (int v = 0; v < n; ++v) {
    if (plan.role[v] != Role::View) continue;
    const NDArray& base = tensors_[plan.root[v]];
    tensors_[v] = NDArray::view(base.owner(), base.data(), g.values[v].shape, g.values[v].dtype,
                                base.device());
  }
}

// The kernels' argument pointers, resolved once; run_bound re-points the slots of input and
// output roots.
void GraphExecutor::bind_args(const MemoryPlan& plan) {
  const int n = static_cast<int>(graph_->values.size());
  slots_.resize(n);
  for (int v = 0; v < n; ++v) root_is_output_.push_back(plan.role[v] == Role::Output);
  for (const auto& kern : graph_->kernels) {
    std::vector<void*> ptrs;
    for (int a : kern.args) {
      const Role role = plan.role[plan.root[a]];
      if (role == Role::Input || role == Role::Output)
        slots_[plan.root[a]].push_back(
            {static_cast<int>(args_.size()), static_cast<int>(ptrs.size())});
      ptrs.push_back(tensors_[a].data());
    }
    args_.push_back(std::move(ptrs));
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

void GraphExecutor::set_input(int index, const NDArray& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  set_input_locked(index, value);
}

void GraphExecutor::set_input_locked(int index, const NDArray& value) {
  check_input(index, value);
  cuda::copy(tensors_[graph_->inputs[index].value], value);  // host or device, either way
}

void GraphExecutor::check_input(int index, const NDArray& value) const {
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

void GraphExecutor::set_input(const std::string& name, const NDArray& value) {
  set_input(input_index(name), value);
}

void GraphExecutor::run() {
  std::lock_guard<std::mutex> lock(mutex_);
  run_locked();
}

void GraphExecutor::run_locked() { launcher_->run(args_); }

std::vector<NDArray> GraphExecutor::run(const std::vector<NDArray>& inputs) {
  if (static_cast<int>(inputs.size()) != num_inputs())
    fail("run was given ", inputs.size(), " input(s) but the model has ", num_inputs(), ": ",
         names_str(input_names()), "; pass one tensor per input, in this order");
  std::lock_guard<std::mutex> lock(mutex_);
  for (int i = 0; i < num_inputs(); ++i) set_input_locked(i, inputs[i]);
  run_locked();
  std::vector<NDArray> outputs;
  for (int o : graph_->outputs) outputs.push_back(tensors_[o].clone());
  return outputs;
}

void GraphExecutor::point_slots(int root, void* data) {
  for (auto [kernel, arg] : slots_[root]) args_[kernel][arg] = data;
}

std::vector<NDArray> GraphExecutor::run_bound(const std::vector<NDArray>& inputs) {
  if (device().type != DeviceType::CPU)
    fail("run_bound runs CPU models only; use run(inputs) on a CUDA model");
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
  std::vector<NDArray> fresh(g.values.size());
  for (int o : g.outputs) {
    int r = root_[o];
    if (root_is_output_[r] && !fresh[r].defined())
      fresh[r] = NDArray::empty(g.values[r].shape, g.values[r].dtype);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (int i = 0; i < num_inputs(); ++i) point_slots(g.inputs[i].value, inputs[i].data());
  for (size_t r = 0; r < fresh.size(); ++r)
    if (fresh[r].defined()) point_slots(static_cast<int>(r), fresh[r].data());
  run_locked();
  std::vector<NDArray> outputs;
  for (int o : g.outputs) {
    int r = root_[o];
    if (fresh[r].defined()) {
      outputs.push_back(
          NDArray::view(fresh[r].owner(), fresh[r].data(), g.values[o].shape, g.values[o].dtype));
      continue;
    }
    int input = -1;  // an output that is (a view of) an input: copy the caller's tensor
    for (int i = 0; i < num_inputs(); ++i)
      if (g.inputs[i].value == r) input = i;
    const NDArray& src = input >= 0 ? inputs[input] : tensors_[r];
    NDArray copy = src.clone();
    outputs.push_back(
        NDArray::view(copy.owner(), copy.data(), g.values[o].shape, g.values[o].dtype));
  }
  // Back to the executor's own buffers for run() and get_output().
  for (int i = 0; i < num_inputs(); ++i)
    point_slots(g.inputs[i].value, tensors_[g.inputs[i].value].data());
  for (size_t r = 0; r < fresh.size(); ++r)
    if (fresh[r].defined()) point_slots(static_cast<int>(r), tensors_[r].data());
  return outputs;
}

Device GraphExecutor::device() const { return launcher_->device(); }

bool GraphExecutor::cuda_graph() const { return launcher_->cuda_graph(); }

NDArray GraphExecutor::get_output(int index) const {
  if (index < 0 || index >= num_outputs())
    fail("output index ", index, " out of range: the model has ", num_outputs(), " outputs");
  const NDArray& out = tensors_[graph_->outputs[index]];
  // A parameter is shared by every executor of the model: never hand out a writable alias.
  return output_is_param_[index] ? out.clone() : out;
}

NDArray GraphExecutor::get_input(int index) const {
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
  for (int i = 0; i < repeat; ++i) r.results_ms.push_back(launcher_->time_runs(args_, number));
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
  for (int r = 0; r < repeat; ++r) launcher_->time_kernels(args_, total);
  double all = 0;
  for (double t : total) all += t / repeat;
  std::vector<KernelProfile> rows;
  for (size_t k = 0; k < num_kernels; ++k) {
    const auto& kern = graph_->kernels[k];
    KernelProfile p;
    p.name = kern.name;
    p.func = kern.func;
    p.schedule = schedule_label(kern);
    p.mean_ms = total[k] / repeat;
    p.percent = all > 0 ? 100.0 * p.mean_ms / all : 0.0;
    for (int a : kern.args) p.shapes.push_back(graph_->values[a].shape);
    rows.push_back(std::move(p));
  }
  return rows;
}

std::string schedule_label(const ExecGraph::Kernel& k) {
  std::string label = k.schedule;
  for (size_t i = 0; i < k.schedule_knobs.size(); ++i)
    label += (i ? "," : "(") + k.schedule_knobs[i].first + "=" +
             std::to_string(k.schedule_knobs[i].second);
  return k.schedule_knobs.empty() ? label : label + ")";
}

std::string GraphExecutor::profile_table(const std::vector<KernelProfile>& p) {
  // Cells as text first, then pad each column to its widest cell: text left, numbers right.
  constexpr int kColumns = 6;
  std::vector<std::vector<std::string>> rows = {
      {"Name", "Func", "Time(ms)", "Percent", "Schedule", "Shapes"}};
  double total_ms = 0, total_pct = 0;
  for (const KernelProfile& k : p) {
    std::string shapes;
    for (size_t i = 0; i < k.shapes.size(); ++i) shapes += (i ? ", " : "") + shape_str(k.shapes[i]);
    rows.push_back({k.name, k.func, fixed(k.mean_ms, 4), fixed(k.percent, 2), k.schedule, shapes});
    total_ms += k.mean_ms;
    total_pct += k.percent;
  }
  rows.push_back({"Total", "", fixed(total_ms, 4), fixed(total_pct, 2), "", ""});
  size_t width[kColumns] = {};
  for (const auto& row : rows)
    for (int c = 0; c < kColumns; ++c) width[c] = std::max(width[c], row[c].size());
  std::ostringstream os;
  for (const auto& row : rows) {
    std::string line;
    for (int c = 0; c < kColumns; ++c) {
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
