"""An import-linter contract type that import-linter does not ship: no package imports another's private module.

dpkit's rule (``pyproject.toml``, ``[tool.importlinter]``): a module whose last dotted segment starts
with ``_`` (``dpkit.divergences._closed``) belongs to its package (``dpkit.divergences``) and may be
imported only from inside that package.  What another package needs goes through a public internal
module (``dpkit.divergences.pairs``, ``dpkit.random.exact``).  Packages directly under the root whose
own name is private (``dpkit._math``, ``dpkit._table``) are the root's shared helpers and are exempt.

Written by hand because import-linter's built-in ``forbidden`` contract names modules one by one and
its wildcards match whole segments only, so "any ``_``-prefixed module of another package" cannot be
stated with it.  Used only by ``make lint``; not part of the installed package.
"""

from __future__ import annotations

from typing import Any

from importlinter import Contract, ContractCheck, fields, output


def _owner(module: str, root: str) -> str | None:
    """The package that owns ``module`` if ``module`` is private below it, else None."""
    parts = module.split(".")
    for i in range(len(parts) - 1, 1, -1):  # never the root's own children (dpkit._math)
        if parts[i].startswith("_") and not parts[i].startswith("__"):
            return ".".join(parts[:i])
    return None


class PrivateModulesContract(Contract):
    """Forbid importing ``pkg._private`` (or anything below it) from outside ``pkg``."""

    root = fields.StringField()

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        root = str(self.root)
        broken: list[tuple[str, str, int]] = []
        for importer in sorted(graph.modules):
            if not importer.startswith(root + ".") and importer != root:
                continue
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                owner = _owner(imported, root)
                if owner is None or importer == owner or importer.startswith(owner + "."):
                    continue
                details = graph.get_import_details(importer=importer, imported=imported)
                line = int(details[0]["line_number"]) if details else 0
                broken.append((importer, imported, line))
        return ContractCheck(kept=not broken, metadata={"broken": broken})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for importer, imported, line in check.metadata["broken"]:
            output.print_error(
                f"{importer} (line {line}) imports {imported}, private to another package; "
                "import it from that package's public internal module instead."
            )
            output.new_line()
