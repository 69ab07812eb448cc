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
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from models.errors import InputError
from models.yamlfile import read_yaml
from providers.base import Capability, Provider

__all__ = ["CLOUDS", "capabilities_of", "load_provider_config", "open_provider"]

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
    return data


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
    settings_class: type[BaseModel] = getattr(module, settings_name)
    try:
        settings = settings_class.model_validate(config.get(cloud) or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in (cloud, *first["loc"]))
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        hint = "" if config_path is not None else " (give the settings with --provider-config FILE)"
        raise InputError(config_path, where, f"{first['msg']}{more}{hint}") from None
    provider: Provider = module.open_provider(settings)
    return provider
