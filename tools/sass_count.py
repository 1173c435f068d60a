"""Static SASS instruction counts of the onesweep kernels, per region.

Renders onesweep.cu for a dtype and config exactly as the plugin does
(KernelTemplate.render), compiles it for sm_90 with -lineinfo, disassembles
it (nvdisasm -gi) and charges each instruction to a region of onesweep.cuh
by the source line it comes from (the innermost onesweep.cuh line of its
inline chain; instructions with none follow the one before). Loops are the
backward branches inside a region: their bodies are listed too.

    python tools/sass_count.py [--dtype uint32] [--values 0] [--set items_per_thread=16 ...]

Needs nvcc and nvdisasm (nvdisasm: `pip install nvidia-cuda-nvdisasm` puts
it under site-packages/nvidia/cu*/bin; found there or on PATH).
"""
import argparse
import glob
import os
import re
import shutil
import site
import subprocess
import sys
import tempfile

from cudasortkit.sdk import registry
from cudasortkit.build.compiler import NVCC_OPTIONS
from cudasortkit.build.template import KernelTemplate

HEADER = "onesweep.cuh"
#: Regions of onesweep.cuh, each from the first line matching its pattern
#: (in file order) to the next region's start. "caller": a helper charged to
#: the region of its call site.
REGION_STARTS = (
    ("caller", r"os_digit\(csk_bits_t w, int shift\)"),
    ("hist.setup", r"^// Passes that hold a bit"),
    ("caller", r"void os_shared_add\("),
    ("plan", r"^// -+ plan"),
    ("hist.setup", r"^onesweep_histogram\("),
    ("hist.loop", r"for \(; start \+ chunk <= n"),
    ("hist.partial", r"if \(start < n\)"),
    ("hist.merge", r"if \(check && \(unsigned long long\)largest"),
    ("caller", r"void os_count_digit\("),
    ("pass.rank", r"os_rank_item\(os_counter_t"),
    ("pass.owned", r"os_owned_digit\(int k\)"),
    ("pass.publish", r"os_publish_counts\(unsigned\* warp_words"),
    ("pass.lookback", r"os_look_back\(os_status_t\*"),
    ("pass.values", r"os_load_value\(const void"),
    ("pass.setup", r"^os_pass\("),
    ("pass.load", r"// Load warp-striped"),
    ("pass.count", r"^#if EARLY_COUNTS"),
    ("pass.values", r"^#if CSK_HAS_VALUES"),
    ("pass.lookback", r"next_status\["),
    ("pass.scatter", r"// Scatter from the staging area"),
)
#: Lines charged to a region wherever they stand (the ranking loop's body).
LINE_REGIONS = ((r"os_rank_item\(my_counts|keys_s\[pos\[j\]\] = key|pos\[j\] \+= my_counts", "pass.rank"),)
INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
LINE = re.compile(r'//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?')


def tool(name):
    found = shutil.which(name)
    if found:
        return found
    for sp in site.getsitepackages():
        for path in glob.glob(os.path.join(sp, "nvidia", "*", "bin", name)):
            return path
    sys.exit(f"{name} not found (pip install nvidia-cuda-{name})")


def line_regions(path):
    """Region of each line (1-based) of onesweep.cuh."""
    lines = open(path).read().splitlines()
    starts, at = [], 0
    for name, pattern in REGION_STARTS:
        while at < len(lines) and not re.search(pattern, lines[at]):
            at += 1
        if at == len(lines):
            sys.exit(f"region {name!r}: no line of {path} matches {pattern!r} (update REGION_STARTS)")
        starts.append((at, name))
    regions, current = [None], None
    for i, text in enumerate(lines):
        for at, name in starts:
            if at == i:
                current = name
        for pattern, name in LINE_REGIONS:
            if re.search(pattern, text):
                regions.append(name)
                break
        else:
            regions.append(current)
    return regions


