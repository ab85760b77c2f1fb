#!/usr/bin/env python3
"""Builds the libm pin of the x86-64-v3 numerical profile (native/libm-pin/README.md), once.

    scripts/build-libm-pin.py [--glibc-source PATH] [--force] [--out DIR]

Compiles glibc's generic sysdeps/ieee754/dbl-64/s_log1p.c and s_expm1.c (contracts/libm.json "pin")
with native/libm-pin/pin.c into the library the profile preloads, checks that it gives the profile's
bits on the probes, and installs it with a build.json (sources, compiler, flags) and the two glibc files
(in their glibc folders, so that the folder serves as --glibc-source again) under .tools/libm-pin/.
glibc's source comes from PATH (an unpacked glibc tree, a glibc-*.tar.{xz,gz,bz2} or a glibc-source
.deb), or else from the glibc-source package of the system's apt sources (apt-get download; nothing is
installed). Needs a C compiler: $CC, cc, gcc or clang. Exits 2 for a bad argument, 1 when it cannot
build, with one line saying why.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from workflows import libm  # noqa: E402
from workflows.contracts import load  # noqa: E402

PIN_SOURCES = ROOT / "native" / "libm-pin"
PROFILE = "x86-64-v3"


class BuildError(Exception):
    pass


class UsageError(Exception):
    pass


def say(line: str) -> None:
    print(f"build-libm-pin: {line}", file=sys.stderr, flush=True)


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def compiler() -> tuple[str, str]:
    """The C compiler and the first line of its --version."""
    names = [os.environ["CC"]] if os.environ.get("CC") else ["cc", "gcc", "clang"]
    for name in names:
        path = shutil.which(name)
        if path:
            version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.splitlines()
            return path, version[0] if version else name
    raise BuildError(
        "needs a C compiler (cc, gcc or clang; on Debian or Ubuntu: apt-get install gcc) to build the libm pin "
        f"of numerical profile '{PROFILE}'; or choose the 'native' profile"
    )


def inputs_digest(cc_version: str, spec: dict) -> str:
    """What decides the build: the pin's own files, the contract's pin section and the compiler."""
    h = hashlib.sha256()
    for path in sorted(PIN_SOURCES.rglob("*")):
        if path.is_file() and path.suffix in (".c", ".h"):
            h.update(path.relative_to(PIN_SOURCES).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(json.dumps(spec, sort_keys=True).encode() + b"\0" + cc_version.encode())
    return h.hexdigest()


def tar_members(archive: tarfile.TarFile, wanted: dict[str, str], into: Path) -> dict[str, str]:
    """Writes each wanted glibc file (name -> path inside the glibc tree) found in a glibc tarball."""
    found: dict[str, str] = {}
    for member in archive:
        parts = member.name.split("/", 1)
        for name, inner in wanted.items():
            if member.isfile() and len(parts) == 2 and parts[1] == inner:
                (into / inner).parent.mkdir(parents=True, exist_ok=True)
                (into / inner).write_bytes(archive.extractfile(member).read())
                found[name] = parts[0]
        if len(found) == len(wanted):
            break
    return found


def from_deb(deb: Path, wanted: dict[str, str], into: Path) -> str:
    """The glibc tarball inside a glibc-source package, read as a stream."""
    if not shutil.which("dpkg-deb"):
        raise BuildError(f"reading {deb} needs dpkg-deb; pass an unpacked glibc tree or a glibc tarball instead")
    with subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE) as unpack:
        with tarfile.open(fileobj=unpack.stdout, mode="r|") as data:
            for member in data:
                if member.isfile() and "/usr/src/glibc/glibc-" in f"/{member.name.lstrip('./')}" and ".tar." in member.name:
                    with tarfile.open(fileobj=data.extractfile(member), mode="r|*") as source:
                        found = tar_members(source, wanted, into)
                    unpack.kill()
                    if len(found) < len(wanted):
                        raise BuildError(f"{deb} holds {member.name} without {', '.join(sorted(set(wanted) - set(found)))}")
                    return f"{deb.name} ({Path(member.name).name})"
    raise BuildError(f"{deb} holds no glibc source tarball (usr/src/glibc/glibc-*.tar.*): is it the glibc-source package?")


def fetch_sources(given: str | None, wanted: dict[str, str], into: Path, scratch: Path) -> str:
    """Copies glibc's files into `into`; returns where they came from."""
    if given:
        path = Path(given).expanduser().resolve()
        if path.is_dir():
            missing = [inner for inner in wanted.values() if not (path / inner).is_file()]
            if missing:
                raise BuildError(f"{path} is not a glibc source tree (no {missing[0]})")
            for inner in wanted.values():
                (into / inner).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path / inner, into / inner)
            return str(path)
        if not path.is_file():
            raise BuildError(f"--glibc-source {given}: no such file or folder")
        if path.suffix == ".deb":
            return from_deb(path, wanted, into)
        try:
            with tarfile.open(path, mode="r:*") as archive:
                found = tar_members(archive, wanted, into)
        except tarfile.TarError as error:
            raise BuildError(f"--glibc-source {given}: not a tarball ({error})") from None
        if len(found) < len(wanted):
            raise BuildError(f"--glibc-source {given}: no {', '.join(wanted[n] for n in wanted if n not in found)} in it")
        return path.name
    if not shutil.which("apt-get"):
        raise BuildError(
            "needs glibc's source: pass --glibc-source PATH (a glibc tree, a glibc-*.tar.xz, or a glibc-source .deb); "
            "without it the glibc-source package is fetched with apt-get, which this machine lacks"
        )
    say("fetching the glibc-source package with apt-get download (about 20 MB; nothing is installed)…")
    got = subprocess.run(["apt-get", "download", "-q", "glibc-source"], cwd=scratch, capture_output=True, text=True)
    debs = sorted(scratch.glob("glibc-source_*.deb"))
    if got.returncode != 0 or not debs:
        last = (got.stderr.strip().splitlines() or ["no package file"])[-1]
        raise BuildError(
            f"apt-get download glibc-source failed ({last}); run 'apt-get update' (as root) and try again, or pass --glibc-source PATH"
        )
    return from_deb(debs[0], wanted, into)


