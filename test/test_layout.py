"""test/test_layout.py — the code's layout promise, read from the sources: the Backend interface
(transformer.h) and its three implementations, the CPU's (CpuBackend, transformer.cpp), the
GPU's (CudaBackend, transformer.cu) and the op profiler's (ProfiledBackend, model/profile.h),
declare their ops in the same order with the same parameter names, so that a reader goes from
one device's op to the other's; the CPU ops themselves (namespace cpu) take their Backend op's
parameters; and the paper's sections (the § tags of the section banners) come in the same
order in the interface, the CPU ops and the CUDA kernels.

Each check prints what it compared. A first pass runs the checks on altered copies of the
sources (two ops swapped, a parameter renamed, a section renamed, a CPU op's parameter renamed)
and expects each to fail with a problem the sources themselves do not have, so that a check
that cannot fail is caught here.

Usage: python3 test/test_layout.py [SOURCE_DIR]    Ends with "layout: N passed, M failed".
"""
import os
import re
import sys

from checks import check, summary

root = sys.argv[1] if len(sys.argv) > 1 else "."


def read(path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def without_comments(text):
    """The text with comments removed; an unnamed parameter's /*name*/ keeps its name."""
    text = re.sub(r"/\*\s*(\w+)\s*\*/(?=\s*[,)])", r" \1", text)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def class_body(text, opening):
    """From `opening` at a line's start (the definition, not a comment naming the class) to the
    end of its class (the first line that is "};" after it)."""
    start = re.search("^" + re.escape(opening), text, re.M).start()
    return text[start:text.index("\n};", start)]


# A method declaration: name, then its parameter list (which may hold one level of parentheses).
METHOD = r"(~?\w+)\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)\s*(?:const\s*)?"


def parameter_names(params):
    names = []
    for p in params.split(","):
        p = p.split("=")[0].strip()
        if p:
            m = re.search(r"(\w+)\s*(?:\[\])?$", p)
            names.append(m.group(1) if m else p)
    return names


def interface_ops(header):
    """[(name, [parameter names])] of Backend's virtual methods, in declaration order."""
    body = without_comments(class_body(header, "class Backend {"))
    return [(m.group(1), parameter_names(m.group(2)))
            for m in re.finditer(r"virtual\s+[\w:<>*&\s]+?\b" + METHOD + r"(?:=\s*0|\{)", body)
            if not m.group(1).startswith("~")]


def overrides(text, opening):
    """[(name, [parameter names])] of the methods marked override in the class at `opening`."""
    body = without_comments(class_body(text, opening))
    return [(m.group(1), parameter_names(m.group(2))) for m in re.finditer(METHOD + r"override", body)
            if not m.group(1).startswith("~")]


def section_keys(lines):
    """The § tags of each section title in order, consecutive repeats merged; a title without
    one counts only when it is the linear layers' (the one section the paper gives no number)."""
    keys = []
    for title in lines:
        tags = tuple(re.findall(r"§(\d+(?:\.\d+)*)", title))
        key = "Linear layers" if title.startswith("Linear layers") else tags
        if key and (not keys or keys[-1] != key):
            keys.append(key)
    return keys


def banner_titles(text):
    """The first line of every banner: a comment line of ='s, its title line, and ='s again."""
    lines = text.split("\n")
    return [lines[i + 1][3:].strip() for i in range(1, len(lines) - 2)
            if re.match(r"// ={20,}$", lines[i]) and not lines[i - 1].startswith("//")
            and lines[i + 1].startswith("// ") and not re.match(r"// ={20,}$", lines[i + 1])]


def interface_sections(header):
    """The titles of the interface's '// ---- title ----' lines, inside class Backend."""
    return [m.group(1).strip() for m in
            re.finditer(r"// ---- (.*?) -{3,}", class_body(header, "class Backend {"))]


def compare_ops(label, interface, implementation):
    """Messages for every way `implementation`'s overrides differ from the interface's order
    and parameter names (empty: none)."""
    where = {name: i for i, (name, _) in enumerate(interface)}
    params = dict(interface)
    problems = []
    last = -1
    for name, names in implementation:
        if name not in where:
            problems.append(f"{label}: {name} overrides nothing of Backend")
            continue
        if where[name] < last:
            problems.append(f"{label}: {name} comes after {interface[last][0]}, before it in Backend")
        last = max(last, where[name])
        if names != params[name]:
            problems.append(f"{label}: {name}({', '.join(names)}), Backend has ({', '.join(params[name])})")
    return problems


# CPU ops whose parameters differ from their Backend op's, and why.
CPU_OP_EXCEPTIONS = {
    "relu_backward": "the CPU's takes n elements; with the bias gradient it is relu_backward_bias",
    "adam_step": "no bf16 weight copy (w) on the CPU: the products read the parameters",
    "search_select": "n, the candidates a sentence has, is implied by st on the CPU",
}


def cpu_ops(cpp):
    """[(name, [parameter names])] of the functions of transformer.cpp's namespace cpu."""
    body = without_comments(cpp[cpp.index("namespace cpu {"):cpp.index("}  // namespace cpu")])
    return [(m.group(1), parameter_names(m.group(2)))
            for m in re.finditer(r"^(?:void|float|double|int|size_t|bool)\s+" + METHOD + r"\{", body, re.M)]


def layout_problems(header, cpp, cu, profile):
    """[(what was compared, [problems])] over the four sources' texts."""
    interface = interface_ops(header)
    results = []
    for label, text, opening in (("CpuBackend (transformer.cpp)", cpp, "class CpuBackend"),
                                 ("CudaBackend (transformer.cu)", cu, "class CudaBackend"),
                                 ("ProfiledBackend (model/profile.h)", profile, "class ProfiledBackend")):
        ops = overrides(text, opening)
        results.append((f"{label}: its {len(ops)} ops in Backend's order ({len(interface)} declared), "
                        "with Backend's parameter names", compare_ops(label, interface, ops) if ops else
                        [f"{label}: no override found"]))
    params = dict(interface)
    named = [(n, p) for n, p in cpu_ops(cpp) if n in params and n not in CPU_OP_EXCEPTIONS]
    results.append((f"transformer.cpp: its {len(named)} CPU ops named as Backend ops take the op's parameters, "
                    f"in order (a scratch buffer may follow; {len(CPU_OP_EXCEPTIONS)} exceptions: "
                    f"{', '.join(CPU_OP_EXCEPTIONS)})",
                    [f"cpu::{n}({', '.join(p)}), Backend has ({', '.join(params[n])})" for n, p in named
                     if p[:len(params[n])] != params[n]]))
    want = section_keys(interface_sections(header))
    for label, text in (("transformer.cpp's CPU ops", cpp), ("transformer.cu's kernels", cu)):
        got = section_keys(banner_titles(text))
        results.append((f"{label}: the paper's sections in the interface's order ({len(got)} sections)",
                        [] if got == want else [f"{label}: {got}", f"transformer.h's Backend: {want}"]))
    return results


def altered(text, pattern, replacement):
    new, n = re.subn(pattern, replacement, text, count=1, flags=re.S)
    return new if n else None


header, cpp, cu, profile = (read(p) for p in ("transformer.h", "transformer.cpp", "transformer.cu", "model/profile.h"))

# The checks first on copies with one thing wrong each: each must find it (a problem the
# sources themselves do not have).
original = [p for _, ps in layout_problems(header, cpp, cu, profile) for p in ps]
swap_ops = altered(cpp, r"(    void dropout_forward\(.*?\n    \}\n)(    void dropout_backward\(.*?\n    \}\n)", r"\2\1")
renamed = altered(cu, r"(void layernorm_forward\(floatX\* y, float\* )mean", r"\1mu")
swap_sections = altered(cu, r"// (§5\.3 Optimizer)", r"// §6.9 Elsewhere")
cpu_renamed = altered(cpp, r"(\nvoid residual_forward\(float\* y, const float\* )f\b", r"\1sub")
for what, sources in (("two CpuBackend ops swapped (dropout_forward, dropout_backward)", (header, swap_ops, cu, profile)),
                      ("a CudaBackend parameter renamed (layernorm_forward's mean)", (header, cpp, renamed, profile)),
                      ("a section of transformer.cu renamed (§5.3 Optimizer)", (header, cpp, swap_sections, profile)),
                      ("a CPU op's parameter renamed (cpu::residual_forward's f)", (header, cpu_renamed, cu, profile))):
    if None in sources:
        check(False, f"the altered copy ({what}) could be made")
        continue
    new = [p for _, ps in layout_problems(*sources) for p in ps if p not in original]
    check(len(new) > 0, f"the checks fail on a copy with {what}: {new[0] if new else 'nothing found'}")

# Then on the sources themselves.
for what, problems in layout_problems(header, cpp, cu, profile):
    for p in problems:
        print("  " + p)
    check(not problems, what)

sys.exit(summary("layout"))
