"""The `ember` command: compile a saved PyTorch program, inspect, run and time artifacts.

    ember compile model.pt2 -o model.ember     # torch.export.save'd program -> artifact
    ember inspect model.ember                  # inputs, outputs, kernels, fusion, sizes
    ember run model.ember --input x.npy --output y.npy
    ember bench model.ember --repeat 100
    ember tune model.pt2 --trials 64 --log model.tune.json   # then: compile --tuning-log

Also `python -m ember ...`. Exit status: 0 ok, 1 a user error (the message on stderr, no
traceback), 2 a usage error, 3 an internal error (a bug in Ember: please report it).
"""
import argparse
import logging
import os
import re
import sys

import numpy as np

import ember
from ember import EmberError, InternalError

__all__ = ["main"]


def _size(n):
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _type(shape_dtype):
    shape, dtype = shape_dtype
    return f"{dtype}[{', '.join(map(str, shape))}]"


def _load(path, load_code=True):
    if not os.path.exists(path):
        raise EmberError(f"no such file: '{path}'")
    if not load_code:  # read and check it; nothing in the file runs
        from .deploy import _inspect as read_only
        return read_only(path)
    return ember.load(path)


# ------------------------------------------------------------------------------ compile
def _need_compiler():
    if ember.RUNTIME_ONLY:
        from .deploy import RUNTIME_ONLY_MESSAGE
        raise EmberError(RUNTIME_ONLY_MESSAGE)


def _compile(args):
    _need_compiler()
    from ember.transform import PassContext
    # Check what needs no PyTorch first: importing it takes seconds.
    config = {"tuning_log": args.tuning_log} if args.tuning_log else None
    passes = PassContext(opt_level=args.opt_level, disabled_passes=args.disable_pass,
                         config=config)
    mod, params = _load_program(args)
    with passes:
        lib = ember.build(mod, target=args.target, params=params)
    out = args.output or os.path.splitext(args.model)[0] + ".ember"
    lib.export(out)
    tuned = sum(bool(k.tuned) for k in lib.fusion_report())
    print(f"compiled {args.model} for {args.target}: {len(lib.kernel_names)} kernels"
          + (f" ({tuned} tuned)" if args.tuning_log else "")
          + f", inputs {', '.join(lib.input_names)} -> {out} ({_size(os.path.getsize(out))})")


def _load_program(args):
    """(ir.Function, params) of the saved torch.export program args.model."""
    if not os.path.isfile(args.model):
        raise EmberError(f"no such file: '{args.model}'")
    with open(args.model, "rb") as fh:
        if fh.read(4) != b"PK\x03\x04":  # a .pt2 file is a zip archive
            raise EmberError(f"cannot read '{args.model}' as a saved torch.export program (it "
                             "is not a .pt2 archive); save one with torch.export.save("
                             "torch.export.export(model, example_inputs), path)")
    try:
        import torch
    except ImportError:
        raise EmberError("`ember compile` reads PyTorch programs and needs PyTorch; "
                         "pip install torch") from None
    from ember.frontend import from_pytorch

    log = logging.getLogger("torch.export")  # it logs a traceback before raising
    level = log.level
    try:
        log.setLevel(logging.CRITICAL)
        program = torch.export.load(args.model)
    except Exception as e:
        raise EmberError(f"cannot read '{args.model}' as a saved torch.export program "
                         f"({type(e).__name__}: {e}); save one with "
                         "torch.export.save(torch.export.export(model, example_inputs), path)")
    finally:
        log.setLevel(level)
    examples = getattr(program, "example_inputs", None)
    if not examples or examples[1]:
        raise EmberError(f"'{args.model}' has no positional example inputs to give the input "
                         "shapes; export the model with example inputs (torch.export.export("
                         "model, (x,)))")
    inputs = tuple(examples[0])
    names = args.input_name or None
    if names is not None and len(names) != len(inputs):
        raise EmberError(f"--input-name was given {len(names)} time(s) but the model has "
                         f"{len(inputs)} input(s)")
    return from_pytorch(program, inputs, input_names=names)


