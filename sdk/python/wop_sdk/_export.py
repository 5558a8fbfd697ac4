"""The export glue: wraps a pack module as the WIT ``node`` export.

Not used by pack authors directly: ``build.sh`` generates the app module that
calls :func:`node_class`.
"""

import json
import traceback
from typing import Any

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import node as wit
from wit_world.imports import types as wit_types

from . import INTERNAL_ERROR, Ctx, NodeContext, NodeError, Outcome, PackInfo, NodeInfo, Request
import wop_sdk as _sdk


def _trace(e: BaseException) -> str:
    """The traceback as `file:line in function` lines. Not
    `traceback.format_exc()`: that reads source lines from files, and a pack
    has no filesystem (the stubbed WASI call would trap)."""
    return "\n".join(
        f"  {frame.f_code.co_filename}:{lineno} in {frame.f_code.co_name}"
        for frame, lineno in traceback.walk_tb(e.__traceback__)
    )


def _error_info(code: str, message: str, details: Any) -> Err:
    return Err(
        wit_types.ErrorInfo(
            code=code,
            message=message,
            details=None if details is None else json.dumps(details, separators=(",", ":")),
        )
    )


def node_class(pack: Any, manifest: dict) -> type:
    """The ``Node`` class componentize-py instantiates: ``describe()`` from
    ``pack.describe()`` or pack.json, ``invoke()`` calling
    ``pack.invoke(ctx, request)``."""
    if not callable(getattr(pack, "invoke", None)):
        raise TypeError("pack.py must define invoke(ctx, request)")

    class Node(exports.Node):
        def describe(self) -> wit.PackInfo:
            # From here on, printed lines are log lines (see `_LogStream`).
            _sdk._in_host = True
            if callable(getattr(pack, "describe", None)):
                info = pack.describe()
            else:
                info = PackInfo(
                    manifest["name"],
                    manifest["version"],
                    [NodeInfo(n["typeId"], n["version"]) for n in manifest["nodes"]],
                )
            return wit.PackInfo(
                name=info.name,
                version=info.version,
                nodes=[wit.NodeInfo(type_id=n.type_id, version=n.version) for n in info.nodes],
            )

        def invoke(self, request: wit.Request) -> wit.Outcome:
            _sdk._in_host = True
            try:
                def parse(what: str, s: str) -> Any:
                    try:
                        return json.loads(s)
                    except ValueError as e:
                        raise NodeError.validation(f"{what} is not valid JSON: {e}") from None

                c = request.context
                req = Request(
                    context=NodeContext(c.run_id, c.node_id, c.tenant_id, c.attempt, c.type_id),
                    inputs=parse("inputs", request.inputs),
                    config=parse("config", request.config),
                    resume=None if request.resume is None else parse("resume", request.resume),
                )
                outcome = pack.invoke(Ctx(), req)
                if not isinstance(outcome, Outcome):
                    outcome = Outcome.completed(outcome)
                try:
                    value = json.dumps(outcome.value, separators=(",", ":"), ensure_ascii=False)
                except (TypeError, ValueError) as e:
                    raise NodeError(INTERNAL_ERROR, f"output is not serializable as JSON: {e}") from None
                if outcome.kind == "suspended":
                    return wit.Outcome_Suspended(value)
                return wit.Outcome_Completed(value)
            except NodeError as e:
                raise _error_info(e.code, e.message, e.details) from None
            except Exception as e:  # noqa: BLE001 - every failure is reported
                raise _error_info(
                    INTERNAL_ERROR,
                    f"uncaught exception: {e!r}\n{_trace(e)}",
                    None,
                ) from None

    return Node