def build(args: argparse.Namespace) -> int:
    if args.glibc_source and not Path(args.glibc_source).expanduser().exists():
        raise UsageError(f"--glibc-source {args.glibc_source}: no such file or folder")
    spec = load("libm")
    pin = spec["pin"]
    target = Path(args.out).resolve() / Path(pin["library"]).name if args.out else ROOT / pin["library"]
    stamp = target.parent / "build.json"
    # The folder is replaced as a whole, so it must be new or an earlier build's.
    if target.parent.exists() and not (stamp.is_file() or (target.parent.is_dir() and not any(target.parent.iterdir()))):
        raise UsageError(f"{shown(target.parent)} exists and is not a libm pin folder (no build.json); name a new folder")
    if platform.machine() not in ("x86_64", "AMD64"):
        say(f"not built: this machine is {platform.machine()}, and numerical profile '{PROFILE}' is for x86-64")
        return 0
    cc, cc_version = compiler()
    want = inputs_digest(cc_version, pin)
    if not args.force and target.is_file() and stamp.is_file():
        try:
            if json.loads(stamp.read_text())["inputs_sha256"] == want:
                say(f"up to date: {shown(target)}")
                return 0
        except (ValueError, KeyError):
            pass

    target.parent.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".libm-pin-", dir=target.parent.parent) as scratch_name:
        scratch = Path(scratch_name)
        staged = scratch / target.parent.name
        (staged / "glibc").mkdir(parents=True)
        files = pin["glibc_files"]
        origin = fetch_sources(args.glibc_source, files, staged / "glibc", scratch)
        sources = {name: hashlib.sha256((staged / "glibc" / inner).read_bytes()).hexdigest() for name, inner in files.items()}
        identity = (
            "glibc generic "
            + ", ".join(f"{n} ({Path(files[n]).name} sha256 {d[:12]})" for n, d in sources.items())
            + f"; {cc_version}; {' '.join(pin['compile_flags'])}"
        )
        flags = [*pin["compile_flags"], "-I", str(PIN_SOURCES / "include")]
        objects = []
        for name, inner in files.items():
            obj = scratch / f"{name}.o"
            renamed = f"-D__{name}=wwref_glibc_{name}"
            compile_step = [cc, *flags, renamed, "-c", str(staged / "glibc" / inner), "-o", str(obj)]
            objects.append((compile_step, obj))
        glue = scratch / "pin.o"
        identity_flag = f"-DWWREF_PIN_IDENTITY={json.dumps(identity)}"
        objects.append(([cc, *flags, identity_flag, "-c", str(PIN_SOURCES / "pin.c"), "-o", str(glue)], glue))
        for step, _ in objects:
            done = subprocess.run(step, capture_output=True, text=True)
            if done.returncode != 0:
                raise BuildError(f"{' '.join(step[:1] + step[-3:])} failed: {(done.stderr.strip().splitlines() or ['?'])[0]}")
        library = staged / target.name
        done = subprocess.run([cc, "-shared", "-o", str(library), *(str(o) for _, o in objects), "-lm"], capture_output=True, text=True)
        if done.returncode != 0:
            raise BuildError(f"linking {target.name} failed: {(done.stderr.strip().splitlines() or ['?'])[0]}")

        # The bits decide, not the file digests: any glibc whose generic code gives the profile's results serves.
        got = libm.digests(ctypes.CDLL(str(library)), pin["functions"])
        expected = spec["expected"][PROFILE]
        wrong = [n for n in pin["functions"] if got[n] != expected[n]]
        if wrong:
            raise BuildError(
                f"the library built from {origin} gives other {', '.join(wrong)} bits than numerical profile '{PROFILE}' pins "
                f"({', '.join(f'{n} {got[n]}, pinned {expected[n]}' for n in wrong)}); glibc's generic code changed, "
                "or the compiler contracted into FMA"
            )
        record = {
            "library": target.name,
            "identity": identity,
            "glibc_source": origin,
            "glibc_files_sha256": sources,
            "compiler": cc_version,
            "compile_flags": pin["compile_flags"],
            "digests": got,
            "inputs_sha256": want,
        }
        (staged / "build.json").write_text(json.dumps(record, indent=2) + "\n")
        if target.parent.exists():
            target.parent.rename(scratch / "previous")
        try:
            staged.rename(target.parent)
        except OSError:
            if not target.is_file():  # not another build finishing first
                raise
    say(f"built {shown(target)} from {origin}: {', '.join(pin['functions'])} give the pinned bits")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="build-libm-pin", description=__doc__.splitlines()[0])
    parser.add_argument("--glibc-source", metavar="PATH", help="a glibc source tree, tarball or glibc-source .deb")
    parser.add_argument("--force", action="store_true", help="build even when the stamp says up to date")
    parser.add_argument("--out", metavar="DIR", help=f"install into DIR instead of {Path(load('libm')['pin']['library']).parent}/")
    try:
        return build(parser.parse_args())
    except UsageError as error:
        say(str(error))
        return 2
    except BuildError as error:
        say(str(error))
        return 1


if __name__ == "__main__":
    sys.exit(main())
