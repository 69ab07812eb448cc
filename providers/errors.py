"""The errors a provider raises: one tree, mapped once at each adapter's SDK boundary.

Each call of the provider protocol either does what it says or raises one of these, never an SDK
exception or a bare ``Exception`` (Karpenter's cloudprovider errors are the model; the tree's layout
follows httpx's ``_exceptions.py``)::

    GpuplanError (models.errors)
    └── ProviderError            a cloud call that did not do what it says; .cloud, .operation, .code
        ├── InsufficientCapacity no capacity for the request now (AWS InsufficientInstanceCapacity,
        │                        GCP ZONE_RESOURCE_POOL_EXHAUSTED, Azure AllocationFailed)
        ├── QuotaExceeded        an account quota or limit stops it (vCPU, GPU, instance count quotas)
        ├── Throttled            the API rate limit; adapters retry it themselves (``retry_throttled``), so
        │                        callers see it only after the bounded retries are spent
        ├── NotFound             the resource does not exist (a delete of a missing one is *not* an error)
        ├── Conflict             it exists already and is not ours, or a request clashes with its state
        ├── Auth                 credentials missing, expired or not allowed (the message never holds them)
        ├── InvalidRequest       the cloud refused the request as malformed (bad parameter, unknown type)
        ├── OperationFailed      a long-running operation ended in failure without a more specific cause
        ├── Timeout              no answer in time: the call may or may not have acted; the next inventory
        │                        tells, and a retry with the same token creates nothing twice
        ├── MissingSDK           the adapter's SDK is not installed; names the extra to install
        └── Unsupported          the adapter lacks the capability asked for (``providers.base.Capability``)
"""

from __future__ import annotations

from models.errors import GpuplanError
from providers.resources import Node

__all__ = [
    "Auth",
    "Conflict",
    "InsufficientCapacity",
    "InvalidRequest",
    "MissingSDK",
    "NotFound",
    "OperationFailed",
    "ProviderError",
    "QuotaExceeded",
    "Throttled",
    "Timeout",
    "Unsupported",
]


class ProviderError(GpuplanError):
    """A cloud call that did not do what it says. ``cloud`` and ``operation`` say where; ``code`` is the
    cloud's own error code (``InsufficientInstanceCapacity``, ``409``), kept for logs and summaries."""

    kind = "error"

    def __init__(
        self,
        message: str,
        *,
        cloud: str = "",
        operation: str = "",
        code: str | None = None,
        launched: tuple[Node, ...] = (),
    ) -> None:
        self.message = message
        self.cloud = cloud
        self.operation = operation
        self.code = code
        #: a launch that failed part way: the nodes it made, which carry our tags and stay (a pool keeps
        #: them; a gang, all or nothing, never has any)
        self.launched = launched
        super().__init__(self.format())

    def format(self) -> str:
        where = ": ".join(p for p in (self.cloud, self.operation) if p)
        code = f" [{self.code}]" if self.code else ""
        return f"{where}: {self.message}{code}" if where else f"{self.message}{code}"


class InsufficientCapacity(ProviderError):
    kind = "insufficient-capacity"


class QuotaExceeded(ProviderError):
    kind = "quota-exceeded"


class Throttled(ProviderError):
    kind = "throttled"


class NotFound(ProviderError):
    kind = "not-found"


class Conflict(ProviderError):
    kind = "conflict"


class Auth(ProviderError):
    kind = "auth"


class InvalidRequest(ProviderError):
    kind = "invalid-request"


class OperationFailed(ProviderError):
    kind = "operation-failed"


class Timeout(ProviderError):
    """No answer in time: the outcome is unknown (unlike the others, which say it did not act)."""

    kind = "timeout"


class MissingSDK(ProviderError):
    """The adapter's SDK is not installed."""

    kind = "missing-sdk"

    def __init__(self, cloud: str, package: str, extra: str) -> None:
        super().__init__(f"the {cloud} provider needs {package}: pip install 'gpuplan[{extra}]'", cloud=cloud)


class Unsupported(ProviderError):
    """The adapter does not have the capability a call needs (ask ``Capability`` first)."""

    kind = "unsupported"
