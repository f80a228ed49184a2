#!/usr/bin/env python3
"""The kernels of a tools/cubins.sh output, one line each, whichever source file compiled them.

    python3 tools/cubin_kernels.py OUT_DIR >KERNELS     # then: diff KERNELS_BEFORE KERNELS_AFTER

cubins.sh compares a refactor file by file; a refactor that moves kernel launches from one .cu file to
another (so the kernels are instantiated in another translation unit, possibly in another order)
changes whole files while every kernel stays the same. This lists, sorted by name, each kernel's
machine code (the cubin's `.text.NAME` section: SASS, with relocation targets left as zeros, so it does
not depend on the symbol order), static shared memory and parameter bank, and each PTX function's text
(whole-line comments dropped; branch labels and stack frames without the function's place in the file)
with its virtual registers as written, as sizes and sha256 digests. Equal lists mean the same kernels
and device functions, compiled to the same bytes.
"""
import hashlib
import pathlib
import re
import struct
import sys


def cubin_sections(path):
    """(name, bytes) of every section of a 64-bit little-endian ELF file."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        sys.exit(f"{path}: not a 64-bit little-endian ELF")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx]
    names = data[strtab[4]:strtab[4] + strtab[5]]
    for name_off, kind, _, _, offset, size, *_ in headers:
        name = names[name_off:names.index(b"\0", name_off)].decode()
        yield name, b"" if kind == 8 else data[offset:offset + size]  # SHT_NOBITS has no bytes


def ptx_functions(path):
    """(name, text) of every .entry and .func definition of a PTX file."""
    text = path.read_text()
    starts = [m for m in re.finditer(r"^(?:\.visible |\.weak |\.extern )?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?(\w+)", text, re.M)]
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        # Whole-line comments go: the next function's `// .globl NAME` and `// NAME has been demoted`
        # lines sit before its .entry, so they would belong to whichever function the file put first.
        # Branch labels and local stack frames are numbered by the function's place in the file
        # ($L__BB<function>_<block>, __local_depot<function>).
        lines = [re.sub(r"__local_depot\d+", "__local_depot", re.sub(r"\$L__BB\d+_", "$L__BB_", line))
                 for line in text[m.start():end].splitlines() if not line.lstrip().startswith("//")]
        yield m.group(1), "\n".join(lines).rstrip()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = pathlib.Path(sys.argv[1])
    lines = []
    for cubin in sorted(out.glob("*.cubin")):
        for name, body in cubin_sections(cubin):
            # Per kernel: its code, its static shared memory and its parameter bank (.nv.info is left
            # out: its attributes name other sections by index, which follows the file's order).
            for section, tag in ((".text.", "sass"), (".nv.shared._Z", "smem"), (".nv.constant0.", "const0")):
                if name.startswith(section):
                    kernel = name[len(section) - (2 if section.endswith("_Z") else 0):]
                    lines.append(f"{tag} {kernel} {len(body)} {hashlib.sha256(body).hexdigest()}")
    for ptx in sorted(out.glob("*.ptx")):
        for name, body in ptx_functions(ptx):
            lines.append(f"ptx {name} {hashlib.sha256(body.encode()).hexdigest()}")
    print("\n".join(sorted(lines)))


if __name__ == "__main__":
    main()