def disassemble(source, include_dirs):
    with tempfile.TemporaryDirectory() as tmp:
        cu, cubin = os.path.join(tmp, "k.cu"), os.path.join(tmp, "k.cubin")
        open(cu, "w").write(source)
        cmd = [tool("nvcc"), "--cubin", *NVCC_OPTIONS, "-arch=sm_90", "-lineinfo", "-Xptxas", "-v",
               "-o", cubin, cu] + [f"-I{d}" for d in include_dirs]
        built = subprocess.run(cmd, capture_output=True, text=True)
        if built.returncode:
            sys.exit(built.stderr)
        sass = subprocess.run([tool("nvdisasm"), "-gi", "-c", cubin], capture_output=True,
                              text=True, check=True).stdout
    return sass, built.stderr


def count(sass, regions):
    """{kernel: [(address, region, text)]}. nvdisasm -gi writes an
    instruction's inline chain innermost first: the first onesweep.cuh line
    of it picks the region."""
    kernels, kernel, region, chain = {}, None, None, []
    for text in sass.splitlines():
        m = re.match(r"\s*\.text\.(\w+):", text)
        if m:
            kernel, region = m.group(1), None
            kernels[kernel] = []
            continue
        m = LINE.search(text)
        if m:
            chain.append(m.groups())
            continue
        m = INSN.search(text)
        if m and kernel:
            for file, line, outer, outer_line in chain:
                if file.endswith("/" + HEADER) or (outer or "").endswith("/" + HEADER):
                    region = regions[int(line if file.endswith("/" + HEADER) else outer_line)]
                    if region != "caller":
                        break
            chain = []
            if not m.group(2).startswith("NOP"):
                kernels[kernel].append((int(m.group(1), 16), region, m.group(2).strip()))
    return kernels


def report(kernels, labels):
    for kernel, insns in kernels.items():
        if kernel == "onesweep_plan":
            continue
        print(f"{kernel}: {len(insns)} instructions")
        names = []
        for _, region, _ in insns:
            if region not in names:
                names.append(region)
        for name in names:
            mine = [(a, t) for a, r, t in insns if r == name]
            line = f"  {name or '?':15s} {len(mine):5d}"
            for a, t in mine:  # loops: backward branches mostly inside the region
                target = re.search(r"BRA `\((\.L_x_\d+)\)", t)
                start = labels.get(target.group(1)) if target else None
                if start is None or start >= a:
                    continue
                body = [r for x, r, _ in insns if start <= x <= a]
                if 2 * body.count(name) > len(body):
                    line += f"  loop {start:#x}-{a:#x}: {len(body)}"
            print(line)


def parse_labels(sass):
    """Address of each .L_x_N label (the next instruction's)."""
    out, pending = {}, []
    for text in sass.splitlines():
        m = re.match(r"(\.L_x_\d+):", text.strip())
        if m:
            pending.append(m.group(1))
            continue
        m = INSN.search(text)
        if m:
            for label in pending:
                out[label] = int(m.group(1), 16)
            pending = []
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtype", default="uint32")
    ap.add_argument("--values", type=int, default=0, help="value bytes (0, 4, 8)")
    ap.add_argument("--set", nargs="*", default=[], help="config overrides, name=int")
    ap.add_argument("--sass", help="also write the SASS here")
    args = ap.parse_args()
    plugin = registry.plugins()["onesweep"]
    config = dict(plugin.default_config(args.dtype, args.values))
    config.update({k: int(v) for k, v in (s.split("=") for s in args.set)})
    template = KernelTemplate("onesweep.cu", plugin.template_package)
    sass, ptxas = disassemble(template.render(args.dtype, args.values, config), template.include_dirs)
    if args.sass:
        open(args.sass, "w").write(sass)
    print(f"{args.dtype} values={args.values} {config}")
    for kernel, regs in re.findall(r"Compiling entry function '(\w+)'.*?Used (\d+) registers", ptxas, re.S):
        print(f"  {kernel}: {regs} registers")
    labels = parse_labels(sass)
    report(count(sass, line_regions(os.path.join(template.include_dirs[-1], HEADER))), labels)