# ------------------------------------------------------------------------------ tune
def _tune(args):
    _need_compiler()
    if args.trials < 1:
        raise EmberError(f"--trials must be >= 1, got {args.trials}")
    if args.threads is not None:
        ember.set_num_threads(args.threads)
    mod, params = _load_program(args)
    log = args.log or os.path.splitext(args.model)[0] + ".tune.json"
    records = ember.tune(mod, params, target=args.target, trials=args.trials, log=log,
                         runner=args.runner, batch=args.batch, timeout_s=args.timeout)
    print(f"{'workload':<48} {'kernels':>7} {'trials':>9} {'default ms':>10} {'best ms':>9}")
    for r in records:
        d = "-" if r.default_ms is None else f"{r.default_ms:.4f}"
        b = "-" if r.best_ms is None else f"{r.best_ms:.4f}"
        print(f"{r.name[:48]:<48} {r.count:>7} {f'{r.trials}/{r.space_size}':>9} {d:>10} {b:>9}")
    print(f"log: {log} (apply it with `ember compile {args.model} --tuning-log {log}` or "
          "PassContext(config={'tuning_log': ...}))")


# ------------------------------------------------------------------------------ inspect
def _inspect(args):
    lib = _load(args.artifact, load_code=False)
    info = lib._info()
    print(f"{args.artifact}: Ember artifact format {info['format_version']}, written by "
          f"Ember {info['ember_version']}")
    code = f" (code for CPU {info['cpu']})" if info["cpu"] else ""
    if info["code"] == "ptx":  # the PTX names the architecture it was built for
        arch = re.search(r"^\s*\.target\s+(sm_\d+)", lib.get_source("ptx"), re.M)
        code = (f" (PTX for {arch.group(1) if arch else 'an unknown architecture'}: runs on "
                "an NVIDIA GPU of that architecture or newer)")
    print(f"target   {info['target']}{code}")
    sections = ", ".join(f"{kind} {_size(n)}" for kind, n in info["sections"])
    print(f"size     {_size(info['file_bytes'])}: {sections}")
    for name, t in info["inputs"]:
        print(f"input    {name}: {_type(t)}")
    for i, t in enumerate(info["outputs"]):
        print(f"output   {i}: {_type(t)}")
    print(f"params   {len(info['params'])} tensors, {_size(info['param_bytes'])}")
    tuning = lib._tuning()
    if tuning:
        print(f"tuning   {tuning['log']}: measured on {tuning['cpu']} ({tuning['vector_bits']}"
              f"-bit vectors, {tuning['threads']} thread(s))")
    kernels = lib._kernels()
    rows = [(str(i), k["name"], " -> ".join(k["ops"]) or "-", k["anchor"] or "-",
             ", ".join(k["patterns"]) or "-", k.get("schedule_label") or "-")
            for i, k in enumerate(kernels)]
    head = ("#", "kernel", "ops", "anchor", "fusion patterns", "schedule")
    if tuning:  # the knobs each tuned kernel was built with (those not left to the schedule)
        rows = [r + (",".join(f"{n}={v}" for n, v in k["knobs"].items() if v)
                     if k.get("tuned") else "-",) for r, k in zip(rows, kernels)]
        head += ("tuned knobs",)
    widths = [max(len(r[c]) for r in rows + [head]) for c in range(len(head))]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    print(f"\nkernels  {len(kernels)}")
    print("  " + fmt.format(*head).rstrip())
    for r in rows:
        print("  " + fmt.format(*r).rstrip())
    unfused = [(p, c, why) for p, c, fused, why in lib._fusion_decisions() if not fused]
    if unfused:
        print(f"\nnot fused ({len(unfused)} edges)")
        for p, c, why in unfused:
            print(f"  {p} -> {c}: {why}")


