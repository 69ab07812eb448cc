"""The daemon's structured logs: one JSON object per line, with secrets redacted before anything is written.

An SRE runs the daemon beside the clusters and ships its stderr to a log store that many people can read,
so a log line must never carry a credential, even when a cloud SDK's error message echoes back the request
that carried it. :func:`configure_json_logging` installs one handler on the ``gpuplan`` loggers and on the
third-party loggers the daemon pulls in (at WARNING: their INFO/DEBUG chatter includes request dumps); the
handler's :class:`RedactionFilter` rewrites every record (message, extras, exception text, stack) before
any formatter sees it, and :class:`JsonFormatter` redacts again as it serialises, so neither alone is
load-bearing.

What counts as a secret (replaced with ``***``):

- the value of any environment variable whose name contains SECRET, TOKEN, PASSWORD, KEY or CREDENTIAL and
  whose value has 8 or more characters (shorter values would match ordinary words); read at each record, so
  a credential set after start-up is covered too;
- ``Bearer <token>`` and the value of an ``Authorization`` header;
- the password in a URL's user info (``postgresql://user:***@host/db``);
- the value after a secret-looking key (``password=``, ``client_secret:``, ``"token": "..."``, ``sig=``),
  except client / idempotency tokens, which are deterministic hashes of an intent, not credentials, and are
  what one greps for when following an action through the journal;
- 40 base64 characters after a ``secret`` word (an AWS secret access key, as botocore's errors print it);
- in extras, the whole value of a key that looks secret (``extra={"password": ...}``), whatever its length.

Redaction errs towards masking too much: a masked word costs a little debugging, a leaked key an incident.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import traceback
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from functools import lru_cache
from typing import IO, Any, Final
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

__all__ = [
    "MASK",
    "THIRD_PARTY_LOGGERS",
    "JsonFormatter",
    "RedactionFilter",
    "configure_json_logging",
    "mask_url",
    "redact",
]

MASK: Final = "***"

#: Loggers of the libraries the daemon uses: routed through the same (redacting) handler, at WARNING.
THIRD_PARTY_LOGGERS: Final = (
    "botocore",
    "boto3",
    "urllib3",
    "azure",
    "google",
    "apscheduler",
    "sqlalchemy",
)

_SECRET_ENV_NAME: Final = re.compile(r"SECRET|TOKEN|PASSWORD|KEY|CREDENTIAL", re.IGNORECASE)
_MIN_ENV_SECRET: Final = 8

# a key whose value is a secret; the word must end the key (so "secrets_path" is one, "keyboard" is not)
_SECRET_KEY_WORDS: Final = (
    r"password|passwd|pwd|secrets?|tokens?|api[_-]?key|access[_-]?key|private[_-]?key|account[_-]?key"
    r"|credentials?|sig|signature|authorization|auth"
)
_SECRET_KEY: Final = re.compile(rf"(?:^|[_.-])(?:{_SECRET_KEY_WORDS})$", re.IGNORECASE)
# camelCase keys (clientSecret, SecretAccessKey): the word starts at a capital after a lower-case letter
_SECRET_CAMEL_KEY: Final = re.compile(
    r"[a-z0-9](?:Password|Passwd|Pwd|Secrets?|Tokens?|ApiKey|AccessKey|PrivateKey|AccountKey"
    r"|Credentials?|Sig|Signature|Authorization|Auth)$"
)
# keys that look secret but name deterministic, non-secret tokens (see the module docstring)
_NOT_SECRET_KEY: Final = re.compile(r"(?:client|idempotency)[_.-]?tokens?$", re.IGNORECASE)

# key=value / key: value / "key": "value" in free text; the key is checked by _SECRET_KEY in the callback
_KEY_VALUE: Final = re.compile(
    r"""(?P<key>[A-Za-z][\w.-]*)(?P<sep>["']?\s*[:=]\s*["']?)(?P<value>(?<=["'])[^"']*|[^\s"'&,;)}\]]+)"""
)
_URL_USERINFO: Final = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/?#@\s]*:)(?P<pw>[^@\s]+)@")
_BEARER: Final = re.compile(r"\b(?P<scheme>bearer)\s+[A-Za-z0-9\-._~+/]+=*", re.IGNORECASE)
_AUTH_HEADER: Final = re.compile(
    r"""(?P<head>\bauthorization["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token|sharedkey)\s+)?)"""
    r"""[^\s"',;]+""",
    re.IGNORECASE,
)
_AWS_SECRET: Final = re.compile(
    r"(?P<head>secret[\w\s\"':=]{0,30}?)(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])",
    re.IGNORECASE,
)


def _secret_env_values(environ: Mapping[str, str]) -> tuple[str, ...]:
    values = {v for k, v in environ.items() if _SECRET_ENV_NAME.search(k) and len(v) >= _MIN_ENV_SECRET}
    return tuple(sorted(values, key=len, reverse=True))  # longest first: a value inside another


@lru_cache(maxsize=8)
def _literal_pattern(values: tuple[str, ...]) -> re.Pattern[str] | None:
    """One alternation of the environment's secret values, compiled once per distinct set of them."""
    if not values:
        return None
    return re.compile("|".join(re.escape(v) for v in values))


_AUTH_SCHEMES: Final = frozenset({"bearer", "basic", "token", "sharedkey"})


def _is_secret_key(key: str) -> bool:
    looks_secret = _SECRET_KEY.search(key) or _SECRET_CAMEL_KEY.search(key)
    return bool(looks_secret) and not _NOT_SECRET_KEY.search(key)


