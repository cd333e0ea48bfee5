"""Adapters for agent frameworks, one module each, on each framework's official seam.

Each needs its framework installed (an extra of this package):

====================  ======================================  ================================
module                framework                               install
====================  ======================================  ================================
``langchain``         LangChain 1.x agents, LangGraph         ``pip install "toolbrake[langchain]"``
``claude_agent_sdk``  Claude Agent SDK (hook callbacks)       ``pip install "toolbrake[claude-agent-sdk]"``
``openai_agents``     OpenAI Agents SDK                       ``pip install "toolbrake[openai-agents]"``
``pydantic_ai``       Pydantic AI                             ``pip install "toolbrake[pydantic-ai]"``
``google_adk``        Google ADK                              ``pip install "toolbrake[google-adk]"``
``crewai``            CrewAI                                  ``pip install "toolbrake[crewai]"``
``smolagents``        smolagents                              ``pip install "toolbrake[smolagents]"``
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
            f"toolbrake.integrations needs {module!r}: "
            f'pip install "toolbrake[{extra}]"'
        ) from e
