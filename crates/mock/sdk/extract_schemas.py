#!/usr/bin/env python3
"""Extract JSON Schemas for provider request bodies from the official Python SDKs.

Usage:
    pip install --target DIR anthropic==2.15.0 openai==3.57.0 google-genai==3.6.1
    python3 extract_schemas.py --sdk-dir DIR --out OUT_DIR

Writes into OUT_DIR (JSON, sort_keys, indent=1):
    anthropic-messages.json         body of POST /v1/messages (beta params, stream true|false)
    openai-responses.json           body of POST /v1/responses
    openai-chat.json                body of POST /v1/chat/completions
    google-generate-content.json    body of POST models/{m}:streamGenerateContent (Gemini Developer
                                    API, REST JSON camelCase), derived from the SDK's mldev converters
    google-mldev-unsupported.json   what google/genai/_transformers.py refuses in schemas on mldev
    keywords.json                   JSON Schema keywords used across the schema files, with counts
    models.json                     each SDK's model ids and the retirement dates it ships
                                    (lumen-models' registry test fails when it lags them)

The schemas are produced by a walker over the SDK type annotations (TypedDicts for Anthropic and
OpenAI request params, pydantic models for google-genai and for the few response models that the
Anthropic param unions accept). Conventions:
  * every object schema gets "properties" and "additionalProperties": false (Dict[str, X] gets
    "additionalProperties": X instead); "required" follows Required[...] / total= / pydantic
    required-ness;
  * Literal -> const (one value) / enum; Union / Optional -> anyOf (Optional adds {"type":"null"});
    Iterable / Sequence / List -> array; bytes, IO[bytes], PathLike (base64 file inputs) -> string;
    Enum classes -> enum of values; Any / object -> {} (anything);
  * named classes go to "$defs" and are referenced as "#/$defs/Name"; no description/title/examples.
Only the standard library and the SDKs' own dependencies (pydantic, typing_extensions) are used.
"""
from __future__ import annotations

import argparse
import ast
import collections
import datetime
import enum
import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import sys
import typing

PINS = {"anthropic": "2.15.0", "openai": "3.57.0", "google-genai": "3.6.1"}
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


# --------------------------------------------------------------------------------------------
# set-up


def setup_sdk_path(sdk_dir: str) -> None:
    sdk_dir = os.path.abspath(sdk_dir)
    if not os.path.isdir(sdk_dir):
        sys.exit(f"error: --sdk-dir {sdk_dir} is not a directory")
    for mod in ("pydantic", "typing_extensions", "anthropic", "openai", "google"):
        if mod in sys.modules:
            sys.exit(f"error: {mod} was imported before --sdk-dir was put on sys.path")
    sys.path.insert(0, sdk_dir)
    importlib.invalidate_caches()
    problems = []
    # look only inside sdk_dir, so a copy in site-packages cannot stand in for a missing pin
    found = {}
    for d in importlib.metadata.distributions(path=[sdk_dir]):
        found.setdefault(d.metadata["Name"].lower().replace("_", "-"), d.version)
    for dist, want in PINS.items():
        have = found.get(dist)
        if have is None:
            problems.append(f"{dist}: not installed in {sdk_dir} (want {want})")
            continue
        if have != want:
            problems.append(f"{dist}: installed {have}, pinned {want}")
    if problems:
        sys.exit(
            "error: SDK versions do not match the pins:\n  "
            + "\n  ".join(problems)
            + f"\nreinstall with: pip install --target {sdk_dir} "
            + " ".join(f"{d}=={v}" for d, v in PINS.items())
        )
    for mod in ("anthropic", "openai", "google.genai", "pydantic", "typing_extensions"):
        m = importlib.import_module(mod)
        f = os.path.abspath(getattr(m, "__file__", "") or "")
        if not f.startswith(sdk_dir + os.sep):
            sys.exit(f"error: {mod} was imported from {f}, not from {sdk_dir}")


# --------------------------------------------------------------------------------------------
# the walker


