"""History: conversations in SQLite, their schema, export and the save queue."""
