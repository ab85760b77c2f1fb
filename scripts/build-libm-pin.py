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
import shlex
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


def compiler() -> tuple[list[str], str]:
    """The C compiler command ($CC, which may hold arguments, or the first of cc, gcc, clang) and the
    first line of its --version."""
    given = os.environ.get("CC", "").strip()
    candidates = [shlex.split(given)] if given else [["cc"], ["gcc"], ["clang"]]
    for command in candidates:
        path = shutil.which(command[0]) if command else None
        if path:
            version = subprocess.run([path, *command[1:], "--version"], capture_output=True, text=True).stdout.splitlines()
            return [path, *command[1:]], version[0] if version else command[0]
    if given:
        raise BuildError(f"CC={given} names no program on this machine; set CC to a C compiler, or unset it to use cc, gcc or clang")
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


def tar_members(archive: tarfile.TarFile, wanted: dict[str, str], into: Path) -> set[str]:
    """Writes each wanted glibc file (name -> path inside the glibc tree) found in a glibc tarball; the names found."""
    found: set[str] = set()
    for member in archive:
        parts = member.name.split("/", 1)
        for name, inner in wanted.items():
            if member.isfile() and len(parts) == 2 and parts[1] == inner:
                (into / inner).parent.mkdir(parents=True, exist_ok=True)
                (into / inner).write_bytes(archive.extractfile(member).read())
                found.add(name)
        if len(found) == len(wanted):
            break
    return found


def from_deb(deb: Path, wanted: dict[str, str], into: Path, mistake: type[Exception]) -> str:
    """The glibc tarball inside a glibc-source package, read as a stream. `mistake` is raised for a
    file that is not that package (a user's mistake when the user named it)."""
    if not shutil.which("dpkg-deb"):
        raise BuildError(f"reading {deb} needs dpkg-deb; pass an unpacked glibc tree or a glibc tarball instead")
    with subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as unpack:
        try:
            with tarfile.open(fileobj=unpack.stdout, mode="r|") as data:
                for member in data:
                    if member.isfile() and "/usr/src/glibc/glibc-" in f"/{member.name.lstrip('./')}" and ".tar." in member.name:
                        with tarfile.open(fileobj=data.extractfile(member), mode="r|*") as source:
                            found = tar_members(source, wanted, into)
                        if len(found) < len(wanted):
                            raise mistake(f"{deb} holds {member.name} without {', '.join(sorted(set(wanted) - found))}")
                        return f"{deb.name} ({Path(member.name).name})"
        except (tarfile.TarError, EOFError, OSError) as error:
            reason = (unpack.stderr.read().decode(errors="replace").strip().splitlines() or [str(error)])[-1]
            raise mistake(f"{deb} is not a readable package ({reason})") from None
        finally:
            unpack.kill()
    raise mistake(f"{deb} holds no glibc source tarball (usr/src/glibc/glibc-*.tar.*): is it the glibc-source package?")


def fetch_sources(given: str | None, wanted: dict[str, str], into: Path, scratch: Path) -> str:
    """Copies glibc's files into `into`; returns where they came from."""
    if given:
        path = Path(given).expanduser().resolve()
        if path.is_dir():
            missing = [inner for inner in wanted.values() if not (path / inner).is_file()]
            if missing:
                raise UsageError(f"{path} is not a glibc source tree (no {missing[0]})")
            for inner in wanted.values():
                (into / inner).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path / inner, into / inner)
            return str(path)
        if not path.is_file():
            raise UsageError(f"--glibc-source {given}: no such file or folder")
        if path.suffix == ".deb":
            return from_deb(path, wanted, into, UsageError)
        try:
            with tarfile.open(path, mode="r:*") as archive:
                found = tar_members(archive, wanted, into)
        except (tarfile.TarError, EOFError, OSError) as error:
            raise UsageError(f"--glibc-source {given}: not a tar archive or not readable ({type(error).__name__})") from None
        if len(found) < len(wanted):
            raise UsageError(f"--glibc-source {given}: no {', '.join(wanted[n] for n in wanted if n not in found)} in it")
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
    return from_deb(debs[0], wanted, into, BuildError)


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def earlier_build(folder: Path) -> dict | None:
    """The build.json of `folder` when it is a pin folder this script wrote (None when it is new or empty).
    Anything else is refused: the folder's contents are replaced."""
    if not folder.exists():
        return None
    if not folder.is_dir():
        raise UsageError(f"{shown(folder)} is a file; name a folder for the libm pin")
    names = {p.name for p in folder.iterdir() if not p.name.startswith(".staging-")}
    if not names:
        return None
    try:
        record = json.loads((folder / "build.json").read_text())
        ours = isinstance(record, dict) and {"inputs_sha256", "library"} <= record.keys()
        ours = ours and names <= {"build.json", record["library"], "glibc"}
    except (OSError, ValueError):
        ours = False
    if not ours:
        raise UsageError(f"{shown(folder)} exists and is not a libm pin folder (it holds other files); name a new folder")
    return record


def up_to_date(folder: Path, record: dict | None, want: str) -> bool:
    """The stamp matches and the library is the one built (a damaged file is rebuilt)."""
    if not record or record.get("inputs_sha256") != want:
        return False
    library = folder / str(record["library"])
    return library.is_file() and file_sha256(library) == record.get("library_sha256")


