"""Licence, citation and homepage of a raw file shipped inside a pinned package, for ``wwref new-source``
(workflows/prepare/inspect.py, describe mode), each with where it was read:

* the package's own metadata: its licence (License-Expression, a one-line License field, the ``License:``
  line of a Debian-style copyright text, or the first line of a licence text naming itself; else the
  licence classifier), its version and homepage;
* the description the package ships for the data set: scikit-learn's ``sklearn/datasets/descr/<name>.rst``
  (title, creator, donor, date, first reference, source URL), statsmodels' ``datasets/<name>/data.py``
  (TITLE, SOURCE, COPYRIGHT) and the docstring of the scikit-image loader that reads the file
  (``skimage/data/_fetchers.py``: summary line, the copyright sentence).

Descriptions are read as text (``ast`` for the Python files), never imported. What a description does not
state is left out, never invented.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
from pathlib import Path
from typing import Any


def _one_line(text: str) -> str:
    return " ".join(text.split())


def package_licence(dist: importlib.metadata.Distribution) -> tuple[str, str] | None:
    """Short licence name of a distribution and the metadata field it was read from."""
    metadata = dist.metadata
    if metadata.get("License-Expression"):
        return metadata["License-Expression"].strip(), "License-Expression"
    lines = [line.strip() for line in (metadata.get("License") or "").splitlines() if line.strip()]
    if len(lines) == 1 and len(lines[0]) <= 100:
        return lines[0], "License"
    for line in lines:  # a Debian-style copyright text: "License: BSD-3-Clause"
        if line.startswith("License:") and line[len("License:") :].strip():
            return line[len("License:") :].strip(), "License"
    if lines and len(lines[0]) <= 100 and re.search(r"licen[cs]e", lines[0], re.I):
        return lines[0], "first line of License"
    for classifier in metadata.get_all("Classifier") or []:
        if classifier.startswith("License ::"):
            return classifier.split("::")[-1].strip(), "Classifier"
    return None


def package_homepage(dist: importlib.metadata.Distribution) -> str | None:
    metadata = dist.metadata
    for entry in metadata.get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "homepage" and url.strip():
            return url.strip()
    return metadata.get("Home-page") or None


# ---------------------------------------------------------------------------------------------
# descriptions shipped with the data: {"title", "creators", "reference", "licence", "homepage"} (each
# optional) and "from", the file (and part) they were read from


def _sklearn(purelib: Path, relative: str) -> dict[str, Any] | None:
    folder, _, name = relative.rpartition("/")
    if folder != "sklearn/datasets/data":
        return None
    stem = re.sub(r"(\.csv)?(\.gz)?$", "", name)
    descr = purelib / "sklearn" / "datasets" / "descr"
    # the description whose name is the file's stem, or its first words: diabetes_data_raw -> diabetes
    matches = sorted((p for p in descr.glob("*.rst") if stem == p.stem or stem.startswith(p.stem + "_")), key=lambda p: -len(p.stem))
    if not matches:
        return None
    lines = matches[0].read_text(encoding="utf-8").splitlines()
    found: dict[str, Any] = {"from": f"sklearn/datasets/descr/{matches[0].name}"}
    for i, line in enumerate(lines[:-1]):
        if line.strip() and not line.startswith("..") and re.fullmatch(r"[-=~]{3,}", lines[i + 1].strip()):
            found["title"] = line.strip()
            break
    people = [f"{field.lower()} {value.strip()}" for field, value in re.findall(r"^:(Creator|Donor|Date):(.+)$", "\n".join(lines), re.M)]
    if people:
        found["creators"] = "; ".join(people)
    for i, line in enumerate(lines):
        if "References" in line:
            item: list[str] = []
            for following in lines[i + 1 :]:
                text = following.strip()
                if item and (not text or text[:2] in ("- ", "* ")):
                    break
                if text[:2] in ("- ", "* ") or item:
                    item.append(text.lstrip("-* "))
            if item:
                found["reference"] = _one_line(" ".join(item))
            break
        if line.strip() == "For more information see:":
            paragraph = []
            for following in lines[i + 1 :]:
                if not following.strip():
                    break
                paragraph.append(following.strip())
            found["reference"] = _one_line(" ".join(paragraph))
            break
    for i, line in enumerate(lines[:-1]):
        if line.strip() == "Source URL:" and lines[i + 1].strip().startswith("http"):
            found["homepage"] = lines[i + 1].strip()
    return found


def _module_strings(path: Path) -> tuple[ast.Module, dict[str, str]]:
    module = ast.parse(path.read_text(encoding="utf-8"))
    strings: dict[str, str] = {}
    for node in module.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                strings[node.targets[0].id] = value.value
            elif isinstance(value, ast.Name) and value.id == "__doc__" and ast.get_docstring(module):
                strings[node.targets[0].id] = ast.get_docstring(module) or ""
    return module, strings


def _statsmodels(purelib: Path, relative: str) -> dict[str, Any] | None:
    folder = relative.rpartition("/")[0]
    data = purelib / folder / "data.py"
    if not folder.startswith("statsmodels/datasets/") or not data.is_file():
        return None
    _, strings = _module_strings(data)
    found: dict[str, Any] = {"from": f"{folder}/data.py"}
    if strings.get("TITLE", "").strip():
        found["title"] = _one_line(strings["TITLE"])
    if strings.get("SOURCE", "").strip():
        found["reference"] = _one_line(strings["SOURCE"])
    copyright_ = _one_line(strings.get("COPYRIGHT", ""))
    if copyright_ and copyright_.strip("?"):
        found["licence"] = copyright_
    return found


def _skimage(purelib: Path, relative: str) -> dict[str, Any] | None:
    folder, _, name = relative.rpartition("/")
    fetchers = purelib / "skimage" / "data" / "_fetchers.py"
    if folder != "skimage/data" or not fetchers.is_file():
        return None
    module, _ = _module_strings(fetchers)
    for function in module.body:
        if not isinstance(function, ast.FunctionDef) or function.name.startswith("_"):
            continue
        if not any(isinstance(n, ast.Constant) and n.value == f"data/{name}" for n in ast.walk(function)):
            continue
        doc = ast.get_docstring(function) or ""
        paragraphs = [p for p in re.split(r"\n\s*\n", doc) if p.strip()]
        found: dict[str, Any] = {"from": f"skimage/data/_fetchers.py, docstring of {function.name}()"}
        if paragraphs:
            found["title"] = f"{_one_line(paragraphs[0]).rstrip('.')} (skimage.data.{function.name}())"
        for paragraph in paragraphs:
            # the first paragraph stating the copyright, without a section heading ("Notes\n-----")
            text = re.sub(r"^\s*\w+\s*\n\s*-{3,}\s*\n", "", paragraph)
            if re.search(r"copyright|CC0|public domain|licen[cs]e", text, re.I) and not text.lstrip().startswith(".."):
                found["licence"] = _one_line(text)
                break
        return found
    return None


DESCRIPTIONS = {"scikit-learn": _sklearn, "statsmodels": _statsmodels, "scikit-image": _skimage}


def about(purelib: Path, package: dict[str, str]) -> dict[str, Any]:
    """{"licence", "citation", "homepage"}: each {"text", "from"} or None, for a file of a pinned package
    (the homepage only when the data set's description names one)."""
    dist = importlib.metadata.distribution(package["distribution"])
    shipped = f"{package['distribution']} {package['version']}"
    reader = DESCRIPTIONS.get(package["distribution"])
    try:
        described = reader(purelib, package["path"]) if reader else None
    except (OSError, SyntaxError, UnicodeDecodeError):  # a description that cannot be read states nothing
        described = None
    licence = package_licence(dist)
    homepage = package_homepage(dist)
    answer: dict[str, Any] = {"licence": None, "citation": None, "homepage": None}
    stated = described.get("licence") if described else None
    if licence or stated:
        unstated = (
            f"no licence stated in the data set's description ({described['from']})"
            if described
            else f"no licence stated for the file by {shipped}"
        )
        data = f"{stated.rstrip('.')} (as {shipped} documents the data set)" if stated else unstated
        package_part = f"; redistributed inside {shipped}, whose package licence is {licence[0]}" if licence else ""
        origins = ([described["from"]] if stated else []) + ([f"{shipped} package metadata ({licence[1]})"] if licence else [])
        answer["licence"] = {"text": data + package_part, "from": "; ".join(origins)}
    if described and (described.get("title") or described.get("reference")):
        parts = [described.get(key, "").rstrip(". ") for key in ("title", "creators", "reference")]
        where = f"as shipped in {shipped}{f' ({homepage})' if homepage else ''}: {package['path']}"
        answer["citation"] = {"text": "; ".join(p for p in parts if p) + f"; {where}", "from": described["from"]}
    if described and described.get("homepage"):
        answer["homepage"] = {"text": described["homepage"], "from": described["from"]}
    return answer
