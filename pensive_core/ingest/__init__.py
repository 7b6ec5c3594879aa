"""The ingest side: plan -> chunk -> situate -> embed -> index -> derive -> commit.

:class:`~.pipeline.IngestPipeline` runs the stages; :class:`~.commit.Committer` holds the
commit and recovery protocol; :class:`~.invalidate.L1Invalidation` decides which cached answers
a commit drops; :func:`~.reindex.move_vectors` moves the vectors to another backend.
"""

from .changes import ChangeSet, IngestCounts
from .commit import Committer
from .invalidate import L1Invalidation
from .pipeline import STAGES, IngestPipeline
from .reindex import move_vectors

__all__ = [
    "STAGES",
    "ChangeSet",
    "Committer",
    "IngestCounts",
    "IngestPipeline",
    "L1Invalidation",
    "move_vectors",
]