class Walker:
    """Turns Python type annotations into JSON Schema with local $defs."""

    def __init__(self, model_view=None, def_name=None):
        import pydantic
        import typing_extensions as te

        self.pydantic = pydantic
        self.te = te
        self.defs: dict[str, dict] = {}
        self.names: dict[object, str] = {}
        # model_view(cls, walker) -> (properties: dict[name, schema], required: list) or None
        self.model_view = model_view
        self.def_name = def_name
        self.notes: dict[str, object] = {}

    # -- helpers ---------------------------------------------------------------------------
    def _name_for(self, key, base: str) -> str:
        if key in self.names:
            return self.names[key]
        name = base
        taken = set(self.names.values())
        if name in taken:
            k = key[1] if isinstance(key, tuple) else key
            mod = getattr(k, "__module__", "") if isinstance(k, type) else "x"
            name = f"{base}__{mod.rsplit('.', 1)[-1]}"
            i = 2
            while name in taken:
                name = f"{base}__{i}"
                i += 1
        self.names[key] = name
        return name

    def ref_to(self, key, base: str, build) -> dict:
        known = key in self.names
        name = self._name_for(key, base)
        if not known:
            self.defs[name] = {}  # placeholder for recursion
            self.defs[name] = build()
        return {"$ref": f"#/$defs/{name}"}

    @staticmethod
    def any_of(options: list) -> dict:
        flat = []
        for o in options:
            if set(o) == {"anyOf"}:
                sub = o["anyOf"]
            else:
                sub = [o]
            for s in sub:
                if s not in flat:
                    flat.append(s)
        if any(s == {} for s in flat):
            return {}
        # merge plain enums/consts into a single enum
        if len(flat) > 1 and all(set(s) <= {"enum", "const"} for s in flat):
            vals = []
            for s in flat:
                for v in s.get("enum", [s.get("const")] if "const" in s else []):
                    if v not in vals:
                        vals.append(v)
            return {"const": vals[0]} if len(vals) == 1 else {"enum": vals}
        if len(flat) == 1:
            return flat[0]
        return {"anyOf": flat}

    # -- main entry ------------------------------------------------------------------------
    def schema(self, tp) -> dict:
        te = self.te
        pydantic = self.pydantic
        if isinstance(tp, typing.ForwardRef):
            raise TypeError(f"unresolved forward reference {tp!r}")
        if isinstance(tp, str):
            raise TypeError(f"unresolved string annotation {tp!r}")
        origin = te.get_origin(tp)
        args = te.get_args(tp)

        if origin is te.Annotated or origin is typing.Annotated:
            return self.schema(args[0])
        if origin in (te.Required, te.NotRequired, typing.Required, typing.NotRequired) or (
            getattr(te, "ReadOnly", None) is not None and origin is te.ReadOnly
        ):
            return self.schema(args[0])
        if tp is typing.Any or tp is object:
            return {}
        if tp is type(None) or tp is None:
            return {"type": "null"}
        if origin in (typing.Literal, te.Literal):
            vals = list(args)
            return {"const": vals[0]} if len(vals) == 1 else {"enum": vals}
        if origin is typing.Union or (hasattr(__import__("types"), "UnionType") and origin is __import__("types").UnionType):
            return self.any_of([self.schema(a) for a in args])
        if tp is str:
            return {"type": "string"}
        if tp is bool:
            return {"type": "boolean"}
        if tp is int:
            return {"type": "integer"}
        if tp is float:
            return {"type": "number"}
        if tp in (bytes, bytearray):
            # base64 in JSON (google-genai models use ser_json_bytes='base64')
            return {"type": "string"}
        if tp is datetime.datetime:
            return {"type": "string", "format": "date-time"}
        if tp is datetime.date:
            return {"type": "string", "format": "date"}
        # file inputs the SDKs base64-encode into a string
        if origin is typing.IO or tp is typing.IO or getattr(tp, "__name__", None) in ("IO", "PathLike", "BinaryIO"):
            return {"type": "string"}
        if origin is not None and getattr(origin, "__name__", None) in ("IO", "PathLike"):
            return {"type": "string"}

        import collections.abc as cabc

        if origin in (list, set, frozenset, cabc.Iterable, cabc.Sequence, cabc.Collection, cabc.MutableSequence, cabc.Set):
            item = self.schema(args[0]) if args else {}
            return {"type": "array", "items": item}
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return {"type": "array", "items": self.schema(args[0])}
            return {
                "type": "array",
                "prefixItems": [self.schema(a) for a in args],
                "minItems": len(args),
                "maxItems": len(args),
            }
        if origin in (dict, cabc.Mapping, cabc.MutableMapping):
            val = self.schema(args[1]) if len(args) == 2 else {}
            out = {"type": "object"}
            if val != {}:
                out["additionalProperties"] = val
            return out
        if tp in (list, tuple, set):
            return {"type": "array"}
        if tp is dict:
            return {"type": "object"}

        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return self.ref_to(tp, tp.__name__, lambda: {"enum": [m.value for m in tp]})
        if te.is_typeddict(tp):
            base = self.def_name(tp) if self.def_name else tp.__name__
            return self.ref_to(tp, base, lambda: self.typeddict_schema(tp))
        if isinstance(tp, type) and issubclass(tp, pydantic.BaseModel):
            view = self.model_view(tp, self) if self.model_view else None
            if view is not None:
                key, base, build = view
                return self.ref_to(key, base, build)
            base = self.def_name(tp) if self.def_name else tp.__name__
            return self.ref_to(tp, base, lambda: self.model_schema(tp))
        if isinstance(tp, typing.TypeVar):
            return {}
        raise TypeError(f"don't know how to express {tp!r} (origin {origin!r}) in JSON Schema")

    # -- TypedDict ---------------------------------------------------------------------------
    def typeddict_fields(self, td):
        """[(key, annotation, required)] honouring Required/NotRequired and per-class totality.

        __required_keys__ is unreliable for modules using `from __future__ import annotations`
        (the qualifiers are strings at class creation), so required-ness is recomputed here from
        the resolved hints and the totality of the class that declares each key."""
        te = self.te
        hints = typing.get_type_hints(td, include_extras=True)
        owner_total = {}

        def visit(cls):
            bases = [b for b in getattr(cls, "__orig_bases__", ()) if te.is_typeddict(b)]
            inherited = set()
            for b in bases:
                visit(b)
                inherited |= set(typing.get_type_hints(b, include_extras=True))
            for k in typing.get_type_hints(cls, include_extras=True):
                if k not in inherited:
                    owner_total[k] = getattr(cls, "__total__", True)

        visit(td)
        out = []
        for k, ann in hints.items():
            req = owner_total.get(k, getattr(td, "__total__", True))
            a = ann
            while True:
                o = te.get_origin(a)
                if o in (te.Required, typing.Required):
                    req = True
                elif o in (te.NotRequired, typing.NotRequired):
                    req = False
                elif o is typing.Annotated or (getattr(te, "ReadOnly", None) is not None and o is te.ReadOnly):
                    pass
                else:
                    break
                a = te.get_args(a)[0]
            out.append((self._td_alias(ann) or k, ann, req))
        return out

    def _td_alias(self, ann):
        """PropertyInfo(alias=...) inside Annotated[...] renames the wire key."""
        te = self.te
        a = ann
        while True:
            o = te.get_origin(a)
            if o is typing.Annotated:
                for meta in te.get_args(a)[1:]:
                    alias = getattr(meta, "alias", None)
                    if isinstance(alias, str):
                        return alias
                a = te.get_args(a)[0]
            elif o in (te.Required, te.NotRequired, typing.Required, typing.NotRequired):
                a = te.get_args(a)[0]
            else:
                return None

    def typeddict_schema(self, td) -> dict:
        props, req = {}, []
        for key, ann, required in self.typeddict_fields(td):
            props[key] = self.schema(ann)
            if required:
                req.append(key)
        return obj(props, req)

    # -- pydantic ----------------------------------------------------------------------------
    def model_schema(self, cls) -> dict:
        props, req = {}, []
        for name, f in cls.model_fields.items():
            key = f.alias or name
            props[key] = self.schema(f.annotation)
            if f.is_required():
                req.append(key)
        return obj(props, req)


