"""Sparse (lexical) retrieval."""

from .bm25 import BM25Index

__all__ = ["BM25Index"]
