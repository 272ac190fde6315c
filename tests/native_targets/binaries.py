"""What a shared library is built for, read from its headers (ELF, PE, Mach-O; 64-bit,
little-endian): system, CPU, exported function names and, for Mach-O, the minimum macOS.

Enough of each format to check a cross-built library without the target's tools.
"""

import dataclasses
import re
import struct

ELF_MACHINES = {62: "x64", 183: "arm64"}
PE_MACHINES = {0x8664: "x64", 0xAA64: "arm64"}
MACHO_CPUS = {0x01000007: "x64", 0x0100000C: "arm64"}


@dataclasses.dataclass
class Binary:
    system: str
    machine: str
    exports: list
    minimum_os: tuple = ()


def describe(data):
    if data[:4] == b"\x7fELF":
        return _elf(data)
    if data[:2] == b"MZ":
        return _pe(data)
    if data[:4] == struct.pack("<I", 0xFEEDFACF):
        return _macho(data)
    raise ValueError("library: not a 64-bit ELF, PE or Mach-O file")


def glibc_versions(data):
    """The glibc symbol versions an ELF library asks for, as (major, minor) tuples."""
    return sorted({(int(a), int(b)) for a, b in re.findall(rb"GLIBC_(\d+)\.(\d+)", data)})


def _c_string(data, offset):
    return data[offset : data.index(b"\0", offset)].decode()


def _elf(data):
    (machine,) = struct.unpack_from("<H", data, 18)
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    exports = []
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != 11:  # SHT_DYNSYM
            continue
        strings = sections[link][4]
        for at in range(offset, offset + size, entsize):
            name, info, _, shndx = struct.unpack_from("<IBBH", data, at)
            if shndx != 0 and info >> 4 in (1, 2) and info & 0xF == 2:  # defined global function
                exports.append(_c_string(data, strings + name))
    return Binary("linux", ELF_MACHINES.get(machine, hex(machine)), exports)


def _pe(data):
    (pe,) = struct.unpack_from("<I", data, 0x3C)
    machine, n_sections = struct.unpack_from("<HH", data, pe + 4)
    (optional_size,) = struct.unpack_from("<H", data, pe + 20)
    optional = pe + 24
    export_rva, _ = struct.unpack_from("<II", data, optional + 112)
    sections = [
        struct.unpack_from("<8sIIII", data, optional + optional_size + 40 * i) for i in range(n_sections)
    ]

    def offset(rva):
        for _, virtual_size, address, raw_size, raw in sections:
            if address <= rva < address + max(virtual_size, raw_size):
                return rva - address + raw
        raise ValueError(f"library: address {rva:#x} outside every section")

    exports = []
    if export_rva:
        directory = offset(export_rva)
        n_names, _, names_rva = struct.unpack_from("<III", data, directory + 24)
        for i in range(n_names):
            (name_rva,) = struct.unpack_from("<I", data, offset(names_rva) + 4 * i)
            exports.append(_c_string(data, offset(name_rva)))
    return Binary("windows", PE_MACHINES.get(machine, hex(machine)), exports)


def _macho(data):
    cpu, _, filetype, n_commands = struct.unpack_from("<iiII", data, 4)
    if filetype != 6:  # MH_DYLIB
        raise ValueError("library: a Mach-O file but not a dynamic library")
    exports, minimum, at = [], (), 32
    for _ in range(n_commands):
        command, size = struct.unpack_from("<II", data, at)
        if command == 0x2:  # LC_SYMTAB
            symbols, count, strings, _ = struct.unpack_from("<IIII", data, at + 8)
            for i in range(count):
                name, kind = struct.unpack_from("<IB", data, symbols + 16 * i)
                if kind & 0x0E == 0x0E and kind & 0x01:  # defined in a section, external
                    exports.append(_c_string(data, strings + name).removeprefix("_"))
        elif command in (0x32, 0x24):  # LC_BUILD_VERSION, LC_VERSION_MIN_MACOSX
            (version,) = struct.unpack_from("<I", data, at + (12 if command == 0x32 else 8))
            minimum = (version >> 16, (version >> 8) & 0xFF)
        at += size
    return Binary("macos", MACHO_CPUS.get(cpu & 0xFFFFFFFF, hex(cpu)), exports, minimum)
