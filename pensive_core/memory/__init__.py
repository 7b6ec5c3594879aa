"""Conversation memory: per-session turns, drift detection, a hypervector selector, rolling
summaries and a token-budgeted prompt builder. Importing loads no model and opens no file."""

from .conversation import Conversation, Turn
from .drift import DriftDetector, DriftSignal
from .hypervector import HypervectorSelector
from .prompt import BuiltPrompt, PromptBuilder, PromptItem
from .render import render_turn, render_turns
from .strategies import PromptStrategy
from .templates import PromptTemplate
from .tokens import TokenCounter, token_counter

__all__ = [
    "BuiltPrompt",
    "Conversation",
    "DriftDetector",
    "DriftSignal",
    "HypervectorSelector",
    "PromptBuilder",
    "PromptItem",
    "PromptStrategy",
    "PromptTemplate",
    "TokenCounter",
    "Turn",
    "render_turn",
    "render_turns",
    "token_counter",
]