def obj(props: dict, required) -> dict:
    out = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        out["required"] = sorted(set(required))
    return out


# --------------------------------------------------------------------------------------------
# generic helpers


def resource_body_keys(resource_file: str, path: str) -> set[str]:
    """Keys of the literal `body=` dict passed to `self._post("<path>", ...)` by `create()` in a resource module."""
    tree = ast.parse(open(resource_file, encoding="utf-8").read())
    keys: set[str] = set()
    creates = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == "create"]
    for node in (n for f in creates for n in ast.walk(f)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "_post"):
            continue
        if not (node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == path):
            continue
        for kw in node.keywords:
            if kw.arg != "body":
                continue
            val = kw.value
            if isinstance(val, ast.Await):
                val = val.value
            if isinstance(val, ast.Call) and val.args:
                val = val.args[0]
            if isinstance(val, ast.Dict):
                keys |= {k.value for k in val.keys if isinstance(k, ast.Constant)}
    if not keys:
        raise RuntimeError(f"no body dict found for _post({path!r}) in {resource_file}")
    return keys


def merged_body(walker: Walker, variants: list, body_keys: set[str], notes: dict) -> dict:
    """Merge the Streaming / NonStreaming TypedDicts into one top-level object schema."""
    per = []
    for td in variants:
        fields = walker.typeddict_fields(td)
        per.append({k: (walker.schema(a), r) for k, a, r in fields})
    keys = []
    for p in per:
        for k in p:
            if k not in keys:
                keys.append(k)
    props, req = {}, []
    dropped = []
    for k in keys:
        if k not in body_keys:
            dropped.append(k)
            continue
        schemas = [p[k][0] for p in per if k in p]
        if k == "stream":
            props[k] = {"type": "boolean"}
        else:
            props[k] = Walker.any_of(schemas)
        if all(k in p and p[k][1] for p in per):
            req.append(k)
    missing = sorted(body_keys - set(keys))
    if missing:
        raise RuntimeError(f"body keys without a TypedDict field: {missing}")
    if dropped:
        notes["notBodyFields"] = sorted(dropped)
    return obj(props, req)


def finish(root: dict, walker: Walker, package: str, extra: dict | None = None) -> dict:
    root = dict(root)
    root["$schema"] = SCHEMA_DIALECT
    root["$defs"] = walker.defs
    root["x-sdk"] = {"package": package, "version": importlib.metadata.version(package)}
    if extra:
        root.update(extra)
    strip_annotations(root)
    check_refs(root)
    return root


def strip_annotations(node):
    if isinstance(node, dict):
        for k in list(node):
            v = node[k]
            if k in ("properties", "$defs", "patternProperties"):
                for sub in v.values():
                    strip_annotations(sub)
                continue
            if k in ("description", "title", "examples", "default"):
                del node[k]
                continue
            strip_annotations(v)
    elif isinstance(node, list):
        for v in node:
            strip_annotations(v)


def check_refs(root: dict):
    defs = root.get("$defs", {})

    def walk(n):
        if isinstance(n, dict):
            r = n.get("$ref")
            if isinstance(r, str):
                if not r.startswith("#/$defs/") or r[len("#/$defs/"):] not in defs:
                    raise RuntimeError(f"dangling or non-local $ref {r}")
            for v in n.values():
                walk(v)
        elif isinstance(n, list):
            for v in n:
                walk(v)

    walk(root)
    # every object with properties must forbid extras
    def walk2(n):
        if isinstance(n, dict):
            if isinstance(n.get("properties"), dict) and n.get("additionalProperties") is not False:
                raise RuntimeError(f"object with properties but no additionalProperties:false: {sorted(n['properties'])[:5]}")
            for k, v in n.items():
                if k in ("properties", "$defs"):
                    for s in v.values():
                        walk2(s)
                else:
                    walk2(v)
        elif isinstance(n, list):
            for v in n:
                walk2(v)

    walk2(root)


def prune_defs(root: dict) -> None:
    """Drop $defs not reachable from the root (can happen after field exclusion)."""
    defs = root.get("$defs", {})
    seen = set()

    def walk(n):
        if isinstance(n, dict):
            r = n.get("$ref")
            if isinstance(r, str) and r.startswith("#/$defs/"):
                name = r[len("#/$defs/"):]
                if name not in seen:
                    seen.add(name)
                    walk(defs[name])
            for k, v in n.items():
                if k != "$defs":
                    walk(v)
        elif isinstance(n, list):
            for v in n:
                walk(v)

    walk(root)
    for k in list(defs):
        if k not in seen:
            del defs[k]


def normalized(schema: dict, strip_prefix: str) -> str:
    """A def-name-insensitive rendering of a schema, to compare beta and GA types structurally."""
    def fix(n):
        if isinstance(n, dict):
            return {k: (("#/$defs/" + v[len("#/$defs/"):].removeprefix(strip_prefix)) if k == "$ref" else fix(v)) for k, v in n.items()}
        if isinstance(n, list):
            return [fix(v) for v in n]
        return n
    return json.dumps(fix(schema), sort_keys=True)


def closure(defs: dict, name: str) -> dict:
    out = {}
    todo = [name]
    while todo:
        n = todo.pop()
        if n in out:
            continue
        out[n] = defs[n]
        s = json.dumps(defs[n])
        import re
        todo += re.findall(r'"#/\$defs/([^"]+)"', s)
    return out


# --------------------------------------------------------------------------------------------
# Anthropic


