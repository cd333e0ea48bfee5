"""Adapters for agent frameworks, one module each, on each framework's official seam.

Each needs its framework installed (an extra of this package; toolbrake is not on PyPI yet,
so install it from a checkout, not by name: a package of that name on PyPI would not be
this one):

====================  ======================================  ================================
module                framework                               install
====================  ======================================  ================================
``langchain``         LangChain 1.x agents, LangGraph         ``pip install "./bindings/python[langchain]"``
``claude_agent_sdk``  Claude Agent SDK (hook callbacks)       ``pip install "./bindings/python[claude-agent-sdk]"``
``openai_agents``     OpenAI Agents SDK                       ``pip install "./bindings/python[openai-agents]"``
``pydantic_ai``       Pydantic AI                             ``pip install "./bindings/python[pydantic-ai]"``
``google_adk``        Google ADK                              ``pip install "./bindings/python[google-adk]"``
``crewai``            CrewAI                                  ``pip install "./bindings/python[crewai]"``
``smolagents``        smolagents                              ``pip install "./bindings/python[smolagents]"``
====================  ======================================  ================================
"""

from __future__ import annotations

import importlib


def require(module: str, extra: str):
    """Imports a framework's module, or raises an ``ImportError`` naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"toolbrake.integrations needs {module!r}, the extra {extra!r}: from a checkout "
            f'of toolbrake, pip install "./bindings/python[{extra}]"'
        ) from e
