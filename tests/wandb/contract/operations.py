"""What identifies an operation the SDK sends: its name and the field paths it selects.

``signature`` flattens a GraphQL document (fragments expanded) into sorted paths such as
``project(entityName,name).run(name).historyKeys``: the same text for the same request however the
query is formatted, and a different one as soon as the SDK asks for another field or argument.
"""

from __future__ import annotations

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    OperationDefinitionNode,
)


def signature(document: DocumentNode) -> tuple[str, ...]:
    fragments = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
    paths: set[str] = set()

    def walk(selection_set, prefix: str) -> None:
        for sel in selection_set.selections:
            if isinstance(sel, FieldNode):
                args = ",".join(sorted(a.name.value for a in sel.arguments or ()))
                name = sel.name.value + (f"({args})" if args else "")
                path = f"{prefix}.{name}" if prefix else name
                if sel.selection_set is None:
                    paths.add(path)
                else:
                    walk(sel.selection_set, path)
            elif isinstance(sel, FragmentSpreadNode):
                walk(fragments[sel.name.value].selection_set, prefix)
            elif isinstance(sel, InlineFragmentNode):
                walk(sel.selection_set, prefix)

    for definition in document.definitions:
        if isinstance(definition, OperationDefinitionNode):
            walk(definition.selection_set, definition.operation.value)
    return tuple(sorted(paths))
