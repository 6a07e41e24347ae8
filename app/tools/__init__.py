"""Tools in the chat: MCP servers (their config, sessions, calls) and the user's consent to each call."""
