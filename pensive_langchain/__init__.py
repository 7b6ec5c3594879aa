"""LangChain adapters for Pensive (retriever, store, chat history, cache, agent memory).

Nothing is exported yet: the adapters are built in their own issue. Use ``pensive_core`` directly
until then.
"""

__all__: list[str] = []