# ------------------------------------------------------------------------------ run, bench
def _inputs(module, specs, what):
    """Arrays for the module's inputs from `--input [NAME=]FILE.npy` specs (in input order
    when unnamed); random ones for inputs not given when `what` is "bench"."""
    names = module.get_input_names()
    given = {}
    for i, spec in enumerate(specs or []):
        name, sep, path = spec.partition("=")
        if not sep:
            if i >= len(names):
                raise EmberError(f"--input was given {len(specs)} times but the model has "
                                 f"{len(names)} input(s): {', '.join(names)}")
            name, path = names[i], spec
        if name not in names:
            raise EmberError(f"--input {spec}: the model has no input '{name}'; its inputs "
                             f"are {', '.join(names)}")
        if not os.path.exists(path):
            raise EmberError(f"--input {spec}: no such file: '{path}'")
        try:
            given[name] = np.load(path, allow_pickle=False)
        except Exception as e:
            raise EmberError(f"--input {spec}: cannot read '{path}' as a .npy file ({e})")
    missing = [n for n in names if n not in given]
    if missing and what == "run":
        raise EmberError(f"give every input with --input [NAME=]FILE.npy; missing: "
                         f"{', '.join(missing)}")
    rng = np.random.default_rng(0)
    for name in missing:  # bench: timing does not depend on the values
        t = module.get_input(name)
        shape, dtype = t.shape, t.dtype
        given[name] = (rng.standard_normal(shape).astype(dtype) if dtype.startswith("float")
                       else np.zeros(shape, dtype))
    for name in names:
        module.set_input(name, given[name])


def _run(args):
    module = ember.GraphModule(_load(args.artifact), cuda_graph=not args.no_cuda_graph)
    _inputs(module, args.input, "run")
    module.run()
    outputs = [module.get_output(i).numpy() for i in range(module.get_num_outputs())]
    paths = args.output or []
    if len(paths) > len(outputs):
        raise EmberError(f"--output was given {len(paths)} times but the model has "
                         f"{len(outputs)} output(s)")
    for i, y in enumerate(outputs):
        line = f"output {i}: {y.dtype}[{', '.join(map(str, y.shape))}]"
        if y.size and y.dtype.kind in "fi":
            line += f"  min {y.min():.6g}  max {y.max():.6g}  mean {y.mean():.6g}"
        if i < len(paths):
            np.save(paths[i], y)
            line += f"  -> {paths[i]}"
        print(line)


def _bench(args):
    if args.repeat < 1 or args.number < 1:
        raise EmberError("--repeat and --number must be at least 1")
    if args.threads is not None:
        ember.set_num_threads(args.threads)
    module = ember.GraphModule(_load(args.artifact), cuda_graph=not args.no_cuda_graph)
    _inputs(module, args.input, "bench")
    print(module.benchmark(number=args.number, repeat=args.repeat))


def _target(args):
    from . import target
    print(target.machine_model(args.target))


# ------------------------------------------------------------------------------ main
def _cuda_graph_flag(p):
    p.add_argument("--no-cuda-graph", action="store_true",
                   help="on a GPU, launch every kernel each run instead of replaying the run "
                   "recorded as a CUDA graph (CPU artifacts ignore it)")


