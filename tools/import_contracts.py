"""import-linter contract types of tally's own (`contract_types` in pyproject.toml).

import-linter sees an external package only as a whole (`sqlalchemy`, never
`sqlalchemy.exc`), so a rule about which of its names a layer may take is checked here,
on the import statements themselves.
"""

from __future__ import annotations

import re

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields, output


class ImportedNamesContract(Contract):
    """`source_modules` (and their descendants) import `external_package` only as
    `from <package> import <names>` on one line, each name one of `allowed_names`.

    Any other form (`import sqlalchemy`, a submodule, a parenthesised list) breaks it:
    what it imports could not be checked."""

    source_modules = fields.ListField(subfield=fields.StringField())
    external_package = fields.StringField()
    allowed_names = fields.ListField(subfield=fields.StringField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        package = str(self.external_package)
        allowed = {str(name) for name in self.allowed_names}  # type: ignore[attr-defined]
        statement = re.compile(rf"from {re.escape(package)} import ([\w, ]+)")
        broken: list[dict[str, object]] = []
        for module in sorted(self._modules(graph)):
            if not graph.direct_import_exists(importer=module, imported=package):
                continue
            for detail in graph.get_import_details(importer=module, imported=package):
                line = str(detail["line_contents"]).strip()
                found = statement.fullmatch(line.split("#", 1)[0].strip())
                names = {n.strip() for n in found.group(1).split(",")} if found else set()
                if found is None or not names <= allowed:
                    broken.append({**detail, "line_contents": line})
        return ContractCheck(kept=not broken, metadata={"broken": broken})

    def render_broken_contract(self, check: ContractCheck) -> None:
        names = ", ".join(str(name) for name in self.allowed_names)  # type: ignore[attr-defined]
        for detail in check.metadata["broken"]:
            output.print_error(
                f"{detail['importer']} (l.{detail['line_number']}): {detail['line_contents']}"
                f" takes more of {self.external_package} than {names}"
            )
            output.new_line()

    def _modules(self, graph: ImportGraph) -> set[str]:
        modules: set[str] = set()
        for name in self.source_modules:  # type: ignore[attr-defined]
            modules |= {str(name)} | graph.find_descendants(str(name))
        return modules
