"""Adapters for agent frameworks, one module each, on each framework's official seam.

Each needs its framework installed (an extra of this package):

====================  ======================================  ================================
module                framework                               install
====================  ======================================  ================================
``langchain``         LangChain 1.x agents, LangGraph         ``pip install "loopbrake[langchain]"``
``claude_agent_sdk``  Claude Agent SDK (hook callbacks)       ``pip install "loopbrake[claude-agent-sdk]"``
``openai_agents``     OpenAI Agents SDK                       ``pip install "loopbrake[openai-agents]"``
``pydantic_ai``       Pydantic AI                             ``pip install "loopbrake[pydantic-ai]"``
``google_adk``        Google ADK                              ``pip install "loopbrake[google-adk]"``
``crewai``            CrewAI                                  ``pip install "loopbrake[crewai]"``
``smolagents``        smolagents                              ``pip install "loopbrake[smolagents]"``
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
            f"loopbrake.integrations needs {module!r}: "
            f'pip install "loopbrake[{extra}]"'
        ) from e
