#include "ember/runtime/graph_executor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "ember/runtime/cuda.h"
#include "ember/runtime/memory_plan.h"
#include "ember/support/error.h"
#include "launcher.h"
#include "shape_binding.h"

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
  binding_ = std::make_unique<ShapeBinding>(*graph_);  // (after the plan checked the ids)
  dynamic_ = !graph_->symbols.empty();
  pool_bytes_ = plan.pool_bytes;
  output_is_param_ = plan.output_is_param;
  root_ = plan.root;
  allocate(plan);
  init_run_shapes();
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

// Until the first set_input, the inputs are their zeroed buffers at the maximum shape, and
// so is the binding; each kernel that takes symbols gets its shape_args array.
void GraphExecutor::init_run_shapes() {
  if (!dynamic_) return;
  run_values_ = binding_->max_values();
  for (int i = 0; i < num_inputs(); ++i) {
    const int v = graph_->inputs[i].value;
    const ExecGraph::Value& val = graph_->values[v];
    input_shapes_.push_back(val.shape);
    input_values_.push_back(binding_->varies(v) ? binding_->input_values(i, val.dtype, val.shape)
                                                : std::vector<int64_t>());
  }
  shape_args_.resize(graph_->kernels.size());
  for (size_t k = 0; k < graph_->kernels.size(); ++k) {
    const int64_t n = static_cast<int64_t>(graph_->kernels[k].symbols.size());
    if (n > 0) shape_args_[k] = launcher_->alloc({n}, DType::Int64, true);
  }
  write_shape_args(run_values_);
}

// The kernels' argument pointers, resolved once; run_bound re-points the slots of input and
// output roots. A kernel that takes symbols gets its shape_args after its inputs.
void GraphExecutor::bind_args(const MemoryPlan& plan) {
  const int n = static_cast<int>(graph_->values.size());
  slots_.resize(n);
  for (int v = 0; v < n; ++v) root_is_output_.push_back(plan.role[v] == Role::Output);
  for (size_t k = 0; k < graph_->kernels.size(); ++k) {
    const ExecGraph::Kernel& kern = graph_->kernels[k];
    std::vector<void*> ptrs;
    for (size_t j = 0; j <= kern.args.size(); ++j) {
      if (j == static_cast<size_t>(kern.num_inputs) && !kern.symbols.empty())
        ptrs.push_back(shape_args_[k].data());
      if (j == kern.args.size()) break;
      const int a = kern.args[j];
      const Role role = plan.role[plan.root[a]];
      if (role == Role::Input || role == Role::Output)
        slots_[plan.root[a]].push_back(
            {static_cast<int>(args_.size()), static_cast<int>(ptrs.size())});
      ptrs.push_back(tensors_[a].data());
    }
    args_.push_back(std::move(ptrs));
  }
}

// On the CPU the kernels read the array written here; a GPU's is copied from the host.
void GraphExecutor::write_shape_args(const std::vector<int64_t>& values) {
  for (size_t k = 0; k < shape_args_.size(); ++k) {
    const std::vector<int>& symbols = graph_->kernels[k].symbols;
    if (symbols.empty()) continue;
    const bool host = shape_args_[k].device().type == DeviceType::CPU;
    NDArray out = host ? shape_args_[k] : NDArray::empty(shape_args_[k].shape(), DType::Int64);
    for (size_t j = 0; j < symbols.size(); ++j) out.data_as<int64_t>()[j] = values[symbols[j]];
    if (!host) cuda::copy(shape_args_[k], out);
  }
}

Shape GraphExecutor::run_shape(int v, const std::vector<int64_t>& values) const {
  return dynamic_ ? binding_->shape(v, values) : graph_->values[v].shape;
}

