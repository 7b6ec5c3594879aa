"""LlamaIndex adapters for Pensive (retriever, node postprocessors, memory block).

Nothing is exported yet: the adapters are built in their own issue. Use ``pensive_core`` directly
until then.
"""

__all__: list[str] = []
