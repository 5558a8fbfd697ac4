"""wop_sdk: OpenWOP node packs in Python.

A node pack is a WebAssembly component implementing one or more OpenWOP node
types against the ``openwop:node-pack@0.1.0`` WIT world. ``sdk/python/build.sh``
turns a pack directory (``pack.json`` + ``pack.py``) into such a component
with componentize-py and assembles it with ``wop pack``.

Your ``pack.py`` defines one function, ``invoke(ctx, request)``, and may define
``describe()`` (by default the description is taken from ``pack.json``)::

    from wop_sdk import Ctx, NodeError, Outcome, Request

    def invoke(ctx: Ctx, request: Request):
        name = request.inputs.get("name", "world")
        ctx.log.info("greeting", {"name": name})
        return Outcome.completed({"greeting": f"Hello, {name}!"})

Returning a plain value is the same as ``Outcome.completed(value)``. Raising a
:class:`NodeError` (or the :class:`ToolError` of a refused tool call, or the
``NodeError`` of a refused fetch) fails the node with its ``code``,
``message`` and ``details``; any other exception fails it with
``internal_error``.

Capabilities are what you declare: the build imports exactly the host
interfaces listed in ``pack.json`` ``x-wop.capabilities`` (``log``, ``clock``,
``random``, ``tools``, ``http``, ``mcp``). Using an undeclared one raises a
``NodeError`` (``internal_error``) naming it. WASI is stubbed out: files,
environment, sockets, ``time.time()`` and ``os.urandom`` trap the invocation
-- use ``ctx.now_ms()`` and ``ctx.random_bytes()``, which are replay-safe.
``print()`` works: ``sys.stdout``/``sys.stderr`` become log lines (info /
warn) when the pack declares ``log``. Every
module a pack uses must be imported at module level (the build snapshots the
interpreter after importing ``pack.py``; there is no filesystem to import from
at run time).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from componentize_py_types import Err

# The host interfaces this pack imports: the build generates the bindings for
# the declared capabilities only, so the others are absent.
try:
    from wit_world.imports import log as _log
except ImportError:  # pragma: no cover - depends on the pack's capabilities
    _log = None
try:
    from wit_world.imports import clock as _clock
except ImportError:  # pragma: no cover
    _clock = None
try:
    from wit_world.imports import random as _random
except ImportError:  # pragma: no cover
    _random = None
try:
    from wit_world.imports import tools as _tools
except ImportError:  # pragma: no cover
    _tools = None
try:
    from wit_world.imports import http as _http
except ImportError:  # pragma: no cover
    _http = None
try:
    from wit_world.imports import mcp as _mcp
except ImportError:  # pragma: no cover
    _mcp = None

# True while the host runs `describe` or `invoke`. Importing `pack.py` (and
# this module) happens once, at build time, when the component is
# pre-initialized: then there is no host to log to, and output goes to the
# build's own stdout/stderr instead.
_in_host = False


class _LogStream:
    """sys.stdout / sys.stderr: WASI stdio is stubbed (writing would trap), so
    printed lines become log lines (stdout at info, stderr at warn) when the
    pack declares `log`, and are dropped otherwise. Output while `pack.py` is
    imported (at build time) goes to the build's stdout/stderr."""

    def __init__(self, level_name: str, build_stream: Any) -> None:
        self._level_name = level_name
        self._build_stream = build_stream
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        while "\n" in self._pending:
            line, self._pending = self._pending.split("\n", 1)
            self._emit(line)
        return len(text)

    def flush(self) -> None:
        if self._pending:
            line, self._pending = self._pending, ""
            self._emit(line)

    def _emit(self, line: str) -> None:
        if not _in_host:
            if self._build_stream is not None:
                self._build_stream.write(line + "\n")
                self._build_stream.flush()
            return
        if _log is not None:
            _log.log(getattr(_log.Level, self._level_name), line, None)

    def isatty(self) -> bool:
        return False


import sys as _sys  # noqa: E402

_sys.stdout = _LogStream("INFO", _sys.__stdout__)
_sys.stderr = _LogStream("WARN", _sys.__stderr__)


