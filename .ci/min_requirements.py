"""Print ``name==floor`` for every core dependency in pyproject.toml (the declared minimum versions), so CI
can install exactly the floors in a second environment and run the fast tests there.

torch is left out: only the CPU wheel of torch 2.13.0 is installable on these machines (an older torch
from the package index is a multi-GB CUDA build), so torch's floor is kept honest by guarding the code
that needs newer torch instead (see README, "Supported versions").
"""

import re
import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

with open(sys.argv[1] if len(sys.argv) > 1 else "pyproject.toml", "rb") as f:
    deps = tomllib.load(f)["project"]["dependencies"]
for dep in deps:
    if ";" in dep and "python_version" in dep:
        continue  # environment-specific back-ports (tomli) follow the running Python
    m = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][^,;\s]*)\s*", dep)
    if not m:
        sys.exit(f"pyproject.toml: dependency {dep!r} has no plain '>=' floor")
    if m[1] != "torch":
        print(f"{m[1]}=={m[2]}")
