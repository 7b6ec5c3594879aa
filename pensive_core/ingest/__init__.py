"""The ingest side: plan -> chunk -> situate -> embed -> index -> derive -> commit.

:class:`~.pipeline.IngestPipeline` runs the stages; :class:`~.commit.Committer` holds the
commit and recovery protocol; :class:`~.invalidate.L1Invalidation` decides which cached answers
a commit drops; :func:`~.reindex.move_vectors` moves the vectors to another backend;
:func:`~.reembed.run_reembed` re-embeds them with another model (blue/green).
"""

from .changes import ChangeSet, IngestCounts
from .commit import Committer
from .invalidate import L1Invalidation
from .pipeline import STAGES, IngestPipeline
from .reembed import run_reembed
from .reindex import move_vectors

__all__ = [
    "STAGES",
    "ChangeSet",
    "Committer",
    "IngestCounts",
    "IngestPipeline",
    "L1Invalidation",
    "move_vectors",
    "run_reembed",
]
