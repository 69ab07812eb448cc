"""Strict offline validation of custom resources against their CRDs: Kueue's in
``../shared/data/kueue-crds/`` (:class:`KueueValidator`) and any other directory of CRDs
(:class:`CrdValidator`, which the Karpenter tests use with ``../shared/data/karpenter-crds/``).

The API server would do three things jsonschema alone does not (CLOUD-TESTING.md section 6), so this does:

- reject unknown fields: the schema is made strict, ``additionalProperties: false`` on every object schema
  that has ``properties`` and no ``x-kubernetes-preserve-unknown-fields`` (``metadata`` has no properties
  and stays open), then ``jsonschema.Draft202012Validator`` checks the whole object;
- apply the schema's defaults, then evaluate every ``x-kubernetes-validations`` CEL rule at its node with
  cel-python (``{"self": celpy.json_to_cel(value)}``); rules on ``oldSelf`` are update-time checks, skipped;
- keep ``x-kubernetes-list-type: map`` lists unique by their ``x-kubernetes-list-map-keys``.

CEL as the API server runs it has Kubernetes' extension libraries beside the standard one; the rules of these
CRDs use two of them that cel-python lacks, the regex library's ``find`` (Karpenter's label-domain rules)
and the strings library's ``split`` (its AMI alias rules): :data:`K8S_FUNCTIONS` supplies them
(https://kubernetes.io/docs/reference/using-api/cel/#kubernetes-regex-library, #strings).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import celpy
import yaml
from jsonschema import Draft202012Validator

CRDS = Path(__file__).resolve().parents[3] / "shared" / "data" / "kueue-crds"
VERSION = "v1beta2"


def _find(text: Any, pattern: Any) -> Any:
    """Kubernetes' ``<string>.find(<regex>)``: the first match, or the empty string."""
    found = re.search(str(pattern), str(text))
    return celpy.celtypes.StringType(found.group(0) if found else "")


def _split(text: Any, separator: Any) -> Any:
    """Kubernetes' ``<string>.split(<string>)``: the list of parts."""
    return celpy.celtypes.ListType(
        [celpy.celtypes.StringType(part) for part in str(text).split(str(separator))]
    )


#: CEL functions of Kubernetes' extension libraries that the CRDs' rules call and cel-python lacks.
K8S_FUNCTIONS: dict[str, Callable[..., Any]] = {"find": _find, "split": _split}


def strict(schema: Any) -> Any:
    """A copy of ``schema`` in which objects with ``properties`` accept no other field."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: strict(value) for key, value in schema.items()}
    if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        result.setdefault("additionalProperties", False)
    return result


class CrdValidator:
    """The kinds of the CRDs in ``directory`` at ``version``; :meth:`errors` lists what the API server would
    refuse."""

    def __init__(self, directory: Path, version: str) -> None:
        self.version = version
        self.schemas: dict[str, dict[str, Any]] = {}
        self.groups: dict[str, str] = {}
        for path in sorted(directory.glob("*.yaml")):
            crd = yaml.safe_load(path.read_text(encoding="utf-8"))
            kind = crd["spec"]["names"]["kind"]
            version_entry = next(v for v in crd["spec"]["versions"] if v["name"] == version)
            self.schemas[kind] = version_entry["schema"]["openAPIV3Schema"]
            self.groups[kind] = crd["spec"]["group"]
        self.group = next(iter(self.groups.values()), "")
        self.validators = {kind: Draft202012Validator(strict(s)) for kind, s in self.schemas.items()}
        self.environment = celpy.Environment()
        self.programs: dict[str, Any] = {}
        self.rules_evaluated = 0

    def errors(self, document: dict[str, Any]) -> list[str]:
        kind = document.get("kind")
        if kind not in self.schemas:
            return [f"kind {kind!r} is not one of {sorted(self.schemas)}"]
        found = []
        expected = f"{self.groups[kind]}/{self.version}"
        if document.get("apiVersion") != expected:
            found.append(f"apiVersion {document.get('apiVersion')!r}, expected {expected}")
        for error in self.validators[kind].iter_errors(document):
            found.append(f"{'.'.join(str(p) for p in error.absolute_path) or '<root>'}: {error.message}")
        if found:
            return found  # CEL on a malformed object would only repeat the problem
        schema = self.schemas[kind]
        defaulted = copy.deepcopy(document)
        _apply_defaults(schema, defaulted)
        found += list(self._lists(schema, document, kind))
        found += list(self._cel(schema, defaulted, kind))
        return found

    def _lists(self, schema: dict[str, Any], value: Any, path: str) -> Iterator[str]:
        if isinstance(value, list):
            keys = schema.get("x-kubernetes-list-map-keys")
            if schema.get("x-kubernetes-list-type") == "map" and keys:
                seen = [tuple(item.get(k) for k in keys) for item in value]
                for key in {k for k in seen if seen.count(k) > 1}:
                    yield f"{path}: duplicate entries for {dict(zip(keys, key, strict=True))}"
            for index, item in enumerate(value):
                yield from self._lists(schema.get("items", {}), item, f"{path}[{index}]")
        elif isinstance(value, dict):
            for key, item in value.items():
                child = _child(schema, key)
                if child is not None:
                    yield from self._lists(child, item, f"{path}.{key}")

    def _cel(self, schema: dict[str, Any], value: Any, path: str) -> Iterator[str]:
        for rule in schema.get("x-kubernetes-validations", []):
            text = rule["rule"]
            if "oldSelf" in text:
                continue
            if text not in self.programs:
                compiled = self.environment.compile(text)
                self.programs[text] = self.environment.program(compiled, functions=K8S_FUNCTIONS)
            self.rules_evaluated += 1
            try:
                result = self.programs[text].evaluate({"self": celpy.json_to_cel(value)})
            except celpy.CELEvalError as exc:
                result = exc
            if isinstance(result, celpy.CELEvalError) or not bool(result):
                yield f"{path}: {rule.get('message', text)} (rule {text!r})"
        if isinstance(value, list):
            for index, item in enumerate(value):
                yield from self._cel(schema.get("items", {}), item, f"{path}[{index}]")
        elif isinstance(value, dict):
            for key, item in value.items():
                child = _child(schema, key)
                if child is not None:
                    yield from self._cel(child, item, f"{path}.{key}")


class KueueValidator(CrdValidator):
    """The four Kueue kinds at :data:`VERSION`."""

    def __init__(self, directory: Path = CRDS) -> None:
        super().__init__(directory, VERSION)


def _child(schema: dict[str, Any], key: str) -> dict[str, Any] | None:
    if key in schema.get("properties", {}):
        return schema["properties"][key]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def _apply_defaults(schema: dict[str, Any], value: Any) -> None:
    """Fill in the schema's defaults as the API server does before it runs the CEL rules."""
    if isinstance(value, dict):
        for key, child in schema.get("properties", {}).items():
            if key not in value and "default" in child:
                value[key] = copy.deepcopy(child["default"])
            if key in value:
                _apply_defaults(child, value[key])
    elif isinstance(value, list):
        for item in value:
            _apply_defaults(schema.get("items", {}), item)


def count_rules(schema: Any) -> int:
    """CEL rules in a schema (the CRDs have 13 at v1beta2: CLOUD-TESTING.md section 6)."""
    if isinstance(schema, list):
        return sum(count_rules(s) for s in schema)
    if not isinstance(schema, dict):
        return 0
    own = len(schema.get("x-kubernetes-validations", []))
    return own + sum(count_rules(v) for k, v in schema.items() if k != "x-kubernetes-validations")
