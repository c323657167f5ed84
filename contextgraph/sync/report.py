"""What a sync did (:class:`SyncReport`), and the lines ``contextgraph sync`` prints of it.

Standard library only: :mod:`contextgraph.sync.unchanged` builds and prints a report without
loading SQLAlchemy or click.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contextgraph.terminal import shown

TYPE_CHECKING = False  # typing itself costs a light CLI run 20 ms; mypy honours the name
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class Problem:
    """A file the sync could not take (``failed``) or took with a caveat (``warning``)."""

    source: str
    path: str
    reason: str


@dataclass
class SyncReport:
    """What a sync did; ``as_dict`` gives the JSON shape the CLI prints."""

    sources: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # sources whose folder is gone
    scanned: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    renamed: int = 0
    failed: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    dropped_links: int = 0
    concepts: int = 0
    relations: int = 0
    entities: int = 0
    code_relations: int = 0
    communities: int | None = None
    modularity: float | None = None
    graph_changed: bool = False
    phases: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "sources": self.sources,
            "missingSources": self.missing,
            "files": {
                "scanned": self.scanned,
                "added": self.added,
                "updated": self.updated,
                "unchanged": self.unchanged,
                "deleted": self.deleted,
                "renamed": self.renamed,
                "failed": len(self.failed),
            },
            "failed": [p.__dict__ for p in self.failed],
            "warnings": [p.__dict__ for p in self.warnings],
            "droppedLinks": self.dropped_links,
            "concepts": self.concepts,
            "relations": self.relations,
            "entities": self.entities,
            "codeRelations": self.code_relations,
            "communities": self.communities,
            "modularity": self.modularity,
            "seconds": {k: round(v, 4) for k, v in self.phases.items()},
        }


def report_lines(report: SyncReport) -> list[tuple[str, bool]]:
    """What ``contextgraph sync`` prints of ``report``: (line, to stderr), in order."""
    data = report.as_dict()
    files = data["files"]
    lines = [
        (
            f"synced {shown(', '.join(report.sources)) or '(nothing)'}: {files['scanned']} files "
            f"scanned, {files['added']} added, {files['updated']} updated, "
            f"{files['unchanged']} unchanged, {files['deleted']} deleted, "
            f"{files['renamed']} renamed, {files['failed']} failed",
            False,
        ),
        (
            f"{report.concepts} concepts, {report.relations} relations, {report.entities} "
            f"entities, {report.code_relations} code relations",
            False,
        ),
    ]
    if report.communities is not None:
        lines.append(
            (f"{report.communities} communities, modularity {report.modularity:.3f}", False)
        )
    lines.extend((line, True) for line in problem_lines(report))
    seconds = ", ".join(f"{k} {v:.2f}s" for k, v in data["seconds"].items())
    lines.append((f"time: {seconds}", False))
    return lines


def problem_lines(report: SyncReport) -> list[str]:
    """A line per failed file and per warning, with its reason (for stderr)."""
    lines = []
    for kind, problems in (("failed", report.failed), ("warning", report.warnings)):
        for problem in problems:
            where = shown(problem.source + "/" + problem.path)
            lines.append(f"{kind}: {where}: {shown(problem.reason)}")
    return lines


__all__ = ["Problem", "SyncReport", "problem_lines", "report_lines"]