__all__ = [
    "VALIDATION_ERROR",
    "INTERNAL_ERROR",
    "NodeError",
    "ToolError",
    "Outcome",
    "NodeContext",
    "Request",
    "NodeInfo",
    "PackInfo",
    "Ctx",
    "Log",
    "Tools",
    "Http",
    "HttpResponse",
    "Mcp",
]

#: The node's inputs, config or arguments are invalid.
VALIDATION_ERROR = "validation_error"
#: The pack itself misbehaved.
INTERNAL_ERROR = "internal_error"

Json = Any


class NodeError(Exception):
    """A node failure: an OpenWOP error ``code``, a ``message`` for people and
    optional machine-readable ``details`` (a JSON object).

    Raised from ``invoke``, it is reported as the node's own failure with
    exactly this code, message and details.
    """

    def __init__(self, code: str, message: str, details: Optional[Dict[str, Json]] = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details

    @classmethod
    def validation(cls, message: str, details: Optional[Dict[str, Json]] = None) -> "NodeError":
        """A ``validation_error`` with ``message``."""
        return cls(VALIDATION_ERROR, message, details)


class ToolError(NodeError):
    """A failed tool call. ``kind`` is the WIT ``tool-error`` case:
    ``forbidden``, ``not-found``, ``rate-limited``, ``budget-exhausted``,
    ``conflict`` or ``failed``; ``code``/``message``/``details`` are the
    protocol error. Propagated out of ``invoke`` it fails the node with the
    tool's code.
    """

    def __init__(self, kind: str, code: str, message: str, details: Optional[Dict[str, Json]] = None):
        super().__init__(code, message, details)
        self.kind = kind


@dataclass(frozen=True)
class Outcome:
    """How an invocation ended, when it did not fail: ``completed`` with the
    node's output, or ``suspended`` with an interrupt payload (the runtime
    invokes again with ``request.resume`` set)."""

    kind: str
    value: Json

    @staticmethod
    def completed(output: Json) -> "Outcome":
        """The node finished with ``output`` (any JSON-serializable value)."""
        return Outcome("completed", output)

    @staticmethod
    def suspended(interrupt: Json) -> "Outcome":
        """The node waits for outside input described by ``interrupt``."""
        return Outcome("suspended", interrupt)


@dataclass(frozen=True)
class NodeContext:
    """Which node invocation this is."""

    run_id: str
    node_id: str
    tenant_id: str
    #: Attempt number, starting at 1.
    attempt: int
    #: The node type invoked (one of the pack's typeIds).
    type_id: str


@dataclass(frozen=True)
class Request:
    """One node invocation: ``inputs`` and ``config`` are parsed JSON values;
    ``resume`` is the resume value after a ``suspended`` outcome, else None."""

    context: NodeContext
    inputs: Json
    config: Json
    resume: Optional[Json] = None


@dataclass(frozen=True)
class NodeInfo:
    """One node type a pack implements."""

    type_id: str
    version: str


@dataclass(frozen=True)
class PackInfo:
    """A pack's self-description; must match ``pack.json``."""

    name: str
    version: str
    nodes: List[NodeInfo] = field(default_factory=list)


def _need(iface: Any, name: str) -> Any:
    if iface is None:
        raise NodeError(
            INTERNAL_ERROR,
            f"the pack uses the `{name}` capability but pack.json does not declare it in x-wop.capabilities",
            {"capability": name},
        )
    return iface


def _to_json(value: Json, what: str) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise NodeError(INTERNAL_ERROR, f"{what} is not serializable as JSON: {e}") from None


def _lenient(s: Optional[str]) -> Optional[Json]:
    if s is None:
        return None
    try:
        return json.loads(s)
    except ValueError:
        return s


def _node_error(info: Any) -> NodeError:
    return NodeError(info.code, info.message, _lenient(info.details))


class Log:
    """Structured logging (``log`` capability). Every line becomes a
    ``log.appended`` event. ``fields`` must be a JSON object (dict); long
    messages are truncated by the host."""

    def write(self, level: str, message: str, fields: Optional[Mapping[str, Json]] = None) -> None:
        """Append one line at ``level``: ``"debug"``, ``"info"``, ``"warn"`` or ``"error"``."""
        log = _need(_log, "log")
        lvl = {
            "debug": log.Level.DEBUG,
            "info": log.Level.INFO,
            "warn": log.Level.WARN,
            "error": log.Level.ERROR,
        }[level]
        log.log(lvl, str(message), None if fields is None else _to_json(fields, "log fields"))

    def debug(self, message: str, fields: Optional[Mapping[str, Json]] = None) -> None:
        """Log at debug level."""
        self.write("debug", message, fields)

    def info(self, message: str, fields: Optional[Mapping[str, Json]] = None) -> None:
        """Log at info level."""
        self.write("info", message, fields)

    def warn(self, message: str, fields: Optional[Mapping[str, Json]] = None) -> None:
        """Log at warn level."""
        self.write("warn", message, fields)

    def error(self, message: str, fields: Optional[Mapping[str, Json]] = None) -> None:
        """Log at error level."""
        self.write("error", message, fields)


_TOOL_ERROR_KINDS = {
    "ToolError_Forbidden": "forbidden",
    "ToolError_NotFound": "not-found",
    "ToolError_RateLimited": "rate-limited",
    "ToolError_BudgetExhausted": "budget-exhausted",
    "ToolError_Conflict": "conflict",
    "ToolError_Failed": "failed",
}


class Tools:
    """Tool calls through the host's gate (``tools`` capability):
    authorization (pack grant and the principal's scopes, failing closed),
    rate limits, budgets and durable effect claims."""

    def call(self, tool_id: str, arguments: Json = None, idempotency_key: Optional[str] = None) -> Json:
        """Call ``tool_id`` with JSON ``arguments`` (default ``{}``) and return
        the tool's JSON result.

        ``idempotency_key``, when given, names the business operation: the
        same key never fires the effect twice, across retries and executors.
        Without it the effect identity is this call's position in the
        invocation. Raises :class:`ToolError` (``forbidden``, ``not_found``,
        ``rate_limited``, ...) when the call did not produce a result.
        """
        tools = _need(_tools, "tools")
        args = _to_json({} if arguments is None else arguments, "tool arguments")
        try:
            result = tools.call(tool_id, args, idempotency_key)
        except Err as e:
            kind = _TOOL_ERROR_KINDS.get(type(e.value).__name__, "failed")
            info = e.value.value
            raise ToolError(kind, info.code, info.message, _lenient(info.details)) from None
        try:
            return json.loads(result)
        except ValueError as e:
            raise ToolError("failed", VALIDATION_ERROR, f"tool `{tool_id}` returned malformed JSON: {e}") from None

    def list(self) -> List[Dict[str, Json]]:
        """The tools this invocation may call, sorted by tool id, as OpenWOP
        ``ToolDescriptor`` dicts (``toolId``, ``title``?, ``description``?,
        ``safetyTier``, ``inputSchema``?, ``outputSchema``?)."""
        out = []
        for d in _need(_tools, "tools").list():
            item: Dict[str, Json] = {"toolId": d.tool_id}
            if d.title is not None:
                item["title"] = d.title
            if d.description is not None:
                item["description"] = d.description
            item["safetyTier"] = d.safety_tier.name.lower()
            if d.input_schema is not None:
                item["inputSchema"] = _lenient(d.input_schema)
            if d.output_schema is not None:
                item["outputSchema"] = _lenient(d.output_schema)
            out.append(item)
        return out


@dataclass
class HttpResponse:
    """An HTTP response with its body read completely."""

    status: int
    #: Response headers as (name, value) pairs.
    headers: List[Tuple[str, str]]
    body: bytes

    @property
    def ok(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status < 300

    def header(self, name: str) -> Optional[str]:
        """The first header named ``name`` (case-insensitive), or None."""
        lower = name.lower()
        for n, v in self.headers:
            if n.lower() == lower:
                return v
        return None

    def text(self) -> str:
        """The body as text (invalid UTF-8 becomes U+FFFD)."""
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Json:
        """The body parsed as JSON; malformed JSON raises ``validation_error``."""
        try:
            return json.loads(self.body)
        except ValueError as e:
            raise NodeError.validation(f"response body is not JSON: {e}") from None


class Http:
    """SSRF-guarded HTTP egress, "safe-fetch" (``http`` capability): the only
    network a pack gets. The host checks the destination against the pack's
    allow-list and refuses private, loopback, link-local and metadata
    addresses (``egress_denied`` with ``details.reason``)."""

    def fetch(
        self,
        url: str,
        method: str = "GET",
        headers: Union[Mapping[str, str], Sequence[Tuple[str, str]], None] = None,
        body: Union[bytes, str, None] = None,
        json_body: Json = None,
        idempotency_key: Optional[str] = None,
    ) -> HttpResponse:
        """Fetch ``url``. ``headers`` is a dict or (name, value) pairs;
        ``json_body`` sets a JSON body and ``content-type: application/json``;
        ``idempotency_key`` is for non-GET/HEAD methods (see
        :meth:`Tools.call`). A non-2xx status is a successful fetch (check
        ``ok``); a refusal raises :class:`NodeError` with the host's code."""
        http = _need(_http, "http")
        pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers or [])
        if json_body is not None:
            pairs.append(("content-type", "application/json"))
            body = _to_json(json_body, "request body")
        if isinstance(body, str):
            body = body.encode("utf-8")
        req = http.Request(
            method=method,
            url=url,
            headers=[http.Header(name=str(n), value=str(v)) for n, v in pairs],
            body=body,
            idempotency_key=idempotency_key,
        )
        try:
            resp = http.safe_fetch(req)
        except Err as e:
            raise _node_error(e.value) from None
        return HttpResponse(resp.status, [(h.name, h.value) for h in resp.headers], bytes(resp.body))


class Mcp:
    """A client for the MCP servers the operator attached (``mcp``
    capability). Results are the server's JSON, unaltered; an MCP result with
    ``isError: true`` is a success value. Refusals and failures raise
    :class:`NodeError`: ``not_found`` for a server the operator did not
    attach, ``forbidden`` for one this pack was not granted,
    ``upstream_unavailable`` (retryable) when the server cannot be reached,
    ``mcp_error`` with the server's JSON-RPC error. Calls pass the gate like
    tool calls (``mcp:<server>/<tool>``)."""

    def _call(self, fn: str, *args: Any) -> Json:
        mcp = _need(_mcp, "mcp")
        try:
            return json.loads(getattr(mcp, fn)(*args))
        except Err as e:
            raise _node_error(e.value) from None

    def call_tool(self, server_id: str, name: str, arguments: Json = None, idempotency_key: Optional[str] = None) -> Json:
        """``tools/call`` ``name`` on ``server_id``; effects are claimed like :meth:`Tools.call`."""
        return self._call("call_tool", server_id, name, _to_json({} if arguments is None else arguments, "MCP arguments"), idempotency_key)

    def list_tools(self, server_id: str, cursor: Optional[str] = None) -> Json:
        """``tools/list`` on ``server_id``, one page at a time."""
        return self._call("list_tools", server_id, cursor)

    def read_resource(self, server_id: str, uri: str) -> Json:
        """``resources/read`` of ``uri`` on ``server_id``."""
        return self._call("read_resource", server_id, uri)

    def server_health(self, server_id: str) -> Json:
        """The host's health document for ``server_id``."""
        return self._call("server_health", server_id)


class Ctx:
    """The host capabilities available to one node invocation. Every call is
    bound by the host to this invocation (run, node, tenant, attempt,
    principal)."""

    def __init__(self) -> None:
        #: Structured logging.
        self.log = Log()
        #: Gated tool calls.
        self.tools = Tools()
        #: SSRF-guarded HTTP egress.
        self.http = Http()
        #: MCP client.
        self.mcp = Mcp()

    def now_ms(self) -> int:
        """The host clock in ms since the Unix epoch (``clock`` capability).
        Replay-safe; advances by 1 ms per call. Use it instead of ``time``."""
        return _need(_clock, "clock").now_ms()

    def random_bytes(self, n: int) -> bytes:
        """``n`` bytes from the host's random stream (``random`` capability).
        Replay-safe (seeded per run, node and attempt); not for key material."""
        random = _need(_random, "random")
        out = bytearray()
        while len(out) < n:
            chunk = random.fill(min(n - len(out), 65536))
            if not chunk:
                break
            out += chunk
        return bytes(out[:n])
