"""The local OpenAI-compatible server as the app runs it."""
