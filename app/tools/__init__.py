"""Tools in the chat: MCP servers (their config, connections, calls) and the user's consent to each call."""