def _parser():
    p = argparse.ArgumentParser(prog="ember", description="Ember tensor compiler: compile PyTorch programs "
                "into self-contained artifacts, and inspect, run and time them.",
                epilog="Run `ember COMMAND --help` for a command's options.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    c = sub.add_parser("compile", help="compile a saved torch.export program (.pt2)",
                       description="Compile a program saved with torch.export.save into an "
                       "Ember artifact (graph, parameters and machine code in one file). The "
                       "program's example inputs give the input shapes.")
    c.add_argument("model", help="the .pt2 file")
    c.add_argument("-o", "--output", help="the artifact to write (default: MODEL.ember)")
    c.add_argument("--target", default="llvm",
                   help='"llvm" (the host CPU, default) or "cuda" / "cuda -arch=sm_90"')
    c.add_argument("--opt-level", type=int, default=3, choices=range(4), metavar="{0-3}",
                   help="which graph passes run (default 3: all)")
    c.add_argument("--disable-pass", action="append", default=[], metavar="PASS",
                   help="skip a graph pass, e.g. FuseOps (repeatable)")
    c.add_argument("--input-name", action="append", metavar="NAME",
                   help="name the model's inputs, in order (repeat once per input)")
    c.add_argument("--tuning-log", metavar="FILE",
                   help="apply the fastest schedules of a log written by `ember tune`")
    c.set_defaults(func=_compile)

    t = sub.add_parser("tune", help="tune the kernels' schedules of a saved program (.pt2)",
                       description="Measure schedule candidates of each distinct kernel of a "
                       "program saved with torch.export.save on this machine and append them "
                       "to a JSON-lines log (resumable; Ctrl-C keeps what was measured).")
    t.add_argument("model", help="the .pt2 file")
    t.add_argument("--trials", type=int, default=64, help="candidates per kernel (default 64)")
    t.add_argument("--log", metavar="FILE", help="the log (default: MODEL.tune.json)")
    t.add_argument("--target", default="llvm", help='a CPU target (default "llvm")')
    t.add_argument("--batch", type=int, default=8,
                   help="candidates compiled in parallel between measurements (default 8)")
    t.add_argument("--runner", default="local",
                   help='"local" (default), "ray" or "ray://HOST:PORT"')
    t.add_argument("--timeout", type=float, default=20.0,
                   help="seconds a measurement may take before it counts as hung (default 20)")
    t.add_argument("--threads", type=int, help="threads for parallel loops")
    t.add_argument("--input-name", action="append", metavar="NAME",
                   help="name the model's inputs, in order (repeat once per input)")
    t.set_defaults(func=_tune)

    i = sub.add_parser("inspect", help="show an artifact's inputs, outputs, kernels and sizes",
                       description="Show what an artifact holds: inputs, outputs, kernels "
                       "with the ops fused into each, unfused edges, and section sizes.")
    i.add_argument("artifact")
    i.set_defaults(func=_inspect)

    r = sub.add_parser("run", help="run an artifact on .npy inputs",
                       description="Run an artifact once on inputs from .npy files and print "
                       "(or save) its outputs.")
    r.add_argument("artifact")
    r.add_argument("--input", action="append", metavar="[NAME=]FILE.npy",
                   help="an input, by name or in order (repeat for each input)")
    r.add_argument("--output", action="append", metavar="FILE.npy",
                   help="save output 0, 1, ... (repeat for each output to save)")
    _cuda_graph_flag(r)
    r.set_defaults(func=_run)

    b = sub.add_parser("bench", help="time an artifact",
                       description="Time an artifact (random inputs unless given) and print "
                       "the execution time summary in milliseconds.")
    b.add_argument("artifact")
    b.add_argument("--repeat", type=int, default=100, help="measurements (default 100)")
    b.add_argument("--number", type=int, default=1, help="runs per measurement (default 1)")
    b.add_argument("--input", action="append", metavar="[NAME=]FILE.npy",
                   help="an input, by name or in order (others are random)")
    b.add_argument("--threads", type=int, help="threads for parallel loops")
    _cuda_graph_flag(b)
    b.set_defaults(func=_bench)

    m = sub.add_parser("target", help="show the machine model of a CPU target",
                       description="Show what Ember knows of a CPU: vector width, FMA issue "
                       "rate, latency and datapath width, loads per cycle, cache sizes, and "
                       "where each fact comes from.")
    m.add_argument("--target", default="llvm",
                   help='"llvm" (the host, default) or "llvm -mcpu=znver1" and the like')
    m.set_defaults(func=_target)
    return p


def main(argv=None):
    args = _parser().parse_args(argv)  # exits with status 2 on a usage error
    try:
        args.func(args)
    except EmberError as e:
        print(f"ember {args.command}: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"ember {args.command}: error: {e}", file=sys.stderr)
        return 1
    except InternalError as e:  # its message says that it is a bug and asks for a report
        print(f"ember {args.command}: {e}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