def build_anthropic() -> dict:
    import anthropic
    from anthropic.types.beta import message_create_params as mcp
    from anthropic.types import computer_toolset_20260801_param as ga_ct
    from anthropic.types import browser_toolset_20260801_param as ga_bt
    from anthropic.types import browser_state_block_param as ga_bs

    pkg_dir = os.path.dirname(anthropic.__file__)
    body = resource_body_keys(os.path.join(pkg_dir, "resources/beta/messages/messages.py"), "/v1/messages")
    w = Walker()
    notes: dict = {}
    root = merged_body(w, [mcp.MessageCreateParamsNonStreaming, mcp.MessageCreateParamsStreaming], body, notes)

    # GA (non-beta) toolset params and the browser_state block: accepted in tools[] / tool_result
    # content of the beta params? The beta unions carry Beta* twins; add the GA types whenever
    # they are not structurally identical to those twins.
    tools_items = root["properties"]["tools"]["items"]
    tr_name = w.names.get(_find_class("anthropic.types.beta.beta_tool_result_block_param", "BetaToolResultBlockParam"))
    ga_checks = []
    for ga_cls, beta_name, where in [
        (ga_ct.ComputerToolset20260801Param, "BetaComputerToolset20260801Param", "tools[]"),
        (ga_bt.BrowserToolset20260801Param, "BetaBrowserToolset20260801Param", "tools[]"),
        (ga_bs.BrowserStateBlockParam, "BetaBrowserStateBlockParam", "tool_result.content[]"),
    ]:
        gw = Walker()
        ga_ref = gw.schema(ga_cls)
        ga_name = ga_ref["$ref"].split("/")[-1]
        ga_norm = {n: normalized(s, "") for n, s in closure(gw.defs, ga_name).items()}
        beta_norm = {n.removeprefix("Beta"): normalized(s, "Beta") for n, s in closure(w.defs, beta_name).items()}
        identical = ga_norm == beta_norm
        entry = {"gaType": f"{ga_cls.__module__}.{ga_cls.__name__}", "betaTwin": beta_name, "in": where, "identical": identical}
        if not identical:
            ref = w.schema(ga_cls)
            if where == "tools[]":
                tools_items.setdefault("anyOf", []).append(ref)
            else:
                content = w.defs[tr_name]["properties"]["content"]
                for alt in content["anyOf"]:
                    if alt.get("type") == "array":
                        alt["items"]["anyOf"].append(ref)
            entry["added"] = True
        ga_checks.append(entry)
    notes["gaTypesVsBeta"] = ga_checks
    notes["headersNotInBody"] = notes.pop("notBodyFields", [])
    out = finish(root, w, "anthropic", {"x-notes": notes})
    return out


def _find_class(module: str, name: str):
    return getattr(importlib.import_module(module), name)


# --------------------------------------------------------------------------------------------
# OpenAI


def build_openai_responses() -> dict:
    import openai
    from openai.types.responses import response_create_params as rcp

    pkg_dir = os.path.dirname(openai.__file__)
    body = resource_body_keys(os.path.join(pkg_dir, "resources/responses/responses.py"), "/responses")
    w = Walker()
    notes: dict = {}
    root = merged_body(w, [rcp.ResponseCreateParamsNonStreaming, rcp.ResponseCreateParamsStreaming], body, notes)
    return finish(root, w, "openai", {"x-notes": notes} if notes else None)


def build_openai_chat() -> dict:
    import openai
    from openai.types.chat import completion_create_params as ccp

    pkg_dir = os.path.dirname(openai.__file__)
    body = resource_body_keys(os.path.join(pkg_dir, "resources/chat/completions/completions.py"), "/chat/completions")
    w = Walker()
    notes: dict = {}
    root = merged_body(w, [ccp.CompletionCreateParamsNonStreaming, ccp.CompletionCreateParamsStreaming], body, notes)
    return finish(root, w, "openai", {"x-notes": notes} if notes else None)


# --------------------------------------------------------------------------------------------
# Google (Gemini Developer API = "mldev")


