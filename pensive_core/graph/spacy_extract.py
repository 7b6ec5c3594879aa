"""Entity extraction with a spaCy pipeline (extra ``pensive[spacy]``).

:class:`SpacyExtractor` turns a pipeline's ``doc.ents`` into :class:`~.extract.Mention` s:
the kind is the entity label lowercased (``"person"``, ``"org"``, ``"date"``), the key the
same :func:`~.extract.normalize_entity` form the rule-based extractor gives, so both meet on
one node.

By default the :class:`~.extract.RuleExtractor`'s identifiers, quantities, dates and titles
fill the gaps the model leaves: a rule mention is added only where it overlaps no entity the
pipeline kept (the model is trusted where it spoke, even when a rule's match is longer). The
rules' names are not used: finding names is what the model is for.

spaCy is imported only when an extractor is made, never when this module is imported.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING

from ..errors import ConfigError, MissingDependencyError
from .extract import Mention, RuleExtractor, normalize_entity, resolve_overlaps

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc

__all__ = ["SpacyExtractor"]

logger = logging.getLogger(__name__)

#: Rule kinds that fill the gaps a pipeline leaves when ``fallback_rules`` is on.
FALLBACK_KINDS = ("id", "quantity", "date", "title")

# components that write doc.ents; a pipeline with none of them finds no entities
_NER_FACTORIES = {"ner", "beam_ner", "entity_ruler", "span_ruler"}


def _spacy() -> ModuleType:
    try:
        import spacy
    except ImportError as exc:
        raise MissingDependencyError("spacy", "spacy", "The spaCy entity extractor") from exc
    return spacy


class SpacyExtractor:
    """Entity mentions from a spaCy pipeline, optionally topped up by the rules.

    Args:
        nlp_or_model: An installed pipeline's package name (``"en_core_web_sm"``), the path of
            a pipeline saved with ``nlp.to_disk``, or a loaded ``Language`` object.
        labels: spaCy entity labels to keep (``{"PERSON", "ORG"}``), matched regardless of
            case; None keeps every label. Entities dropped here do not block the rules.
        fallback_rules: Add the rule-based extractor's identifiers, quantities, dates and
            titles where the pipeline found nothing overlapping.

    Attributes:
        name: ``"spacy:<pipeline>"``, the pipeline's package name (``"spacy:en_core_web_sm"``;
            ``"spacy:en_pipeline"`` for ``spacy.blank("en")``).
        nlp: The pipeline.

    Raises:
        MissingDependencyError: If spaCy is not installed (extra ``spacy``).
        ConfigError: If the named pipeline is not installed or is not a pipeline, or an
            argument has the wrong type.
    """

    def __init__(
        self,
        nlp_or_model: str | os.PathLike[str] | Language,
        labels: Iterable[str] | None = None,
        fallback_rules: bool = True,
    ) -> None:
        spacy = _spacy()
        if isinstance(nlp_or_model, spacy.Language):
            self.nlp: Language = nlp_or_model
        elif isinstance(nlp_or_model, (str, os.PathLike)):
            self.nlp = _load(spacy, nlp_or_model)
        else:
            raise ConfigError(
                "nlp_or_model must be a spaCy pipeline's name or path, or a spacy.Language; "
                f"got {type(nlp_or_model).__name__}"
            )
        if isinstance(labels, str):
            # a bare string would be read as a set of its letters
            raise ConfigError(f"labels must be a set of entity labels, got the string {labels!r}")
        self.labels = None if labels is None else frozenset(lab.casefold() for lab in labels)
        self.fallback_rules = fallback_rules
        self._rules = RuleExtractor(kinds=FALLBACK_KINDS) if fallback_rules else None
        self.name = f"spacy:{self.nlp.lang}_{self.nlp.meta.get('name', 'pipeline')}"
        factories = {self.nlp.get_pipe_meta(p).factory for p in self.nlp.pipe_names}
        if not factories & _NER_FACTORIES:
            logger.warning(
                "spaCy pipeline %s has no entity component (pipes: %s); only the rules will "
                "find mentions",
                self.name,
                self.nlp.pipe_names or "none",
            )

    def __repr__(self) -> str:
        return (
            f"SpacyExtractor({self.name!r}, labels={sorted(self.labels) if self.labels else None}, "
            f"fallback_rules={self.fallback_rules})"
        )

    def extract(self, text: str) -> list[Mention]:
        """Mentions in ``text``, in order of position.

        Args:
            text: One passage.

        Returns:
            The pipeline's entities (kept labels only) and, with ``fallback_rules``, the rule
            mentions overlapping none of them; no two overlap.
        """
        return self._mentions(self.nlp(text))

    def extract_many(
        self, texts: Iterable[str], batch_size: int | None = None
    ) -> list[list[Mention]]:
        """Mentions of many passages, run through the pipeline in batches (``nlp.pipe``).

        Args:
            texts: The passages.
            batch_size: Passages per batch; None uses the pipeline's own default.

        Returns:
            One list per passage, as :meth:`extract` would give it, in the order given.
        """
        return [self._mentions(doc) for doc in self.nlp.pipe(texts, batch_size=batch_size)]

    def _mentions(self, doc: Doc) -> list[Mention]:
        found = [
            Mention(
                normalize_entity(ent.text),
                ent.text,
                ent.label_.lower(),
                ent.start_char,
                ent.end_char,
            )
            for ent in doc.ents
            if self.labels is None or ent.label_.casefold() in self.labels
        ]
        if self._rules is not None:
            spans = [(m.start, m.end) for m in found]
            found += [
                m
                for m in self._rules.extract(doc.text)
                if not any(m.start < e and s < m.end for s, e in spans)
            ]
        # doc.ents never overlap and the rules resolve their own overlaps, so this only drops
        # entities with an empty normal form ("the") and puts everything in position order
        return resolve_overlaps(found)


def _load(spacy: ModuleType, model: str | os.PathLike[str]) -> Language:
    try:
        nlp: Language = spacy.load(model)
    except OSError as exc:
        raise ConfigError(
            f"spaCy pipeline {os.fspath(model)!r} is not installed, or is not a folder saved by "
            "nlp.to_disk. Install a trained pipeline as a package, e.g. "
            "`python -m spacy download en_core_web_sm` or `pip install <pipeline wheel>`, "
            "or pass a path to a saved pipeline or a spacy.Language object."
        ) from exc
    return nlp
