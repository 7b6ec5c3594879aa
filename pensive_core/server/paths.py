"""Path parameters that carry any stored id whole.

Starlette's ``path`` convertor matches ``.*``, which stops at a line break, and the route's
closing ``$`` also matches just before a final one: ``/v1/documents/report%0A`` was routed
with the id ``"report"``, so a DELETE of the document ``"report\\n"`` deleted ``"report"``,
and an id with a line break inside could not be reached at all. The API stores such ids
(an id is any non-empty text without a lone surrogate), so the routes that take one use
:data:`ANY_ID`, which matches every character, line breaks included.
"""

from __future__ import annotations

from starlette.convertors import Convertor, register_url_convertor

__all__ = ["ANY_ID"]

#: The convertor's name, for a route written ``/v1/documents/{doc_id:pensive_id}``
ANY_ID = "pensive_id"


class _AnyId(Convertor[str]):
    """Every character, line breaks included (``[\\s\\S]``, not ``.``)."""

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return str(value)


register_url_convertor(ANY_ID, _AnyId())
