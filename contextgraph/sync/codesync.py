"""Store the code graph of one source: rebuilt from the cached per-file facts when any changed.

Resolution is global to a source (a reference is weighted 0.5 only when its name is unique in the
whole source, an import may start resolving when a file appears), so an edit to one file can change
relations held by another. Rebuilding the source's code entities and relations from the parsed
facts cached in ``files.facts`` keeps the store equal to a from-scratch sync without re-parsing.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, delete, false, insert, select

from contextgraph.code import CodeParseError, FileFacts, build_graph, parse_code
from contextgraph.store import db, meta
from contextgraph.store.dialect import fits_index
from contextgraph.store.models import T_ENTITIES, T_FILES, T_REL
from contextgraph.store.sqlcore import chunked


def _entity_key(source_id: int, kind: str, key: str) -> str:
    # Packages are shared by every source; files and symbols belong to one.
    return key if kind == "package" else f"{source_id}:{key}"


def rebuild_code_graph(engine: Engine, source_id: int) -> None:
    """Replace the code entities and relations of ``source_id`` with freshly resolved ones."""
    with db.read(engine) as conn:
        rows = conn.execute(
            select(T_FILES.c.id, T_FILES.c.path, T_FILES.c.kind, T_FILES.c.facts, T_FILES.c.text)
            .where(T_FILES.c.source_id == source_id, T_FILES.c.kind.in_(("code", "config")))
            .order_by(T_FILES.c.path)
        ).all()
    facts: dict[str, FileFacts] = {}
    configs: dict[str, str] = {}
    file_ids: dict[str, int] = {}
    for fid, path, kind, facts_json, text in rows:
        file_ids[path] = fid
        if kind == "config":
            configs[path] = text or ""
        elif facts_json is not None:
            try:
                facts[path] = FileFacts.from_json(facts_json)
            except ValueError:
                # Facts cached by another version of the parser: parse the stored text again.
                try:
                    facts[path] = parse_code(path, text or "")
                except CodeParseError:
                    continue
    graph = build_graph(facts, configs)

    with db.write(engine) as conn:
        current = {
            r.path: r.id
            for r in conn.execute(
                select(T_FILES.c.id, T_FILES.c.path).where(T_FILES.c.source_id == source_id)
            )
        }
        if any(current.get(path) != fid for path, fid in file_ids.items()):
            return  # the files moved under us; the stale mark stays and the next sync redoes it
        ids_in_source = list(file_ids.values())
        for chunk in chunked(ids_in_source):
            conn.execute(delete(T_REL).where(T_REL.c.file_id.in_(chunk)))
            conn.execute(delete(T_ENTITIES).where(T_ENTITIES.c.file_id.in_(chunk)))
        entity_rows: list[dict[str, Any]] = []
        packages = [
            e
            for e in graph.entities
            if e.kind == "package" and fits_index(conn, e.key) and fits_index(conn, e.name.lower())
        ]
        taken: set[tuple[str, str]] = set()
        for e in graph.entities:
            # A key is a path, '::' and a qualified name, and both may hold '::' (a JS method
            # named by the string "js::f", a file named "x.js::Cls.js"): two symbols can spell
            # one key. The first keeps it; the store's unique key would fail the whole sync.
            if e.kind == "package" or (e.kind, e.key) in taken:
                continue
            taken.add((e.kind, e.key))
            key = _entity_key(source_id, e.kind, e.key)
            if not (fits_index(conn, key) and fits_index(conn, e.name.lower())):
                continue  # PostgreSQL: left out with its relations, not failing the rebuild
            entity_rows.append(
                {
                    "kind": e.kind,
                    "key": key,
                    "name": e.name,
                    "name_lower": e.name.lower(),
                    "file_id": file_ids.get(e.path or ""),
                    "path": e.path,
                }
            )
        if entity_rows:
            conn.execute(insert(T_ENTITIES), entity_rows)
        if packages:
            from contextgraph.store.dialect import insert_ignore, name_of

            conn.execute(
                insert_ignore(T_ENTITIES, ["kind", "key"], dialect=name_of(conn)),
                [
                    {"kind": "package", "key": p.key, "name": p.name, "name_lower": p.name.lower()}
                    for p in packages
                ],
            )
        ids: dict[tuple[str, str], int] = {}
        for kind, key, eid in conn.execute(
            select(T_ENTITIES.c.kind, T_ENTITIES.c.key, T_ENTITIES.c.id).where(
                T_ENTITIES.c.file_id.in_(ids_in_source) if ids_in_source else false()
            )
        ):
            ids[(kind, key)] = eid
        package_keys = sorted({p.key for p in packages})
        for keys in chunked(package_keys):
            for key, eid in conn.execute(
                select(T_ENTITIES.c.key, T_ENTITIES.c.id).where(
                    T_ENTITIES.c.kind == "package",
                    T_ENTITIES.c.key.in_(keys),
                )
            ):
                ids[("package", key)] = eid
        relation_rows = []
        for r in graph.relations:
            src = ids.get((r.src[0], _entity_key(source_id, *r.src)))
            dst = ids.get((r.dst[0], _entity_key(source_id, *r.dst)))
            fid = file_ids.get(r.path)
            if src is None or dst is None or fid is None:
                continue
            relation_rows.append(
                {"src_id": src, "dst_id": dst, "type": r.type, "weight": r.weight, "file_id": fid}
            )
        if relation_rows:
            conn.execute(insert(T_REL), relation_rows)
        _delete_orphan_packages(conn)
        meta.clear_stale(conn, meta.code_graph(source_id))


def _delete_orphan_packages(conn: Any) -> None:
    used = select(T_REL.c.dst_id).where(T_REL.c.dst_id == T_ENTITIES.c.id).exists()
    conn.execute(delete(T_ENTITIES).where(T_ENTITIES.c.kind == "package", ~used))


__all__ = ["rebuild_code_graph"]
