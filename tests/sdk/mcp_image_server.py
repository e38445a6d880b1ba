"""A tiny MCP server (the Python SDK's MCPServer, formerly FastMCP) over stdio whose tools
answer with an image and with an embedded resource (tests/api/tool_files.rs).

`screenshot` returns a text block and the PNG given as the first argument (an ImageContent);
`export` returns an embedded resource holding the same PNG as a blob; `cite` returns a text
block and a resource link to a web page (a source of the answer).
"""

import base64
import sys

from mcp.server.mcpserver import Image, MCPServer
from mcp_types import BlobResourceContents, EmbeddedResource, ResourceLink, TextContent

with open(sys.argv[1], "rb") as png:
    PNG = png.read()

server = MCPServer("pictures")


@server.tool()
def screenshot(page: str) -> list:
    """Takes a screenshot of a page."""
    return [TextContent(text=f"screenshot of {page}"), Image(data=PNG, format="png")]


@server.tool()
def export(page: str) -> list:
    """Exports a page as a file."""
    blob = BlobResourceContents(
        uri=f"file:///exports/{page}.png",
        mime_type="image/png",
        blob=base64.b64encode(PNG).decode(),
    )
    return [EmbeddedResource(resource=blob)]


@server.tool()
def cite(topic: str) -> list:
    """Finds a web page about a topic."""
    link = ResourceLink(
        uri=f"https://example.org/wiki/{topic}", name=topic, title=f"About {topic}"
    )
    return [TextContent(text=f"see the page about {topic}"), link]


if __name__ == "__main__":
    server.run("stdio")
