"""Pods decoded in two steps, so the replicas of a workload decode their repeated parts once.

The wire form leaves each part that replicas repeat (owner references, labels, annotations,
containers, init containers, volumes, tolerations, node selector, affinity, spread constraints)
as raw JSON text, which costs msgspec little more than skipping it. A pod is then assembled
against its owner's first pod: a part whose text equals that pod's is that pod's decoded part,
with no decoding at all; one that differs is decoded, and still shared when it decodes equal
(the same values written in another order). This replaces decoding every part and then
comparing it (model/sharing.py, still used for watch events and protobuf), which cost twice as
much at 150,000 pods (bench/README.md, "Load in two steps").

Annotations are a part like the others, kept reduced to the ones a decision reads (as
meta.trim_annotations keeps them): replicas' annotations are decoded and reduced once.

Errors read as the one-step decoders write them: when a part fails to decode, the object is
decoded again whole by the exact decoder, which names the failing field's full path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import itemgetter
from typing import Annotated, Any, Literal

import msgspec

from desched.model.kinds import JSON_DECODERS, PAGE_DECODERS
from desched.model.meta import EMPTY_MAP, ObjectMeta, kept_annotations, shared_hook
from desched.model.pod import Pod, PodSpec, PodStatus
from desched.util.memo import remember

Buffer = bytes | memoryview
Raw = msgspec.Raw

# The parts replicas repeat, by struct. Their positions in the entry of an owner's first pod
# (`_First`) follow this order.
_META_PARTS = ("owner_references", "labels", "annotations")
_SPEC_PARTS = ("containers", "init_containers", "volumes", "tolerations", "node_selector",
               "affinity", "topology_spread_constraints")
OWNERS_LIMIT = 50_000  # owners whose first pod is kept (a 150,000-pod cluster has ~8,000)
_annotations = msgspec.json.Decoder(Mapping[str, str])


def _wire_type(real: type, raw: tuple[str, ...]) -> type:
    """`real` with the fields named in `raw` left as JSON text: same fields, same names and
    defaults, in the same order (so a wire struct's values line up with the real struct's)."""
    fields: list[tuple[str, Any, Any]] = []
    for info in msgspec.structs.fields(real):
        if info.name in raw:
            fields.append((info.name, Raw, msgspec.field(default=Raw(), name=info.encode_name)))
        elif info.default_factory is not msgspec.NODEFAULT:
            fields.append((info.name, info.type, msgspec.field(
                default_factory=info.default_factory, name=info.encode_name)))
        else:
            fields.append((info.name, info.type, msgspec.field(
                default=info.default, name=info.encode_name)))
    return msgspec.defstruct(f"Wire{real.__name__}", fields, gc=False, module=__name__)


Decode = Callable[[Raw], Any]


def _kept_annotations(raw: Raw) -> Mapping[str, str]:
    """The annotations a decision reads (as meta.trim_annotations keeps them); all of them
    checked to be strings, as the exact decoder checks them."""
    prefixes = kept_annotations()
    kept = {key: value for key, value in _annotations.decode(raw).items()
            if key.startswith(prefixes)}
    return kept or EMPTY_MAP


def _decoders(real: type, names: tuple[str, ...]) -> list[tuple[int, Decode, Any]]:
    """(position in `real`, decoder of the field's own type, its default) per named field."""
    infos = msgspec.structs.fields(real)
    order = [info.name for info in infos]
    out: list[tuple[int, Decode, Any]] = []
    for name in names:
        position = order.index(name)
        info = infos[position]
        default = info.default if info.default_factory is msgspec.NODEFAULT \
            else info.default_factory()
        decode = _kept_annotations if name == "annotations" \
            else msgspec.json.Decoder(info.type, dec_hook=shared_hook).decode
        out.append((position, decode, default))
    return out


_WireMeta = _wire_type(ObjectMeta, _META_PARTS)
_WireSpec = _wire_type(PodSpec, _SPEC_PARTS)
_META = _decoders(ObjectMeta, _META_PARTS)
_SPEC = _decoders(PodSpec, _SPEC_PARTS)
_PARTS = (*_META, *_SPEC)  # owner references first: they say whose replica a pod is
_META_RAWS = itemgetter(*(position for position, _, _ in _META))
_SPEC_RAWS = itemgetter(*(position for position, _, _ in _SPEC))
# (index in _PARTS, position in the struct's fields)
_META_AT = [(index, position) for index, (position, _, _) in enumerate(_META)]
_SPEC_AT = [(len(_META) + index, position) for index, (position, _, _) in enumerate(_SPEC)]


# What the JSON of a pod carries (Pod's derived fields are never read from input). The status
# is decoded whole: what desched reads of it differs from pod to pod.
_BODY = [("metadata", _WireMeta, msgspec.field(default_factory=_WireMeta)),
         ("spec", _WireSpec, msgspec.field(default_factory=_WireSpec)),
         ("status", PodStatus, msgspec.field(default_factory=PodStatus))]
_WirePod = msgspec.defstruct("WirePod", _BODY, tag_field="kind", tag="Pod", gc=False,
                             module=__name__)
# An item of a `kind: List` (kubectl's form): a pod only if it says so, in the core group.
_WireListedPod = msgspec.defstruct(
    "WireListedPod",
    [("kind", Literal["Pod"]),
     ("api_version", Annotated[str, msgspec.Meta(pattern="^[^/]*$")],
      msgspec.field(default="", name="apiVersion")),
     *_BODY],
    gc=False, module=__name__)


class ListMeta(msgspec.Struct, rename="camel", gc=False):
    """A list page's metadata: where its version stands, and how to ask for the next page."""

    resource_version: str = ""
    continue_: str = msgspec.field(default="", name="continue")


_WirePodList = msgspec.defstruct(
    "WirePodList",
    [("kind", str, ""), ("api_version", str, ""),
     ("metadata", ListMeta, msgspec.field(default_factory=ListMeta)),
     ("items", tuple[_WirePod, ...] | None, ())],  # type: ignore[valid-type]
    rename="camel", module=__name__)


_EXACT_ITEMS = msgspec.json.Decoder(tuple[Pod, ...], dec_hook=shared_hook)


class PodPage(msgspec.Struct, gc=False):
    """A decoded PodList page, read as the page decoders' own (kind, apiVersion, items), and
    its list metadata (an API server's page)."""

    kind: str
    api_version: str
    items: tuple[Pod, ...]
    metadata: ListMeta


class _First:
    """An owner's first pod: the raw text of each repeatable part (empty when it had none) and
    what it decoded to, in `_PARTS` order."""

    __slots__ = ("raws", "statuses", "values")

    def __init__(self, raws: tuple[Raw, ...], values: tuple[Any, ...]) -> None:
        self.raws = tuple(raw.copy() for raw in raws)  # copies: `raws` point into the input
        self.values = values
        self.statuses: Any = None


def _decoded(raws: tuple[Raw, ...]) -> tuple[Any, ...]:
    return tuple(decode(raw) if raw else default
                 for raw, (_, decode, default) in zip(raws, _PARTS, strict=True))


def _shared(raws: tuple[Raw, ...], first: _First) -> tuple[Any, ...]:
    """The parts `raws` decode to, each as the first pod's object when it is the same: same
    text, or different text decoding equal."""
    values = list(first.values)
    for index, raw in enumerate(raws):
        if raw != first.raws[index]:
            _, decode, default = _PARTS[index]
            value = decode(raw) if raw else default
            if value != values[index]:
                values[index] = value
    return tuple(values)


class PodDecoder:
    """Decodes pods and PodList pages from JSON like `kinds.JSON_DECODERS["Pod"]` and
    `kinds.PAGE_DECODERS["PodList"]` do, into pods whose repeated parts are shared with their
    owner's first pod and whose conditions no longer point into the input. One per load: what
    it remembers of owners goes with it."""

    def __init__(self) -> None:
        self._firsts: dict[bytes, _First] = {}
        self._pod: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_WirePod,
                                                                    dec_hook=shared_hook)
        self._page: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_WirePodList,
                                                                     dec_hook=shared_hook)
        self._items: msgspec.json.Decoder[Any] = msgspec.json.Decoder(
            tuple[_WirePod, ...], dec_hook=shared_hook)  # type: ignore[valid-type]
        self._listed: msgspec.json.Decoder[Any] = msgspec.json.Decoder(
            tuple[_WireListedPod, ...], dec_hook=shared_hook)  # type: ignore[valid-type]

    def decode(self, data: Buffer) -> Pod:
        wire = self._pod.decode(data)
        try:
            return self._assemble(wire)
        except msgspec.DecodeError:
            JSON_DECODERS["Pod"].decode(data)  # raises, naming the field's full path
            raise

    def decode_page(self, data: Buffer) -> PodPage:
        page = self._page.decode(data)
        try:
            items = tuple(map(self._assemble, page.items or ()))
        except msgspec.DecodeError:
            PAGE_DECODERS["PodList"].decode(data)
            raise
        return PodPage(page.kind, page.api_version, items, page.metadata)

    def decode_items(self, data: Buffer, *, listed: bool = False) -> tuple[Pod, ...]:
        """A JSON array of pods: a run of a PodList's items, or with `listed` of a `kind: List`'s
        (each must then name its kind, Pod, and an apiVersion of the core group)."""
        wires = (self._listed if listed else self._items).decode(data)
        try:
            return tuple(map(self._assemble, wires))
        except msgspec.DecodeError:
            _EXACT_ITEMS.decode(data)
            raise

    def _assemble(self, wire: Any) -> Pod:
        meta = msgspec.structs.astuple(wire.metadata)
        spec = msgspec.structs.astuple(wire.spec)
        raws = _META_RAWS(meta) + _SPEC_RAWS(spec)
        owner = bytes(raws[0]) if raws[0] else None  # the owner references' text
        first = self._firsts.get(owner) if owner is not None else None
        if first is None:
            values = _decoded(raws)
            if owner is not None:
                first = remember(self._firsts, owner, _First(raws, values),
                                 limit=OWNERS_LIMIT)
        elif raws == first.raws:  # replicas: every part written as the first pod's
            values = first.values
        else:
            values = _shared(raws, first)
        status = wire.status
        if status.conditions:
            status.conditions = status.conditions.copy()
        if first is not None and status.container_statuses:
            if first.statuses is None:
                first.statuses = status.container_statuses
            elif status.container_statuses == first.statuses:
                status.container_statuses = first.statuses
        meta_values, spec_values = list(meta), list(spec)
        for index, position in _META_AT:
            meta_values[position] = values[index]
        for index, position in _SPEC_AT:
            spec_values[position] = values[index]
        return Pod(ObjectMeta(*meta_values), PodSpec(*spec_values), status)
