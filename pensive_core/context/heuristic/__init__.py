"""A model-free context generator: title, section, dates, principal entities and referents.

For each passage it writes a short line of facts the passage itself lacks, from its document:

* the **title** (``metadata["title"]``, else the first markdown heading, else the file name);
* the **heading path** of the section the passage starts in ("Results > Revenue");
* the **date** (the document's timestamp, else the dates its text mentions most);
* the **principal entities** (the names the document mentions most);
* the **referents** of pronouns the passage opens with ("She finally told him" ->
  ``She: Anna Berg. Him: Tomas Lind.``), resolved from the text just before it.

For example ``"Ferry story. 8 May 2023. About: Oslo. She: Anna Berg. Him: Tomas Lind."``.
Anything the passage already says is left out, so that every word added is one a question could
use and the passage could not match on its own. Nothing here loads a model: a document costs a
date scan and one pass of the rule-based entity extractor, whatever its number of passages.

Pronoun resolution is deliberately timid: a pronoun is resolved only when it comes before any name
in the passage's first sentence, and only to a name whose kind (person, organisation, place) the
text shows; an unresolved pronoun costs nothing, a wrong referent misleads the index.

The package, by concern:

* :mod:`.generator`: :class:`HeuristicContextGenerator`, a document's facts and each passage's
  context;
* :mod:`.outline`: headings, heading paths and the title;
* :mod:`.names`: name mentions and their aliases;
* :mod:`.profile`: what the text shows about each named entity (kind, gender, subject);
* :mod:`.referents`: :func:`leading_referents`, the pronoun resolver;
* :mod:`.records`: :func:`is_records`, records or prose.
"""

from .generator import HeuristicContextGenerator
from .records import is_records
from .referents import leading_referents

__all__ = ["HeuristicContextGenerator", "is_records", "leading_referents"]