def compile_library(cc: list[str], pin: dict, sources: Path, identity: str, scratch: Path, library: Path) -> None:
    flags = [*pin["compile_flags"], "-I", str(PIN_SOURCES / "include")]
    steps = []
    for name, inner in pin["glibc_files"].items():
        steps.append((f"-D__{name}=wwref_glibc_{name}", sources / inner, scratch / f"{name}.o"))
    steps.append((f"-DWWREF_PIN_IDENTITY={json.dumps(identity)}", PIN_SOURCES / "pin.c", scratch / "pin.o"))
    for define, source, obj in steps:
        done = subprocess.run([*cc, *flags, define, "-c", str(source), "-o", str(obj)], capture_output=True, text=True)
        if done.returncode != 0 or not obj.is_file():
            raise BuildError(
                f"{' '.join(cc)} could not compile {source.name}: {(done.stderr.strip().splitlines() or ['no object file'])[0]}"
            )
    # -z defs: a name the header stand-ins do not define fails here, not when the library loads
    link = [*cc, "-shared", "-Wl,-z,defs", "-o", str(library), *(str(obj) for _, _, obj in steps), "-lm"]
    done = subprocess.run(link, capture_output=True, text=True)
    if done.returncode != 0 or not library.is_file():
        raise BuildError(f"{' '.join(cc)} could not link {library.name}: {(done.stderr.strip().splitlines() or ['no library file'])[0]}")


def install(staging: Path, folder: Path, library_name: str) -> None:
    """glibc's files, then the library, then build.json, which names the library's digest: a reader
    that finds them disagreeing (another build half done) builds again."""
    if (folder / "glibc").exists():
        (folder / "glibc").rename(staging / "glibc.previous")
    (staging / "glibc").rename(folder / "glibc")
    os.replace(staging / library_name, folder / library_name)
    os.replace(staging / "build.json", folder / "build.json")


def build(args: argparse.Namespace) -> int:
    if args.glibc_source is not None and not args.glibc_source.strip():
        raise UsageError("--glibc-source needs a path")
    if args.glibc_source and not Path(args.glibc_source).expanduser().exists():
        raise UsageError(f"--glibc-source {args.glibc_source}: no such file or folder")
    spec = load("libm")
    pin = spec["pin"]
    library_name = Path(pin["library"]).name
    folder = Path(args.out).expanduser().resolve() if args.out else ROOT / Path(pin["library"]).parent
    if args.out and not folder.parent.is_dir():
        raise UsageError(f"--out {args.out}: {shown(folder.parent)} is not a folder")
    record = earlier_build(folder)
    if platform.machine() not in ("x86_64", "AMD64"):
        say(f"not built: this machine is {platform.machine()}, and numerical profile '{PROFILE}' is for x86-64")
        return 0
    cc, cc_version = compiler()
    want = inputs_digest(cc_version, pin)
    # A source named explicitly is always built from.
    if not args.force and not args.glibc_source and up_to_date(folder, record, want):
        say(f"up to date: {shown(folder / library_name)}")
        return 0

    created = not folder.exists()
    folder.mkdir(parents=not args.out, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=folder))
    try:
        (staging / "glibc").mkdir()
        files = pin["glibc_files"]
        # Rebuilding (a damaged library, another compiler) reuses the earlier build's glibc files.
        kept = folder / "glibc"
        reuse = not args.glibc_source and record is not None and all((kept / inner).is_file() for inner in files.values())
        origin = fetch_sources(str(kept) if reuse else args.glibc_source, files, staging / "glibc", staging)
        if reuse:  # where the files came from in the first place
            origin = str(record.get("glibc_source", kept))
        sources = {name: file_sha256(staging / "glibc" / inner) for name, inner in files.items()}
        identity = (
            "glibc generic "
            + ", ".join(f"{n} ({Path(files[n]).name} sha256 {d[:12]})" for n, d in sources.items())
            + f"; {cc_version}; {' '.join(pin['compile_flags'])}"
        )
        compile_library(cc, pin, staging / "glibc", identity, staging, staging / library_name)
        # The bits decide, not the file digests: any glibc whose generic code gives the profile's results serves.
        got = libm.digests(ctypes.CDLL(str(staging / library_name)), pin["functions"])
        expected = spec["expected"][PROFILE]
        wrong = [n for n in pin["functions"] if got[n] != expected[n]]
        if wrong:
            raise BuildError(
                f"the library built from {origin} gives other {', '.join(wrong)} bits than numerical profile '{PROFILE}' pins "
                f"({', '.join(f'{n} {got[n]}, pinned {expected[n]}' for n in wrong)}); glibc's generic code changed, "
                "or the compiler contracted into FMA"
            )
        built = {
            "library": library_name,
            "library_sha256": file_sha256(staging / library_name),
            "identity": identity,
            "glibc_source": origin,
            "glibc_files_sha256": sources,
            "compiler": cc_version,
            "compile_flags": pin["compile_flags"],
            "digests": got,
            "inputs_sha256": want,
        }
        (staging / "build.json").write_text(json.dumps(built, indent=2) + "\n")
        install(staging, folder, library_name)
    except BaseException:
        if created:  # a failed build leaves nothing behind
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    say(f"built {shown(folder / library_name)} from {origin}: {', '.join(pin['functions'])} give the pinned bits")
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
    except OSError as error:  # a compiler that wrote no usable library, a folder that cannot be written
        say(f"failed: {error}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