def _getv_field(test) -> str | None:
    """`getv(from_object, ['x']) is not None` -> 'x'."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot)):
        return None
    call = test.left
    if not (isinstance(call, ast.Call) and getattr(call.func, "id", None) == "getv" and len(call.args) == 2):
        return None
    path = call.args[1]
    if isinstance(path, ast.List) and len(path.elts) == 1 and isinstance(path.elts[0], ast.Constant):
        return path.elts[0].value
    return None


def _value_kind(expr) -> dict:
    """Describe the value expression handed to setv()."""
    kind = {"list": isinstance(expr, ast.ListComp)}
    inner = expr.elt if isinstance(expr, ast.ListComp) else expr
    for n in ast.walk(inner):
        if isinstance(n, ast.Call):
            fname = getattr(n.func, "id", None) or getattr(n.func, "attr", None)
            if fname and fname.startswith("_") and fname.endswith("_to_mldev"):
                kind["converter"] = fname[1:-len("_to_mldev")]
                break
    transforms = []
    for n in ast.walk(expr):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and getattr(n.func.value, "id", None) == "t":
            transforms.append(n.func.attr)
    if transforms:
        kind["transforms"] = transforms
    return kind


def parse_mldev_converters(models_py: str) -> dict:
    """{TypeName: {"set": [(field, target, wire_path, kind)], "raise": {field: message}}}"""
    tree = ast.parse(open(models_py, encoding="utf-8").read())
    out = {}
    for fn in tree.body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name.startswith("_") and fn.name.endswith("_to_mldev")):
            continue
        tname = fn.name[1:-len("_to_mldev")]
        sets, raises = [], {}
        for st in fn.body:
            if not isinstance(st, ast.If):
                continue
            field = _getv_field(st.test)
            if field is None:
                continue
            for sub in st.body:
                if isinstance(sub, ast.Raise):
                    msg = ""
                    if isinstance(sub.exc, ast.Call) and sub.exc.args:
                        a = sub.exc.args[0]
                        if isinstance(a, ast.Constant):
                            msg = a.value
                        elif isinstance(a, ast.JoinedStr):
                            msg = "".join(v.value for v in a.values if isinstance(v, ast.Constant))
                    raises[field] = msg
                elif isinstance(sub, ast.Expr) and isinstance(sub.value, ast.Call) and getattr(sub.value.func, "id", None) == "setv":
                    target, path, value = sub.value.args[:3]
                    wire = [e.value for e in path.elts] if isinstance(path, ast.List) else None
                    sets.append((field, target.id, wire, _value_kind(value)))
        out[tname] = {"set": sets, "raise": raises}
    return out


TRANSFORM_TYPES = {
    # google/genai/_transformers.py helpers used by the mldev converters -> resulting wire type
    "t_cached_content_name": "string",
    "t_schema": "Schema",
    "t_json_schema": "any",
    "t_speech_config": "SpeechConfig",
    "t_content": "Content",
    "t_contents": "Content[]",
    "t_tool": "Tool",
    "t_tools": "Tool[]",
}


def build_google() -> tuple[dict, dict]:
    from google import genai
    from google.genai import types as gt

    pkg_dir = os.path.dirname(genai.__file__)
    conv = parse_mldev_converters(os.path.join(pkg_dir, "models.py"))
    vertex_only: dict[str, dict] = {}
    not_sent: dict[str, list] = {}

    def field_schema(cls, field, kind, w, fallback_cls=None):
        f = cls.model_fields.get(field)
        if f is None and fallback_cls is not None:
            f = fallback_cls.model_fields.get(field)
        if f is None:
            raise RuntimeError(f"{cls.__name__}.{field} not found")

        def nullable(s):
            # the field is Optional[...] on the SDK type: keep null accepted, as for plain fields
            # (proto3 JSON treats null as "unset")
            if type(None) in typing.get_args(f.annotation):
                return Walker.any_of([s, {"type": "null"}])
            return s

        if "converter" in kind:
            target = getattr(gt, kind["converter"])
            s = converted(target, w)
            return nullable({"type": "array", "items": s} if kind["list"] else s)
        for tr in kind.get("transforms", []):
            t = TRANSFORM_TYPES.get(tr)
            if t == "string":
                return nullable({"type": "string"})
            if t == "any":
                return {}
            if t in ("Schema", "SpeechConfig", "Content", "Tool"):
                s = w.schema(getattr(gt, t))
                return nullable({"type": "array", "items": s} if kind["list"] else s)
        return w.schema(f.annotation)

    def converted(cls, w):
        """Schema of `cls` as the mldev converter `_<cls>_to_mldev` writes it."""
        c = conv[cls.__name__]

        def build():
            props = {}
            for field, target, wire, kind in c["set"]:
                if target != "to_object" or wire is None or len(wire) != 1:
                    raise RuntimeError(f"unexpected setv in _{cls.__name__}_to_mldev: {target} {wire}")
                props[wire[0]] = field_schema(cls, field, kind, w)
            if c["raise"]:
                vertex_only[cls.__name__] = {k: v for k, v in sorted(c["raise"].items())}
            handled = {f for f, *_ in c["set"]} | set(c["raise"])
            dropped = sorted(set(cls.model_fields) - handled)
            if dropped:
                not_sent[cls.__name__] = dropped
            return obj(props, [])

        return w.ref_to(("mldev", cls), cls.__name__, build)

    def model_view(cls, w):
        # a pydantic model reached by plain pass-through (no converter call): all fields, camelCase
        name = cls.__name__ + ("Passthrough" if cls.__name__ in conv else "")
        return (cls, name, lambda: w.model_schema(cls))

    w = Walker(model_view=model_view)

    # top level: _GenerateContentParameters_to_mldev + the parent_object fields that
    # _GenerateContentConfig_to_mldev writes.
    top = conv["GenerateContentParameters"]
    cfg = conv["GenerateContentConfig"]
    props: dict = {}
    for field, target, wire, kind in top["set"]:
        if wire[0] == "_url":
            continue  # model goes into the URL
        if field == "config":
            continue  # handled below (generationConfig + hoisted fields)
        if field == "contents" and kind.get("converter") == "Content" and kind["list"]:
            props[wire[0]] = {"type": "array", "items": converted(gt.Content, w)}
        else:
            raise RuntimeError(f"unexpected top-level field in _GenerateContentParameters_to_mldev: {field}")
    gen_props: dict = {}
    gen_sources = []
    for field, target, wire, kind in cfg["set"]:
        if target == "parent_object":
            props[wire[0]] = field_schema(gt.GenerateContentConfig, field, kind, w)
        else:
            # generationConfig members: typed from types.GenerationConfig where it has the field
            src = gt.GenerationConfig if field in gt.GenerationConfig.model_fields else gt.GenerateContentConfig
            gen_sources.append((wire[0], src.__name__))
            gen_props[wire[0]] = field_schema(src, field, kind, w, fallback_cls=gt.GenerateContentConfig)
    props["generationConfig"] = w.ref_to("GenerationConfig(mldev)", "GenerationConfig", lambda: obj(gen_props, []))
    vertex_only["GenerateContentConfig"] = dict(sorted(cfg["raise"].items()))
    gencfg_fields = set(gt.GenerationConfig.model_fields)
    sent_gen = {f for f, t, *_ in cfg["set"] if t == "to_object"}
    root = obj(props, [])
    root["required"] = ["contents"]
    notes = {
        "source": "google/genai/models.py _GenerateContentParameters_to_mldev / _GenerateContentConfig_to_mldev and the _<Type>_to_mldev converters they call",
        "wireCase": "camelCase (pydantic by_alias / converter keys). Sub-objects the converters pass through unconverted are sent by the SDK via model_dump() in snake_case; the API's proto-JSON parser accepts both spellings, this schema only camelCase.",
        "vertexOnlyExcluded": vertex_only,
        "fieldsTheMldevConverterDoesNotSend": not_sent,
        "generationConfigFieldsFromGenerateContentConfigOnly": sorted(k for k, s in gen_sources if s != "GenerationConfig"),
        "typesGenerationConfigFieldsNotSentOnMldev": sorted(gencfg_fields - sent_gen),
        "topLevelFromGenerateContentConfig": sorted(wire[0] for f, t, wire, k in cfg["set"] if t == "parent_object"),
        "required": "contents is required by the REST method; everything else optional",
    }
    out = finish(root, w, "google-genai", {"x-notes": notes})
    prune_defs(out)

    unsupported = google_mldev_unsupported(os.path.join(pkg_dir, "_transformers.py"))
    unsupported["x-sdk"] = out["x-sdk"]
    unsupported["schemaTypeFields"] = sorted(f.alias or n for n, f in gt.Schema.model_fields.items())
    return out, unsupported


def google_mldev_unsupported(transformers_py: str) -> dict:
    src = open(transformers_py, encoding="utf-8").read()
    tree = ast.parse(src)
    fn = next(
        n for n in tree.body
        if isinstance(n, ast.FunctionDef) and n.name == "_raise_for_unsupported_mldev_properties"
    )
    keys, msgs = [], []
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" and n.args and isinstance(n.args[0], ast.Constant):
            keys.append(n.args[0].value)
        if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and n.exc.args and isinstance(n.exc.args[0], ast.Constant):
            msgs.append(n.exc.args[0].value)
    callers = sorted({
        f.name for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef)
        and any(isinstance(c, ast.Call) and getattr(c.func, "id", None) == "_raise_for_unsupported_mldev_properties" for c in ast.walk(f))
    })
    t_schema_users = sorted({
        f.name for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef)
        and any(isinstance(c, ast.Call) and getattr(c.func, "id", None) == "process_schema" for c in ast.walk(f))
    })
    return {
        "source": "google/genai/_transformers.py::_raise_for_unsupported_mldev_properties",
        "keywords": keys,
        "condition": "raises ValueError when the client is not vertexai and schema.get(keyword) is truthy (so additionalProperties: false passes, true or a schema object fails); checked on every (sub)schema process_schema visits",
        "errorMessages": msgs,
        "calledFrom": callers,
        "processSchemaCalledFrom": t_schema_users,
        "appliesTo": "schemas that go through t_schema/process_schema: GenerateContentConfig.response_schema (-> generationConfig.responseSchema), enum / pydantic-class schemas. FunctionDeclaration.parameters given directly in a Tool is passed through by _Tool_to_mldev without process_schema, so the SDK itself does not check it; parameters is typed types.Schema (extra=forbid), whose fields are listed in schemaTypeFields.",
    }


# --------------------------------------------------------------------------------------------
# keyword summary


def keyword_counts(files: dict[str, dict]) -> dict:
    counts = collections.Counter()
    types_ = collections.Counter()
    formats = collections.Counter()
    per_file = {}

    def walk(n, c):
        if isinstance(n, dict):
            for k, v in n.items():
                c[k] += 1
                if k == "type":
                    for t in (v if isinstance(v, list) else [v]):
                        types_[t] += 1
                if k == "format":
                    formats[v] += 1
                if k in ("properties", "$defs", "patternProperties"):
                    for s in v.values():
                        walk(s, c)
                elif k in ("items", "additionalProperties", "not", "contains", "propertyNames"):
                    walk(v, c)
                elif k in ("anyOf", "oneOf", "allOf", "prefixItems"):
                    for s in v:
                        walk(s, c)
        elif isinstance(n, list):
            for s in n:
                walk(s, c)

    for name, doc in files.items():
        c = collections.Counter()
        body = {k: v for k, v in doc.items() if not k.startswith("x-")}
        walk(body, c)
        for k in doc:
            if k.startswith("x-"):
                c[k] += 1
        per_file[name] = dict(sorted(c.items()))
        counts.update(c)
    return {
        "keywords": dict(sorted(counts.items())),
        "typeValues": dict(sorted(types_.items())),
        "formatValues": dict(sorted(formats.items())),
        "perFile": per_file,
        "additionalPropertiesValues": _ap_values(files),
    }


def _ap_values(files):
    c = collections.Counter()

    def walk(n):
        if isinstance(n, dict):
            if "additionalProperties" in n:
                v = n["additionalProperties"]
                c["false" if v is False else "true" if v is True else "schema"] += 1
            for v in n.values():
                walk(v)
        elif isinstance(n, list):
            for v in n:
                walk(v)

    for d in files.values():
        walk(d)
    return dict(c)


# --------------------------------------------------------------------------------------------
# sanity samples (--check): hand-written bodies that must pass / must fail


PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def _anthropic_ok() -> dict:
    return {
        "model": "claude-opus-4-7",
        "max_tokens": 4096,
        "stream": True,
        "thinking": {"type": "adaptive", "display": "summarized"},
        "output_config": {"effort": "high"},
        "system": [{"type": "text", "text": "You are a browser agent.", "cache_control": {"type": "ephemeral"}}],
        "tools": [
            {"type": "computer_20251124", "name": "computer", "display_width_px": 1280, "display_height_px": 800, "enable_zoom": True},
            {"type": "computer_toolset_20260801", "configs": {"zoom": {"enabled": False}, "left_click": {"defer_loading": False}}},
            {"type": "browser_toolset_20260801", "configs": {"javascript_exec": {"enabled": False}}},
        ],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "Open example.com"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
            ]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I should click.", "signature": "c2ln"},
                {"type": "tool_use", "id": "toolu_1", "name": "computer", "input": {"action": "left_click", "coordinate": [10, 20]}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True, "content": [{"type": "text", "text": "click failed"}]},
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_2", "name": "left_click", "toolset_name": "browser",
                 "input": {"target": {"type": "ref", "ref": "ref_7"}}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_2", "toolset_name": "browser", "content": [
                    {"type": "text", "text": "Clicked."},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
                    {"type": "browser_state",
                     "tabs": [{"tab_id": "t1", "title": "Example", "url": "https://example.com/", "active": True},
                              {"tab_id": "t2", "title": "", "url": ""}],
                     "state_changes": [{"type": "tab_opened", "tab_id": "t2"},
                                       {"type": "download_completed", "download_id": "d1", "url": "https://example.com/a.pdf", "size_bytes": 10}]},
                ]},
            ]},
        ],
    }


def _openai_responses_ok() -> dict:
    return {
        "model": "gpt-5.5",
        "stream": True,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "reasoning": {"effort": "medium", "summary": "auto"},
        "tools": [{"type": "computer"}, {"type": "computer_use_preview", "display_width": 1280, "display_height": 800, "environment": "browser"}],
        "input": [
            {"role": "user", "content": [
                {"type": "input_text", "text": "Open example.com"},
                {"type": "input_image", "image_url": "data:image/png;base64," + PNG_B64, "detail": "auto"},
            ]},
            {"type": "computer_call", "id": "cu_1", "call_id": "call_1", "status": "completed", "pending_safety_checks": [],
             "actions": [{"type": "click", "button": "left", "x": 1, "y": 2, "keys": ["SHIFT"]},
                         {"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 3, "y": 4}]},
                         {"type": "double_click", "x": 5, "y": 6, "keys": None}]},
            {"type": "computer_call_output", "call_id": "call_1",
             "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64," + PNG_B64}},
        ],
    }


def _openai_chat_ok() -> dict:
    return {
        "model": "gpt-4.1",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "hi"},
                                         {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PNG_B64, "detail": "low"}}]},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}],
    }


def _google_ok() -> dict:
    return {
        "contents": [
            {"role": "user", "parts": [{"text": "Open example.com"}, {"inlineData": {"mimeType": "image/png", "data": PNG_B64}}]},
            {"role": "model", "parts": [{"functionCall": {"id": "fc1", "name": "click_at", "args": {"x": 1, "y": 2}}, "thoughtSignature": "c2ln"}]},
            {"role": "user", "parts": [{"functionResponse": {"id": "fc1", "name": "click_at", "response": {"url": "https://example.com/"},
                                                             "parts": [{"inlineData": {"mimeType": "image/png", "data": PNG_B64}}]}}]},
        ],
        "systemInstruction": {"parts": [{"text": "sys"}]},
        "tools": [{"computerUse": {"environment": "ENVIRONMENT_BROWSER", "excludedPredefinedFunctions": ["drag_and_drop"]}},
                  {"functionDeclarations": [{"name": "f", "description": "d",
                                             "parameters": {"type": "OBJECT", "properties": {"a": {"type": "STRING"}}, "required": ["a"]}}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
        "generationConfig": {"temperature": 0.2, "maxOutputTokens": 1024, "thinkingConfig": {"thinkingLevel": "LOW", "includeThoughts": True}},
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
    }


def _mut(base, fn):
    b = json.loads(json.dumps(base))
    fn(b)
    return b


def samples():
    a, r, c, g = _anthropic_ok(), _openai_responses_ok(), _openai_chat_ok(), _google_ok()
    return [
        ("anthropic-messages.json", "valid: computer_20251124 + both GA toolsets, adaptive thinking, effort, image, is_error tool_result, browser_state", a, True),
        ("anthropic-messages.json", "unknown top-level field", _mut(a, lambda b: b.update(foo=1)), False),
        ("anthropic-messages.json", "missing max_tokens", _mut(a, lambda b: b.pop("max_tokens")), False),
        ("anthropic-messages.json", "effort inside thinking (belongs in output_config)", _mut(a, lambda b: b["thinking"].update(effort="high")), False),
        ("anthropic-messages.json", "budget_tokens on adaptive thinking", _mut(a, lambda b: b["thinking"].update(budget_tokens=2048)), False),
        ("anthropic-messages.json", "thinking enabled with budget_tokens", _mut(a, lambda b: b.update(thinking={"type": "enabled", "budget_tokens": 2048})), True),
        ("anthropic-messages.json", "unknown member key in computer toolset configs", _mut(a, lambda b: b["tools"][1]["configs"].update(navigate={"enabled": True})), False),
        ("anthropic-messages.json", "name on a toolset entry", _mut(a, lambda b: b["tools"][2].update(name="browser")), False),
        ("anthropic-messages.json", "image data not a string", _mut(a, lambda b: b["messages"][0]["content"][1]["source"].update(data=[1, 2])), False),
        ("anthropic-messages.json", "browser_state tab without url", _mut(a, lambda b: b["messages"][4]["content"][0]["content"][2]["tabs"][0].pop("url")), False),
        ("openai-responses.json", "valid: GA computer tool, computer_call with actions[], computer_call_output", r, True),
        ("openai-responses.json", "unknown top-level field", _mut(r, lambda b: b.update(foo=1)), False),
        ("openai-responses.json", "detail on computer_screenshot output (not in SDK 3.54.0)", _mut(r, lambda b: b["input"][2]["output"].update(detail="original")), False),
        ("openai-responses.json", "drag path as [x, y] pairs", _mut(r, lambda b: b["input"][1]["actions"][1].update(path=[[1, 2], [3, 4]])), False),
        ("openai-chat.json", "valid: tools + image_url + tool message", c, True),
        ("openai-chat.json", "unknown top-level field", _mut(c, lambda b: b.update(foo=1)), False),
        ("google-generate-content.json", "valid: computerUse + functionResponse with inline screenshot part", g, True),
        ("google-generate-content.json", "unknown top-level field", _mut(g, lambda b: b.update(foo=1)), False),
        ("google-generate-content.json", "snake_case system_instruction", _mut(g, lambda b: b.update(system_instruction=b.pop("systemInstruction"))), False),
        ("google-generate-content.json", "functionCall.willContinue (Vertex-only)", _mut(g, lambda b: b["contents"][1]["parts"][0]["functionCall"].update(willContinue=True)), False),
        ("google-generate-content.json", "functionResponse.willContinue + scheduling (allowed on mldev)", _mut(g, lambda b: b["contents"][2]["parts"][0]["functionResponse"].update(willContinue=False, scheduling="SILENT")), True),
        ("google-generate-content.json", "unknown Environment value", _mut(g, lambda b: b["tools"][0]["computerUse"].update(environment="BROWSER")), False),
    ]


def run_checks(out_dir: str) -> int:
    try:
        import jsonschema
    except ImportError:
        print("--check needs the jsonschema package (pass --jsonschema-dir DIR with it pip-installed --target DIR)")
        return 2
    failures = 0
    cache = {}
    for fname, label, body, expect in samples():
        if fname not in cache:
            schema = json.load(open(os.path.join(out_dir, fname), encoding="utf-8"))
            jsonschema.Draft202012Validator.check_schema(schema)
            cache[fname] = jsonschema.Draft202012Validator(schema)
        errs = list(cache[fname].iter_errors(body))
        ok = (not errs) == expect
        failures += not ok
        first = ""
        if errs:
            e = jsonschema.exceptions.best_match(errs)
            first = f" -- {'/'.join(map(str, e.absolute_path))}: {e.message[:150]}"
        print(f"{'ok  ' if ok else 'FAIL'} {fname}: {label}: {'valid' if not errs else 'invalid'}{first}")
    print(f"{len(samples()) - failures} passed, {failures} failed")
    return 1 if failures else 0


# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# model lists


def _module_file(module: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        sys.exit(f"error: {module} is not in the SDK directory")
    return spec.origin


def _literals(node) -> list[str]:
    """Every string constant inside a Literal[...] subscript under `node`, in order."""
    out = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Subscript) and getattr(sub.value, "id", None) == "Literal":
            for const in ast.walk(sub.slice):
                if isinstance(const, ast.Constant) and isinstance(const.value, str):
                    out.append(const.value)
    return out


def _assigned(module: str, name: str):
    """The value node and the docstring after `name = ...` in `module`'s source."""
    tree = ast.parse(open(_module_file(module), encoding="utf-8").read())
    body = tree.body
    for i, stmt in enumerate(body):
        target = stmt.target if isinstance(stmt, ast.AnnAssign) else (
            stmt.targets[0] if isinstance(stmt, ast.Assign) else None)
        if getattr(target, "id", None) == name:
            doc = ""
            if i + 1 < len(body) and isinstance(body[i + 1], ast.Expr) and isinstance(
                    getattr(body[i + 1], "value", None), ast.Constant):
                doc = body[i + 1].value.value
            return stmt.value, doc
    sys.exit(f"error: {module} defines no {name}")


