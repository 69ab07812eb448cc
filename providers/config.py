"""Provider settings (``--provider-config FILE``) and the one place a provider is opened by name.

The file is YAML with one section per cloud; each adapter validates its own section with its settings
model (``providers.aws.AwsSettings`` and so on), so a misspelt key fails naming the file and the field:

```yaml
aws:   {image_id: ami-0123456789abcdef0, subnets: {us-east-1: [subnet-0a1b2c3d]}}
gcp:   {project: my-project, zones: {us-central1: us-central1-a}}
azure: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: gpu-fleet,
        subnet_id: /subscriptions/.../subnets/gpu, ssh_public_key: "ssh-ed25519 AAAA..."}
```

Credentials never go in this file: each SDK finds its own (AWS profiles and environment, Google's
application default credentials, azure-identity's DefaultAzureCredential).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from models.errors import InputError
from models.numbers import Range, checked_in_range
from models.yamlfile import read_yaml
from providers.base import Capability, Provider

__all__ = [
    "CLOUDS",
    "FILE",
    "MAX_ITEMS",
    "capabilities_of",
    "checked_retry",
    "load_provider_config",
    "open_provider",
    "read_section",
]

#: The validation context of a section read from a settings file: the adapters' settings then also require
#: what a launch needs and check the ids' shapes (a Python caller, a test, builds partial settings freely).
FILE: Final = "settings-file"
#: The most entries of any list or mapping in a section (regions, subnets, security groups, NICs).
MAX_ITEMS: Final = 64
#: ``retry:`` of every section: the fields of providers.base.RetryPolicy and their ranges.
_RETRY: Final = {
    "attempts": Range(ge=1, le=20, whole=True),
    "base_seconds": Range(gt=0, le=60, unit="s"),
    "cap_seconds": Range(gt=0, le=600, unit="s"),
}


def checked_retry(value: Any) -> Any:
    """A ``retry:`` mapping with its numbers read strictly (a whole number of attempts from 1 to 20, waits
    finite and bounded): RetryPolicy is a plain dataclass, which pydantic would fill from ``true`` or
    ``1e308``. Anything else is returned for pydantic to judge."""
    if not isinstance(value, Mapping):
        return value
    for key, item in value.items():
        allowed = _RETRY.get(str(key))
        if allowed is None:
            raise ValueError(f"{key}: unknown; valid: {', '.join(_RETRY)}")
        number = _number(item, allowed)
        if isinstance(number, str):
            raise ValueError(f"{key}: {number}")
    return value


def _number(value: Any, allowed: Range) -> Any:
    """``value`` checked against ``allowed``, or the problem as text."""
    if not isinstance(value, bool) and not isinstance(value, int | float | str):
        return "must be a number"
    try:
        return checked_in_range(value, int if allowed.whole else float, allowed)
    except ValueError as exc:
        return str(exc)


#: Provider name -> (module, settings class, provider class) of its adapter; ``sim`` needs no settings.
_ADAPTERS: Final = {
    "aws": ("providers.aws", "AwsSettings", "AwsProvider"),
    "gcp": ("providers.gcp", "GcpSettings", "GcpProvider"),
    "azure": ("providers.azure", "AzureSettings", "AzureProvider"),
}
CLOUDS: Final = (*_ADAPTERS, "sim")


def load_provider_config(path: Path | None) -> dict[str, Any]:
    """The sections of the settings file (an empty dict without one)."""
    if path is None:
        return {}
    data = read_yaml(path, "provider settings file")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(path, None, "must be a mapping with sections aws:, gcp:, azure:")
    for key, section in data.items():
        if key not in _ADAPTERS:
            raise InputError(path, str(key), f"unknown section; valid: {', '.join(_ADAPTERS)}")
        if section is not None and not isinstance(section, dict):
            raise InputError(path, str(key), "must be a mapping of settings")
        read_section(path, key, section)  # every section given, the clouds not in use too
    return data


def read_section(path: Path | None, cloud: str, section: Any) -> BaseModel:
    """``section`` (one cloud's part of the settings file at ``path``) as that adapter's settings, with what
    a file must hold (the settings a launch needs, ids of the right shape); InputError naming the file and
    ``cloud.field``. Imports the adapter module only, never its SDK. What a fuzzer drives."""
    if cloud not in _ADAPTERS:
        raise InputError(path, cloud, f"unknown section; valid: {', '.join(_ADAPTERS)}")
    if section is not None and not isinstance(section, dict):
        raise InputError(path, cloud, "must be a mapping of settings")
    module_name, settings_name, _ = _ADAPTERS[cloud]
    settings_class: type[BaseModel] = getattr(importlib.import_module(module_name), settings_name)
    given = section or {}
    requires: dict[str, str] = getattr(settings_class, "FILE_REQUIRES", {})
    missing = [name for name in requires if given.get(name) in (None, "", {}, [])]
    if missing:
        what = " and ".join(f"{name} ({requires[name]})" for name in missing)
        where = f"{cloud}.{missing[0]}" if len(missing) == 1 else cloud
        raise InputError(path, where, f"missing {what}, which a launch needs")
    return _validated(settings_class, cloud, given, path, {FILE: True})


def capabilities_of(cloud: str) -> frozenset[Capability]:
    """What ``cloud``'s adapter can do, without opening it (no SDK, no credentials): what Terraform roots
    need to follow the same rules as provision (a gang's reservation only where a reservation can hold
    its placement group)."""
    if cloud == "sim":
        from providers.sim import SimProvider

        return SimProvider.capabilities
    if cloud not in _ADAPTERS:
        raise InputError(None, "--cloud", f"unknown provider {cloud!r}; valid: {', '.join(CLOUDS)}")
    module_name, _, adapter = _ADAPTERS[cloud]
    provider: type[Provider] = getattr(importlib.import_module(module_name), adapter)
    return provider.capabilities


def open_provider(
    cloud: str,
    config: dict[str, Any],
    *,
    config_path: Path | None = None,
    sim_state: Path | None = None,
) -> Provider:
    """The provider called ``cloud``, with its section of ``config``; InputError for bad settings."""
    if cloud == "sim":
        from providers.sim import SimProvider

        return SimProvider(sim_state)
    if cloud not in _ADAPTERS:
        raise InputError(None, "--cloud", f"unknown provider {cloud!r}; valid: {', '.join(CLOUDS)}")
    module_name, settings_name, _ = _ADAPTERS[cloud]
    module = importlib.import_module(module_name)
    if config_path is not None:
        if cloud not in config:
            raise InputError(config_path, cloud, f"no {cloud}: section for the cloud in use")
        settings = read_section(config_path, cloud, config[cloud])
    else:
        settings_class: type[BaseModel] = getattr(module, settings_name)
        settings = _validated(settings_class, cloud, config.get(cloud) or {}, None, None)
    provider: Provider = module.open_provider(settings)
    return provider


def _validated(
    settings_class: type[BaseModel],
    cloud: str,
    section: dict[str, Any],
    path: Path | None,
    context: dict[str, Any] | None,
) -> BaseModel:
    try:
        return settings_class.model_validate(section, context=context)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in (cloud, *first["loc"]))
        message = str(first["msg"]).removeprefix("Value error, ")
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        hint = "" if path is not None else " (give the settings with --provider-config FILE)"
        raise InputError(path, where, f"{message}{more}{hint}") from None