NDArray GraphExecutor::at_run_shape(const NDArray& t, int v,
                                    const std::vector<int64_t>& values) const {
  if (!dynamic_ || !binding_->varies(v)) return t;
  return NDArray::view(t.owner(), t.data(), binding_->shape(v, values), t.dtype(), t.device());
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

// An input of run-time shape goes compactly to the start of its maximum-size buffer.
void GraphExecutor::set_input_locked(int index, const NDArray& value) {
  std::vector<int64_t> values = check_input(index, value);
  NDArray& buffer = tensors_[graph_->inputs[index].value];
  if (values.empty()) {
    cuda::copy(buffer, value);  // host or device, either way
    return;
  }
  NDArray run =
      NDArray::view(buffer.owner(), buffer.data(), value.shape(), value.dtype(), buffer.device());
  cuda::copy(run, value);
  input_shapes_[index] = value.shape();
  input_values_[index] = std::move(values);
  rebind_ = true;
}

std::vector<int64_t> GraphExecutor::check_input(int index, const NDArray& value) const {
  if (index < 0 || index >= num_inputs())
    fail("input index ", index, " out of range: the model has ", num_inputs(), " inputs ",
         names_str(input_names()));
  const ExecGraph::Input& in = graph_->inputs[index];
  const ExecGraph::Value& expected = graph_->values[in.value];
  const bool varies = dynamic_ && binding_->varies(in.value);
  if (!value.defined())
    fail("input '", in.name, "' was given an undefined tensor: pass a ",
         varies ? binding_->type_str(in.value) : type_str(expected.dtype, expected.shape),
         " tensor");
  if (varies) return binding_->input_values(index, value.dtype(), value.shape());
  if (value.shape() != expected.shape || value.dtype() != expected.dtype)
    fail("input '", in.name, "' expects ", type_str(expected.dtype, expected.shape),
         " but was given ", type_str(value.dtype(), value.shape()),
         ": pass a tensor of that shape and dtype (or rebuild the model for the new shape)");
  return {};
}

void GraphExecutor::set_input(const std::string& name, const NDArray& value) {
  set_input(input_index(name), value);
}

void GraphExecutor::run() {
  std::lock_guard<std::mutex> lock(mutex_);
  run_locked();
}

void GraphExecutor::bind_locked() {
  if (!rebind_) return;
  run_values_ = binding_->bind(input_shapes_, input_values_);
  write_shape_args(run_values_);
  rebind_ = false;
}

void GraphExecutor::run_locked() {
  if (dynamic_) bind_locked();
  launcher_->run(args_);
}

std::vector<NDArray> GraphExecutor::run(const std::vector<NDArray>& inputs) {
  if (static_cast<int>(inputs.size()) != num_inputs())
    fail("run was given ", inputs.size(), " input(s) but the model has ", num_inputs(), ": ",
         names_str(input_names()), "; pass one tensor per input, in this order");
  std::lock_guard<std::mutex> lock(mutex_);
  for (int i = 0; i < num_inputs(); ++i) set_input_locked(i, inputs[i]);
  run_locked();
  std::vector<NDArray> outputs;
  for (int o : graph_->outputs)
    outputs.push_back(at_run_shape(tensors_[o], o, run_values_).clone());
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
  std::vector<std::vector<int64_t>> values;  // per input, the symbols' values it gives
  for (int i = 0; i < num_inputs(); ++i) {
    values.push_back(check_input(i, inputs[i]));
    if (inputs[i].device().type != DeviceType::CPU)
      fail("run_bound: input '", graph_->inputs[i].name, "' is not on the CPU");
  }
  return run_bound_with(inputs, values);
}

namespace {

// `t` at the start of a new buffer of `shape` (its maximum): room for masked vector loads.
NDArray padded_copy(const NDArray& t, const Shape& shape) {
  NDArray buffer = NDArray::empty(shape, t.dtype());
  NDArray run = NDArray::view(buffer.owner(), buffer.data(), t.shape(), t.dtype());
  run.copy_from(t);
  return buffer;
}

// Runs `restore` when the scope ends, also when a kernel fails.
template <class F>
struct OnExit {
  F restore;
  ~OnExit() { restore(); }
};
template <class F>
OnExit(F) -> OnExit<F>;

}  // namespace

// Memory first, then the run under the lock.
std::vector<NDArray> GraphExecutor::run_bound_with(
    const std::vector<NDArray>& inputs, const std::vector<std::vector<int64_t>>& values) {
  const ExecGraph& g = *graph_;
  std::vector<int64_t> bound;  // the run's symbols (none in a static graph)
  std::vector<void*> read;     // what the kernels read: the caller's memory, or a padded copy
  for (const NDArray& t : inputs) read.push_back(t.data());
  std::vector<NDArray> padded;
  if (dynamic_) {
    std::vector<Shape> shapes;
    for (const NDArray& t : inputs) shapes.push_back(t.shape());
    bound = binding_->bind(shapes, values);
    for (int i = 0; i < num_inputs(); ++i) {
      if (values[i].empty()) continue;
      padded.push_back(padded_copy(inputs[i], g.values[g.inputs[i].value].shape));
      read[i] = padded.back().data();
    }
  }
  // Fresh memory for every output root (several outputs may share one through views).
  std::vector<NDArray> fresh(g.values.size());
  for (int o : g.outputs) {
    int r = root_[o];
    if (root_is_output_[r] && !fresh[r].defined())
      fresh[r] = NDArray::empty(g.values[r].shape, g.values[r].dtype);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  // Back to the executor's own buffers and binding for run() and get_output() afterwards.
  OnExit restore{[&] {
    for (int i = 0; i < num_inputs(); ++i)
      point_slots(g.inputs[i].value, tensors_[g.inputs[i].value].data());
    for (size_t r = 0; r < fresh.size(); ++r)
      if (fresh[r].defined()) point_slots(static_cast<int>(r), tensors_[r].data());
    if (dynamic_) write_shape_args(run_values_);
  }};
  for (int i = 0; i < num_inputs(); ++i) point_slots(g.inputs[i].value, read[i]);
  for (size_t r = 0; r < fresh.size(); ++r)
    if (fresh[r].defined()) point_slots(static_cast<int>(r), fresh[r].data());
  if (dynamic_) write_shape_args(bound);
  launcher_->run(args_);
  std::vector<NDArray> outputs;
  for (int o : g.outputs) {
    int r = root_[o];
    const Shape shape = run_shape(o, bound);
    if (fresh[r].defined()) {
      outputs.push_back(NDArray::view(fresh[r].owner(), fresh[r].data(), shape, g.values[o].dtype));
      continue;
    }
    int input = -1;  // an output that is (a view of) an input: copy the caller's tensor
    for (int i = 0; i < num_inputs(); ++i)
      if (g.inputs[i].value == r) input = i;
    const NDArray& src = input >= 0 ? inputs[input] : tensors_[r];
    NDArray copy = src.clone();
    outputs.push_back(NDArray::view(copy.owner(), copy.data(), shape, g.values[o].dtype));
  }
  return outputs;
}

Device GraphExecutor::device() const { return launcher_->device(); }

bool GraphExecutor::cuda_graph() const { return launcher_->cuda_graph(); }

NDArray GraphExecutor::get_output(int index) const {
  if (index < 0 || index >= num_outputs())
    fail("output index ", index, " out of range: the model has ", num_outputs(), " outputs");
  if (!dynamic_) return output_locked(index);  // (reads nothing that a run changes)
  std::lock_guard<std::mutex> lock(mutex_);
  return output_locked(index);
}

NDArray GraphExecutor::output_locked(int index) const {
  const int v = graph_->outputs[index];
  const NDArray& out = tensors_[v];
  // A parameter is shared by every executor of the model: never hand out a writable alias.
  return output_is_param_[index] ? out.clone() : at_run_shape(out, v, run_values_);
}

NDArray GraphExecutor::get_input(int index) const {
  if (index < 0 || index >= num_inputs())
    fail("input index ", index, " out of range: the model has ", num_inputs(), " inputs ",
         names_str(input_names()));
  const int v = graph_->inputs[index].value;
  if (!dynamic_ || !binding_->varies(v)) return tensors_[v];
  std::lock_guard<std::mutex> lock(mutex_);
  const NDArray& t = tensors_[v];
  return NDArray::view(t.owner(), t.data(), input_shapes_[index], t.dtype(), t.device());
}

std::vector<std::pair<std::string, int64_t>> GraphExecutor::symbol_values() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::pair<std::string, int64_t>> out;
  for (size_t s = 0; s < run_values_.size(); ++s)
    out.emplace_back(graph_->symbols[s].name, run_values_[s]);
  return out;
}

BenchmarkResult GraphExecutor::benchmark(int number, int repeat, int warmup) {
  if (number < 1 || repeat < 1 || warmup < 0)
    fail("benchmark(number=", number, ", repeat=", repeat, ", warmup=", warmup,
         "): number and repeat must be at least 1 and warmup at least 0");
  std::lock_guard<std::mutex> lock(mutex_);
  if (dynamic_) bind_locked();  // (time_runs runs the kernels alone)
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
    for (int a : kern.args) p.shapes.push_back(run_shape(a, run_values_));
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