def _mask_key_value(m: re.Match[str]) -> str:
    if not _is_secret_key(m["key"]) or m["value"] == MASK or m["value"].lower() in _AUTH_SCHEMES:
        return m[0]  # "Authorization: Bearer ***" was masked already, by _AUTH_HEADER
    return f"{m['key']}{m['sep']}{MASK}"


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every secret (see the module docstring) replaced by ``***``.

    The environment's values go first, so a credential is masked whole before the patterns cut it apart.
    """
    literal = _literal_pattern(_secret_env_values(os.environ if environ is None else environ))
    if literal is not None:
        text = literal.sub(MASK, text)
    text = _URL_USERINFO.sub(lambda m: f"{m['head']}{MASK}@", text)
    text = _AUTH_HEADER.sub(lambda m: f"{m['head']}{MASK}", text)
    text = _BEARER.sub(lambda m: f"{m['scheme']} {MASK}", text)
    text = _AWS_SECRET.sub(lambda m: f"{m['head']}{MASK}", text)
    return _KEY_VALUE.sub(_mask_key_value, text)


def _redact_value(value: Any, environ: Mapping[str, str]) -> Any:
    """A JSON-ready copy of an extra's value with its strings redacted; other objects become their str()
    first, since their text is what would be written and may embed a secret."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return redact(value, environ)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = redact(str(k), environ)
            out[key] = MASK if _is_secret_key(str(k)) and v is not None else _redact_value(v, environ)
        return out
    if isinstance(value, list | tuple | set | frozenset):
        return [_redact_value(v, environ) for v in value]
    return redact(str(value), environ)


def mask_url(url: str) -> str:
    """``url`` with its password, and the values of secret-looking query parameters, replaced by ``***``:
    for logging a database or webhook URL that a config gave. A URL that does not parse is redacted as
    text instead."""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises on a malformed port
    except ValueError:
        return redact(url)
    netloc = parts.netloc
    if parts.password is not None:
        host = parts.hostname or ""
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"
        user = quote(parts.username or "", safe="")
        netloc = f"{user}:{MASK}@{host}" + (f":{port}" if port is not None else "")
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_is_secret_key(k) for k, _ in pairs):
            query = urlencode([(k, MASK if _is_secret_key(k) else v) for k, v in pairs], safe="*")
    if netloc == parts.netloc and query == parts.query:
        return url  # nothing to mask: unchanged (urlunsplit would turn sqlite:///x.db into sqlite:/x.db)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


# the attributes every LogRecord has: anything else on a record came from ``extra={...}``
_RECORD_ATTRS: Final = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in record.__dict__.items() if k not in _RECORD_ATTRS and not k.startswith("_")}


class RedactionFilter(logging.Filter):
    """Rewrites a record in place so that any formatter on the handler writes only redacted text: the
    message is rendered with its args and redacted, extras are redacted, the exception and stack are
    rendered to redacted text (``exc_text``, which formatters use instead of formatting ``exc_info``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        environ = dict(os.environ)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must not lose the record, nor leak its args
            message = f"{record.msg!s} (unformattable log arguments)"
        record.msg = redact(message, environ)
        record.args = None
        for key, value in _extras(record).items():
            masked = MASK if _is_secret_key(key) and value is not None else _redact_value(value, environ)
            setattr(record, key, masked)
        if record.exc_info and not record.exc_text:
            record.exc_text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        if record.exc_text:
            record.exc_text = redact(record.exc_text, environ)
        record.exc_info = None  # exc_text now stands for it; the traceback objects hold unredacted locals
        if record.stack_info:
            record.stack_info = redact(record.stack_info, environ)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message``, the extras,
    ``exception`` and ``stack`` when present. An extra that would overwrite one of these keys is written as
    ``extra_<key>`` instead. Every string is redacted here too, in case the filter was not installed."""

    _CORE: Final = ("time", "level", "logger", "message", "exception", "stack")

    def format(self, record: logging.LogRecord) -> str:
        environ = dict(os.environ)
        when = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        out: dict[str, Any] = {
            "time": when.replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage(), environ),
        }
        for key, value in _extras(record).items():
            name = f"extra_{key}" if key in self._CORE else key
            masked = MASK if _is_secret_key(key) and value is not None else _redact_value(value, environ)
            out[redact(name, environ)] = masked
        exc_text = record.exc_text
        if record.exc_info and not exc_text:
            exc_text = self.formatException(record.exc_info)
        if exc_text:
            out["exception"] = redact(exc_text, environ)
        if record.stack_info:
            out["stack"] = redact(record.stack_info, environ)
        return json.dumps(out, ensure_ascii=False, default=str)


def configure_json_logging(
    stream: IO[str] | None = None,
    level: int | str = "INFO",
    *,
    third_party: Iterable[str] = THIRD_PARTY_LOGGERS,
) -> logging.Handler:
    """Send the ``gpuplan`` loggers (at ``level``) and the third-party ones (at WARNING) to ``stream``
    (stderr by default) as redacted JSON lines; returns the handler, so a caller (or a test) can remove it.

    The loggers stop propagating to the root logger: a handler someone else put there (basicConfig, an
    SDK's debug helper) would otherwise write the same records unredacted. Calling this again replaces the
    handler rather than adding a second one.
    """
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.addFilter(RedactionFilter())
    handler.setFormatter(JsonFormatter())
    own = logging.getLogger("gpuplan")
    own.handlers[:] = [handler]
    own.setLevel(level.upper() if isinstance(level, str) else level)
    own.propagate = False
    for name in third_party:
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(logging.WARNING)
        logger.propagate = False
    return handler