def _openai_shutdowns(doc: str) -> dict[str, str]:
    """`- "a", "b": Announced shutdown date: 2026-12-11.` lines of a literal's docstring."""
    out = {}
    for item in re.split(r"\n- ", "\n" + doc):
        m = re.search(r"Announced shutdown date:\s*(\d{4}-\d{2}-\d{2})", item)
        if m:
            for model in re.findall(r'"([^"]+)"', item.split(":", 1)[0]):
                out[model] = m.group(1)
    return out


def _iso_date(text: str) -> str:
    """`January 22nd, 2027` (Anthropic's spelling) -> `2027-01-22`."""
    plain = re.sub(r"(\d+)(st|nd|rd|th)", r"\1", text)
    return datetime.datetime.strptime(plain, "%B %d, %Y").date().isoformat()


def build_models() -> dict:
    """Each SDK's model ids (its own literals) and the retirement dates it ships."""
    anthropic_models, _ = _assigned("anthropic.types.model_param", "ModelParam")
    deprecated, _ = _assigned("anthropic._data.deprecated_models", "DEPRECATED_MODELS")
    chat, chat_doc = _assigned("openai.types.shared.chat_model", "ChatModel")
    responses, responses_doc = _assigned("openai.types.shared.responses_model", "ResponsesModel")
    tokenizers = ast.parse(open(_module_file("google.genai._local_tokenizer_loader"), encoding="utf-8").read())
    google = set()
    for node in ast.walk(tokenizers):
        if isinstance(node, ast.Dict):
            google.update(k.value for k in node.keys if isinstance(k, ast.Constant)
                          and isinstance(k.value, str) and k.value.startswith("gemini-"))
    # The model the SDK's own examples use.
    examples = open(_module_file("google.genai.models"), encoding="utf-8").read()
    google.update(re.findall(r"model='(gemini-[0-9][\w.-]*)'", examples))
    shutdowns = _openai_shutdowns(chat_doc)
    shutdowns.update(_openai_shutdowns(responses_doc))
    return {
        "pins": PINS,
        "anthropic": {
            "models": sorted(set(_literals(anthropic_models))),
            "source": "anthropic/types/model_param.py, anthropic/_data/deprecated_models.py",
            "end_of_life": {k.value: _iso_date(v.value) for k, v in zip(deprecated.keys, deprecated.values)},
        },
        "openai": {
            "models": sorted(set(_literals(chat)) | set(_literals(responses))),
            "source": "openai/types/shared/chat_model.py, openai/types/shared/responses_model.py",
            "end_of_life": shutdowns,
        },
        "google": {
            "models": sorted(google),
            "source": "google/genai/_local_tokenizer_loader.py, google/genai/models.py (examples)",
            "end_of_life": {},
        },
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sdk-dir", required=True, help="directory the SDKs were pip-installed into with --target")
    ap.add_argument("--out", required=True, help="output directory for the JSON Schema files")
    ap.add_argument("--check", action="store_true", help="validate hand-written sample bodies against the written schemas")
    ap.add_argument("--jsonschema-dir", help="extra sys.path entry holding the jsonschema package (for --check)")
    args = ap.parse_args(argv)
    setup_sdk_path(args.sdk_dir)
    if args.jsonschema_dir:
        sys.path.append(os.path.abspath(args.jsonschema_dir))
    os.makedirs(args.out, exist_ok=True)

    schemas = {
        "anthropic-messages.json": build_anthropic(),
        "openai-responses.json": build_openai_responses(),
        "openai-chat.json": build_openai_chat(),
    }
    google, unsupported = build_google()
    schemas["google-generate-content.json"] = google
    for name, doc in schemas.items():
        prune_defs(doc)
        check_refs(doc)
    summary = keyword_counts(schemas)
    outputs = dict(schemas)
    outputs["google-mldev-unsupported.json"] = unsupported
    outputs["keywords.json"] = summary
    outputs["models.json"] = build_models()
    for name, doc in outputs.items():
        path = os.path.join(args.out, name)
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, sort_keys=True, indent=1, ensure_ascii=False)
            fh.write("\n")
        print(f"{path}: {os.path.getsize(path)} bytes, {len(doc.get('$defs', {}))} $defs")
    print("keywords:", json.dumps(summary["keywords"], sort_keys=True))
    if args.check:
        return run_checks(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
