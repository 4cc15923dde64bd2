"""The layering promises of design.md section 1."""

from __future__ import annotations

import subprocess
import sys


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_import_deltatx_log_loads_no_pyspark() -> None:
    modules = _loaded_after("import deltatx.log, deltatx.log.delta_log, deltatx.log.commit")
    assert "deltatx.log.delta_log" in modules
    assert not any(m == "pyspark" or m.startswith("pyspark.") for m in modules)


def test_import_deltatx_loads_no_pyspark_until_used() -> None:
    modules = _loaded_after("import deltatx")
    assert "deltatx.errors" in modules
    assert not any(m.startswith("pyspark") for m in modules)


def test_kernel_imports_only_the_standard_library() -> None:
    modules = _loaded_after(
        "import deltatx.kernel.actions, deltatx.kernel.codec, deltatx.kernel.conflicts, "
        "deltatx.kernel.evaluation, deltatx.kernel.properties, deltatx.kernel.features"
    )
    for banned in ("pyarrow", "pyspark", "sqlglot"):
        assert banned not in modules, banned
