"""Sparse (lexical) retrieval."""

from .base import SparseIndex
from .bm25 import BM25Index

__all__ = ["BM25Index", "SparseIndex"]
